// SPDX-License-Identifier: BSD-3-Clause
// Builds Ethernet frames byte by byte for tests, the demo traffic tool and the
// packet generator. Not for the fast path: it allocates freely.
//
// Table-driven use: fill a PacketSpec (designated initializers work well) and
// call build_packet(). Every field has a sensible default, so a spec names only
// what a test cares about:
//
//   auto frame = build_packet({.l3 = L3::kIpv4, .proto = kTcp, .sport = 1234, .dport = 80});
//
// Checksums (IPv4 header, TCP, UDP, ICMP, ICMPv6) are always correct for the
// bytes built; the *_override fields exist to make deliberately broken headers.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psgate::pkt {

using Mac = std::array<uint8_t, 6>;
using Ipv4Addr = std::array<uint8_t, 4>;
using Ipv6Addr = std::array<uint8_t, 16>;

inline constexpr uint8_t kIcmp = 1;
inline constexpr uint8_t kTcp = 6;
inline constexpr uint8_t kUdp = 17;
inline constexpr uint8_t kIpv6Routing = 43;
inline constexpr uint8_t kIpv6Fragment = 44;
inline constexpr uint8_t kEsp = 50;
inline constexpr uint8_t kAh = 51;
inline constexpr uint8_t kIcmpv6 = 58;
inline constexpr uint8_t kNoNextHeader = 59;
inline constexpr uint8_t kIpv6DstOpts = 60;
inline constexpr uint8_t kIpv6HopByHop = 0;
inline constexpr uint8_t kSctp = 132;

inline constexpr uint16_t kEtherTypeIpv4 = 0x0800;
inline constexpr uint16_t kEtherTypeArp = 0x0806;
inline constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
inline constexpr uint16_t kEtherTypeLldp = 0x88cc;
inline constexpr uint16_t kTpid8021Q = 0x8100;
inline constexpr uint16_t kTpid8021ad = 0x88a8;
inline constexpr uint16_t kTpidQinQ = 0x9100;

// TCP flag bits (byte 13 of the header).
inline constexpr uint8_t kTcpFin = 0x01;
inline constexpr uint8_t kTcpSyn = 0x02;
inline constexpr uint8_t kTcpRst = 0x04;
inline constexpr uint8_t kTcpPsh = 0x08;
inline constexpr uint8_t kTcpAck = 0x10;

// Ethernet minimum frame without the FCS (which NICs strip).
inline constexpr size_t kMinFrameSize = 60;

enum class L3 : uint8_t {
  kNone,  // Ethernet header + `ethertype` + payload (LLDP, anything raw)
  kArp,   // ARP request: who has dst4, tell src4 (src_mac)
  kIpv4,
  kIpv6,
};

struct VlanTag {
  uint16_t tpid = kTpid8021Q;
  uint16_t tci = 0;  // PCP(3) | DEI(1) | VID(12)
};

// One IPv6 extension header. `type` is its own protocol number (0, 43, 44, 51,
// 60, or anything else for raw); the next-header byte is chained by the builder.
struct Ipv6Ext {
  uint8_t type = kIpv6DstOpts;
  // Total length in bytes, rounded up to a multiple of 8, at least 8 (AH: a
  // multiple of 4, at least 16). Ignored for the fragment header: always 8.
  size_t len = 8;
  // Fragment header only.
  uint16_t frag_offset = 0;  // in 8-byte units
  bool more_fragments = false;
  uint32_t ident = 0;
};

struct PacketSpec {
  Mac dst_mac{0x02, 0, 0, 0, 0, 0x02};
  Mac src_mac{0x02, 0, 0, 0, 0, 0x01};
  std::vector<VlanTag> vlans;           // outermost first
  uint16_t ethertype = kEtherTypeLldp;  // L3::kNone only

  L3 l3 = L3::kIpv4;
  uint8_t tos = 0;   // IPv4 TOS / IPv6 traffic class: DSCP << 2 | ECN
  uint8_t ttl = 64;  // IPv4 TTL / IPv6 hop limit

