// SPDX-License-Identifier: BSD-3-Clause
// The slow half of the RX buffer check (see rx_guard.h): only packets the
// fast check refused come here.
#include "psgate/rx_guard.h"

#include <rte_ether.h>

#include "psgate/config.h"
#include "psgate/packet_parser.h"

namespace psgate {

namespace {

// A buffer a pool can take back: it has one, and a reference (a count of 0
// is no live mbuf's: freeing it would wrap the count and lose the buffer).
inline bool live_pool_buffer(const rte_mbuf* seg) {
  if (seg->pool == nullptr || seg->buf_addr == nullptr || rte_mbuf_refcnt_read(seg) == 0) return false;
  // Freeing an attached segment goes through its attachment: an external
  // buffer's shared info (its callback frees the buffer), an indirect one's
  // direct mbuf, found from the buffer address. A flag without them would
  // call through a null pointer, or free the segment as its own "direct"
  // mbuf and then again as itself.
  if (RTE_MBUF_HAS_EXTBUF(seg)) return seg->shinfo != nullptr && seg->shinfo->free_cb != nullptr;
  if (RTE_MBUF_CLONED(seg)) {
    const rte_mbuf* direct = rte_mbuf_from_indirect(const_cast<rte_mbuf*>(seg));
    return direct != seg && rte_mbuf_refcnt_read(direct) != 0;
  }
  return true;
}

}  // namespace

bool mbuf_is_sane(const rte_mbuf* m) {
  if (m->nb_segs == 0) return false;
  const rte_mbuf* seg = m;
  uint64_t sum = 0;
  for (unsigned k = 0; k < m->nb_segs; ++k) {
    if (seg == nullptr) return false;  // the chain is shorter than nb_segs says
    // Every segment, not only the head: the driver frees each into its own pool.
    if (!live_pool_buffer(seg) || seg->data_off > seg->buf_len ||
        uint32_t{seg->data_off} + seg->data_len > seg->buf_len)
      return false;
    sum += seg->data_len;
    seg = seg->next;
  }
  return seg == nullptr && sum == m->pkt_len;  // longer than nb_segs, or lengths that disagree
}

void free_broken_mbuf(rte_mbuf* m, FreedSegments* freed) {
  // The segments nb_segs vouches for, at most kMaxBrokenSegsFreed, one by one,
  // each detached from its `next` first; it stops at the first that is not a
  // live pool buffer or that came up before (a chain that loops back, or
  // another broken chain's): such a segment freed would be in its pool
  // twice, and handed out twice. Segments past the limit, if a broken chain
  // had more, stay unfreed.
  rte_mbuf* mine[kMaxBrokenSegsFreed];
  unsigned n_mine = 0;
  unsigned left = m->nb_segs == 0 ? 1 : m->nb_segs;
  while (m != nullptr && left-- > 0 && n_mine < kMaxBrokenSegsFreed && live_pool_buffer(m)) {
    for (unsigned k = 0; k < n_mine; ++k)
      if (mine[k] == m) return;
    if (freed != nullptr && freed->holds(m)) return;
    rte_mbuf* next = m->next;
    m->next = nullptr;
    m->nb_segs = 1;
    rte_pktmbuf_free_seg(m);
    mine[n_mine++] = m;
    if (freed != nullptr) freed->add(m);
    m = next;
  }
}

namespace {

// Takes `seg`, which follows `prev` in m's chain, out of the chain and frees it.
void unlink_after(rte_mbuf* m, rte_mbuf* prev, rte_mbuf* seg) {
  prev->next = seg->next;
  --m->nb_segs;
  seg->next = nullptr;
  seg->nb_segs = 1;
  rte_pktmbuf_free_seg(seg);
}

}  // namespace

void unlink_empty_segments(rte_mbuf* m) {
  // Only a chain nobody else holds: another holder of a shared chain would
  // lose the segments taken out of it (and they would never return to
  // their pool).
  for (const rte_mbuf* seg = m; seg != nullptr; seg = seg->next)
    if (rte_mbuf_refcnt_read(seg) != 1) return;
  rte_mbuf* prev = m;
  for (rte_mbuf* seg = m->next; seg != nullptr;) {
    rte_mbuf* next = seg->next;
    if (seg->data_len == 0) {
      unlink_after(m, prev, seg);
    } else {
      prev = seg;
    }
    seg = next;
  }
  // The head carries the packet's fields, so it stays: an empty one (a
  // direct one: its buffer is its own) takes the next segment's first bytes
  // into its buffer, as many as fit, and that segment goes if they were all.
  rte_mbuf* next = m->next;
  if (m->data_len != 0 || next == nullptr || !RTE_MBUF_DIRECT(m) || m->buf_len == 0) return;
  const uint16_t take = RTE_MIN(next->data_len, m->buf_len);
  m->data_off = static_cast<uint16_t>(RTE_MIN(RTE_PKTMBUF_HEADROOM, m->buf_len - take));  // headroom where it fits
  std::memcpy(rte_pktmbuf_mtod(m, uint8_t*), rte_pktmbuf_mtod(next, const uint8_t*), take);
  m->data_len = take;
  next->data_off = static_cast<uint16_t>(next->data_off + take);
  next->data_len = static_cast<uint16_t>(next->data_len - take);
  if (next->data_len == 0) unlink_after(m, m, next);
}

bool restore_stripped_vlan_tags(rte_mbuf* m) {
  const bool inner = m->ol_flags & RTE_MBUF_F_RX_VLAN_STRIPPED;
  const bool outer = m->ol_flags & RTE_MBUF_F_RX_QINQ_STRIPPED;
  const uint16_t room = static_cast<uint16_t>(4 * (inner + outer));
  // Written in place in front of the data: a buffer another holder reads
  // (shared, attached) must not change, and the head's data_len must hold
  // the MAC addresses that move.
  if (!RTE_MBUF_DIRECT(m) || rte_mbuf_refcnt_read(m) != 1 || rte_pktmbuf_headroom(m) < room ||
      m->data_len < 2 * RTE_ETHER_ADDR_LEN || uint32_t{m->data_len} + room > UINT16_MAX)
    return false;
  auto* moved = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(m, room));
  std::memmove(moved, moved + room, 2 * RTE_ETHER_ADDR_LEN);
  uint8_t* tag = moved + 2 * RTE_ETHER_ADDR_LEN;
  auto put = [&tag](uint16_t tpid, uint16_t tci) {
    const uint8_t bytes[4] = {uint8_t(tpid >> 8), uint8_t(tpid), uint8_t(tci >> 8), uint8_t(tci)};
    std::memcpy(tag, bytes, sizeof bytes);
    tag += sizeof bytes;
  };
  if (outer) put(RTE_ETHER_TYPE_QINQ, m->vlan_tci_outer);
  if (inner) put(RTE_ETHER_TYPE_VLAN, m->vlan_tci);
  m->ol_flags &= ~(RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ_STRIPPED);
  return true;
}

