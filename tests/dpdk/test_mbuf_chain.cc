// SPDX-License-Identifier: BSD-3-Clause
// Real mbufs and mbuf chains: the RX buffer guard's verdicts and what it
// frees, and DSCP/ECN rewrites and address reads wherever a chain splits the
// IP header.
#include <gtest/gtest.h>
#include <rte_mbuf.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "packet_builder.h"
#include "psgate/header_rewrite.h"
#include "psgate/mbuf_rewrite.h"
#include "psgate/rx_guard.h"

namespace psgate {
namespace {

namespace pk = psgate::pkt;
using Bytes = std::vector<uint8_t>;

class MbufChain : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    pool_ = rte_pktmbuf_pool_create("chain_test", 1023, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    ASSERT_NE(pool_, nullptr);
  }
  static void TearDownTestSuite() {
    rte_mempool_free(pool_);
    pool_ = nullptr;
  }
  // Every buffer back exactly once. rte_mempool_avail_count cannot tell a
  // buffer freed twice (it caps at the pool's size, and the ring holds one
  // more): the pool is emptied instead, and what it hands out counted, a
  // buffer handed out twice too.
  void TearDown() override {
    std::vector<rte_mbuf*> all;
    for (rte_mbuf* m; (m = rte_pktmbuf_alloc(pool_)) != nullptr;) all.push_back(m);
    const std::set<rte_mbuf*> distinct(all.begin(), all.end());
    EXPECT_EQ(all.size(), 1023u) << "mbufs leaked or freed twice";
    EXPECT_EQ(distinct.size(), all.size()) << "a buffer was freed twice: handed out twice";
    for (rte_mbuf* m : distinct) rte_pktmbuf_free(m);
  }

  // `frame` cut at `cuts` (offsets, ascending) into a chain.
  static rte_mbuf* chain(const Bytes& frame, const std::vector<uint32_t>& cuts) {
    rte_mbuf* head = nullptr;
    rte_mbuf* tail = nullptr;
    uint32_t from = 0;
    std::vector<uint32_t> ends = cuts;
    ends.push_back(static_cast<uint32_t>(frame.size()));
    for (uint32_t to : ends) {
      rte_mbuf* m = rte_pktmbuf_alloc(pool_);
      if (to > from)
        std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(to - from)), frame.data() + from, to - from);
      if (head == nullptr) {
        head = m;
      } else {
        tail->next = m;
        ++head->nb_segs;
      }
      tail = m;
      from = to;
    }
    head->pkt_len = static_cast<uint32_t>(frame.size());
    return head;
  }
  static Bytes flatten(const rte_mbuf* m) {
    Bytes out;
    for (; m != nullptr; m = m->next) {
      const auto* p = rte_pktmbuf_mtod(m, const uint8_t*);
      out.insert(out.end(), p, p + m->data_len);
    }
    return out;
  }
  static rte_mempool* pool_;
};
rte_mempool* MbufChain::pool_ = nullptr;

Bytes ipv4_frame(uint8_t tos) {
  pk::PacketSpec s;
  s.tos = tos;
  s.ipv4_options = {1, 1, 1, 1};  // a 24-byte header: the checksum covers the options too
  s.payload_len = 100;
  return pk::build_packet(s);
}

TEST_F(MbufChain, RewriteWhereverTheChainSplitsTheHeaderEqualsAFlatRewrite) {
  for (L3Kind kind : {L3Kind::kIpv4, L3Kind::kIpv6}) {
    pk::PacketSpec s;
    s.l3 = kind == L3Kind::kIpv4 ? pk::L3::kIpv4 : pk::L3::kIpv6;
    s.tos = 0x02;  // ECT(0)
    s.payload_len = 100;
    const Bytes frame = pk::build_packet(s);
    Bytes want = frame;
    ASSERT_EQ(rewrite_traffic_class(want.data() + 14, kind, 46, true), kRewroteDscp | kMarkedCe);
    // Every two-way and three-way split of the first 60 bytes (empty segments too).
    for (uint32_t a = 0; a <= 60; ++a) {
      for (uint32_t b = a; b <= 60; b += 7) {
        rte_mbuf* m = chain(frame, {a, b});
        const unsigned changed = rewrite_traffic_class_mbuf(m, 14, kind, 46, true);
        EXPECT_EQ(changed, kRewroteDscp | kMarkedCe) << a << "/" << b;
        const Bytes got = flatten(m);
        ASSERT_EQ(got, want) << "split at " << a << "/" << b;
        if (kind == L3Kind::kIpv4) {
          Bytes hdr(got.begin() + 14, got.begin() + 34);
          const uint16_t stored = static_cast<uint16_t>(hdr[10] << 8 | hdr[11]);
          hdr[10] = hdr[11] = 0;
          ASSERT_EQ(stored, ipv4_header_checksum(hdr.data(), 20)) << "split at " << a << "/" << b;
        }
        rte_pktmbuf_free(m);
      }
    }
  }
}

