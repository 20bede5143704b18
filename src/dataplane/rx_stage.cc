// SPDX-License-Identifier: BSD-3-Clause
// RX stage: receive, parse, classify, police and hand off one burst.
// Fast path: no allocation, no locks, no logging. The clock is read once per burst.
#include "dataplane/rx_stage.h"

#include <rte_ethdev.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <type_traits>

#include "dataplane/run_total.h"
#include "dataplane/sched_stage.h"
#include "dataplane/tx.h"
#include "psgate/flow_key.h"
#include "psgate/fragment_table.h"
#include "psgate/mbuf_rewrite.h"
#include "psgate/packet_meta.h"
#include "psgate/packet_parser.h"
#include "psgate/rx_guard.h"

namespace psgate {

namespace {

// Headers that straddle mbuf segments are copied out once, which is rare
// (drivers put at least the first 128 bytes in one segment); the rewrite at
// dequeue finds the IP header in whichever segment holds it (mbuf_rewrite.h).
// The copy holds the frame's first kMaxHeaderBytes, as far as the parser
// reads in any buffer: a longer IPv6 header chain is forwarded unclassified
// as malformed.
inline void parse_mbuf(rte_mbuf* m, ParsedPacket& out) {
  parse_packet(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, m->pkt_len, out);
  if (!out.malformed || m->nb_segs == 1) return;
  uint8_t copy[kMaxHeaderBytes];
  const uint32_t len = m->pkt_len < sizeof(copy) ? m->pkt_len : sizeof(copy);
  const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, copy));
  parse_packet(p, len, m->pkt_len, out);
}

// What the class step does with a packet the slow path saw (a job slot, or
// none: unclassified IP goes to the default class like malformed frames do,
// but is counted apart; MAC control is dropped).
enum : uint8_t { kKindIp = 0, kKindNetworkControl, kKindMalformed, kKindMacControl };

}  // namespace

void rx_sync_slots(DataplaneShared& shared, RxContext& rx, const Snapshot& snap) {
  const uint64_t now = rte_rdtsc();
  const uint64_t hz = shared.tsc_hz;
  const size_t slots = std::min({snap.slots.size(), rx.police.size(), rx.slot_owner.size()});
  const bool first = rx.synced_generation == UINT32_MAX;  // the first snapshot's jobs: nothing came before them
  // Pipelined: where this lcore's default rings stand as it takes this
  // snapshot (it is their only producer): every packet it classified with
  // an older one lies before. A new job's packets start behind it, and the
  // scheduler reads it to hold the job (sched_release_holds).
  std::array<uint32_t, kPortCount> default_tail{};
  if (!rx.rings.empty()) {
    for (unsigned port = 0; port < kPortCount; ++port)
      default_tail[port] = rx.rings[port * shared.class_count + shared.default_class]->prod.tail;
  }
  auto sync = [&](size_t slot) {
    const SlotInfo& info = snap.slots[slot];
    const bool new_owner = rx.slot_owner[slot] != info.owner;
    rx.slot_owner[slot] = info.owner;
    // A job new to its slot: pipelined, its packets start on the default
    // class's ring, behind everything this lcore put there before (the
    // earlier packets of flows it takes over, unclassified until now), and
    // move to their class's ring as a re-rank would (stick_to_rings).
    if (new_owner && info.owner != 0 && !first && rx.hold_new_jobs && !rx.rings.empty()) {
      for (unsigned port = 0; port < kPortCount; ++port) {
        RxContext::RingStick& st = rx.ring_stick[port * rx.max_jobs + slot];
        st.cls = static_cast<uint8_t>(shared.default_class);
        st.ticket = default_tail[port];
        st.burst = rx.burst_seq;  // none of the next bursts
        st.valid = 1;
      }
    }
    if (info.police_bytes_per_sec == 0) return;
    TokenBucket& tb = rx.police[slot];
    if (new_owner || tb.rate_bytes_per_sec() != info.police_bytes_per_sec ||
        tb.burst_bytes() != info.police_burst_bytes) {
      tb = TokenBucket(info.police_bytes_per_sec, info.police_burst_bytes, hz, now);
    }
  };
  for_each_slot_to_sync(snap, rx.synced_generation, first, slots, sync);
  if (!rx.rings.empty()) {
    for (unsigned port = 0; port < kPortCount; ++port)
      rx.posts[port].synced.store(uint64_t{snap.generation} << 32 | default_tail[port], std::memory_order_release);
  }
  rx.synced_generation = snap.generation;
}