unsigned vlan_tag_count(const rte_mbuf* m) {
  unsigned tags = 0;
  for (; tags < kMaxVlanTags; ++tags) {
    uint8_t copy[2];
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 12 + 4 * tags, sizeof(copy), copy));
    if (p == nullptr) break;
    const uint16_t type = static_cast<uint16_t>(p[0] << 8 | p[1]);  // bytes: the frame has no alignment
    if (type != RTE_ETHER_TYPE_VLAN && type != RTE_ETHER_TYPE_QINQ && type != RTE_ETHER_TYPE_QINQ1) break;
  }
  return tags;
}

namespace {

// 1 when the frame's outer tag is 802.1Q (TPID 0x8100), else 0.
unsigned outer_dot1q_tag(const rte_mbuf* m) {
  uint8_t copy[2];
  const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 12, sizeof(copy), copy));
  return p != nullptr && (p[0] << 8 | p[1]) == RTE_ETHER_TYPE_VLAN;
}

}  // namespace

bool frame_over_mtu(const rte_mbuf* m, uint32_t max_untagged_frame, bool one_dot1q_tag_room) {
  const uint32_t len = m->pkt_len;
  return len > max_untagged_frame &&
         len > max_untagged_frame + (one_dot1q_tag_room ? 4 * outer_dot1q_tag(m) : 4 * vlan_tag_count(m));
}

bool has_empty_segment(const rte_mbuf* m) {
  for (; m != nullptr; m = m->next)
    if (m->data_len == 0) return true;
  return false;
}

bool shares_bytes(const rte_mbuf* m) {
  for (; m != nullptr; m = m->next)
    if (rte_mbuf_refcnt_read(m) != 1 || RTE_MBUF_CLONED(m)) return true;
  return false;
}

rte_mbuf* copy_packet(const rte_mbuf* m) {
  // Into the pool of the buffer that holds the bytes: a clone's head is an
  // indirect mbuf, whose own pool usually holds no data (DPDK's examples
  // make clone pools of data room 0); its direct mbuf's is a packet pool.
  rte_mempool* pool = RTE_MBUF_CLONED(m) ? rte_mbuf_from_indirect(const_cast<rte_mbuf*>(m))->pool : m->pool;
  if (pool == nullptr || rte_pktmbuf_data_room_size(pool) <= RTE_PKTMBUF_HEADROOM) return nullptr;
  return rte_pktmbuf_copy(m, pool, 0, UINT32_MAX);
}

