// SPDX-License-Identifier: BSD-3-Clause
// DSCP remarking and ECN CE marking of an IP header in place, with the IPv4
// header checksum updated incrementally (RFC 1624). Pure, no DPDK.
#pragma once

#include <cstdint>

#include "psgate/packet_parser.h"

namespace psgate {

inline constexpr int kKeepDscp = -1;

// `l3` points at the IPv4 or IPv6 header (at least 20 / 40 bytes readable;
// the parser guarantees it for packets that are not malformed).
// dscp: 0..63 to remark, kKeepDscp to leave it. mark_ce: set ECN to CE (0b11)
// only if the packet is ECN-capable (ECT(0) or ECT(1)); Not-ECT is left alone.
// Returns a bit set of what changed: 1 = DSCP rewritten, 2 = CE marked.
unsigned rewrite_traffic_class(uint8_t* l3, L3Kind kind, int dscp, bool mark_ce);

inline constexpr unsigned kRewroteDscp = 1;
inline constexpr unsigned kMarkedCe = 2;

// Full IPv4 header checksum (for tests and for checking the incremental one).
uint16_t ipv4_header_checksum(const uint8_t* ipv4_header, unsigned header_len);

}  // namespace psgate