namespace {

// A burst's fragments once every packet has its job: each first fragment's
// job is remembered for its datagram, then the later fragments the table did
// not know before the burst look again (their first may have come in this
// burst, even after them), and what still has no first keeps the job its
// addresses and protocol gave it.
// What the fragment table remembers for a datagram whose first fragment was
// network control (class 0): its later fragments may not look like it (the
// protocol is behind AH, or in IPv6 behind the fragment header), and must
// not be taken by a job's rule or the default class.
inline constexpr uint32_t kNetworkControlDatagram = kNoJob - 1;

// A value recalled from the fragment table into job[i] and kind[i].
inline void take_recalled(unsigned i, uint32_t* job, uint8_t* kind) {
  if (job[i] == kNetworkControlDatagram) [[unlikely]] {
    job[i] = kNoJob;
    kind[i] = kKindNetworkControl;
  }
}

void settle_fragments(RxContext& rx, const Snapshot& snap, uint64_t now, uint64_t firsts, uint64_t orphans,
                      uint32_t* job, uint8_t* kind, PortCounters& in_counters) {
  FragmentTable& table = *rx.fragments;
  for (uint64_t t = firsts; t != 0; t &= t - 1) {
    const unsigned i = static_cast<unsigned>(__builtin_ctzll(t));
    if (kind[i] == kKindNetworkControl) {  // whatever the rules: a rules change leaves it current
      table.remember(rx.parsed[i], FragmentTable::kAnyGeneration, now, kNetworkControlDatagram);
    } else {
      table.remember(rx.parsed[i], snap.rules_generation, now, job[i]);
    }
  }
  unsigned followed = 0;
  for (uint64_t t = orphans; t != 0; t &= t - 1) {
    const unsigned i = static_cast<unsigned>(__builtin_ctzll(t));
    if (table.recall(rx.parsed[i], snap.rules_generation, now, job[i])) {
      take_recalled(i, job, kind);
      ++followed;
    }
  }
  in_counters.rx_fragments_followed.add(followed);
  in_counters.rx_fragments_orphaned.add(static_cast<unsigned>(__builtin_popcountll(orphans)) - followed);
}

// Classifies the packets of `todo` the slow way: the full parser, the flow
// cache for what it can key (IPv6, tagged, options), the ACL for the rest, and
// the results cached; a later fragment takes its datagram's first fragment's
// job (FragmentTable). `keyed` marks packets whose IPv4 wire key (keys[i],
// hashes[i]) already missed the cache: they are inserted under that key.
// Fills job[i], and l3_offset[i] / ip_version[i] (0: never rewrite) for
// every packet of `todo`; kind[i] says what the class step must do with a
// packet that has no job.
void classify_slow(RxContext& rx, const Snapshot& snap, rte_mbuf* const* pkts, uint64_t todo, uint64_t keyed,
                   uint64_t now, PortCounters& in_counters, uint32_t* job, uint16_t* l3_offset, uint8_t* ip_version,
                   uint8_t* kind) {
  ParsedPacket* parsed = rx.parsed.data();
  FlowCache* fc = rx.flow_cache.get();
  LcoreCounters& counters = *rx.counters;
  uint64_t firsts = 0;   // first fragments: remembered once classified
  uint64_t orphans = 0;  // later fragments the table did not know
  unsigned followed = 0;
  const ParsedPacket* lookup[kMaxBurst];  // cacheable without a wire key
  unsigned lookup_idx[kMaxBurst];
  unsigned n_lookup = 0;
  const ParsedPacket* acl[kMaxBurst];
  unsigned acl_idx[kMaxBurst];
  unsigned n_acl = 0;
  for (uint64_t t = todo; t != 0; t &= t - 1) {
    const unsigned i = static_cast<unsigned>(__builtin_ctzll(t));
    parse_mbuf(pkts[i], parsed[i]);
    const ParsedPacket& p = parsed[i];
    job[i] = kNoJob;
    l3_offset[i] = p.l3_offset;
    // A malformed packet whose IP header is sound is rewritten too (its
    // class's DSCP remark, ECN): only the header's own bytes are touched.
    ip_version[i] = (p.l3 != L3Kind::kNonIp && (!p.malformed || p.ip_header_sound)) ? static_cast<uint8_t>(p.l3) : 0;
    kind[i] = p.network_control ? kKindNetworkControl
              : p.malformed     ? kKindMalformed
              : p.mac_control   ? kKindMacControl
                                : kKindIp;
    if (p.l3 == L3Kind::kNonIp || p.malformed || p.network_control) {
      // A first fragment too short for its L4 header (RFC 1858's tiny
      // fragment) has no job; remembered as such, so that its later
      // fragments follow it rather than match on addresses alone, where a
      // port-restricted job's rule would take them. A network control one
      // is remembered as such: its later fragments go to class 0 with it.
      if ((p.malformed || p.network_control) && p.fragment && !p.non_first_fragment) [[unlikely]]
        firsts |= uint64_t{1} << i;
      continue;
    }
    if (p.fragment) [[unlikely]] {
      if (!p.non_first_fragment) {
        firsts |= uint64_t{1} << i;
      } else if (rx.fragments->recall(p, snap.rules_generation, now, job[i])) {
        take_recalled(i, job, kind);
        ++followed;
        continue;
      } else {
        orphans |= uint64_t{1} << i;  // classified on addresses meanwhile
      }
    }
    if (fc && FlowCache::cacheable(p) && !(keyed >> i & 1)) {
      lookup[n_lookup] = &p;
      lookup_idx[n_lookup++] = i;
    } else {
      acl[n_acl] = &p;
      acl_idx[n_acl++] = i;
    }
  }
  uint64_t insert_mask = 0;  // bits of acl[] to cache after the ACL
  if (n_lookup) {
    uint32_t cached[kMaxBurst];
    const uint64_t hits = fc->lookup(lookup, n_lookup, snap.rules_generation, cached);
    counters.flow_cache.hits.add(static_cast<unsigned>(__builtin_popcountll(hits)));
    counters.flow_cache.misses.add(n_lookup - static_cast<unsigned>(__builtin_popcountll(hits)));
    for (unsigned k = 0; k < n_lookup; ++k) {
      if (hits >> k & 1) {
        job[lookup_idx[k]] = cached[k];
      } else {
        insert_mask |= uint64_t{1} << n_acl;
        acl[n_acl] = lookup[k];
        acl_idx[n_acl++] = lookup_idx[k];
      }
    }
  }
  if (n_acl != 0) {
    uint32_t matched[kMaxBurst];
    snap.matcher.classify(acl, n_acl, matched);
    const uint64_t evictions_before = fc ? fc->evictions() : 0;
    for (unsigned k = 0; k < n_acl; ++k) {
      const unsigned i = acl_idx[k];
      job[i] = matched[k];
      if (keyed >> i & 1) {
        fc->insert4(rx.keys[i], rx.hashes[i], snap.rules_generation, matched[k]);
      } else if (insert_mask >> k & 1) {
        fc->insert(*acl[k], snap.rules_generation, matched[k]);
      }
    }
    if (fc) counters.flow_cache.evictions.add(fc->evictions() - evictions_before);
  }
  if (followed) in_counters.rx_fragments_followed.add(followed);
  if (firsts | orphans) [[unlikely]]
    settle_fragments(rx, snap, now, firsts, orphans, job, kind, in_counters);
}

// What classification found for each packet of a burst, by index.
struct BurstClasses {
  uint32_t job[kMaxBurst];  // job slot, Classifier::kNoMatch, or kNoJob
  uint64_t hits;            // bit i: packet i hit the cache as plain IPv4 at kCommonL3Offset
  // Filled by classify_slow for the packets that did not hit:
  uint16_t l3_offset[kMaxBurst];
  uint8_t ip_version[kMaxBurst];
  uint8_t kind[kMaxBurst];
};

// The stages of rx_poll are kept out of line (one call per burst): a profile
// then names each, which is what perf/run-bench's stage budget is made of.

// rx_guard_burst (rx_guard.h), out of line for the profile.
[[gnu::noinline]] unsigned guard_burst(rte_mbuf** pkts, unsigned n, uint32_t max_untagged_frame, unsigned max_segs,
                                       bool one_dot1q_tag_room, std::array<Counter, kDropReasonCount>& drops,
                                       uint64_t& bytes) {
  return rx_guard_burst(pkts, n, max_untagged_frame, drops, bytes, max_segs, one_dot1q_tag_room);
}

// Classifies the `n` packets of `pkts`, which arrived on `in_port` at `now`, into `out`.
[[gnu::noinline]] void classify_burst(RxContext& rx, const Snapshot& snap, rte_mbuf* const* pkts, unsigned n,
                                      unsigned in_port, uint64_t now, BurstClasses& out) {
  FlowCache* fc = rx.flow_cache.get();
  LcoreCounters& counters = *rx.counters;

  // 1. The common case straight from the wire: key, hash, and the key's cache
  //    sets requested, while the rest of the burst is still being looked at.
  uint64_t keyed = 0;
  if (fc) {
    const FlowCache::Prefetcher4 prefetch = fc->prefetcher4();
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      if (parse_ipv4_flow_key(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, rx.keys[i])) {
        rx.hashes[i] = FlowCache::hash(rx.keys[i]);
        prefetch(rx.hashes[i]);
        keyed |= uint64_t{1} << i;
      }
    }
  }

