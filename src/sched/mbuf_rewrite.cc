// SPDX-License-Identifier: BSD-3-Clause
// The slow half of mbuf_rewrite.h: an IP header split across segments.
#include "psgate/mbuf_rewrite.h"

namespace psgate {

namespace {

// Copies `len` bytes of `src` into the packet at `offset`, segment by segment.
void write_bytes(rte_mbuf* m, unsigned offset, const uint8_t* src, unsigned len) {
  for (rte_mbuf* seg = m; seg != nullptr && len > 0; seg = seg->next) {
    if (offset >= seg->data_len) {
      offset -= seg->data_len;
      continue;
    }
    const unsigned n = seg->data_len - offset < len ? seg->data_len - offset : len;
    std::memcpy(rte_pktmbuf_mtod_offset(seg, uint8_t*, offset), src, n);
    src += n;
    len -= n;
    offset = 0;
  }
}

}  // namespace

unsigned rewrite_traffic_class_chain(rte_mbuf* m, unsigned l3_offset, L3Kind kind, int dscp, bool mark_ce) {
  const unsigned span = kind == L3Kind::kIpv4 ? 12 : 2;
  uint8_t copy[12];
  const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, l3_offset, span, copy));
  if (p == nullptr) return 0;  // shorter than its header: the parser never lets that through
  if (p != copy) {
    // Contiguous inside a later segment: rewrite it where it is.
    return rewrite_traffic_class(const_cast<uint8_t*>(p), kind, dscp, mark_ce);
  }
  const unsigned changed = rewrite_traffic_class(copy, kind, dscp, mark_ce);
  if (changed) write_bytes(m, l3_offset, copy, span);
  return changed;
}

}  // namespace psgate