TEST_F(MbufChain, ChecksumAfterRewriteEqualsAFullRecomputeWithOptions) {
  const Bytes frame = ipv4_frame(0x01);  // ECT(1)
  for (uint32_t cut = 0; cut <= 40; ++cut) {
    rte_mbuf* m = chain(frame, {cut});
    rewrite_traffic_class_mbuf(m, 14, L3Kind::kIpv4, 10, true);
    Bytes hdr = flatten(m);
    hdr = Bytes(hdr.begin() + 14, hdr.begin() + 14 + 24);
    EXPECT_EQ(hdr[1], (10 << 2) | 3);
    const uint16_t stored = static_cast<uint16_t>(hdr[10] << 8 | hdr[11]);
    hdr[10] = hdr[11] = 0;
    EXPECT_EQ(stored, ipv4_header_checksum(hdr.data(), 24)) << "cut at " << cut;
    rte_pktmbuf_free(m);
  }
}

TEST_F(MbufChain, ReadsTheDestinationAddressAcrossSegments) {
  const Bytes frame = ipv4_frame(0);
  uint32_t want;
  std::memcpy(&want, frame.data() + 14 + 16, 4);
  for (uint32_t cut = 0; cut <= 40; ++cut) {
    rte_mbuf* m = chain(frame, {cut});
    EXPECT_EQ(read_u32_at(m, 14 + 16), want) << "cut at " << cut;
    EXPECT_EQ(read_u32_at(m, static_cast<unsigned>(frame.size()) - 2), 0u) << "past the end reads as 0";
    rte_pktmbuf_free(m);
  }
}

