// SPDX-License-Identifier: BSD-3-Clause
// Packet parser: a table of good and malformed frames, then every good frame
// cut at every length, then random mutations, each parsed from an exact-size
// heap copy so AddressSanitizer catches any read past `len`. Also the packet
// builder and pcap helpers the other tests rely on.
#include "psgate/flow_key.h"
#include "psgate/packet_parser.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "packet_builder.h"
#include "pcap_file.h"
#include "psgate/header_rewrite.h"

namespace psgate {
namespace {

namespace pk = psgate::pkt;
using Bytes = std::vector<uint8_t>;

// Parses the first `n` bytes of `frame` from a heap block of exactly `n` bytes.
ParsedPacket parse_exact(const Bytes& frame, size_t n) {
  auto buf = std::make_unique<uint8_t[]>(n);
  if (n != 0) std::memcpy(buf.get(), frame.data(), n);
  ParsedPacket p;
  parse_packet(buf.get(), static_cast<uint32_t>(n), p);
  return p;
}
ParsedPacket parse_exact(const Bytes& frame) { return parse_exact(frame, frame.size()); }

Bytes build(const std::function<void(pk::PacketSpec&)>& edit) {
  pk::PacketSpec s;
  edit(s);
  return pk::build_packet(s);
}

// Properties every parse result must have, whatever the input.
void check_invariants(const ParsedPacket& p, size_t len, const std::string& what) {
  SCOPED_TRACE(what);
  if (p.malformed) {
    EXPECT_FALSE(p.has_ports);
    EXPECT_FALSE(p.network_control);
  }
  if (p.has_ports) {
    EXPECT_FALSE(p.non_first_fragment);
  }
  if (!p.has_ports) {
    EXPECT_EQ(p.sport, 0);
    EXPECT_EQ(p.dport, 0);
  }
  if (p.l3 == L3Kind::kNonIp) {
    EXPECT_FALSE(p.has_ports);
    EXPECT_FALSE(p.non_first_fragment);
  }
  // header_rewrite relies on this: a good IP packet has its full fixed header.
  if (!p.malformed && p.l3 == L3Kind::kIpv4) {
    EXPECT_LE(p.l3_offset + 20u, len);
  }
  if (!p.malformed && p.l3 == L3Kind::kIpv6) {
    EXPECT_LE(p.l3_offset + 40u, len);
  }
  // The rewrite also takes malformed packets whose IP header is sound: the
  // same guarantee, and every good IP packet has one.
  if (p.ip_header_sound) {
    EXPECT_NE(p.l3, L3Kind::kNonIp);
    EXPECT_LE(p.l3_offset + (p.l3 == L3Kind::kIpv4 ? 20u : 40u), len);
  }
  if (!p.malformed && p.l3 != L3Kind::kNonIp) {
    EXPECT_TRUE(p.ip_header_sound);
  }
}

struct Expect {
  L3Kind l3 = L3Kind::kIpv4;
  bool malformed = false;
  bool network_control = false;
  bool mac_control = false;
  bool non_first_fragment = false;
  bool fragment = false;
  uint32_t fragment_id = 0;
  bool has_ports = false;
  uint8_t proto = 0;
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint8_t tc = 0;
  uint16_t l3_offset = 14;
};

struct Case {
  std::string name;
  Bytes frame;
  Expect want;
};

void expect_matches(const ParsedPacket& p, const Expect& w) {
  EXPECT_EQ(p.l3, w.l3);
  EXPECT_EQ(p.malformed, w.malformed);
  EXPECT_EQ(p.network_control, w.network_control);
  EXPECT_EQ(p.mac_control, w.mac_control);
  EXPECT_EQ(p.non_first_fragment, w.non_first_fragment);
  EXPECT_EQ(p.fragment, w.fragment);
  EXPECT_EQ(p.fragment_id, w.fragment_id);
  EXPECT_EQ(p.has_ports, w.has_ports);
  if (w.l3 != L3Kind::kNonIp && !w.malformed) {
    EXPECT_EQ(p.proto, w.proto);
    EXPECT_EQ(p.traffic_class, w.tc);
    EXPECT_EQ(p.l3_offset, w.l3_offset);
  }
  EXPECT_EQ(p.sport, w.sport);
  EXPECT_EQ(p.dport, w.dport);
}

constexpr L3Kind k4 = L3Kind::kIpv4;
constexpr L3Kind k6 = L3Kind::kIpv6;
constexpr L3Kind kNon = L3Kind::kNonIp;

std::vector<Case> good_cases() {
  std::vector<Case> c;
  // --- IPv4 ---
  c.push_back({"udp4", build([](auto&) {}), {.l3 = k4, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"tcp4_dscp_ef",
               build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.sport = 40000;
                 s.dport = 5201;
                 s.tos = 0xb8;
                 s.payload_len = 100;
               }),
               {.l3 = k4, .has_ports = true, .proto = 6, .sport = 40000, .dport = 5201, .tc = 0xb8}});
  c.push_back({"tcp4_with_options",
               build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.tcp_options = {2, 4, 0x05, 0xb4, 1, 1, 4, 2};
                 s.sport = 1;
                 s.dport = 2;
               }),
               {.l3 = k4, .has_ports = true, .proto = 6, .sport = 1, .dport = 2}});
  c.push_back({"sctp4",
               build([](auto& s) {
                 s.proto = pk::kSctp;
                 s.sport = 9;
                 s.dport = 36412;
               }),
               {.l3 = k4, .has_ports = true, .proto = 132, .sport = 9, .dport = 36412}});
  c.push_back({"icmp4_echo",
               build([](auto& s) {
                 s.proto = pk::kIcmp;
                 s.payload_len = 56;
               }),
               {.l3 = k4, .proto = 1}});
  c.push_back({"gre4_no_ports",
               build([](auto& s) {
                 s.proto = 47;
                 s.payload_len = 24;
               }),
               {.l3 = k4, .proto = 47}});
  c.push_back({"ipv4_options_4B",
               build([](auto& s) {
                 s.ipv4_options = {0x94, 4, 0, 0};
                 s.proto = pk::kTcp;
               }),
               {.l3 = k4, .has_ports = true, .proto = 6, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv4_options_40B",
               build([](auto& s) {
                 s.ipv4_options = Bytes(40, 1);
                 s.sport = 7;
               }),
               {.l3 = k4, .has_ports = true, .proto = 17, .sport = 7, .dport = 2048}});
  c.push_back({"ipv4_df",
               build([](auto& s) { s.dont_fragment = true; }),
               {.l3 = k4, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv4_first_fragment",
               build([](auto& s) {
                 s.more_fragments = true;
                 s.ip_id = 0xbeef;
                 s.proto = pk::kTcp;
                 s.payload_len = 1000;
               }),
               {.l3 = k4,
                .fragment = true,
                .fragment_id = 6 << 16 | 0xbeef,
                .has_ports = true,
                .proto = 6,
                .sport = 1024,
                .dport = 2048}});
  c.push_back({"ipv4_middle_fragment",
               build([](auto& s) {
                 s.more_fragments = true;
                 s.frag_offset = 185;
                 s.ip_id = 7;
                 s.payload_len = 1480;
               }),
               {.l3 = k4, .non_first_fragment = true, .fragment = true, .fragment_id = 17 << 16 | 7, .proto = 17}});
  c.push_back({"ipv4_last_fragment_tiny",
               build([](auto& s) {
                 s.frag_offset = 1;
                 s.payload_len = 1;
               }),
               {.l3 = k4, .non_first_fragment = true, .fragment = true, .fragment_id = 17 << 16, .proto = 17}});
  c.push_back({"ipv4_last_fragment_empty",
               build([](auto& s) {
                 s.frag_offset = 3;
                 s.proto = pk::kTcp;
               }),
               {.l3 = k4, .non_first_fragment = true, .fragment = true, .fragment_id = 6 << 16, .proto = 6}});
  {
    // Bytes after total_length (a left-over FCS, non-zero padding) are ignored.
    Bytes f = build([](auto& s) {
      s.min_frame_size = 0;
      s.sport = 5;
    });
    f.insert(f.end(), {0xde, 0xad, 0xbe, 0xef});
    c.push_back({"ipv4_trailing_garbage", f, {.l3 = k4, .has_ports = true, .proto = 17, .sport = 5, .dport = 2048}});
  }
  c.push_back({"ipv4_unpadded_42B",
               build([](auto& s) { s.min_frame_size = 0; }),
               {.l3 = k4, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  // --- VLAN ---
  c.push_back({"vlan_8100",
               build([](auto& s) {
                 s.vlans = {{0x8100, 0x2064}};
               }),
               {.l3 = k4, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048, .l3_offset = 18}});
  c.push_back({"qinq_88a8_8100",
               build([](auto& s) {
                 s.vlans = {{0x88a8, 10}, {0x8100, 20}};
                 s.proto = pk::kTcp;
               }),
               {.l3 = k4, .has_ports = true, .proto = 6, .sport = 1024, .dport = 2048, .l3_offset = 22}});
  c.push_back({"vlan_x4_max",
               build([](auto& s) {
                 s.vlans = {{0x9100, 1}, {0x88a8, 2}, {0x8100, 3}, {0x8100, 4}};
                 s.l3 = pk::L3::kIpv6;
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048, .l3_offset = 30}});
  // --- IPv6 ---
  c.push_back({"udp6",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.tos = 0x2b;
                 s.flow_label = 0xfffff;
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048, .tc = 0x2b}});
  c.push_back({"tcp6",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kTcp;
                 s.tos = 0xff;
               }),
               {.l3 = k6, .has_ports = true, .proto = 6, .sport = 1024, .dport = 2048, .tc = 0xff}});
  c.push_back({"sctp6",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kSctp;
               }),
               {.l3 = k6, .has_ports = true, .proto = 132, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_hbh_udp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0}};
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  // The upper-layer header ends at byte 1006 of the frame, inside the
  // 1 KiB the parser reads.
  c.push_back({"ipv6_hbh_944B_udp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0, .len = 944}};
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_routing_tcp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 43, .len = 24}};
                 s.proto = pk::kTcp;
               }),
               {.l3 = k6, .has_ports = true, .proto = 6, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_dstopts_16B",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 60, .len = 16}};
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_ah_tcp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 51, .len = 24}};
                 s.proto = pk::kTcp;
               }),
               {.l3 = k6, .has_ports = true, .proto = 6, .sport = 1024, .dport = 2048}});
  c.push_back(
      {"ipv6_chain_all",
       build([](auto& s) {
         s.l3 = pk::L3::kIpv6;
         s.ext = {{.type = 0, .len = 8},   {.type = 60, .len = 24},
                  {.type = 43, .len = 16}, {.type = 44, .more_fragments = true, .ident = 77},
                  {.type = 51, .len = 16}, {.type = 60, .len = 8}};
         s.proto = pk::kTcp;
         s.sport = 179;
         s.dport = 50000;
       }),
       {.l3 = k6, .fragment = true, .fragment_id = 77, .has_ports = true, .proto = 6, .sport = 179, .dport = 50000}});
  c.push_back({"ipv6_8_ext_headers_ok",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = std::vector<pk::Ipv6Ext>(8, pk::Ipv6Ext{.type = 60});
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_first_fragment",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 44, .more_fragments = true, .ident = 0x89abcdef}};
                 s.payload_len = 1200;
               }),
               {.l3 = k6,
                .fragment = true,
                .fragment_id = 0x89abcdef,
                .has_ports = true,
                .proto = 17,
                .sport = 1024,
                .dport = 2048}});
  c.push_back({"ipv6_atomic_fragment",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 44, .ident = 5}};
               }),
               {.l3 = k6, .has_ports = true, .proto = 17, .sport = 1024, .dport = 2048}});
  c.push_back({"ipv6_non_first_fragment",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 44, .frag_offset = 150, .more_fragments = true, .ident = 77}};
                 s.proto = pk::kTcp;
                 s.payload_len = 64;
               }),
               {.l3 = k6, .non_first_fragment = true, .fragment = true, .fragment_id = 77, .proto = 6}});
  c.push_back({"ipv6_hbh_then_non_first_fragment",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0}, {.type = 44, .frag_offset = 1}};
                 s.payload_len = 3;
               }),
               {.l3 = k6, .non_first_fragment = true, .fragment = true, .proto = 17}});
  c.push_back({"ipv6_esp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kEsp;
                 s.payload_len = 64;
               }),
               {.l3 = k6, .proto = 50}});
  c.push_back({"ipv6_dstopts_esp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 60}};
                 s.proto = pk::kEsp;
                 s.payload_len = 2;
               }),
               {.l3 = k6, .proto = 50}});
  c.push_back({"ipv6_no_next_header",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kNoNextHeader;
               }),
               {.l3 = k6, .proto = 59}});
  c.push_back({"ipv6_hbh_no_next_header",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0}};
                 s.proto = pk::kNoNextHeader;
               }),
               {.l3 = k6, .proto = 59}});
  // Plain ICMPv6 of a type, hop limit and payload length.
  auto icmpv6 = [](uint8_t type, uint8_t hop_limit, size_t payload_len) {
    return build([=](auto& s) {
      s.l3 = pk::L3::kIpv6;
      s.proto = pk::kIcmpv6;
      s.icmp_type = type;
      s.ttl = hop_limit;
      s.payload_len = payload_len;
    });
  };
  c.push_back({"icmpv6_echo", icmpv6(128, 64, 56), {.l3 = k6, .proto = 58}});
  for (uint8_t type : {132, 138, 1, 143})  // MLD done, redirect+1, dest unreachable, MLDv2 report
    c.push_back({"icmpv6_type_" + std::to_string(type), icmpv6(type, 64, 0), {.l3 = k6, .proto = 58}});
  for (uint8_t type = 133; type <= 137; ++type)  // RS, RA, NS, NA, redirect
    c.push_back(
        {"ndp_type_" + std::to_string(type), icmpv6(type, 255, 24), {.l3 = k6, .network_control = true, .proto = 58}});
  c.push_back({"ndp_in_vlan_after_hbh",
               build([](auto& s) {
                 s.vlans = {{0x8100, 5}};
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0}};
                 s.proto = pk::kIcmpv6;
                 s.icmp_type = 135;
                 s.ttl = 255;
               }),
               {.l3 = k6, .network_control = true, .proto = 58, .l3_offset = 18}});
  // ND sent from further than the link (hop limit not 255: RFC 4861 has
  // receivers discard it) is ordinary ICMPv6, not the top class.
  c.push_back({"ndp_ns_hop_limit_64", icmpv6(135, 64, 24), {.l3 = k6, .proto = 58}});
  for (uint8_t type : {130, 131, 132, 143}) {  // MLD query, reports, done
    c.push_back({"mld_type_" + std::to_string(type),
                 build([type](auto& s) {
                   s.l3 = pk::L3::kIpv6;
                   s.ext = {{.type = 0}};  // router alert's hop-by-hop header
                   s.proto = pk::kIcmpv6;
                   s.icmp_type = type;
                   s.ttl = 1;
                 }),
                 {.l3 = k6, .network_control = true, .proto = 58}});
  }
  // IPv4 AH in transport mode: the ports are the next header's, as in IPv6.
  {
    Bytes f = build([](auto& s) {
      s.proto = 51;
      s.payload_len = 12 + 20;
    });
    const uint8_t ah[12] = {6, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7};  // next TCP, length (1 + 2) * 4
    std::copy(std::begin(ah), std::end(ah), f.begin() + 34);
    const uint8_t tcp[20] = {0x12, 0x34, 0x08, 0xae, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10};
    std::copy(std::begin(tcp), std::end(tcp), f.begin() + 46);
    c.push_back({"ipv4_ah_then_tcp", f, {.has_ports = true, .proto = 6, .sport = 0x1234, .dport = 2222}});
    // The same as a first fragment: the datagram is named by the header's
    // protocol (AH), which is all its later fragments carry.
    f[20] = 0x20;  // MF
    f[18] = 0x12, f[19] = 0x34;
    c.push_back({"ipv4_ah_first_fragment",
                 f,
                 {.fragment = true,
                  .fragment_id = 51 << 16 | 0x1234,
                  .has_ports = true,
                  .proto = 6,
                  .sport = 0x1234,
                  .dport = 2222}});
  }
  // The rest of a fragmented OSPF message sent link-local: class 0 like its
  // first fragment.
  c.push_back({"ipv4_ospf_later_fragment_ttl_1",
               build([](auto& s) {
                 s.proto = 89;
                 s.ttl = 1;
                 s.frag_offset = 185;
                 s.payload_len = 100;
               }),
               {.l3 = k4,
                .network_control = true,
                .non_first_fragment = true,
                .fragment = true,
                .fragment_id = 89 << 16,
                .proto = 89}});
  // Link-scoped routing and redundancy protocols: with TTL 1 or 255 only.
  for (auto [proto, ttl, control] : {std::tuple{89, 1, true},
                                     {89, 255, true},
                                     {112, 255, true},
                                     {2, 1, true},
                                     {103, 1, true},
                                     {89, 64, false},
                                     {112, 254, false},
                                     {47, 255, false}}) {
    c.push_back({"ipv4_proto_" + std::to_string(proto) + "_ttl_" + std::to_string(ttl),
                 build([proto, ttl](auto& s) {
                   s.proto = static_cast<uint8_t>(proto);
                   s.ttl = static_cast<uint8_t>(ttl);
                 }),
                 {.network_control = control, .proto = static_cast<uint8_t>(proto)}});
  }
  c.push_back({"ipv6_ospf_hop_limit_1",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = 89;
                 s.ttl = 1;
               }),
               {.l3 = k6, .network_control = true, .proto = 89}});
  // --- non-IP: network control when the ethertype is the link's own ---
  c.push_back({"arp_request",
               build([](auto& s) {
                 s.l3 = pk::L3::kArp;
                 s.dst_mac.fill(0xff);
               }),
               {.l3 = kNon, .network_control = true}});
  c.push_back({"arp_in_qinq",
               build([](auto& s) {
                 s.l3 = pk::L3::kArp;
                 s.vlans = {{0x88a8, 1}, {0x8100, 2}};
               }),
               {.l3 = kNon, .network_control = true}});
  c.push_back({"lldp",
               build([](auto& s) {
                 s.l3 = pk::L3::kNone;
                 s.ethertype = pk::kEtherTypeLldp;
                 s.payload_len = 40;
               }),
               {.l3 = kNon, .network_control = true}});
  c.push_back({"ieee8023_llc_stp",
               build([](auto& s) {
                 s.l3 = pk::L3::kNone;
                 s.ethertype = 38;
                 s.payload_len = 38;
               }),
               {.l3 = kNon, .network_control = true}});
  // 802.3 frames whose length field does not describe a small LLC frame, or
  // that carry IP in SNAP (RFC 1042): bulk that must not get class 0.
  auto llc = [](uint16_t length, size_t payload, std::initializer_list<uint8_t> head) {
    Bytes f = build([&](auto& s) {
      s.l3 = pk::L3::kNone;
      s.ethertype = length;
      s.payload_len = payload;
    });
    std::copy(head.begin(), head.end(), f.begin() + 14);
    return f;
  };
  c.push_back({"ieee8023_jumbo_with_small_length", llc(46, 9000, {}), {.l3 = kNon}});
  c.push_back({"ieee8023_length_zero_bulk", llc(0, 1400, {}), {.l3 = kNon}});
  c.push_back({"ieee8023_length_past_frame", llc(1500, 100, {}), {.l3 = kNon}});
  c.push_back({"llc_snap_ipv4", llc(1000, 1000, {0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00}), {.l3 = kNon}});
  c.push_back(
      {"llc_snap_arp", llc(36, 36, {0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x06}), {.l3 = kNon, .network_control = true}});
  c.push_back({"llc_snap_cdp",
               llc(300, 300, {0xaa, 0xaa, 0x03, 0, 0, 0x0c, 0x20, 0x00}),
               {.l3 = kNon, .network_control = true}});
  // MAC control (PAUSE, PFC), tagged or not: never relayed, not class 0; nor
  // its ethertype inside SNAP, which no MAC consumes: bulk as any other.
  c.push_back({"mac_control_pause",
               build([](auto& s) {
                 s.l3 = pk::L3::kNone;
                 s.ethertype = 0x8808;
                 s.payload_len = 46;
               }),
               {.l3 = kNon, .mac_control = true}});
  c.push_back({"mac_control_pfc_tagged",
               build([](auto& s) {
                 s.l3 = pk::L3::kNone;
                 s.vlans = {{0x8100, 7}};
                 s.ethertype = 0x8808;
                 s.payload_len = 46;
               }),
               {.l3 = kNon, .mac_control = true}});
  c.push_back({"llc_snap_mac_control", llc(46, 46, {0xaa, 0xaa, 0x03, 0, 0, 0, 0x88, 0x08}), {.l3 = kNon}});
  for (uint16_t type : {0x8035, 0x8809, 0x888e, 0x88f7, 0x8902}) {
    c.push_back({"link_control_ethertype_" + std::to_string(type),
                 build([type](auto& s) {
                   s.l3 = pk::L3::kNone;
                   s.ethertype = type;
                   s.payload_len = 46;
                 }),
                 {.l3 = kNon, .network_control = true}});
  }
  // Non-IP payload that can be bulk (MPLS, PPPoE session, FCoE, RoCEv1,
  // MACsec, a local experimental type): forwarded, unclassified, never the
  // uncapped top class.
  for (uint16_t type : {0x8847, 0x8848, 0x8864, 0x8906, 0x8915, 0x88e5, 0x88b5}) {
    c.push_back({"bulk_ethertype_" + std::to_string(type),
                 build([type](auto& s) {
                   s.l3 = pk::L3::kNone;
                   s.ethertype = type;
                   s.payload_len = 1400;
                 }),
                 {.l3 = kNon}});
  }
  c.push_back({"unknown_ethertype_bare_14B",
               build([](auto& s) {
                 s.l3 = pk::L3::kNone;
                 s.ethertype = 0x88b5;
                 s.min_frame_size = 0;
               }),
               {.l3 = kNon}});
  return c;
}

