// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: arbitrary bytes as an Ethernet frame. libFuzzer hands us
// an exactly-sized heap buffer, so AddressSanitizer catches any read past
// `len`; on top of that the result must obey the contract in packet_parser.h.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "psgate/flow_key.h"
#include "psgate/packet_parser.h"

namespace {

using psgate::L3Kind;
using psgate::ParsedPacket;

constexpr uint32_t kEthHeaderLen = 14;

[[noreturn]] void fail(const char* what, const ParsedPacket& p, size_t len) {
  std::fprintf(stderr,
               "invariant broken: %s (len=%zu l3=%u malformed=%d control=%d nff=%d ports=%d "
               "proto=%u l3_offset=%u sport=%u dport=%u)\n",
               what, len, static_cast<unsigned>(p.l3), p.malformed, p.network_control, p.non_first_fragment,
               p.has_ports, p.proto, p.l3_offset, p.sport, p.dport);
  std::abort();
}

bool all_zero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

bool same(const ParsedPacket& a, const ParsedPacket& b) {
  return a.l3 == b.l3 && a.malformed == b.malformed && a.network_control == b.network_control &&
         a.non_first_fragment == b.non_first_fragment && a.fragment == b.fragment && a.fragment_id == b.fragment_id &&
         a.has_ports == b.has_ports && a.proto == b.proto && a.traffic_class == b.traffic_class &&
         a.l3_offset == b.l3_offset && a.sport == b.sport && a.dport == b.dport && a.src == b.src && a.dst == b.dst;
}

void check(const ParsedPacket& p, const uint8_t* data, size_t len) {
  if (p.l3 != L3Kind::kNonIp && p.l3 != L3Kind::kIpv4 && p.l3 != L3Kind::kIpv6) {
    fail("l3 out of enum", p, len);
  }
  if (p.malformed && (p.has_ports || p.network_control)) {
    fail("malformed packet claims ports or network control", p, len);
  }
  if (p.has_ports && p.non_first_fragment) fail("ports on a non-first fragment", p, len);
  if (p.non_first_fragment && !p.fragment) fail("a later fragment not marked a fragment", p, len);
  if (!p.fragment && p.fragment_id != 0) fail("a fragment id outside a fragment", p, len);
  if (p.has_ports && p.proto != 6 && p.proto != 17 && p.proto != 132) {
    fail("ports for a protocol without ports", p, len);
  }
  if (!p.has_ports && (p.sport != 0 || p.dport != 0)) fail("ports set without has_ports", p, len);

  if (p.l3 == L3Kind::kNonIp) {
    if (p.has_ports || p.non_first_fragment || p.fragment) fail("non-IP with L4 facts", p, len);
    if (!all_zero(p.src.data(), 16) || !all_zero(p.dst.data(), 16)) {
      fail("non-IP frame with addresses", p, len);
    }
    return;
  }

  // IP: the header sits after Ethernet and at most kMaxVlanTags tags, and the
  // ethertype that said "IP" was inside the frame.
  const uint32_t max_offset = kEthHeaderLen + 4 * psgate::kMaxVlanTags;
  if (p.l3_offset < kEthHeaderLen || p.l3_offset > max_offset || (p.l3_offset - kEthHeaderLen) % 4 != 0) {
    fail("l3_offset not after Ethernet + VLAN tags", p, len);
  }
  if (p.l3_offset > len) fail("l3_offset beyond the frame", p, len);
  if (p.l3 == L3Kind::kIpv4 && (!all_zero(p.src.data() + 4, 12) || !all_zero(p.dst.data() + 4, 12))) {
    fail("IPv4 address spills past 4 bytes", p, len);
  }
  if (p.malformed) return;

  // A well-formed IP packet has its whole fixed header inside the frame
  // (header_rewrite writes there) and the version the ethertype promised.
  const uint32_t fixed = p.l3 == L3Kind::kIpv4 ? 20 : 40;
  if (uint64_t{p.l3_offset} + fixed > len) fail("IP header runs past the frame", p, len);
  const unsigned version = data[p.l3_offset] >> 4;
  if (version != static_cast<unsigned>(p.l3)) fail("IP version differs from l3", p, len);
  // The header's protocol, or what follows an Authentication Header (51),
  // which the parser walks as IPv6's.
  if (p.l3 == L3Kind::kIpv4 && p.proto != data[p.l3_offset + 9] && data[p.l3_offset + 9] != 51) {
    fail("IPv4 proto differs from the header", p, len);
  }
  if (p.l3 == L3Kind::kIpv4 && std::memcmp(p.src.data(), data + p.l3_offset + 12, 4) != 0) {
    fail("IPv4 src differs from the header", p, len);
  }
  if (p.l3 == L3Kind::kIpv6 && std::memcmp(p.dst.data(), data + p.l3_offset + 24, 16) != 0) {
    fail("IPv6 dst differs from the header", p, len);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 0xffff) return 0;  // frames are at most 64 KiB; len is uint32_t anyway
  const uint32_t len = static_cast<uint32_t>(size);

  ParsedPacket fresh;
  psgate::parse_packet(data, len, fresh);
  check(fresh, data, size);

  // "Fills out completely": a struct full of garbage must come out the same.
  ParsedPacket dirty;
  std::memset(static_cast<void*>(&dirty), 0xa5, sizeof(dirty));
  dirty.l3 = L3Kind::kIpv6;
  dirty.malformed = true;
  dirty.network_control = true;
  dirty.non_first_fragment = true;
  dirty.fragment = true;
  dirty.fragment_id = 0xa5a5a5a5;
  dirty.has_ports = true;
  psgate::parse_packet(data, len, dirty);
  if (!same(fresh, dirty)) fail("result depends on the previous contents of out", dirty, size);

  // The common-case flow key parser either declines, or takes a frame the
  // full parser sees as plain IPv4 TCP/UDP at offset 14 and builds the same key.
  psgate::FlowKey4 key;
  if (psgate::parse_ipv4_flow_key(data, len, key)) {
    if (fresh.l3 != L3Kind::kIpv4 || fresh.malformed || !fresh.has_ports || fresh.fragment ||
        fresh.l3_offset != psgate::kCommonL3Offset)
      fail("parse_ipv4_flow_key took a frame the full parser does not see as plain IPv4", fresh, size);
    if (!(key == psgate::flow_key4(fresh))) fail("parse_ipv4_flow_key's key differs from flow_key4", fresh, size);
  }
  return 0;
}