TEST_F(MbufChain, GuardPassesSaneChainsAndCountsEveryBrokenOne) {
  const Bytes frame = ipv4_frame(0);
  std::array<Counter, kDropReasonCount> drops;
  struct Case {
    const char* name;
    bool sane;
    void (*fault)(rte_mbuf* head);
  } cases[] = {
      {"one segment", true, [](rte_mbuf*) {}},
      {"pkt_len too long", false, [](rte_mbuf* m) { m->pkt_len += 1; }},
      {"pkt_len too short", false, [](rte_mbuf* m) { m->pkt_len -= 1; }},
      {"nb_segs zero", false, [](rte_mbuf* m) { m->nb_segs = 0; }},
      {"data past the buffer", false,
       [](rte_mbuf* m) { m->data_off = static_cast<uint16_t>(m->buf_len - m->data_len + 1); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    rte_mbuf* m = chain(frame, {});
    c.fault(m);
    EXPECT_EQ(mbuf_is_sane(m), c.sane);
    rte_mbuf* burst[1] = {m};
    uint64_t bytes = 0;
    const uint64_t bad_before = drops[kDropBadMbuf].get();
    const unsigned kept = rx_guard_burst(burst, 1, 1514, drops, bytes);
    EXPECT_EQ(kept, c.sane ? 1u : 0u);
    EXPECT_EQ(drops[kDropBadMbuf].get() - bad_before, c.sane ? 0u : 1u);
    if (kept) rte_pktmbuf_free(burst[0]);
  }
  // Chains: a sane one passes; one whose nb_segs says more or fewer
  // segments than it has is broken. Fewer: only what nb_segs vouches for is
  // freed, the rest is never followed (the test frees it).
  rte_mbuf* ok = chain(frame, {10, 50});
  EXPECT_TRUE(mbuf_is_sane(ok));
  rte_pktmbuf_free(ok);
  rte_mbuf* more = chain(frame, {10, 50});
  ++more->nb_segs;
  EXPECT_FALSE(mbuf_is_sane(more));
  free_broken_mbuf(more);
  rte_mbuf* fewer = chain(frame, {10, 50});
  rte_mbuf* third = fewer->next->next;
  fewer->nb_segs = 2;
  EXPECT_FALSE(mbuf_is_sane(fewer));
  const unsigned avail = rte_mempool_avail_count(pool_);
  free_broken_mbuf(fewer);
  EXPECT_EQ(rte_mempool_avail_count(pool_), avail + 2);
  rte_pktmbuf_free(third);
}

// Chains a driver could hand over broken in ways that, freed naively, put a
// buffer into its pool twice (it is then handed out twice) or wrap a
// reference count of 0: each is refused, counted as bad_mbuf, and every
// buffer goes back exactly once or not at all (TearDown counts the pool).
TEST_F(MbufChain, GuardNeverFreesABufferTwice) {
  const Bytes frame = ipv4_frame(0);
  std::array<Counter, kDropReasonCount> drops;
  auto guard = [&](rte_mbuf* m) {
    rte_mbuf* burst[1] = {m};
    uint64_t bytes = 0;
    const uint64_t bad_before = drops[kDropBadMbuf].get();
    EXPECT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 0u);
    EXPECT_EQ(drops[kDropBadMbuf].get() - bad_before, 1u);
  };
  // Room in the pool: a buffer put back twice into a full pool is refused by
  // its ring, which would hide the second free.
  rte_mbuf* held[8];
  ASSERT_EQ(rte_pktmbuf_alloc_bulk(pool_, held, 8), 0);
  const unsigned all = rte_mempool_avail_count(pool_);
  {
    SCOPED_TRACE("a segment chained to itself");
    rte_mbuf* m = chain(frame, {});
    m->next = m;
    m->nb_segs = 2;
    guard(m);
    EXPECT_EQ(rte_mempool_avail_count(pool_), all);
  }
  {
    SCOPED_TRACE("a chain that loops back to its head");
    rte_mbuf* m = chain(frame, {10, 50});
    m->next->next->next = m;
    m->nb_segs = 5;
    guard(m);
    EXPECT_EQ(rte_mempool_avail_count(pool_), all);
  }
  {
    SCOPED_TRACE("a second segment without a pool");
    rte_mbuf* m = chain(frame, {10});
    rte_mbuf* second = m->next;
    second->pool = nullptr;
    EXPECT_FALSE(mbuf_is_sane(m));
    guard(m);  // the head goes back; the second has nowhere to go
    EXPECT_EQ(rte_mempool_avail_count(pool_), all - 1);
    second->pool = pool_;
    rte_pktmbuf_free(second);
  }
  {
    // A buffer the driver already freed (its count 0): freeing it again
    // would wrap the count and put it in the pool twice.
    SCOPED_TRACE("a single segment with a reference count of 0");
    rte_mbuf* m = chain(frame, {});
    rte_mbuf_refcnt_set(m, 0);
    guard(m);
    EXPECT_EQ(rte_mempool_avail_count(pool_), all - 1) << "not freed";
    rte_mbuf_refcnt_set(m, 1);
    rte_pktmbuf_free(m);
  }
  {
    SCOPED_TRACE("a chain whose head has a reference count of 0");
    rte_mbuf* m = chain(frame, {10});
    rte_mbuf* second = m->next;
    rte_mbuf_refcnt_set(m, 0);
    guard(m);  // not freed (its count would wrap and the buffer be lost), nor what follows
    EXPECT_EQ(rte_mempool_avail_count(pool_), all - 2);
    rte_mbuf_refcnt_set(m, 1);
    m->next = nullptr;
    m->nb_segs = 1;
    rte_pktmbuf_free(m);
    rte_pktmbuf_free(second);
  }
  EXPECT_EQ(rte_mempool_avail_count(pool_), all);
  rte_pktmbuf_free_bulk(held, 8);
}

// A shared buffer (a reference count of 2: legal, a clone's) leaves the
// fast check for the full one, which forwards a copy of psgate's own: the
// class's DSCP/ECN rewrite must not change what the other holder reads.
// The guard lets go of its reference; the other holder's bytes are as they
// were. With no mbuf free for the copy, a counted drop.
TEST_F(MbufChain, GuardForwardsACopyOfASharedBuffer) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  rte_mbuf* m = chain(frame, {});
  m->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  m->vlan_tci = 0x2064;
  rte_mbuf_refcnt_set(m, 2);
  EXPECT_NE(mbuf_fast_odd(m, 1500), 0u);
  rte_mbuf* burst[1] = {m};
  uint64_t bytes = 0;
  ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
  EXPECT_NE(burst[0], m);
  EXPECT_EQ(rte_mbuf_refcnt_read(burst[0]), 1u);
  EXPECT_EQ(flatten(burst[0]).size(), frame.size() + 4) << "the stripped tag back on, in the copy";
  EXPECT_EQ(flatten(m), frame) << "the other holder's bytes unchanged";
  EXPECT_EQ(rte_mbuf_refcnt_read(m), 1u) << "the guard's reference let go";
  EXPECT_EQ(drops[kDropBadMbuf].get() + drops[kDropVlanStripped].get() + drops[kDropSharedBuffer].get(), 0u);
  rte_pktmbuf_free(burst[0]);

  rte_mbuf_refcnt_set(m, 2);
  std::vector<rte_mbuf*> taken;
  for (rte_mbuf* t; (t = rte_pktmbuf_alloc(pool_)) != nullptr;) taken.push_back(t);
  burst[0] = m;
  bytes = 0;
  EXPECT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 0u);
  EXPECT_EQ(drops[kDropSharedBuffer].get(), 1u);
  EXPECT_EQ(bytes, frame.size()) << "received, though dropped";
  EXPECT_EQ(rte_mbuf_refcnt_read(m), 1u);
  for (rte_mbuf* t : taken) rte_pktmbuf_free(t);
  rte_pktmbuf_free(m);

  // An empty one is a runt, whatever its references (rte_pktmbuf_copy
  // refuses to copy 0 bytes).
  rte_mbuf* empty = rte_pktmbuf_alloc(pool_);
  rte_mbuf_refcnt_set(empty, 2);
  burst[0] = empty;
  EXPECT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 0u);
  EXPECT_EQ(drops[kDropRunt].get(), 1u);
  EXPECT_EQ(drops[kDropSharedBuffer].get(), 1u);
  rte_pktmbuf_free(empty);
}