std::vector<Case> malformed_cases() {
  std::vector<Case> c;
  const Expect bad4{.l3 = k4, .malformed = true};
  const Expect bad6{.l3 = k6, .malformed = true};
  {
    Bytes f = build([](auto& s) {
      s.proto = 51;
      s.payload_len = 12 + 20;
    });
    const uint8_t ah[12] = {6, 40, 0, 0, 0, 0, 0, 1, 0, 0, 0, 7};  // (40 + 2) * 4 bytes: past the datagram
    std::copy(std::begin(ah), std::end(ah), f.begin() + 34);
    c.push_back({"ipv4_ah_past_the_datagram", f, bad4});
  }
  const Expect bad_non{.l3 = kNon, .malformed = true};
  c.push_back({"empty", {}, bad_non});
  c.push_back({"runt_13B", Bytes(13, 0), bad_non});
  {
    Bytes f = build([](auto&) {});
    f.resize(13);
    c.push_back({"runt_13B_ipv4_ethertype_cut", f, bad_non});
  }
  {
    Bytes f(14, 0);
    f[12] = 0x81;  // a VLAN TPID with nothing after it
    c.push_back({"vlan_tag_truncated", f, bad_non});
    f.resize(17, 0);
    c.push_back({"vlan_tag_without_inner_type", f, bad_non});
  }
  c.push_back({"vlan_x5_too_deep", build([](auto& s) { s.vlans = std::vector<pk::VlanTag>(5); }), bad_non});
  {
    Bytes f = build([](auto& s) { s.min_frame_size = 0; });
    f.resize(14 + 19);
    c.push_back({"ipv4_header_19B", f, bad_non});
  }
  c.push_back({"ipv4_ethertype_version_5", build([](auto& s) { s.ip_version_override = 5; }), bad_non});
  c.push_back({"ipv4_ethertype_version_6", build([](auto& s) { s.ip_version_override = 6; }), bad_non});
  c.push_back({"ipv4_ihl_0", build([](auto& s) { s.ipv4_ihl_override = 0; }), bad4});
  c.push_back({"ipv4_ihl_4", build([](auto& s) { s.ipv4_ihl_override = 4; }), bad4});
  c.push_back({"ipv4_ihl_15_beyond_frame", build([](auto& s) {
                 s.min_frame_size = 0;
                 s.ipv4_ihl_override = 15;
               }),
               bad4});
  c.push_back({"ipv4_ihl_beyond_total_length", build([](auto& s) {
                 s.ipv4_ihl_override = 8;
                 s.payload_len = 100;
                 s.ipv4_total_length_override = 28;
               }),
               bad4});
  c.push_back({"ipv4_total_length_beyond_frame", build([](auto& s) { s.ipv4_total_length_override = 1500; }), bad4});
  c.push_back({"ipv4_total_length_0", build([](auto& s) { s.ipv4_total_length_override = 0; }), bad4});
  c.push_back({"ipv4_total_length_19", build([](auto& s) { s.ipv4_total_length_override = 19; }), bad4});
  // The UDP header is in the frame, but only as padding past total_length.
  c.push_back({"ipv4_udp_past_total_length", build([](auto& s) { s.ipv4_total_length_override = 20; }), bad4});
  c.push_back({"ipv4_udp_7B", build([](auto& s) {
                 s.raw_l4 = true;
                 s.payload_len = 7;
               }),
               bad4});
  c.push_back({"ipv4_tcp_0B", build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.raw_l4 = true;
               }),
               bad4});
  c.push_back({"ipv4_tcp_10B", build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.raw_l4 = true;
                 s.payload_len = 10;
               }),
               bad4});
  c.push_back({"ipv4_tcp_19B", build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.raw_l4 = true;
                 s.payload_len = 19;
               }),
               bad4});
  c.push_back({"ipv4_tcp_data_offset_4", build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.tcp_data_offset_override = 4;
               }),
               bad4});
  c.push_back({"ipv4_tcp_data_offset_0", build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.tcp_data_offset_override = 0;
                 s.payload_len = 20;
               }),
               bad4});
  c.push_back({"ipv4_sctp_3B", build([](auto& s) {
                 s.proto = pk::kSctp;
                 s.raw_l4 = true;
                 s.payload_len = 3;
               }),
               bad4});
  c.push_back({"ipv4_first_fragment_tiny_tcp",
               build([](auto& s) {
                 s.proto = pk::kTcp;
                 s.more_fragments = true;
                 s.raw_l4 = true;
                 s.payload_len = 8;
               }),
               {.l3 = k4, .malformed = true, .fragment = true, .fragment_id = 6 << 16}});
  c.push_back({"ipv6_ethertype_version_4", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ip_version_override = 4;
               }),
               bad_non});
  {
    Bytes f = build([](auto& s) {
      s.l3 = pk::L3::kIpv6;
      s.min_frame_size = 0;
    });
    f.resize(14 + 39);
    c.push_back({"ipv6_header_39B", f, bad_non});
  }
  c.push_back({"ipv6_payload_length_beyond_frame", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ipv6_payload_length_override = 9;
               }),
               bad6});
  c.push_back({"ipv6_payload_length_0_udp", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ipv6_payload_length_override = 0;
               }),
               bad6});
  c.push_back({"ipv6_udp_4B", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.raw_l4 = true;
                 s.payload_len = 4;
               }),
               bad6});
  c.push_back({"ipv6_tcp_19B", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kTcp;
                 s.raw_l4 = true;
                 s.payload_len = 19;
               }),
               bad6});
  c.push_back({"ipv6_icmpv6_3B", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.proto = pk::kIcmpv6;
                 s.raw_l4 = true;
                 s.payload_len = 3;
                 s.payload_seed = 135;
               }),
               bad6});
  c.push_back({"ipv6_hbh_1B", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0}};
                 s.ipv6_payload_length_override = 1;
               }),
               bad6});
  c.push_back({"ipv6_dstopts_longer_than_payload", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 60, .len = 16}};
                 s.ipv6_payload_length_override = 8;
               }),
               bad6});
  c.push_back({"ipv6_routing_longer_than_payload", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 43, .len = 2048}};
                 s.ipv6_payload_length_override = 40;
                 s.payload_len = 100;
               }),
               bad6});
  c.push_back({"ipv6_fragment_header_7B", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 44, .frag_offset = 9}};
                 s.ipv6_payload_length_override = 7;
               }),
               bad6});
  c.push_back({"ipv6_ah_longer_than_payload", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 51, .len = 64}};
                 s.ipv6_payload_length_override = 32;
               }),
               bad6});
  c.push_back({"ipv6_first_fragment_tiny_tcp",
               build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 44, .more_fragments = true}};
                 s.proto = pk::kTcp;
                 s.raw_l4 = true;
                 s.payload_len = 8;
               }),
               {.l3 = k6, .malformed = true, .fragment = true}});
  // A header chain past the frame's first 1 KiB: malformed in one buffer as
  // in a chain of segments (it was classified when it came in one).
  c.push_back({"ipv6_hbh_2KiB_udp", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = {{.type = 0, .len = 2048}};
               }),
               bad6});
  c.push_back({"ipv6_9_ext_headers", build([](auto& s) {
                 s.l3 = pk::L3::kIpv6;
                 s.ext = std::vector<pk::Ipv6Ext>(9, pk::Ipv6Ext{.type = 60});
               }),
               bad6});
  return c;
}