  Ipv4Addr src4{10, 0, 0, 1};
  Ipv4Addr dst4{10, 0, 0, 2};
  uint16_t ip_id = 0;
  bool dont_fragment = false;
  bool more_fragments = false;
  uint16_t frag_offset = 0;           // IPv4, in 8-byte units
  std::vector<uint8_t> ipv4_options;  // zero-padded to a multiple of 4, max 40

  Ipv6Addr src6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  Ipv6Addr dst6{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  uint32_t flow_label = 0;   // 20 bits
  std::vector<Ipv6Ext> ext;  // in wire order

  // Upper-layer protocol. TCP, UDP, SCTP, ICMP (IPv4) and ICMPv6 get a real
  // header unless `raw_l4` is set or this is a non-first fragment; any other
  // protocol (and those cases) carry just the payload.
  uint8_t proto = kUdp;
  bool raw_l4 = false;
  uint16_t sport = 1024;
  uint16_t dport = 2048;
  uint32_t seq = 1;
  uint32_t ack = 0;
  uint8_t tcp_flags = kTcpAck;
  std::vector<uint8_t> tcp_options;  // zero-padded to a multiple of 4
  uint8_t icmp_type = 8;             // echo request (ICMPv6: set 128 or an NDP type)
  uint8_t icmp_code = 0;

  size_t payload_len = 0;
  uint8_t payload_seed = 0;               // payload byte i = payload_seed + i
  size_t min_frame_size = kMinFrameSize;  // zero-pad the frame up to this; 0 = none

  // Deliberate breakage (applied after the checksum, so it stays as computed
  // for the honest header).
  std::optional<uint8_t> ip_version_override;
  std::optional<uint8_t> ipv4_ihl_override;  // in 4-byte words
  std::optional<uint16_t> ipv4_total_length_override;
  std::optional<uint16_t> ipv6_payload_length_override;
  std::optional<uint8_t> tcp_data_offset_override;  // in 4-byte words
};

std::vector<uint8_t> build_packet(const PacketSpec& spec);

// Offsets into a frame built from `spec` (before any padding): where the L3
// header starts and where the IP datagram (or ARP / raw payload) ends.
size_t l3_offset(const PacketSpec& spec);

// RFC 1071 sum of `len` bytes added to `initial` (folded, not complemented).
// internet_checksum(...) = ~sum, what goes into a checksum field.
uint32_t ones_complement_sum(const uint8_t* data, size_t len, uint32_t initial = 0);
uint16_t internet_checksum(const uint8_t* data, size_t len, uint32_t initial = 0);

// Pseudo-header sum for TCP/UDP/ICMPv6 checksums over a `l4_len`-byte segment.
uint32_t pseudo_header_sum_v4(const Ipv4Addr& src, const Ipv4Addr& dst, uint8_t proto, size_t l4_len);
uint32_t pseudo_header_sum_v6(const Ipv6Addr& src, const Ipv6Addr& dst, uint8_t proto, size_t l4_len);

// Readable hex dump for test failure messages.
std::string hex(const std::vector<uint8_t>& bytes);

// The PS-host topology the tests share: the PS at 10.0.0.5 and a worker at
// 10.0.1.10, whose end of every connection is port 40000.
inline constexpr Ipv4Addr kTestPs{10, 0, 0, 5};
inline constexpr Ipv4Addr kTestWorker{10, 0, 1, 10};
inline constexpr uint16_t kTestWorkerPort = 40000;
// From the PS (leaves by the wire port: a pull): TCP from `ps_port` to the worker.
PacketSpec from_ps(uint16_t ps_port, uint16_t ip_id, size_t payload_len);
// To the PS (leaves by the host port: a push): TCP from the worker to `ps_port`.
PacketSpec to_ps(uint16_t ps_port, uint16_t ip_id, size_t payload_len);
// A push frame of exactly `frame_len` bytes (at least 42: Ethernet + IPv4 +
// UDP, no padding), from the worker to the PS's port 2222, its IP id
// `ip_id` and its payload seeded with the length, so that frames of
// different lengths differ byte for byte (a capture compared against what
// was sent tells them apart).
std::vector<uint8_t> udp_push_frame_of_length(size_t frame_len, uint16_t ip_id);

}  // namespace psgate::pkt
