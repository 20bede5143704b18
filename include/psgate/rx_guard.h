// The first thing the RX stage does with a burst: make sure every mbuf can be
// read and forwarded before any stage touches its data.
//
//   rx_burst ──▶ fast check (one segment, lengths agree, fits the MTU) ──▶ parse...
//                    │ any packet fails it
//                    ▼
//                full check (rte_mbuf_check's rules, the chain walked)
//                    ├─ broken buffer  ──▶ freed as far as it can be trusted, bad_mbuf
//                    ├─ < 14 bytes     ──▶ runt
//                    ├─ > MTU + L2 + its tags ──▶ oversize
//                    └─ a sane chain   ──▶ forwarded like any packet
//
// Drivers have been seen handing over an mbuf whose pkt_len (66,014) does not
// match its single 2 KB segment (net_pcap truncates a capture's length to 16
// bits); reading or transmitting one faults. The fast check reads only fields
// the later stages read anyway, so a burst of good 64-byte frames pays a few
// compares per packet.
#pragma once

#include <rte_mbuf.h>

#include <cstdint>

#include "psgate/counters.h"

namespace psgate {

// rte_mbuf_check's rules without its panic: a pool and a buffer, a
// reference, segment data inside each buffer, a chain exactly nb_segs long
// whose data lengths add up to pkt_len. Walks at most nb_segs segments.
bool mbuf_is_sane(const rte_mbuf* m);

// Frees a buffer mbuf_is_sane refused without trusting its chain: the
// segments nb_segs vouches for, one by one, each detached from its `next`
// first. A corrupt `next` beyond them is never followed (those buffers, if
// any, are lost to the pool rather than freed twice).
void free_broken_mbuf(rte_mbuf* m);

// The number of 802.1Q/802.1ad tags in front of the frame's ethertype (up to
// kMaxVlanTags), read across segments if needed.
unsigned vlan_tag_count(const rte_mbuf* m);

// The slow half of rx_guard_burst: sorts out the packets of `suspect`.
unsigned rx_guard_suspects(rte_mbuf** pkts, unsigned n, uint64_t suspect, uint32_t max_untagged_frame,
                           std::array<Counter, kDropReasonCount>& drops, uint64_t& bytes);

// Checks a received burst in place: packets that may go on stay in `pkts`,
// in order, and their count is returned; the others are counted on
// `drops` (the egress port's drop counters) and freed. `bytes` receives the
// pkt_len sum of every packet whose length can be trusted.
inline unsigned rx_guard_burst(rte_mbuf** pkts, unsigned n, uint32_t max_untagged_frame,
                               std::array<Counter, kDropReasonCount>& drops, uint64_t& bytes) {
  uint64_t suspect = 0;
  uint64_t sum = 0;
  for (unsigned i = 0; i < n; ++i) {
    const rte_mbuf* m = pkts[i];
    const uint32_t len = m->pkt_len;
    sum += len;
    // One segment that holds exactly pkt_len bytes inside its buffer, with a
    // length from 14 bytes up to the untagged maximum (one unsigned compare
    // covers both ends). `next` shares the cache line of the metadata the RX
    // stage writes anyway.
    const bool ok = (m->nb_segs == 1) & (m->next == nullptr) & (m->data_len == len) &
                    (uint32_t{m->data_off} + m->data_len <= m->buf_len) &
                    (len - 14u <= max_untagged_frame - 14u);
    suspect |= uint64_t{!ok} << i;
  }
  if (__builtin_expect(suspect == 0, 1)) {
    bytes = sum;
    return n;
  }
  return rx_guard_suspects(pkts, n, suspect, max_untagged_frame, drops, bytes);
}

}  // namespace psgate