TEST(PacketParser, GoodFrames) {
  for (const Case& c : good_cases()) {
    SCOPED_TRACE(c.name + "\n" + pk::hex(c.frame));
    const ParsedPacket p = parse_exact(c.frame);
    expect_matches(p, c.want);
    check_invariants(p, c.frame.size(), c.name);
  }
}

TEST(PacketParser, MalformedFrames) {
  for (const Case& c : malformed_cases()) {
    SCOPED_TRACE(c.name + "\n" + pk::hex(c.frame));
    const ParsedPacket p = parse_exact(c.frame);
    expect_matches(p, c.want);
    check_invariants(p, c.frame.size(), c.name);
  }
}

// A broken L4 header behind a sound IP header: malformed (no job), but the
// IP header may be rewritten (DSCP remark, ECN), so a bad TCP header is no
// way around a class's DSCP scrub. An IP header that is itself broken is not.
TEST(PacketParser, TheIpHeaderIsSoundBehindABrokenL4Header) {
  const ParsedPacket tcp = parse_exact(build([](auto& s) {
    s.proto = pk::kTcp;
    s.tcp_data_offset_override = 4;
  }));
  EXPECT_TRUE(tcp.malformed);
  EXPECT_TRUE(tcp.ip_header_sound);
  const ParsedPacket udp6 = parse_exact(build([](auto& s) {
    s.l3 = pk::L3::kIpv6;
    s.raw_l4 = true;
    s.payload_len = 3;
  }));
  EXPECT_TRUE(udp6.malformed);
  EXPECT_TRUE(udp6.ip_header_sound);
  const ParsedPacket long4 = parse_exact(build([](auto& s) { s.ipv4_total_length_override = 1400; }));
  EXPECT_TRUE(long4.malformed);
  EXPECT_FALSE(long4.ip_header_sound);
  const ParsedPacket ihl4 = parse_exact(build([](auto& s) { s.ipv4_ihl_override = 4; }));
  EXPECT_TRUE(ihl4.malformed);
  EXPECT_FALSE(ihl4.ip_header_sound);
  const ParsedPacket long6 = parse_exact(build([](auto& s) {
    s.l3 = pk::L3::kIpv6;
    s.ipv6_payload_length_override = 1400;
  }));
  EXPECT_TRUE(long6.malformed);
  EXPECT_FALSE(long6.ip_header_sound);
}