unsigned rx_guard_suspects(rte_mbuf** pkts, unsigned n, uint32_t max_untagged_frame, unsigned max_segs,
                           bool one_dot1q_tag_room, std::array<Counter, kDropReasonCount>& drops, uint64_t& bytes) {
  uint64_t sum = 0;
  unsigned kept = 0;
  unsigned bad = 0, runt = 0, oversize = 0, too_many_segments = 0, vlan_stripped = 0, shared_buffer = 0;
  rte_mbuf* dropped[64];  // a burst is at most 64 packets (dataplane.burst)
  unsigned n_dropped = 0;
  uint64_t suspects = 0;  // bit k: pkts[k] (as kept) failed the fast check, sound
  FreedSegments freed;    // by every broken chain of the burst: none freed twice

  // 1. Broken buffers freed, as far as they can be trusted; the rest kept.
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    if (mbuf_fast_odd(m, max_untagged_frame - kMinForwardFrame) != 0) {
      if (!mbuf_is_sane(m)) {
        ++bad;
        free_broken_mbuf(m, &freed);
        continue;
      }
      suspects |= uint64_t{1} << kept;
    }
    pkts[kept++] = m;
  }

  // 2. A packet of the burst that holds a segment a broken chain freed (its
  //    corrupt `next` led there) would be sent, or freed, from the pool:
  //    counted as broken too, and left unfreed (what is left of it is lost
  //    to the pool rather than freed twice; a reference it shared with
  //    another holder was the broken chain's to let go). A freed segment's
  //    `next` is 0. Before anything below takes mbufs from the pool, which
  //    may hand out the very ones freed here.
  if (freed.n != 0) [[unlikely]] {
    auto holds_freed = [&](const rte_mbuf* m) {
      const unsigned segs = m->nb_segs;
      for (unsigned k = 0; m != nullptr && k < segs; ++k, m = m->next)
        if (freed.holds(m)) return true;
      return false;
    };
    unsigned still = 0;
    uint64_t still_suspects = 0;
    for (unsigned i = 0; i < kept; ++i) {
      if (holds_freed(pkts[i])) {
        ++bad;
        continue;
      }
      still_suspects |= (suspects >> i & 1) << still;
      pkts[still++] = pkts[i];
    }
    kept = still;
    suspects = still_suspects;
  }

  // 3. The sound packets the fast check sent here, in place.
  unsigned out = 0;
  for (unsigned i = 0; i < kept; ++i) {
    rte_mbuf* m = pkts[i];
    if (!(suspects >> i & 1)) {
      sum += m->pkt_len;
      pkts[out++] = m;
      continue;
    }
    // Bytes another holder reads (a clone's reference) are never written:
    // psgate forwards its own copy, which its rewrites, the unlinking of
    // empty segments and the restored VLAN tags may change.
    if (shares_bytes(m)) [[unlikely]] {
      rte_mbuf* copy = copy_packet(m);
      if (copy == nullptr) {
        sum += m->pkt_len;
        ++(m->pkt_len < kMinForwardFrame ? runt : shared_buffer);  // rte_pktmbuf_copy refuses 0 bytes
        dropped[n_dropped++] = m;
        continue;
      }
      rte_pktmbuf_free(m);  // the other holder keeps its reference
      m = copy;
    }
    if (m->next != nullptr) unlink_empty_segments(m);  // a NIC may refuse a 0-byte TX descriptor
    // Transmit requests are the sender's to make (psgate makes none); a
    // stripped tag goes back on before the frame is judged and classified,
    // and counted as received with it, as the wire carried it.
    m->ol_flags &= ~RTE_MBUF_F_TX_OFFLOAD_MASK;
    if ((m->ol_flags & (RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ_STRIPPED)) && !restore_stripped_vlan_tags(m))
        [[unlikely]] {
      sum += m->pkt_len;
      ++vlan_stripped;
      dropped[n_dropped++] = m;
      continue;
    }
    const uint32_t len = m->pkt_len;
    sum += len;
    if (len < kMinForwardFrame) {
      ++runt;
      dropped[n_dropped++] = m;
      continue;
    }
    if (frame_over_mtu(m, max_untagged_frame, one_dot1q_tag_room)) {
      ++oversize;
      dropped[n_dropped++] = m;
      continue;
    }
    // A driver that chains in pieces smaller than the plan's mbufs (it
    // rounds its buffer size down) can exceed what the egress device takes
    // as one packet; handed over, such a chain is refused, or stops the TX
    // queue of a device that does not check.
    if (m->nb_segs > max_segs) {
      ++too_many_segments;
      dropped[n_dropped++] = m;
      continue;
    }
    pkts[out++] = m;  // a sane chain, or a tagged frame within its limit
  }
  if (bad) drops[kDropBadMbuf].add(bad);
  if (runt) drops[kDropRunt].add(runt);
  if (oversize) drops[kDropOversize].add(oversize);
  if (too_many_segments) drops[kDropTooManySegments].add(too_many_segments);
  if (vlan_stripped) drops[kDropVlanStripped].add(vlan_stripped);
  if (shared_buffer) drops[kDropSharedBuffer].add(shared_buffer);
  if (n_dropped) rte_pktmbuf_free_bulk(dropped, n_dropped);
  bytes = sum;
  return out;
}

}  // namespace psgate
