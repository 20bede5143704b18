// SPDX-License-Identifier: BSD-3-Clause
// The flow cache's key of a packet, and the two ways to get one:
//   - flow_key4/flow_key6 from a ParsedPacket (any packet the full parser
//     understood: VLAN tags, IPv4 options, IPv6 extension headers, ...);
//   - parse_ipv4_flow_key straight from the frame, for the common case the
//     data path sees at line rate: untagged Ethernet, IPv4 without options,
//     not a fragment, a complete TCP or UDP header. That is two loads
//     from the header instead of a full parse, and a flow cache hit needs
//     nothing else; only misses and uncommon frames pay for parse_packet.
// Both give the same key for the same packet (tests and the parser fuzzer
// check this). Pure C++: no DPDK.
//
// Layout: the 5-tuple's bytes as they are on the wire, so the fast path can
// load them without swapping. A key is never all-zero (the family is part of
// it), which is what marks an empty cache entry.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "psgate/packet_parser.h"

namespace psgate {

struct FlowKey4 {
  // w[0]: source address | destination address << 32 (wire byte order)
  // w[1]: source port | destination port << 16 (wire byte order) | proto << 32 | 4 << 40
  uint64_t w[2];
};

struct FlowKey6 {
  // w[0]: 6 | proto << 8 | source port << 16 | destination port << 32 (ports in wire byte order)
  // w[1..2]: source address; w[3..4]: destination address (wire byte order)
  uint64_t w[5];
};

// The destination address of a key, in wire byte order (the pull
// telemetry's worker: set_packet_worker).
inline uint32_t flow_key4_destination(const FlowKey4& key) { return static_cast<uint32_t>(key.w[0] >> 32); }

inline bool operator==(const FlowKey4& a, const FlowKey4& b) { return a.w[0] == b.w[0] && a.w[1] == b.w[1]; }
inline bool operator==(const FlowKey6& a, const FlowKey6& b) { return std::memcmp(a.w, b.w, sizeof(a.w)) == 0; }

// Keys are built from the frame's bytes as little-endian words.
static_assert(std::endian::native == std::endian::little, "flow keys and the wire key path assume little-endian");

namespace detail {
// A port (host order) as the little-endian value of its two wire bytes.
inline uint64_t wire_port(uint16_t host_order) { return __builtin_bswap16(host_order); }
inline uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint32_t load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
}  // namespace detail

// For a cacheable IPv4 packet (FlowCache::cacheable).
inline FlowKey4 flow_key4(const ParsedPacket& p) {
  return FlowKey4{
      {detail::load32(p.src.data()) | uint64_t{detail::load32(p.dst.data())} << 32,
       detail::wire_port(p.sport) | detail::wire_port(p.dport) << 16 | uint64_t{p.proto} << 32 | uint64_t{4} << 40}};
}

// For a cacheable IPv6 packet.
inline FlowKey6 flow_key6(const ParsedPacket& p) {
  FlowKey6 k;
  k.w[0] = uint64_t{6} | uint64_t{p.proto} << 8 | detail::wire_port(p.sport) << 16 | detail::wire_port(p.dport) << 32;
  std::memcpy(&k.w[1], p.src.data(), 16);
  std::memcpy(&k.w[3], p.dst.data(), 16);
  return k;
}

// Where the IP header of a frame accepted by parse_ipv4_flow_key starts.
inline constexpr uint16_t kCommonL3Offset = 14;

// The common case straight from the frame: returns true and fills `key`
// exactly when the frame is untagged Ethernet + IPv4 without options, whose
// total length fits in `len`, that is not a fragment and carries a
// complete UDP or TCP header. For such a frame parse_packet reports
// l3 = kIpv4 at l3_offset 14, not malformed, with ports, and flow_key4 of its
// result equals `key`. Anything else returns false and leaves `key` alone.
inline bool parse_ipv4_flow_key(const uint8_t* data, uint32_t len, FlowKey4& key) {
  constexpr uint32_t kL3 = kCommonL3Offset;
  if (len < kL3 + 20 + 8) return false;
  const uint8_t* ip = data + kL3;
  // Two 8-byte loads hold every field checked here (little-endian: the
  // frame's first byte is the word's lowest). `head`: ethertype, version and
  // IHL, TOS, total length, ID (frame bytes 12-19); `frag`: flags and
  // fragment offset, TTL, protocol, checksum, ... (bytes 20-27).
  const uint64_t head = detail::load64(data + 12);
  const uint64_t frag = detail::load64(ip + 6);
  if ((head & 0xffffff) != 0x450008) return false;  // 08 00 45: IPv4, no options
  const uint32_t total = __builtin_bswap16(static_cast<uint16_t>(head >> 32));
  const uint8_t proto = static_cast<uint8_t>(frag >> 24);
  const uint8_t* l4 = ip + 20;
  // Past the frame, or a fragment (MF or an offset: fragments go through the
  // RX stage's fragment table, which a first fragment must reach).
  if (total > len - kL3 || (frag & 0xff3f) != 0) return false;
  // The key's protocol and family bits, a constant in each branch: built
  // from `proto` they took five instructions and two registers more.
  uint64_t proto_and_family;
  if (proto == 17) {
    if (total < 20 + 8) return false;
    proto_and_family = uint64_t{17} << 32 | uint64_t{4} << 40;
  } else if (proto == 6) {
    if (total < 20 + 20 || (l4[12] >> 4) < 5) return false;
    proto_and_family = uint64_t{6} << 32 | uint64_t{4} << 40;
  } else {
    return false;
  }
  key.w[0] = detail::load64(ip + 12);  // source and destination address, adjacent on the wire
  key.w[1] = detail::load32(l4) | proto_and_family;
  return true;
}

}  // namespace psgate