TEST(PacketParser, Addresses) {
  const ParsedPacket p4 = parse_exact(build([](auto& s) {
    s.src4 = {192, 168, 1, 2};
    s.dst4 = {8, 8, 4, 4};
  }));
  const std::array<uint8_t, 16> src4{192, 168, 1, 2}, dst4{8, 8, 4, 4};
  EXPECT_EQ(p4.src, src4);
  EXPECT_EQ(p4.dst, dst4);

  const pk::Ipv6Addr a{0x20, 0x01, 0x0d, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  const pk::Ipv6Addr b{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x11, 0x22};
  const ParsedPacket p6 = parse_exact(build([&](auto& s) {
    s.l3 = pk::L3::kIpv6;
    s.src6 = a;
    s.dst6 = b;
    s.ext = {{.type = 44, .frag_offset = 3}};
  }));
  EXPECT_TRUE(p6.non_first_fragment);
  EXPECT_EQ(p6.src, a);
  EXPECT_EQ(p6.dst, b);
}

TEST(PacketParser, ResetsEveryField) {
  ParsedPacket p;
  p.l3 = L3Kind::kIpv6;
  p.malformed = p.non_first_fragment = p.has_ports = true;
  p.proto = 6;
  p.traffic_class = 0xff;
  p.l3_offset = 99;
  p.sport = p.dport = 7;
  p.src.fill(1);
  p.dst.fill(2);
  const Bytes arp = build([](auto& s) { s.l3 = pk::L3::kArp; });
  parse_packet(arp.data(), static_cast<uint32_t>(arp.size()), p);
  ParsedPacket want;
  want.network_control = true;
  EXPECT_EQ(std::memcmp(&p.src, &want.src, 16), 0);
  EXPECT_EQ(std::memcmp(&p.dst, &want.dst, 16), 0);
  EXPECT_EQ(p.l3, want.l3);
  EXPECT_FALSE(p.malformed);
  EXPECT_FALSE(p.non_first_fragment);
  EXPECT_FALSE(p.has_ports);
  EXPECT_EQ(p.proto, 0);
  EXPECT_EQ(p.traffic_class, 0);
  EXPECT_EQ(p.l3_offset, 0);
  EXPECT_EQ(p.sport, 0);
  EXPECT_EQ(p.dport, 0);
}

// Where the datagram (or, for non-IP, the ethertype) ends in a good frame: any
// cut before it must be reported malformed, any cut after it changes nothing.
size_t needed_bytes(const Bytes& f, const ParsedPacket& full) {
  const size_t l3 = full.l3_offset;
  if (full.l3 == L3Kind::kIpv4) return l3 + ((f[l3 + 2] << 8) | f[l3 + 3]);
  return l3 + 40 + ((f[l3 + 4] << 8) | f[l3 + 5]);
}

TEST(PacketParser, EveryTruncationOfGoodFrames) {
  int cuts = 0;
  for (const Case& c : good_cases()) {
    const ParsedPacket full = parse_exact(c.frame);
    size_t need = 0;
    if (full.l3 != L3Kind::kNonIp) {
      need = needed_bytes(c.frame, full);
    } else {
      // Non-IP: the parser only needs the tags and the final ethertype.
      size_t off = 12;
      for (;;) {
        const unsigned type = c.frame[off] << 8 | c.frame[off + 1];
        if (type != 0x8100 && type != 0x88a8 && type != 0x9100) break;
        off += 4;
      }
      need = off + 2;
    }
    // An 802.3 frame's class depends on its length agreeing with the frame's:
    // cut short of the LLC payload its length states, it is no control frame
    // (and a long frame cut to its stated length may become one).
    const unsigned type = c.frame[need - 2] << 8 | c.frame[need - 1];
    const bool llc = full.l3 == L3Kind::kNonIp && type < 0x0600;
    for (size_t n = 0; n <= c.frame.size(); ++n, ++cuts) {
      const std::string what = c.name + " cut at " + std::to_string(n);
      SCOPED_TRACE(what);
      const ParsedPacket p = parse_exact(c.frame, n);
      check_invariants(p, n, what);
      if (n < need) {
        ASSERT_TRUE(p.malformed);
      } else {
        ASSERT_FALSE(p.malformed);
        ASSERT_EQ(p.l3, full.l3);
        ASSERT_EQ(p.has_ports, full.has_ports);
        ASSERT_EQ(p.sport, full.sport);
        ASSERT_EQ(p.dport, full.dport);
        ASSERT_EQ(p.proto, full.proto);
        if (!llc || n == c.frame.size()) {
          ASSERT_EQ(p.network_control, full.network_control);
        } else if (n < need + type) {
          ASSERT_FALSE(p.network_control);
        }
        ASSERT_EQ(p.non_first_fragment, full.non_first_fragment);
      }
    }
  }
  EXPECT_GT(cuts, 3000);
}

// A frame seen through a shorter view (an mbuf chain's first segment): the
// lengths the headers state are checked against the whole frame, only bytes
// in view are read (exact-size heap copy: ASan catches any read past it).
// Whatever the view, a result that is not malformed is the full parse's, and
// a view that holds the headers gives exactly the full parse.
ParsedPacket parse_view(const Bytes& frame, size_t n) {
  auto buf = std::make_unique<uint8_t[]>(n);
  if (n != 0) std::memcpy(buf.get(), frame.data(), n);
  ParsedPacket p;
  parse_packet(buf.get(), static_cast<uint32_t>(n), static_cast<uint32_t>(frame.size()), p);
  return p;
}

TEST(PacketParser, EveryViewOfAFrameLongerThanTheView) {
  int views = 0, parsed_in_view = 0;
  for (const Case& c : good_cases()) {
    const Bytes& frame = c.frame;
    const ParsedPacket full = parse_exact(frame);
    for (size_t n = 0; n <= frame.size(); ++n, ++views) {
      const std::string what = c.name + " viewed to " + std::to_string(n);
      SCOPED_TRACE(what);
      const ParsedPacket p = parse_view(frame, n);
      check_invariants(p, n, what);
      if (n == frame.size()) {
        ASSERT_EQ(p.malformed, full.malformed);
      }
      if (p.malformed) continue;
      if (n < frame.size()) ++parsed_in_view;
      ASSERT_EQ(p.l3, full.l3);
      ASSERT_EQ(p.l3_offset, full.l3_offset);
      ASSERT_EQ(p.has_ports, full.has_ports);
      ASSERT_EQ(p.sport, full.sport);
      ASSERT_EQ(p.dport, full.dport);
      ASSERT_EQ(p.proto, full.proto);
      ASSERT_EQ(p.src, full.src);
      ASSERT_EQ(p.dst, full.dst);
      ASSERT_EQ(p.network_control, full.network_control);
      ASSERT_EQ(p.non_first_fragment, full.non_first_fragment);
    }
  }
  EXPECT_GT(views, 3000);
  // Most views that hold the headers but not the payload parse in full.
  EXPECT_GT(parsed_in_view, views / 4);
}

TEST(PacketParser, AJumboDatagramParsesFromItsFirstSegment) {
  const Bytes frame = build([](pk::PacketSpec& s) {
    s.proto = pk::kTcp;
    s.sport = 2222;
    s.dport = 40000;
    s.payload_len = 9000 - 40;
  });
  ASSERT_EQ(frame.size(), 9014u);
  const ParsedPacket first_segment = parse_view(frame, 2048);
  EXPECT_FALSE(first_segment.malformed);
  EXPECT_EQ(first_segment.sport, 2222);
  // The same view claiming the frame ends there: total length past the frame.
  ParsedPacket alone;
  parse_packet(frame.data(), 2048, alone);
  EXPECT_TRUE(alone.malformed);
  // A view shorter than the TCP header asks for a longer one.
  EXPECT_TRUE(parse_view(frame, 14 + 20 + 19).malformed);
  EXPECT_FALSE(parse_view(frame, 14 + 20 + 20).malformed);
}

TEST(PacketParser, EveryTruncationOfMalformedFramesStaysInBounds) {
  for (const Case& c : malformed_cases()) {
    for (size_t n = 0; n <= c.frame.size(); ++n) {
      const std::string what = c.name + " cut at " + std::to_string(n);
      check_invariants(parse_exact(c.frame, n), n, what);
    }
  }
}

// Random byte flips and cuts of good frames: exercises length fields pointing
// anywhere. The assertions are the invariants; ASan builds catch over-reads.
TEST(PacketParser, RandomMutationsStayInBounds) {
  std::mt19937 rng(424242);
  const std::vector<Case> cases = good_cases();
  int malformed = 0, ported = 0;
  for (int i = 0; i < 30000; ++i) {
    Bytes f = cases[rng() % cases.size()].frame;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Bias towards the headers, where the length fields live.
      const size_t at = rng() % std::min<size_t>(f.size(), 100);
      f[at] = static_cast<uint8_t>(rng());
    }
    const size_t n = (rng() % 4 == 0) ? rng() % (f.size() + 1) : f.size();
    const ParsedPacket p = parse_exact(f, n);
    check_invariants(p, n, "mutation " + std::to_string(i));
    if (HasFailure()) {
      ADD_FAILURE() << pk::hex(Bytes(f.begin(), f.begin() + static_cast<ptrdiff_t>(n)));
      return;
    }
    malformed += p.malformed;
    ported += p.has_ports;
  }
  EXPECT_GT(malformed, 1000);
  EXPECT_GT(ported, 1000);
}