// Two broken chains of one burst that share a segment (a corrupt `next`):
// the segment goes back to its pool once, not once for each chain (a pool
// keeps a reference count of 1 on its free buffers, so the second chain's
// walk cannot tell it was freed).
TEST_F(MbufChain, GuardFreesASegmentTwoBrokenChainsShareOnce) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  rte_mbuf* a = chain(frame, {40});
  rte_mbuf* b = chain(frame, {40});
  rte_mbuf* shared = a->next;
  rte_pktmbuf_free_seg(b->next);  // b's own tail, replaced by a's
  b->next = shared;
  a->pkt_len += 1;  // both broken: lengths that disagree with the chain
  b->pkt_len += 1;
  // Held meanwhile: a full pool's ring has no room for a buffer freed a
  // second time (the pool drops it unseen); with room, TearDown sees it
  // handed out twice.
  rte_mbuf* held = rte_pktmbuf_alloc(pool_);
  rte_mbuf* burst[2] = {a, b};
  uint64_t bytes = 0;
  EXPECT_EQ(rx_guard_burst(burst, 2, 1514, drops, bytes), 0u);
  EXPECT_EQ(drops[kDropBadMbuf].get(), 2u);
  rte_pktmbuf_free(held);
}

// A burst of many broken chains of several segments each: every segment
// goes back (a limit on what one burst may free, not on what one chain may,
// left all but the first 128 segments out of the pool, drained in a few
// hundred such bursts). TearDown counts the pool.
TEST_F(MbufChain, GuardFreesEveryBrokenChainOfAFullBurst) {
  std::array<Counter, kDropReasonCount> drops;
  Bytes frame(1400, 0x5a);
  rte_mbuf* burst[64];
  for (rte_mbuf*& m : burst) {
    m = chain(frame, {280, 560, 840, 1120});  // 5 segments
    m->pkt_len += 1;
  }
  uint64_t bytes = 0;
  EXPECT_EQ(rx_guard_burst(burst, 64, 1514, drops, bytes), 0u);
  EXPECT_EQ(drops[kDropBadMbuf].get(), 64u);
}

// A broken chain whose corrupt `next` leads to a sound packet of the same
// burst, before it or after it: the guard frees that packet's buffer with the
// chain, so it must not send it (from the pool) nor free it again. Both are
// counted as broken; TearDown sees no buffer handed out twice.
TEST_F(MbufChain, GuardSendsNoPacketABrokenChainFreed) {
  const Bytes frame = ipv4_frame(0);
  for (bool sound_first : {true, false}) {
    SCOPED_TRACE(sound_first ? "sound packet first" : "broken chain first");
    std::array<Counter, kDropReasonCount> drops;
    rte_mbuf* sound = chain(frame, {});
    rte_mbuf* broken = chain(frame, {});
    broken->next = sound;  // two segments, as nb_segs says, but pkt_len says one's worth: broken
    broken->nb_segs = 2;
    rte_mbuf* other = chain(frame, {});
    rte_mbuf* held = rte_pktmbuf_alloc(pool_);  // room in the pool's ring for a buffer freed twice
    rte_mbuf* burst[3] = {sound_first ? sound : broken, sound_first ? broken : sound, other};
    uint64_t bytes = 0;
    const unsigned kept = rx_guard_burst(burst, 3, 1514, drops, bytes);
    ASSERT_EQ(kept, 1u);
    EXPECT_EQ(burst[0], other);
    EXPECT_EQ(drops[kDropBadMbuf].get(), 2u);
    rte_pktmbuf_free(other);
    rte_pktmbuf_free(held);
  }
}

