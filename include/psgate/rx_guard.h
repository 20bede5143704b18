// SPDX-License-Identifier: BSD-3-Clause
// The first thing the RX stage does with a burst: make sure every mbuf can be
// read and forwarded before any stage touches its data.
//
//   rx_burst ──▶ fast check (one segment, one reference, lengths agree, fits the MTU) ──▶ parse...
//                    │ any packet fails it
//                    ▼
//                full check (rte_mbuf_check's rules, the chain walked)
//                    ├─ broken buffer  ──▶ freed as far as it can be trusted, bad_mbuf
//                    ├─ < 17 bytes     ──▶ runt
//                    ├─ shared buffer  ──▶ forwarded as a copy of psgate's own (shared_buffer
//                    │                     if no mbuf is free for it)
//                    ├─ empty segments ──▶ unlinked from the chain and freed
//                    ├─ offload flags  ──▶ a stripped VLAN tag put back (vlan_stripped if it
//                    │                     cannot be), transmit requests cleared
//                    ├─ > MTU + L2 + its tags ──▶ oversize
//                    ├─ more segments than the egress device sends ──▶ too_many_segments
//                    └─ a sane chain   ──▶ forwarded like any packet
//
// Drivers have been seen handing over an mbuf whose pkt_len (66,014) does not
// match its single 2 KB segment (net_pcap truncates a capture's length to 16
// bits); reading or transmitting one faults. The fast check reads only fields
// the later stages read anyway, so a burst of good 64-byte frames pays a few
// compares per packet.
#pragma once

#include <rte_mbuf.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "psgate/counters.h"
#include "psgate/packet_parser.h"  // kMinForwardFrame