// The common-case flow key parser: when it takes a frame, the full parser
// reports a plain IPv4 TCP/UDP packet at offset 14 with ports, and the key
// built from its result is the same; when the full parser reports such a
// packet, the fast parser takes it too (else the fast path would silently
// lose its common case). Good and malformed cases, every truncation, random
// mutations.
TEST(PacketParser, CommonFlowKeyAgreesWithFullParser) {
  std::mt19937 rng(99);
  int taken = 0, checked = 0;
  auto check = [&](const Bytes& f, size_t n, const std::string& what) {
    auto buf = std::make_unique<uint8_t[]>(n + 1);
    if (n) std::memcpy(buf.get(), f.data(), n);
    ParsedPacket full;
    parse_packet(buf.get(), static_cast<uint32_t>(n), full);
    FlowKey4 key{{0x5a5a5a5a5a5a5a5aull, 0x5a5a5a5a5a5a5a5aull}};
    const FlowKey4 untouched = key;
    ++checked;
    SCOPED_TRACE(what);
    const bool plain = full.l3 == L3Kind::kIpv4 && !full.malformed && full.has_ports && !full.fragment &&
                       full.l3_offset == kCommonL3Offset && buf[kCommonL3Offset] == 0x45 &&
                       (full.proto == 6 || full.proto == 17) && buf[kCommonL3Offset + 9] == full.proto;
    if (!parse_ipv4_flow_key(buf.get(), static_cast<uint32_t>(n), key)) {
      EXPECT_FALSE(plain) << "a plain IPv4 TCP/UDP frame missed the fast path";
      EXPECT_EQ(key, untouched) << "a declined frame wrote the key";
      return;
    }
    ++taken;
    EXPECT_TRUE(plain);
    EXPECT_EQ(key, flow_key4(full));
  };
  std::vector<Case> cases = good_cases();
  for (const Case& c : malformed_cases()) cases.push_back(c);
  for (const Case& c : cases)
    for (size_t n = 0; n <= c.frame.size(); ++n) check(c.frame, n, c.name + " cut at " + std::to_string(n));
  const std::vector<Case> good = good_cases();
  for (int i = 0; i < 30000 && !HasFailure(); ++i) {
    Bytes f = good[rng() % good.size()].frame;
    const size_t at = rng() % std::min<size_t>(f.size(), 60);
    f[at] = static_cast<uint8_t>(rng());
    check(f, f.size(), "mutation " + std::to_string(i));
  }
  EXPECT_GT(taken, 1000) << "the common case never applied: the fast path is dead code";
  EXPECT_GT(checked - taken, 1000);
}