// The same with a sound packet another holder shares (reference count 2):
// the broken chain's walk lets go of the guard's reference, and the guard
// neither copies the packet nor lets go of it a second time: the other
// holder's reference is still good (TearDown sees no buffer handed out
// twice).
TEST_F(MbufChain, GuardLetsGoOfASharedPacketOnceWhenABrokenChainReachesIt) {
  const Bytes frame = ipv4_frame(0);
  for (bool sound_first : {true, false}) {
    SCOPED_TRACE(sound_first ? "shared packet first" : "broken chain first");
    std::array<Counter, kDropReasonCount> drops;
    rte_mbuf* sound = chain(frame, {});
    rte_mbuf_refcnt_update(sound, 1);  // the other holder's
    rte_mbuf* broken = chain(frame, {});
    broken->next = sound;
    broken->nb_segs = 2;
    rte_mbuf* held = rte_pktmbuf_alloc(pool_);  // room in the pool's ring for a buffer freed twice
    rte_mbuf* burst[2] = {sound_first ? sound : broken, sound_first ? broken : sound};
    uint64_t bytes = 0;
    EXPECT_EQ(rx_guard_burst(burst, 2, 1514, drops, bytes), 0u);
    EXPECT_EQ(drops[kDropBadMbuf].get(), 2u);
    EXPECT_EQ(drops[kDropSharedBuffer].get(), 0u);
    EXPECT_EQ(rte_mbuf_refcnt_read(sound), 1u) << "the other holder's reference, and only it, left";
    rte_pktmbuf_free(sound);
    rte_pktmbuf_free(held);
  }
}

// A shared packet's copy comes from a pool whose per-lcore cache hands out
// the buffer freed last: a broken chain of the same burst freed before it
// must not make the copy look like one of its own segments (counted
// bad_mbuf and never freed: a good packet lost and its buffer leaked).
TEST_F(MbufChain, GuardForwardsACopyThatReusesABufferABrokenChainFreed) {
  rte_mempool* cached = rte_pktmbuf_pool_create("chain_cached", 511, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  ASSERT_NE(cached, nullptr);
  const Bytes frame = ipv4_frame(0);
  auto one = [&] {
    rte_mbuf* m = rte_pktmbuf_alloc(cached);
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
    return m;
  };
  std::array<Counter, kDropReasonCount> drops;
  rte_mbuf* broken = one();
  broken->pkt_len += 1;
  rte_mbuf* shared = one();
  rte_mbuf_refcnt_update(shared, 1);
  rte_mbuf* burst[2] = {broken, shared};
  uint64_t bytes = 0;
  ASSERT_EQ(rx_guard_burst(burst, 2, 1514, drops, bytes), 1u);
  EXPECT_EQ(drops[kDropBadMbuf].get(), 1u);
  EXPECT_NE(burst[0], shared);
  EXPECT_EQ(flatten(burst[0]), frame);
  rte_pktmbuf_free(burst[0]);
  rte_pktmbuf_free(shared);
  EXPECT_EQ(rte_mempool_avail_count(cached), 511u) << "every buffer back";
  rte_mempool_free(cached);
}

// Offload flags a driver set oddly: a direct mbuf flagged indirect (freed
// as its own "direct" mbuf, then again: twice in the pool) or external with
// no shared info (a call through a null pointer at the first free), and a
// buffer pointer of 0 (the parser would read near address 0): never read,
// bad_mbuf, and not one mbuf freed twice (TearDown counts the pool). A real
// clone (indirect, its direct mbuf another) goes on.
TEST_F(MbufChain, GuardRefusesAttachmentFlagsWithoutTheirAttachment) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  rte_mbuf* flagged_indirect = chain(frame, {});
  flagged_indirect->ol_flags |= RTE_MBUF_F_INDIRECT;
  rte_mbuf* flagged_external = chain(frame, {});
  flagged_external->ol_flags |= RTE_MBUF_F_EXTERNAL;
  rte_mbuf* no_buffer = chain(frame, {});
  void* const buffer = no_buffer->buf_addr;
  no_buffer->buf_addr = nullptr;
  rte_mbuf* original = chain(frame, {});
  // A clone pool as DPDK's examples make them: no data room of its own.
  rte_mempool* clones = rte_pktmbuf_pool_create("chain_clones", 63, 0, 0, 0, SOCKET_ID_ANY);
  ASSERT_NE(clones, nullptr);
  rte_mbuf* clone = rte_pktmbuf_clone(original, clones);
  ASSERT_NE(clone, nullptr);
  rte_mbuf* burst[4] = {flagged_indirect, flagged_external, no_buffer, clone};
  uint64_t bytes = 0;
  const unsigned kept = rx_guard_burst(burst, 4, 1514, drops, bytes);
  ASSERT_EQ(kept, 1u);
  EXPECT_EQ(flatten(burst[0]), frame);
  EXPECT_TRUE(RTE_MBUF_DIRECT(burst[0])) << "a clone goes on as a copy: its bytes are the original's";
  EXPECT_EQ(drops[kDropBadMbuf].get(), 3u);
  EXPECT_EQ(rte_mbuf_refcnt_read(original), 1u) << "the clone freed";
  EXPECT_EQ(drops[kDropSharedBuffer].get(), 0u) << "copied into its direct mbuf's pool, not the clone pool";
  EXPECT_EQ(burst[0]->pool, pool_);
  rte_pktmbuf_free(burst[0]);
  rte_pktmbuf_free(original);
  EXPECT_EQ(rte_mempool_avail_count(clones), 63u);
  rte_mempool_free(clones);
  // Never freed (a buffer of 0 is no pool's): put back here. The flagged
  // ones were freed by the guard as far as they could be trusted: not.
  no_buffer->buf_addr = buffer;
  rte_pktmbuf_free(no_buffer);
  flagged_indirect->ol_flags &= ~RTE_MBUF_F_INDIRECT;
  flagged_external->ol_flags &= ~RTE_MBUF_F_EXTERNAL;
  rte_pktmbuf_free(flagged_indirect);
  rte_pktmbuf_free(flagged_external);
}

