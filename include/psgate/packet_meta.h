// SPDX-License-Identifier: BSD-3-Clause
// Per-packet metadata carried in an mbuf dynamic field from RX to TX.
#pragma once

#include <cstdint>
#include <cstring>

#include <rte_mbuf.h>
#include <rte_mbuf_dyn.h>

namespace psgate {

inline constexpr uint32_t kNoJob = UINT32_MAX;

struct PacketMeta {
  uint64_t rx_tsc;         // when the RX stage saw it: sojourn time is measured from here
  uint32_t job_slot;       // kNoJob for unclassified traffic
  uint16_t l3_offset;      // where DSCP/ECN rewrites apply
  uint8_t ip_version : 7;  // 4 or 6: rewritable; 0: leave the bytes alone (non-IP, malformed)
  // The class queue was at or above its ECN threshold when this packet
  // arrived: set CE when it leaves (RED and DCTCP decide on arrival depth).
  uint8_t mark_ce : 1;
  uint8_t cls;
};
static_assert(sizeof(PacketMeta) == 16);

// Registered once at start-up (register_packet_meta); read by every stage.
extern int g_packet_meta_offset;

int register_packet_meta();  // returns the offset or -1 with rte_errno set

inline PacketMeta* packet_meta(rte_mbuf* m) { return RTE_MBUF_DYNFIELD(m, g_packet_meta_offset, PacketMeta*); }

// The metadata's second word as RX writes it (mark_ce clear), composed in a
// register: job_slot, l3_offset, ip_version (7 bits), mark_ce, cls, in their
// little-endian places (a unit test checks it against the struct). Filling
// the struct field by field makes the compiler mask each bitfield in turn.
inline uint64_t packet_meta_word1(uint32_t job_slot, uint16_t l3_offset, uint8_t ip_version, uint8_t cls) {
  return uint64_t{job_slot} | uint64_t{l3_offset} << 32 | uint64_t{ip_version & 0x7fu} << 48 | uint64_t{cls} << 56;
}

// Writes a packet's metadata in two 8-byte stores at the registered offset
// (`offset`: g_packet_meta_offset, held in a register by the caller's loop).
inline void write_packet_meta(rte_mbuf* m, int offset, uint64_t rx_tsc, uint64_t word1) {
  auto* p = RTE_MBUF_DYNFIELD(m, offset, uint8_t*);
  std::memcpy(p, &rx_tsc, 8);
  std::memcpy(p + 8, &word1, 8);
}

// The worker a packet goes to, for the pull telemetry at the wire egress:
// the low 32 bits of its destination address (IPv4's, or IPv6's last word),
// in wire byte order; 0 for a packet that is not IP (a packet of no job may
// carry its destination or 0: tx reads it only for a job's). The RX stage
// writes it, from the flow key it built anyway for a cache hit, so tx does
// not find and read the packet's header again (at 8 jobs tx takes 11.6
// instructions a packet less and admission 5 more: perf/README.md). It
// rides in the mbuf's user tag, `hash.usr`, which DPDK leaves to
// applications (rte_distributor uses it): the dynamic field above is full,
// and tx reads this first cache line (pkt_len) anyway. psgate reads no
// receive hash, so nothing is lost by overwriting it.
inline void set_packet_worker(rte_mbuf* m, uint32_t worker) { m->hash.usr = worker; }
inline uint32_t packet_worker(const rte_mbuf* m) { return m->hash.usr; }

}  // namespace psgate