// ---------------------------------------------------------------------------
// Packet builder

// Test-local one's complement sum, independent of the builder's.
uint32_t ref_sum(const uint8_t* p, size_t n, uint64_t sum = 0) {
  for (size_t i = 0; i < n; ++i) sum += (i % 2 == 0) ? uint64_t{p[i]} << 8 : p[i];
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint32_t>(sum);
}

TEST(PacketBuilder, KnownIpv4HeaderChecksum) {
  // Wikipedia's IPv4 checksum example: 4500 0073 0000 4000 4011 [b861] c0a8 0001 c0a8 00c7.
  const Bytes f = build([](auto& s) {
    s.dont_fragment = true;
    s.src4 = {192, 168, 0, 1};
    s.dst4 = {192, 168, 0, 199};
    s.payload_len = 0x73 - 28;
  });
  const Bytes want_hdr = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                          0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(Bytes(f.begin() + 14, f.begin() + 34), want_hdr) << pk::hex(f);
}

TEST(PacketBuilder, ChecksumsVerify) {
  struct C {
    std::string name;
    pk::PacketSpec spec;
  };
  std::vector<C> cases;
  for (pk::L3 l3 : {pk::L3::kIpv4, pk::L3::kIpv6}) {
    for (uint8_t proto : {pk::kTcp, pk::kUdp, l3 == pk::L3::kIpv4 ? pk::kIcmp : pk::kIcmpv6}) {
      for (size_t payload : {0, 1, 17, 1000}) {
        pk::PacketSpec s;
        s.l3 = l3;
        s.proto = proto;
        s.payload_len = payload;
        s.payload_seed = static_cast<uint8_t>(payload);
        s.ipv4_options = {1, 1, 1};
        s.tcp_options = {1, 1, 1, 1, 2, 4, 5, 0xb4};
        s.ext = {{.type = 0}};
        cases.push_back(
            {std::to_string(static_cast<int>(l3)) + "/" + std::to_string(proto) + "/" + std::to_string(payload), s});
      }
    }
  }
  for (const C& c : cases) {
    SCOPED_TRACE(c.name);
    const Bytes f = pk::build_packet(c.spec);
    const ParsedPacket p = parse_exact(f);
    ASSERT_FALSE(p.malformed) << pk::hex(f);
    const uint8_t* ip = f.data() + 14;
    size_t l4_off, l4_len;
    uint64_t pseudo = 0;
    if (c.spec.l3 == pk::L3::kIpv4) {
      const size_t hlen = (ip[0] & 0xf) * 4u;
      EXPECT_EQ(hlen, 24u);
      EXPECT_EQ(ref_sum(ip, hlen), 0xffffu) << "IPv4 header checksum";
      EXPECT_EQ(ipv4_header_checksum(ip, static_cast<unsigned>(hlen)), (ip[10] << 8) | ip[11]);
      const size_t total = (ip[2] << 8) | ip[3];
      l4_off = 14 + hlen;
      l4_len = total - hlen;
      if (c.spec.proto != pk::kIcmp) pseudo = ref_sum(ip + 12, 8) + c.spec.proto + l4_len;
    } else {
      EXPECT_EQ(ip[40], c.spec.proto);  // hop-by-hop's next header
      l4_off = 14 + 40 + 8;
      l4_len = ((ip[4] << 8) | ip[5]) - 8u;
      pseudo = ref_sum(ip + 8, 32) + c.spec.proto + l4_len;
    }
    EXPECT_EQ(ref_sum(f.data() + l4_off, l4_len, pseudo), 0xffffu) << "L4 checksum\n" << pk::hex(f);
    EXPECT_EQ(f.size(), std::max<size_t>(60, l4_off + l4_len));
  }
}