  // 2. Compare them. A hit is all a common-case packet needs.
  uint64_t hits = 0;
  if (keyed) {
    hits = fc->lookup4(rx.keys.data(), rx.hashes.data(), keyed, snap.rules_generation, out.job);
    const unsigned n_hits = static_cast<unsigned>(__builtin_popcountll(hits));
    counters.flow_cache.hits.add(n_hits);
    counters.flow_cache.misses.add(static_cast<unsigned>(__builtin_popcountll(keyed)) - n_hits);
  }
  out.hits = hits;

  // 3. Everything else: the full parser, then cache or ACL.
  const uint64_t all = n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  if (hits != all) {
    classify_slow(rx, snap, pkts, all & ~hits, keyed & ~hits, now, counters.ports[in_port], out.job, out.l3_offset,
                  out.ip_version, out.kind);
  }
}

// Packets admitted for the scheduler, in arrival order, with their classes,
// and what the cut-through needs of them as a whole.
struct Admitted {
  rte_mbuf* pkts[kMaxBurst];
  uint8_t cls[kMaxBurst];
  unsigned n = 0;
  uint64_t classes = 0;  // bit c: some packet is in class c
  uint64_t bytes = 0;    // pkt_len sum
};

// Gives each packet its class, polices the jobs that have a policer (a
// packet over its job's rate is dropped and counted here), and writes the
// packet's metadata for the later stages. What is admitted is counted per
// job later (count_admitted, or the cut-through's tx): the class-ordered
// burst the cut-through sends keeps a job's packets together, so a burst of
// interleaved jobs costs one counter update per job there instead of one per
// packet here.
// `bytes` is the length of the `n` packets: what is admitted is that less
// what is policed, without a sum per packet.
[[gnu::noinline]] void admit_burst(const DataplaneShared& shared, RxContext& rx, const Snapshot& snap, unsigned in_port,
                                   rte_mbuf* const* pkts, unsigned n, uint64_t bytes, const BurstClasses& bc,
                                   uint64_t now, Admitted& out) {
  LcoreCounters& counters = *rx.counters;
  PortCounters& in_counters = counters.ports[in_port];
  const unsigned dir = direction_of_ingress(in_port);
  // Loop invariants in locals: the metadata stores below are byte stores,
  // which may alias anything, so the compiler would otherwise reload each of
  // these from memory for every packet.
  const SlotInfo* const slots = snap.slots.data();
  const size_t slot_count = snap.slots.size();
  const unsigned default_class = shared.default_class;
  const int meta_offset = g_packet_meta_offset;
  const uint64_t hits = bc.hits;
  // Policed packets (and MAC control, never relayed) are counted as they
  // come and freed together afterwards.
  rte_mbuf* dropped[kMaxBurst];
  unsigned n_dropped = 0;
  unsigned n_policed = 0;  // the rest of `dropped` is MAC control
  unsigned n_out = 0;
  uint64_t classes = 0;
  // The loop four times: for a burst that hit the cache throughout (every
  // packet plain IPv4 at kCommonL3Offset: nothing else to look at) or not,
  // and for the wire egress, whose pull telemetry wants each packet's
  // worker (set_packet_worker), or the host egress, where nothing reads it.
  auto admit_all = [&]<bool kAllHits, bool kWorkers>(std::bool_constant<kAllHits>, std::bool_constant<kWorkers>) {
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = pkts[i];
      uint32_t slot = bc.job[i];
      // A cache hit is plain IPv4 at kCommonL3Offset; its slot may still be
      // kNoMatch (unclassified flows are cached too).
      const bool common = kAllHits || (hits >> i & 1);
      unsigned cls;
      if (!common && bc.kind[i] == kKindNetworkControl) {
        cls = 0;
        in_counters.rx_network_control.inc();
      } else if (!common && bc.kind[i] == kKindMalformed) {
        cls = default_class;
        in_counters.rx_malformed.inc();
      } else if (!common && bc.kind[i] == kKindMacControl) [[unlikely]] {
        bytes -= m->pkt_len;
        dropped[n_dropped++] = m;
        continue;
      } else if (slot >= slot_count) {  // Classifier::kNoMatch and kNoJob are both above any slot
        slot = kNoJob;
        cls = default_class;
        in_counters.rx_unclassified.inc();
      } else {
        const SlotInfo& info = slots[slot];
        cls = info.cls[dir];
        if (info.police_bytes_per_sec) [[unlikely]] {
          TokenBucket& tb = rx.police[slot];
          tb.refill(now);
          if (!tb.conforms(m->pkt_len)) {
            counters.jobs[slot].policed.inc();
            bytes -= m->pkt_len;
            dropped[n_dropped++] = m;
            ++n_policed;
            continue;
          }
          tb.consume(m->pkt_len);
        }
      }
      const uint16_t l3_offset = common ? kCommonL3Offset : bc.l3_offset[i];
      const uint8_t ip_version = common ? 4 : bc.ip_version[i];
      write_packet_meta(m, meta_offset, now, packet_meta_word1(slot, l3_offset, ip_version, static_cast<uint8_t>(cls)));
      // A cache hit's worker is in its key; any other packet's is read here,
      // off the common path, for tx. (Stored in classify_burst's key loop
      // instead, it cost 2% at 64 B in time, though 2 instructions less.)
      if constexpr (kWorkers) {
        uint32_t worker = 0;
        if (common) {
          worker = flow_key4_destination(rx.keys[i]);
        } else if (slot != kNoJob && ip_version != 0) {
          worker = read_u32_at(m, l3_offset + (ip_version == 4 ? 16u : 36u));
        }
        set_packet_worker(m, worker);
      }
      classes |= uint64_t{1} << cls;
      out.pkts[n_out] = m;
      out.cls[n_out++] = static_cast<uint8_t>(cls);
    }
  };
  const bool all_hit = hits == (n == 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1);
  if (dir == kPull) {  // bound for the wire egress, which alone keeps telemetry (dataplane.cc)
    all_hit ? admit_all(std::true_type{}, std::true_type{}) : admit_all(std::false_type{}, std::true_type{});
  } else {
    all_hit ? admit_all(std::true_type{}, std::false_type{}) : admit_all(std::false_type{}, std::false_type{});
  }
  out.n = n_out;
  out.classes = classes;
  out.bytes = bytes;
  if (n_dropped) [[unlikely]] {
    std::array<Counter, kDropReasonCount>& drops = counters.ports[in_port ^ 1u].drops;
    if (n_policed) drops[kDropPoliced].add(n_policed);
    if (n_dropped > n_policed) drops[kDropMacControl].add(n_dropped - n_policed);
    rte_pktmbuf_free_bulk(dropped, n_dropped);
  }
}