// psgate asks no driver to strip VLAN tags; one that does anyway (a VF under
// a port VLAN, a default) hands the frame over without them. Forwarded like
// that it would leave untagged: the tags go back on (802.1Q inner, 802.1ad
// outer), and what cannot take them (no headroom) is dropped as
// vlan_stripped, not sent untagged. Transmit requests are cleared: a driver
// would act on them (insert vlan_tci again, segment).
TEST_F(MbufChain, GuardPutsStrippedVlanTagsBackAndClearsTransmitRequests) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  pk::PacketSpec one_tag_spec;
  one_tag_spec.tos = 0;
  one_tag_spec.ipv4_options = {1, 1, 1, 1};
  one_tag_spec.payload_len = 100;
  one_tag_spec.vlans = {{pk::kTpid8021Q, 0x2064}};
  const Bytes one_tag = pk::build_packet(one_tag_spec);
  pk::PacketSpec two_tags_spec = one_tag_spec;
  two_tags_spec.vlans = {{pk::kTpid8021ad, 0x0007}, {pk::kTpid8021Q, 0x2064}};
  const Bytes two_tags = pk::build_packet(two_tags_spec);

  rte_mbuf* stripped = chain(frame, {40});
  stripped->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  stripped->vlan_tci = 0x2064;
  rte_mbuf* qinq = chain(frame, {});
  qinq->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ | RTE_MBUF_F_RX_QINQ_STRIPPED;
  qinq->vlan_tci = 0x2064;
  qinq->vlan_tci_outer = 0x0007;
  rte_mbuf* no_room = chain(frame, {});
  no_room->ol_flags |= RTE_MBUF_F_RX_VLAN | RTE_MBUF_F_RX_VLAN_STRIPPED;
  std::memmove(rte_pktmbuf_mtod_offset(no_room, uint8_t*, -static_cast<int>(no_room->data_off)),
               rte_pktmbuf_mtod(no_room, uint8_t*), no_room->data_len);
  no_room->data_off = 0;
  rte_mbuf* requests = chain(frame, {});
  requests->ol_flags |= RTE_MBUF_F_TX_VLAN | RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IP_CKSUM;
  rte_mbuf* burst[4] = {stripped, qinq, no_room, requests};
  uint64_t bytes = 0;
  const unsigned kept = rx_guard_burst(burst, 4, 1514, drops, bytes);
  ASSERT_EQ(kept, 3u);
  EXPECT_EQ(drops[kDropVlanStripped].get(), 1u);
  EXPECT_EQ(flatten(burst[0]), one_tag);
  EXPECT_EQ(burst[0]->pkt_len, one_tag.size());
  EXPECT_EQ(flatten(burst[1]), two_tags);
  EXPECT_EQ(burst[1]->pkt_len, two_tags.size());
  EXPECT_EQ(burst[0]->ol_flags & (RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ_STRIPPED), 0u);
  EXPECT_EQ(burst[1]->ol_flags & (RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ_STRIPPED), 0u);
  EXPECT_EQ(burst[2], requests);
  EXPECT_EQ(burst[2]->ol_flags & RTE_MBUF_F_TX_OFFLOAD_MASK, 0u);
  EXPECT_EQ(flatten(burst[2]), frame);
  EXPECT_EQ(bytes, one_tag.size() + two_tags.size() + 2 * frame.size()) << "received: with the tags put back";
  for (unsigned i = 0; i < kept; ++i) rte_pktmbuf_free(burst[i]);
}