TEST(PacketBuilder, LayoutOfVlanArpAndIpv6Chain) {
  const Bytes arp = build([](auto& s) {
    s.l3 = pk::L3::kArp;
    s.vlans = {{0x88a8, 0x0123}, {0x8100, 0x0fff}};
    s.src4 = {10, 1, 2, 3};
    s.dst4 = {10, 1, 2, 4};
  });
  ASSERT_EQ(arp.size(), 60u);
  const Bytes tags = {0x88, 0xa8, 0x01, 0x23, 0x81, 0x00, 0x0f, 0xff, 0x08, 0x06};
  EXPECT_EQ(Bytes(arp.begin() + 12, arp.begin() + 22), tags);
  const Bytes arp_head = {0, 1, 8, 0, 6, 4, 0, 1};
  EXPECT_EQ(Bytes(arp.begin() + 22, arp.begin() + 30), arp_head);
  EXPECT_EQ(Bytes(arp.begin() + 36, arp.begin() + 40), (Bytes{10, 1, 2, 3}));
  EXPECT_EQ(Bytes(arp.begin() + 46, arp.begin() + 50), (Bytes{10, 1, 2, 4}));

  const Bytes v6 = build([](auto& s) {
    s.l3 = pk::L3::kIpv6;
    s.min_frame_size = 0;
    s.tos = 0xa5;
    s.flow_label = 0x12345;
    s.ext = {
        {.type = 0}, {.type = 44, .frag_offset = 0x1abc, .more_fragments = true, .ident = 0xdeadbeef}, {.type = 51}};
    s.proto = pk::kNoNextHeader;
    s.payload_len = 3;
  });
  ASSERT_EQ(v6.size(), 14u + 40 + 8 + 8 + 16 + 3);
  EXPECT_EQ(Bytes(v6.begin() + 14, v6.begin() + 22), (Bytes{0x6a, 0x51, 0x23, 0x45, 0, 35, 0, 64}));
  EXPECT_EQ(v6[54], 44);  // hbh -> fragment
  EXPECT_EQ(v6[55], 0);
  EXPECT_EQ(Bytes(v6.begin() + 62, v6.begin() + 70),
            (Bytes{51, 0, 0xd5, 0xe1, 0xde, 0xad, 0xbe, 0xef}));  // offset << 3 | M
  EXPECT_EQ(v6[70], 59);                                          // AH -> no next header
  EXPECT_EQ(v6[71], 16 / 4 - 2);
}