// Run to completion: the burst's class 0 packets (network control) over the
// egress port's limit are dropped before the cut-through or the FIFOs see
// them (control_limit.h), the others kept in order. Called only for a burst
// that holds class 0 packets, on a port that limits them.
[[gnu::noinline]] void police_control(EgressPort& egress, LcoreCounters& counters, Admitted& a, uint64_t now) {
  rte_mbuf* dropped[kMaxBurst];
  unsigned n_dropped = 0;
  bool control_left = false;
  const unsigned kept = egress.control.police(
      a.n, now, [&](unsigned i) { return a.cls[i] == 0 ? a.pkts[i]->pkt_len : ControlLimit::kOtherClass; },
      [&](unsigned from, unsigned to) {
        control_left |= a.cls[from] == 0;
        a.pkts[to] = a.pkts[from];
        a.cls[to] = a.cls[from];
      },
      [&](unsigned i) {
        a.bytes -= a.pkts[i]->pkt_len;
        dropped[n_dropped++] = a.pkts[i];
      });
  if (n_dropped == 0) return;
  a.n = kept;
  if (!control_left) a.classes &= ~uint64_t{1};
  drop_policed_control(egress, counters, dropped, n_dropped);
}

// A run keyed by job slot, counted as admitted (tx.h).
inline void add_admitted_run(LcoreCounters& counters, unsigned dir, const RunTotal& r) {
  psgate::add_admitted_run(counters, dir, r.key, r.packets, r.bytes);
}