TEST_F(MbufChain, GuardSortsRuntsAndOversizeByTheirTags) {
  std::array<Counter, kDropReasonCount> drops;
  pk::PacketSpec tagged;
  tagged.vlans = {{pk::kTpid8021ad, 1}, {pk::kTpid8021Q, 2}};
  tagged.payload_len = 1500 - 28;  // an IP packet of exactly 1500 bytes: 1522 with two tags
  tagged.min_frame_size = 0;
  const Bytes at_limit = pk::build_packet(tagged);
  ASSERT_EQ(at_limit.size(), 1522u);
  tagged.payload_len += 1;
  const Bytes over = pk::build_packet(tagged);
  const Bytes runt(13, 0xee);
  // A header and 2 bytes: Intel 700/800-series NICs refuse to send it (17 B
  // at least) and disable the queue; the fast check alone passed it before.
  const Bytes short_frame(16, 0xee);
  rte_mbuf* burst[5] = {chain(at_limit, {}), chain(runt, {}), chain(over, {700}), chain(ipv4_frame(0), {30}),
                        chain(short_frame, {})};
  rte_mbuf* const keep0 = burst[0];
  rte_mbuf* const keep3 = burst[3];
  uint64_t bytes = 0;
  const unsigned kept = rx_guard_burst(burst, 5, 1514, drops, bytes);
  ASSERT_EQ(kept, 2u);
  EXPECT_EQ(burst[0], keep0);  // order kept
  EXPECT_EQ(burst[1], keep3);
  EXPECT_EQ(drops[kDropRunt].get(), 2u);
  EXPECT_EQ(drops[kDropOversize].get(), 1u);
  EXPECT_EQ(drops[kDropBadMbuf].get(), 0u);
  EXPECT_EQ(bytes, at_limit.size() + runt.size() + over.size() + ipv4_frame(0).size() + short_frame.size());
  rte_pktmbuf_free(burst[0]);
  rte_pktmbuf_free(burst[1]);
}

// To a kernel packet socket (af_packet) a frame may exceed the MTU only by
// one 802.1Q outer tag: the kernel refuses more ("packet size is too long")
// after the driver counted the frame sent, so such frames were lost with no
// counter. They are oversize; frames within the socket's limit still go.
TEST_F(MbufChain, GuardAllowsAPacketSocketOneDot1qTagOnly) {
  auto frame = [](std::vector<std::pair<uint16_t, uint16_t>> vlans, size_t ip_bytes) {
    pk::PacketSpec s;
    for (auto [tpid, vid] : vlans) s.vlans.push_back({tpid, vid});
    s.payload_len = ip_bytes - 28;
    s.min_frame_size = 0;
    return pk::build_packet(s);
  };
  const Bytes untagged = frame({}, 1500);                                                // 1514: goes
  const Bytes dot1q = frame({{pk::kTpid8021Q, 2}}, 1500);                                // 1518: goes
  const Bytes dot1ad = frame({{pk::kTpid8021ad, 2}}, 1500);                              // 1518: 0x88a8 has no room
  const Bytes two = frame({{pk::kTpid8021Q, 1}, {pk::kTpid8021Q, 2}}, 1500);             // 1522: one tag's room only
  const Bytes two_short = frame({{pk::kTpid8021ad, 1}, {pk::kTpid8021Q, 2}}, 1500 - 8);  // 1514: goes
  ASSERT_EQ(dot1ad.size(), 1518u);
  ASSERT_EQ(two.size(), 1522u);
  for (const bool packet_socket : {false, true}) {
    std::array<Counter, kDropReasonCount> drops;
    rte_mbuf* burst[5] = {chain(untagged, {}), chain(dot1q, {}), chain(dot1ad, {}), chain(two, {}),
                          chain(two_short, {})};
    uint64_t bytes = 0;
    const unsigned kept = rx_guard_burst(burst, 5, 1514, drops, bytes, UINT16_MAX, packet_socket);
    EXPECT_EQ(kept, packet_socket ? 3u : 5u);
    EXPECT_EQ(drops[kDropOversize].get(), packet_socket ? 2u : 0u);
    for (unsigned i = 0; i < kept; ++i) rte_pktmbuf_free(burst[i]);
  }
}

// A chain of more segments than the egress device sends as one packet (8 on
// i40e) never reaches it: dropped as too_many_segments, order of the rest
// kept. Empty segments, unlinked first, do not count.
TEST_F(MbufChain, GuardDropsAChainLongerThanTheEgressSends) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  rte_mbuf* burst[4] = {chain(frame, {}), chain(frame, {20, 40, 60}), chain(frame, {20, 40}),
                        chain(frame, {20, 20, 40, 40})};
  ASSERT_EQ(burst[1]->nb_segs, 4u);
  ASSERT_EQ(burst[3]->nb_segs, 5u);
  rte_mbuf* const keep[3] = {burst[0], burst[2], burst[3]};
  uint64_t bytes = 0;
  ASSERT_EQ(rx_guard_burst(burst, 4, 1514, drops, bytes, /*max_segs=*/3), 3u);
  EXPECT_EQ(drops[kDropTooManySegments].get(), 1u);
  EXPECT_EQ(drops[kDropBadMbuf].get() + drops[kDropRunt].get() + drops[kDropOversize].get(), 0u);
  EXPECT_EQ(bytes, 4 * frame.size()) << "received, the dropped one too";
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(burst[i], keep[i]);
    EXPECT_LE(burst[i]->nb_segs, 3u);
    EXPECT_EQ(flatten(burst[i]), frame);
  }
  rte_pktmbuf_free_bulk(burst, 3);

  // Where the device states no limit, any sane chain goes on.
  burst[0] = chain(frame, {10, 20, 30, 40, 50, 60, 70, 80, 90});
  ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
  EXPECT_EQ(drops[kDropTooManySegments].get(), 1u);
  rte_pktmbuf_free(burst[0]);
}

