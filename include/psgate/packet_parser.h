// SPDX-License-Identifier: BSD-3-Clause
// Header parser for the fast path. Pure C++ over a byte span: no DPDK, no
// allocation, never reads past `len`.
//
// Understands Ethernet II, 802.1Q / 802.1ad / QinQ (0x8100, 0x88a8, 0x9100,
// any depth up to kMaxVlanTags), IPv4 with options, IPv6 with extension
// headers (hop-by-hop, routing, destination options, fragment; AH is skipped
// too), and TCP/UDP/SCTP ports.
#pragma once

#include <array>
#include <cstdint>

namespace psgate {

enum class L3Kind : uint8_t { kNonIp = 0, kIpv4 = 4, kIpv6 = 6 };

inline constexpr unsigned kMaxVlanTags = 4;

// The shortest frame forwarded: an Ethernet header and 3 bytes. Nothing
// shorter carries a protocol (a header and at most 2 bytes), and Intel's
// 700/800-series NICs (i40e, iavf, ice: 17 bytes in their tx_prepare) treat
// a shorter one as a malicious driver event and disable the queue or VF.
inline constexpr uint32_t kMinForwardFrame = 17;

struct ParsedPacket {
  L3Kind l3 = L3Kind::kNonIp;
  // Truncated or inconsistent headers. A malformed packet is still forwarded
  // (transparent wire), unclassified, in the default class, and counted.
  bool malformed = false;
  // The IP header itself is whole and consistent (IPv4: IHL, options and
  // total length; IPv6: the payload length), whatever follows it: its
  // DSCP and ECN bits may be rewritten even when `malformed` says the rest
  // (extension headers, the L4 header) is not, so that a broken TCP header
  // is no way around a class's DSCP remark.
  bool ip_header_sound = false;
  // Frames the gateway must never delay behind job traffic: the link's own
  // control (ARP, LLDP, LACP, STP, ...; IPv6 ND and MLD; IGMP, OSPF, PIM and
  // VRRP sent link-local), the list in packet_parser.cc.
  bool network_control = false;
  // 802.3 MAC Control (ethertype 0x8808: PAUSE, PFC, tagged or not): a
  // request to the MAC at the other end of the link it came in on, which
  // 802.3 never relays (a bridge discards it). Relayed across the bump, it
  // would pause the far side's sender for a congestion that is not its own.
  bool mac_control = false;
  // A non-first fragment carries no L4 header: it matches on addresses only.
  bool non_first_fragment = false;
  // Part of a fragmented datagram, first fragment or later (IPv4: MF set or
  // an offset; IPv6: a Fragment header other than an atomic one). With the
  // addresses, fragment_id names the datagram, so its later fragments can
  // follow its first (fragment_table.h). IPv4: the IP header's protocol << 16
  // | Identification (the protocol before any AH: a later fragment has no
  // other); IPv6: the Fragment header's Identification. Host order.
  bool fragment = false;
  uint32_t fragment_id = 0;
  // Ports were read (TCP, UDP or SCTP in an unfragmented or first fragment).
  bool has_ports = false;
  uint8_t proto = 0;              // final upper-layer protocol (IPv6: after ext headers)
  uint8_t traffic_class = 0;      // IPv4 TOS / IPv6 traffic class (DSCP << 2 | ECN)
  uint16_t l3_offset = 0;         // byte offset of the IP header, valid when l3 != kNonIp
  uint16_t sport = 0;             // host byte order
  uint16_t dport = 0;             // host byte order
  std::array<uint8_t, 16> src{};  // network order; IPv4 in [0..3], rest zero
  std::array<uint8_t, 16> dst{};
};

// How far into a frame headers are read: an IPv6 header chain whose
// upper-layer header does not end within the frame's first 1 KiB is
// malformed, whether the frame came in one buffer or as a chain (whose
// first bytes the RX stage copies out into a buffer this large).
inline constexpr uint32_t kMaxHeaderBytes = 1024;

// Fills `out` completely (every field is reset). Never fails: what cannot be
// understood is reported through `out.malformed` / `out.l3`.
void parse_packet(const uint8_t* data, uint32_t len, ParsedPacket& out);
// The same over the first `len` bytes of a frame of `frame_len` bytes (an mbuf
// chain's first segment): lengths the headers state are checked against
// frame_len, and only headers wholly in view are read; one that is not is
// reported as malformed, so the caller can parse a longer view.
void parse_packet(const uint8_t* data, uint32_t len, uint32_t frame_len, ParsedPacket& out);

}  // namespace psgate
