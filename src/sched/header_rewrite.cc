// SPDX-License-Identifier: BSD-3-Clause
// DSCP remarking and ECN CE marking. See include/psgate/header_rewrite.h.
#include "psgate/header_rewrite.h"

namespace psgate {
namespace {

constexpr uint8_t kEcnMask = 0x03;
constexpr uint8_t kEcnCe = 0x03;  // RFC 3168: 00 Not-ECT, 01 ECT(1), 10 ECT(0), 11 CE

// One's complement 16-bit addition with end-around carry.
inline uint32_t ones_add(uint32_t a, uint32_t b) {
  uint32_t s = a + b;
  return (s & 0xffff) + (s >> 16);
}

// New traffic class byte, and which parts of it changed (kRewroteDscp /
// kMarkedCe). "Changed" is literal: remarking to the DSCP a packet already
// carries, or a packet already at CE, reports nothing.
inline uint8_t new_traffic_class(uint8_t tc, int dscp, bool mark_ce, unsigned& changed) {
  uint8_t out = tc;
  if (dscp >= 0) out = static_cast<uint8_t>(((dscp & 0x3f) << 2) | (tc & kEcnMask));
  // Only ECN-capable transports may be marked (RFC 3168 sec. 5); a Not-ECT
  // packet would have to be dropped instead, which is the scheduler's call.
  const uint8_t ecn = tc & kEcnMask;
  if (mark_ce && ecn != 0 && ecn != kEcnCe) out |= kEcnCe;
  changed = ((out ^ tc) & ~kEcnMask ? kRewroteDscp : 0u) | ((out ^ tc) & kEcnMask ? kMarkedCe : 0u);
  return out;
}

}  // namespace

unsigned rewrite_traffic_class(uint8_t* l3, L3Kind kind, int dscp, bool mark_ce) {
  unsigned changed = 0;
  if (kind == L3Kind::kIpv4) {
    const uint8_t tc = new_traffic_class(l3[1], dscp, mark_ce, changed);
    if (changed == 0) return 0;
    // RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), m = the 16-bit word holding
    // version/IHL and TOS. Eqn. 3 (not eqn. 2) never yields the 0xffff a full
    // computation cannot produce, so results stay byte-identical to a recompute.
    const uint32_t m_old = (uint32_t{l3[0]} << 8) | l3[1];
    const uint32_t m_new = (uint32_t{l3[0]} << 8) | tc;
    const uint32_t hc = (uint32_t{l3[10]} << 8) | l3[11];
    uint32_t sum = ones_add(~hc & 0xffff, ~m_old & 0xffff);
    sum = ones_add(sum, m_new);
    const uint16_t hc_new = static_cast<uint16_t>(~sum);
    l3[1] = tc;
    l3[10] = static_cast<uint8_t>(hc_new >> 8);
    l3[11] = static_cast<uint8_t>(hc_new);
    return changed;
  }
  if (kind == L3Kind::kIpv6) {
    // Traffic class straddles bytes 0-1: version(4) | TC(8) | flow label(20).
    const uint8_t old_tc = static_cast<uint8_t>(((l3[0] & 0x0f) << 4) | (l3[1] >> 4));
    const uint8_t tc = new_traffic_class(old_tc, dscp, mark_ce, changed);
    l3[0] = static_cast<uint8_t>((l3[0] & 0xf0) | (tc >> 4));
    l3[1] = static_cast<uint8_t>((l3[1] & 0x0f) | (tc << 4));
    return changed;  // IPv6 has no header checksum
  }
  return 0;
}

uint16_t ipv4_header_checksum(const uint8_t* ipv4_header, unsigned header_len) {
  // Sum of all 16-bit words with the checksum field (bytes 10-11) taken as 0:
  // the value that belongs in that field.
  uint32_t sum = 0;
  for (unsigned i = 0; i + 1 < header_len; i += 2) {
    if (i == 10) continue;
    sum += (uint32_t{ipv4_header[i]} << 8) | ipv4_header[i + 1];
  }
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

}  // namespace psgate