// ---------------------------------------------------------------------------
// pcap files

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "psgate_" + std::to_string(getpid()) + "_" + name;
}

TEST(PcapFile, RoundTrip) {
  const std::string path = temp_path("roundtrip.pcap");
  std::vector<Bytes> frames = {
      build([](auto&) {}),
      build([](auto& s) {
        s.l3 = pk::L3::kIpv6;
        s.proto = pk::kTcp;
        s.payload_len = 1400;
      }),
      build([](auto& s) { s.l3 = pk::L3::kArp; }),
      Bytes{},                                       // zero-length record
      build([](auto& s) { s.payload_len = 9000; }),  // jumbo
  };
  const std::vector<uint64_t> ts = {0, 1'000, 1'700'000'000'123'456'000ull, 999'999'000, 5'000'000'000};
  {
    pk::PcapWriter w;
    ASSERT_TRUE(w.open(path)) << w.error();
    for (size_t i = 0; i < frames.size(); ++i) ASSERT_TRUE(w.write(frames[i], ts[i])) << w.error();
    ASSERT_TRUE(w.close()) << w.error();
  }
  auto got = pk::read_pcap(path);
  ASSERT_TRUE(got.ok()) << got.error();
  ASSERT_EQ(got->size(), frames.size());
  for (size_t i = 0; i < frames.size(); ++i) {
    EXPECT_EQ((*got)[i].bytes, frames[i]) << i;
    EXPECT_EQ((*got)[i].ts_ns, ts[i]) << i;
    EXPECT_EQ((*got)[i].orig_len, frames[i].size()) << i;
  }
  std::remove(path.c_str());
}

TEST(PcapFile, MicrosecondResolutionAndSnaplen) {
  const std::string path = temp_path("snap.pcap");
  pk::PcapWriter w;
  ASSERT_TRUE(w.open(path)) << w.error();
  Bytes big(70000, 0xab);
  ASSERT_TRUE(w.write(big, 1'234'567'891));  // sub-microsecond part is lost
  ASSERT_TRUE(w.close());
  auto got = pk::read_pcap(path);
  ASSERT_TRUE(got.ok()) << got.error();
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].ts_ns, 1'234'567'000u);
  EXPECT_EQ((*got)[0].bytes.size(), pk::kPcapSnaplen);
  EXPECT_EQ((*got)[0].orig_len, 70000u);
  std::remove(path.c_str());
}

void put_u32(Bytes& b, uint32_t v, bool big_endian) {
  for (int i = 0; i < 4; ++i) {
    const int shift = big_endian ? 24 - 8 * i : 8 * i;
    b.push_back(static_cast<uint8_t>(v >> shift));
  }
}

// A hand-made file: magic, version 2.4 as two u16, zone, sigfigs, snaplen, linktype.
Bytes pcap_bytes(uint32_t magic, bool big_endian, uint32_t linktype,
                 const std::vector<std::pair<uint32_t, uint32_t>>& ts, const Bytes& frame) {
  Bytes b;
  put_u32(b, magic, big_endian);
  const uint32_t version = big_endian ? (2u << 16 | 4) : (4u << 16 | 2);
  put_u32(b, version, big_endian);
  put_u32(b, 0, big_endian);
  put_u32(b, 0, big_endian);
  put_u32(b, 65535, big_endian);
  put_u32(b, linktype, big_endian);
  for (const auto& [sec, frac] : ts) {
    put_u32(b, sec, big_endian);
    put_u32(b, frac, big_endian);
    put_u32(b, static_cast<uint32_t>(frame.size()), big_endian);
    put_u32(b, static_cast<uint32_t>(frame.size()), big_endian);
    b.insert(b.end(), frame.begin(), frame.end());
  }
  return b;
}

void write_file(const std::string& path, const Bytes& b) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  if (!b.empty()) {
    ASSERT_EQ(std::fwrite(b.data(), 1, b.size(), f), b.size());
  }
  std::fclose(f);
}

TEST(PcapFile, ReadsNanosecondAndSwappedFiles) {
  const Bytes frame = build([](auto&) {});
  struct C {
    const char* name;
    uint32_t magic;
    bool big_endian;
    uint64_t want_ns;
  };
  const C cases[] = {
      {"micro_le", pk::kPcapMagicMicro, false, 7'000'123'000},
      {"micro_be", pk::kPcapMagicMicro, true, 7'000'123'000},
      {"nano_le", pk::kPcapMagicNano, false, 7'000'000'123},
      {"nano_be", pk::kPcapMagicNano, true, 7'000'000'123},
  };
  for (const C& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp_path(std::string(c.name) + ".pcap");
    write_file(path, pcap_bytes(c.magic, c.big_endian, 1, {{7, 123}, {7, 123}}, frame));
    auto got = pk::read_pcap(path);
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[1].ts_ns, c.want_ns);
    EXPECT_EQ((*got)[1].bytes, frame);
    std::remove(path.c_str());
  }
}

TEST(PcapFile, Errors) {
  const Bytes frame = build([](auto&) {});
  const Bytes good = pcap_bytes(pk::kPcapMagicMicro, false, 1, {{1, 2}}, frame);
  struct C {
    const char* name;
    Bytes contents;
  };
  const C cases[] = {
      {"empty", {}},
      {"short_header", Bytes(good.begin(), good.begin() + 20)},
      {"bad_magic", pcap_bytes(0x0a0d0d0a /* pcapng */, false, 1, {}, frame)},
      {"linktype_raw_ip", pcap_bytes(pk::kPcapMagicMicro, false, 101, {{1, 2}}, frame)},
      {"truncated_record_header", Bytes(good.begin(), good.begin() + 24 + 10)},
      {"truncated_record_data", Bytes(good.begin(), good.end() - 1)},
  };
  for (const C& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = temp_path(std::string(c.name) + ".pcap");
    write_file(path, c.contents);
    auto got = pk::read_pcap(path);
    EXPECT_FALSE(got.ok());
    EXPECT_FALSE(got.error().empty());
    std::remove(path.c_str());
  }
  EXPECT_FALSE(pk::read_pcap(temp_path("does_not_exist.pcap")).ok());
  pk::PcapWriter w;
  EXPECT_FALSE(w.open("/nonexistent-dir/x.pcap"));
  EXPECT_NE(w.error().find("/nonexistent-dir/x.pcap"), std::string::npos);
  EXPECT_FALSE(w.write(frame, 0));
}

TEST(PcapFile, HeaderOnlyFileHasNoRecords) {
  const std::string path = temp_path("empty.pcap");
  pk::PcapWriter w;
  ASSERT_TRUE(w.open(path));
  ASSERT_TRUE(w.close());
  auto got = pk::read_pcap(path);
  ASSERT_TRUE(got.ok()) << got.error();
  EXPECT_TRUE(got->empty());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace psgate