// Counts the admitted packets per job (runs of one job's packets added
// once), for a burst of the run-to-completion path that does not leave by
// the cut-through (the pipelined hand-off counts them itself).
void count_admitted(LcoreCounters& counters, unsigned in_port, const Admitted& a) {
  const unsigned dir = direction_of_ingress(in_port);
  RunTotal run;
  auto flush = [&](const RunTotal& r) { add_admitted_run(counters, dir, r); };
  for (unsigned i = 0; i < a.n; ++i) run_add(run, packet_meta(a.pkts[i])->job_slot, a.pkts[i]->pkt_len, flush);
  if (run.packets) flush(run);
}

// Pipelined re-ranking: a re-ranked job keeps using its old class's ring
// until the scheduler has consumed its last packet there (see
// RxContext::RingStick), so its packets are never in two rings at once.
// Rewrites the class of the packets that must stay on their old ring.
void stick_to_rings(RxContext& rx, unsigned out_port, rte_ring* const* port_rings, Admitted& a) {
  RxContext::RingStick* sticks = rx.ring_stick.data() + out_port * rx.max_jobs;
  const uint32_t burst = ++rx.burst_seq;
  for (unsigned i = 0; i < a.n; ++i) {
    const uint32_t s = packet_meta(a.pkts[i])->job_slot;
    if (s == kNoJob) continue;
    RxContext::RingStick& st = sticks[s];
    if (st.valid && st.cls != a.cls[i]) {
      // Stay on the old ring if an earlier packet of this burst is going
      // there (its enqueue, and so its ticket, is still to come), or if the
      // scheduler has not consumed past the job's last packet in it yet:
      // cons.tail is the consumer's release-store of how far it has read.
      bool stay = st.burst == burst;
      if (!stay) {
        // Outstanding: 1..capacity positions ahead of the consumer. Anything
        // else is a ticket long consumed, the counters having wrapped since
        // (a job quiet for 2^31 packets of its ring), not one still due.
        const rte_ring* old_ring = port_rings[st.cls];
        const uint32_t consumed = __atomic_load_n(&old_ring->cons.tail, __ATOMIC_ACQUIRE);
        stay = st.ticket - consumed - 1u < old_ring->capacity;
      }
      if (stay) {
        a.cls[i] = st.cls;
        packet_meta(a.pkts[i])->cls = st.cls;
        st.burst = burst;
        continue;
      }
      // Moving: until an enqueue below sets it, the ticket is a position of
      // the new ring (this lcore is its only producer), never one of the old
      // ring read against the new one's consumer, should the ring refuse
      // every packet of the job.
      st.ticket = port_rings[a.cls[i]]->prod.tail;
    }
    st.cls = a.cls[i];
    st.valid = 1;
    st.burst = burst;
  }
}

