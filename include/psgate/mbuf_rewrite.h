// SPDX-License-Identifier: BSD-3-Clause
// Reads and rewrites of a packet's IP header wherever it lies in an mbuf
// chain. The header is in the first segment for every frame a driver
// delivers in one buffer; only a chain whose first segment ends inside it
// takes the slow path (mbuf_rewrite.cc).
#pragma once

#include <rte_mbuf.h>

#include <cstdint>
#include <cstring>

#include "psgate/header_rewrite.h"

namespace psgate {

// rewrite_traffic_class for a header that straddles segments: copied out,
// rewritten, written back.
unsigned rewrite_traffic_class_chain(rte_mbuf* m, unsigned l3_offset, L3Kind kind, int dscp, bool mark_ce);

// DSCP remark / CE mark of the IPv4 or IPv6 header at `l3_offset` (see
// header_rewrite.h for what changes and what is returned).
inline unsigned rewrite_traffic_class_mbuf(rte_mbuf* m, unsigned l3_offset, L3Kind kind, int dscp, bool mark_ce) {
  // The bytes a rewrite touches: IPv4 up to its checksum, IPv6 its first word.
  const unsigned span = kind == L3Kind::kIpv4 ? 12 : 2;
  if (__builtin_expect(l3_offset + span <= m->data_len, 1))
    return rewrite_traffic_class(rte_pktmbuf_mtod_offset(m, uint8_t*, l3_offset), kind, dscp, mark_ce);
  return rewrite_traffic_class_chain(m, l3_offset, kind, dscp, mark_ce);
}

// Four bytes at `offset` of the packet (in any segment), or 0 when the packet
// is shorter.
inline uint32_t read_u32_at(const rte_mbuf* m, unsigned offset) {
  uint32_t v = 0;
  if (__builtin_expect(offset + sizeof(v) <= m->data_len, 1)) {
    std::memcpy(&v, rte_pktmbuf_mtod_offset(m, const uint8_t*, offset), sizeof(v));
    return v;
  }
  const void* p = rte_pktmbuf_read(m, offset, sizeof(v), &v);
  if (p == nullptr) return 0;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

}  // namespace psgate