// Segments that hold nothing (legal in DPDK) leave the chain before any NIC
// sees them: some treat a 0-byte TX descriptor as a malicious driver event.
// The frame is the same, and the empty segments go back to their pool.
TEST_F(MbufChain, GuardUnlinksEmptySegments) {
  std::array<Counter, kDropReasonCount> drops;
  const Bytes frame = ipv4_frame(0);
  rte_mbuf* burst[1] = {chain(frame, {30, 30, 60, 60, static_cast<uint32_t>(frame.size())})};
  ASSERT_EQ(burst[0]->nb_segs, 6u);
  uint64_t bytes = 0;
  ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
  EXPECT_EQ(burst[0]->nb_segs, 3u);
  for (const rte_mbuf* seg = burst[0]->next; seg != nullptr; seg = seg->next) EXPECT_NE(seg->data_len, 0u);
  EXPECT_EQ(flatten(burst[0]), frame);
  EXPECT_EQ(burst[0]->pkt_len, frame.size());
  EXPECT_TRUE(mbuf_is_sane(burst[0]));
  EXPECT_EQ(drops[kDropBadMbuf].get() + drops[kDropRunt].get() + drops[kDropOversize].get(), 0u);
  rte_pktmbuf_free(burst[0]);

  // An empty head: it takes the next segment's bytes, and that one goes.
  burst[0] = chain(frame, {0, 30});
  ASSERT_EQ(burst[0]->data_len, 0u);
  ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
  EXPECT_EQ(burst[0]->nb_segs, 2u);
  EXPECT_EQ(burst[0]->data_len, 30u);
  EXPECT_EQ(flatten(burst[0]), frame);
  EXPECT_TRUE(mbuf_is_sane(burst[0]));
  rte_pktmbuf_free(burst[0]);

  // An empty head too small for the next segment's bytes takes as many as
  // fit; the rest stay in that segment.
  rte_mempool* small = rte_pktmbuf_pool_create("chain_small", 63, 0, 0, 256, SOCKET_ID_ANY);
  ASSERT_NE(small, nullptr);
  const Bytes big(1100, 0x5a);
  rte_mbuf* head = rte_pktmbuf_alloc(small);
  rte_mbuf* tail = rte_pktmbuf_alloc(pool_);
  std::memcpy(rte_pktmbuf_append(tail, 1100), big.data(), 1100);
  head->next = tail;
  head->nb_segs = 2;
  head->pkt_len = 1100;
  burst[0] = head;
  ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
  EXPECT_EQ(head->nb_segs, 2u);
  EXPECT_EQ(head->data_len, 256u);
  EXPECT_EQ(flatten(head), big);
  EXPECT_TRUE(mbuf_is_sane(head));
  rte_pktmbuf_free(head);
  EXPECT_EQ(rte_mempool_avail_count(small), 63u);
  rte_mempool_free(small);

  // A chain another holder shares is left as it is (taking a segment out of
  // it would lose that segment for the other holder): a copy goes on, none
  // of its segments empty.
  for (const std::vector<uint32_t>& cuts : {std::vector<uint32_t>{30, 30}, std::vector<uint32_t>{0, 30}}) {
    rte_mbuf* shared = chain(frame, cuts);
    for (rte_mbuf* seg = shared; seg != nullptr; seg = seg->next) rte_mbuf_refcnt_update(seg, 1);
    burst[0] = shared;
    ASSERT_EQ(rx_guard_burst(burst, 1, 1514, drops, bytes), 1u);
    EXPECT_NE(burst[0], shared);
    EXPECT_FALSE(has_empty_segment(burst[0]));
    EXPECT_EQ(flatten(burst[0]), frame);
    EXPECT_EQ(burst[0]->pkt_len, frame.size());
    EXPECT_TRUE(mbuf_is_sane(burst[0]));
    EXPECT_EQ(shared->nb_segs, 3u) << "the other holder's chain is unchanged";
    EXPECT_EQ(flatten(shared), frame);
    for (const rte_mbuf* seg = shared; seg != nullptr; seg = seg->next) EXPECT_EQ(rte_mbuf_refcnt_read(seg), 1u);
    rte_pktmbuf_free(burst[0]);
    rte_pktmbuf_free(shared);
  }
  EXPECT_EQ(drops[kDropSharedBuffer].get(), 0u);
}

}  // namespace
}  // namespace psgate