// Pipelined hand-off: one enqueue per class present in the burst, arrival
// order kept within each class. A full ring drops the excess and counts it:
// never spin. Counts the packets admitted per job on the way (as
// count_admitted would in a pass of its own): all of them, before a full
// ring drops any, as the FIFO path counts them before a full queue does.
void hand_off_to_rings(const DataplaneShared& shared, RxContext& rx, unsigned in_port, Admitted& a) {
  const unsigned out_port = in_port ^ 1u;
  LcoreCounters& counters = *rx.counters;
  RxContext::RingStick* sticks = rx.ring_stick.data() + out_port * rx.max_jobs;
  rte_ring* const* port_rings = rx.rings.data() + out_port * shared.class_count;
  stick_to_rings(rx, out_port, port_rings, a);
  const unsigned dir = direction_of_ingress(in_port);
  RunTotal admitted;
  auto count_run = [&](const RunTotal& r) { add_admitted_run(counters, dir, r); };
  uint64_t present = 0;
  for (unsigned i = 0; i < a.n; ++i) present |= uint64_t{1} << a.cls[i];
  while (present) {
    const unsigned cls = __builtin_ctzll(present);
    present &= present - 1;
    rte_mbuf* group[kMaxBurst];
    // The packets' jobs, read while this lcore still owns them: once
    // enqueued, the scheduler lcore may send a packet and the driver free it,
    // and another RX lcore receive into it, before the tickets below are set.
    uint32_t group_slot[kMaxBurst];
    unsigned g = 0;
    for (unsigned i = 0; i < a.n; ++i) {
      if (a.cls[i] != cls) continue;
      group_slot[g] = packet_meta(a.pkts[i])->job_slot;
      run_add(admitted, group_slot[g], a.pkts[i]->pkt_len, count_run);
      group[g++] = a.pkts[i];
    }
    rte_ring* ring = port_rings[cls];
    const unsigned sent = rte_ring_sp_enqueue_burst(ring, reinterpret_cast<void* const*>(group), g, nullptr);
    // Single producer: after the enqueue, prod.tail is the position just past
    // the packets this lcore put in, the ticket for their jobs.
    const uint32_t ticket = ring->prod.tail;
    // Tell the scheduler this ring has news (lcore_context.h, RingPosts).
    if (sent) rx.posts[out_port].tail[cls].store(ticket, std::memory_order_release);
    for (unsigned i = 0; i < sent; ++i) {
      if (group_slot[i] != kNoJob) sticks[group_slot[i]].ticket = ticket;
    }
    if (sent == g) continue;
    for (unsigned i = sent; i < g; ++i) {
      if (group_slot[i] != kNoJob) counters.jobs[group_slot[i]].drops.inc();
    }
    counters.ports[out_port].drops[kDropRingFull].add(g - sent);
    counters.cls(out_port, cls).drop_ring_full.add(g - sent);
    rte_pktmbuf_free_bulk(group + sent, g - sent);
  }
  if (admitted.packets) count_run(admitted);
}

}  // namespace