namespace psgate {

// rte_mbuf_check's rules without its panic: a pool, a buffer and a
// reference for every segment, segment data inside each buffer, a chain
// exactly nb_segs long whose data lengths add up to pkt_len. Walks at most
// nb_segs segments. A segment flagged as attached must be: an external
// buffer with its shared info and free callback, an indirect one whose
// buffer is another mbuf's (a direct mbuf flagged indirect would be freed
// twice: once as the "direct" one it names, itself, once as itself).
bool mbuf_is_sane(const rte_mbuf* m);

// The offload flags the fast check sends to the full one: attached buffers
// (their bookkeeping is checked there), a VLAN tag the driver stripped
// (psgate asks for none: forwarded as it came, the frame would leave
// without its tag), and transmit requests (a driver acts on them: one
// would insert vlan_tci, or segment the frame). A driver whose every buffer
// is external (mlx5's multi-packet RX queues) pays the full check.
inline constexpr uint64_t kOffloadFlagsToCheck = RTE_MBUF_F_INDIRECT | RTE_MBUF_F_EXTERNAL |
                                                 RTE_MBUF_F_RX_VLAN_STRIPPED | RTE_MBUF_F_RX_QINQ_STRIPPED |
                                                 RTE_MBUF_F_TX_OFFLOAD_MASK;

// Puts the VLAN tags a driver stripped (RTE_MBUF_F_RX_VLAN_STRIPPED: one,
// from vlan_tci, TPID 0x8100; with RTE_MBUF_F_RX_QINQ_STRIPPED the outer one
// too, from vlan_tci_outer, TPID 0x88a8, 802.1ad's) back in front of the
// ethertype, in the headroom, and clears the flags. False when it cannot (a
// shared or attached head, too little headroom): the frame must not go on
// without them. pkt_len and data_len grow by 4 bytes a tag.
bool restore_stripped_vlan_tags(rte_mbuf* m);

// The segments the broken chains of one burst freed. A freed segment
// cannot be told from a live one (a pool keeps a reference count of 1 on its
// free buffers): one that two broken chains share (a corrupt `next`), or that
// a sound packet of the burst holds, must be looked up here, not freed twice
// or sent after it was freed. Past kCapacity, segments are still freed,
// unrecorded.
struct FreedSegments {
  static constexpr unsigned kCapacity = 1024;
  rte_mbuf* segs[kCapacity];
  unsigned n = 0;
  bool holds(const rte_mbuf* m) const {
    for (unsigned k = 0; k < n; ++k)
      if (segs[k] == m) return true;
    return false;
  }
  void add(rte_mbuf* m) {
    if (n < kCapacity) segs[n++] = m;
  }
};

// Frees a buffer mbuf_is_sane refused without trusting its chain: the
// segments nb_segs vouches for (at most kMaxBrokenSegsFreed), one by one,
// each detached from its `next` first, up to the first that is not a live
// buffer of a pool (no pool, no buffer, or a reference count of 0, which
// freeing would wrap), that came up before in this chain (a chain that
// loops) or that `freed` holds (another broken chain's, freed already). A
// corrupt `next` beyond them is never followed: those buffers, if any, are
// lost to the pool rather than freed twice. What it frees goes into `freed`.
inline constexpr unsigned kMaxBrokenSegsFreed = 128;
void free_broken_mbuf(rte_mbuf* m, FreedSegments* freed = nullptr);

// Unlinks and frees the segments of a sane chain that hold no data: some
// NICs treat a 0-byte TX descriptor as a malicious driver event. An empty
// head (it carries the packet's fields) takes the next segment's bytes into
// its own buffer instead, where they fit. A chain with a segment shared
// (reference count above 1) is left alone. The packet's bytes and their
// order are unchanged.
void unlink_empty_segments(rte_mbuf* m);

// Whether some segment of the chain holds no data.
bool has_empty_segment(const rte_mbuf* m);

// Whether another holder reads some of the packet's bytes: a segment with
// more than one reference (rte_mbuf_refcnt_update, a clone's direct mbuf)
// or attached to another mbuf's buffer (indirect: a clone). An external
// buffer is not: drivers that use them (mlx5's multi-packet RX queues) give
// each packet its own stretch of it.
bool shares_bytes(const rte_mbuf* m);

// A copy of the packet, direct, in as few segments as its head's pool fills,
// none empty (rte_pktmbuf_copy skips them; the packet's fields and dynamic
// fields come along). Null when the pool has no mbuf to spare or holds no
// data (a pool of indirect mbufs).
rte_mbuf* copy_packet(const rte_mbuf* m);

// The number of 802.1Q/802.1ad tags in front of the frame's ethertype (up to
// kMaxVlanTags), read across segments if needed.
unsigned vlan_tag_count(const rte_mbuf* m);

// Whether the frame is larger than an egress port whose largest untagged
// frame is `max_untagged_frame` carries. The MTU limits the IP packet: a
// tagged frame may be longer by its tags (by one 802.1Q tag at most where
// `one_dot1q_tag_room`: a kernel packet socket's allowance).
bool frame_over_mtu(const rte_mbuf* m, uint32_t max_untagged_frame, bool one_dot1q_tag_room);

// The offload flags' and the buffer pointer's part of the fast check,
// nonzero when either needs the full one: a flag of kOffloadFlagsToCheck,
// or a buffer at address 0 (0 - 1 sets the top bit, which no user-space
// address has). It distributes over OR: rx_guard_burst takes it once, of its
// packets' flags and addresses OR-ed.
inline uint64_t mbuf_flags_odd(uint64_t ol_flags, const void* buf_addr) {
  return (ol_flags & kOffloadFlagsToCheck) | ((reinterpret_cast<uintptr_t>(buf_addr) - 1) >> 63);
}

// The rest: zero exactly when `m` is one segment with one reference that
// holds pkt_len bytes inside its buffer, kMinForwardFrame bytes up to
// kMinForwardFrame + `max_above_min` long. Terms are OR-ed, not branched on;
// the two range checks are differences whose sign bit is set when they fail
// (one shift for both). The reference count and the segment count are
// adjacent 16-bit fields, checked by one load: a count of 0 (a buffer the
// driver handed over already freed) must not be freed again, and a shared
// one (2 or more) is legal but rare, so both go to the full check. `next`
// and the offload flags share the cache line of the metadata the RX stage
// writes anyway. A single segment's pool is trusted.
static_assert(offsetof(rte_mbuf, nb_segs) == offsetof(rte_mbuf, refcnt) + sizeof(uint16_t) &&
              sizeof(rte_mbuf::refcnt) == sizeof(uint16_t) && sizeof(rte_mbuf::nb_segs) == sizeof(uint16_t));
inline uint64_t mbuf_fast_odd_shape(const rte_mbuf* m, uint32_t max_above_min) {
  const uint32_t len = m->pkt_len;
  uint32_t refs_and_segs;  // refcnt | nb_segs << 16 (little-endian)
  std::memcpy(&refs_and_segs, reinterpret_cast<const char*>(m) + offsetof(rte_mbuf, refcnt), sizeof refs_and_segs);
  const int64_t room = int64_t{m->buf_len} - (int64_t{m->data_off} + m->data_len);  // < 0: data past the buffer
  const int64_t size = int64_t{max_above_min} - uint32_t(len - kMinForwardFrame);   // < 0: runt or over the MTU
  return (uint64_t{refs_and_segs} ^ 0x00010001u) | (uint64_t{m->data_len} ^ len) |
         reinterpret_cast<uintptr_t>(m->next) | (static_cast<uint64_t>(room | size) >> 63);
}
// Zero exactly when `m` may skip the full check.
inline uint64_t mbuf_fast_odd(const rte_mbuf* m, uint32_t max_above_min) {
  return mbuf_fast_odd_shape(m, max_above_min) | mbuf_flags_odd(m->ol_flags, m->buf_addr);
}

// The slow half of rx_guard_burst: sorts out a burst in which some packet
// failed the fast check.
unsigned rx_guard_suspects(rte_mbuf** pkts, unsigned n, uint32_t max_untagged_frame, unsigned max_segs,
                           bool one_dot1q_tag_room, std::array<Counter, kDropReasonCount>& drops, uint64_t& bytes);

// Checks a received burst in place: packets that may go on stay in `pkts`,
// in order, and their count is returned; the others are counted on
// `drops` (the egress port's drop counters) and freed. `bytes` receives the
// pkt_len sum of every packet whose length can be trusted. `max_segs`: the
// most segments the egress device sends as one packet (a chain always takes
// the full check). `one_dot1q_tag_room`: a tagged frame may exceed
// `max_untagged_frame` only by one 802.1Q outer tag (PortCapacity's, for a
// kernel packet socket), else by 4 bytes per tag it has. A burst of good
// packets costs one pass of loads and ORs, no branch per packet.
inline unsigned rx_guard_burst(rte_mbuf** pkts, unsigned n, uint32_t max_untagged_frame,
                               std::array<Counter, kDropReasonCount>& drops, uint64_t& bytes,
                               unsigned max_segs = UINT16_MAX, bool one_dot1q_tag_room = false) {
  const uint32_t max_above_min = max_untagged_frame - kMinForwardFrame;
  uint64_t odd = 0;
  uint64_t sum = 0;
  uint64_t flags = 0;  // mbuf_flags_odd taken once, of the burst's flags and addresses OR-ed
  uintptr_t addresses = 0;
  for (unsigned i = 0; i < n; ++i) {
    sum += pkts[i]->pkt_len;
    odd |= mbuf_fast_odd_shape(pkts[i], max_above_min);
    flags |= pkts[i]->ol_flags;
    addresses |= reinterpret_cast<uintptr_t>(pkts[i]->buf_addr) - 1;
  }
  odd |= (flags & kOffloadFlagsToCheck) | (addresses >> 63);
  if (__builtin_expect(odd == 0, 1)) {
    bytes = sum;
    return n;
  }
  return rx_guard_suspects(pkts, n, max_untagged_frame, max_segs, one_dot1q_tag_room, drops, bytes);
}

}  // namespace psgate