unsigned rx_poll(DataplaneShared& shared, RxContext& rx, const Snapshot& snap, unsigned in_port, uint64_t now) {
  rte_mbuf* pkts[kMaxBurst];
  const uint16_t received = rte_eth_rx_burst(shared.port_ids[in_port], rx.rx_queue, pkts, shared.burst);
  if (received == 0) return 0;
  const unsigned out_port = in_port ^ 1u;  // bump-in-the-wire: wire <-> host
  LcoreCounters& counters = *rx.counters;
  PortCounters& in_counters = counters.ports[in_port];
  // Nothing reads a packet before its buffer is known to be sound and its
  // frame to fit the egress port (rx_guard.h).
  // Received is counted before anything of the burst is dropped or sent:
  // a live read takes it last (read_totals), and so never counts more out
  // than in.
  in_counters.rx_packets.add(received);
  // Ordered before this lcore's later counts (free on x86, a barrier where
  // stores may pass each other).
  std::atomic_thread_fence(std::memory_order_release);
  uint64_t bytes = 0;
  const unsigned n = guard_burst(pkts, received, shared.max_untagged_frame[out_port].load(std::memory_order_relaxed),
                                 shared.max_tx_segs[out_port], shared.one_dot1q_tag_room[out_port],
                                 counters.ports[out_port].drops, bytes);
  in_counters.rx_bytes.add(bytes);
  if (n == 0) return received;

  // What admission starts from: the bytes of the packets kept. The guard's
  // sum is of every sound buffer received, runts and oversized frames it
  // dropped included (rx_bytes), so it serves only when it kept them all.
  uint64_t kept_bytes = bytes;
  if (n != received) [[unlikely]] {
    kept_bytes = 0;
    for (unsigned i = 0; i < n; ++i) kept_bytes += pkts[i]->pkt_len;
  }

  BurstClasses bc;
  classify_burst(rx, snap, pkts, n, in_port, now, bc);
  Admitted admitted;
  admit_burst(shared, rx, snap, in_port, pkts, n, kept_bytes, bc, now, admitted);

  if (EgressPort* direct = rx.direct[out_port]) {
    if ((admitted.classes & 1) && direct->control.on) [[unlikely]]
      police_control(*direct, counters, admitted, now);
    if (admitted.n && !sched_cut_through(*direct, counters, admitted.pkts, admitted.cls, admitted.n, admitted.classes,
                                         admitted.bytes, now)) {
      count_admitted(counters, in_port, admitted);
      sched_accept_burst(shared, *direct, counters, admitted.pkts, admitted.n);
    }
    return received;
  }
  hand_off_to_rings(shared, rx, in_port, admitted);
  return received;
}

}  // namespace psgate
