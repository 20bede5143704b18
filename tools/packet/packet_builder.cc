// SPDX-License-Identifier: BSD-3-Clause
// Frame builder for tests and tools. See packet_builder.h.
#include "packet_builder.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace psgate::pkt {
namespace {

void put8(std::vector<uint8_t>& b, uint8_t v) { b.push_back(v); }
void put16(std::vector<uint8_t>& b, uint16_t v) {
  b.push_back(static_cast<uint8_t>(v >> 8));
  b.push_back(static_cast<uint8_t>(v));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, static_cast<uint16_t>(v >> 16));
  put16(b, static_cast<uint16_t>(v));
}
template <size_t N>
void put_bytes(std::vector<uint8_t>& b, const std::array<uint8_t, N>& a) {
  b.insert(b.end(), a.begin(), a.end());
}
void set16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = static_cast<uint8_t>(v >> 8);
  b[at + 1] = static_cast<uint8_t>(v);
}
size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

std::vector<uint8_t> payload(const PacketSpec& s) {
  std::vector<uint8_t> p(s.payload_len);
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<uint8_t>(s.payload_seed + i);
  return p;
}

bool is_non_first_fragment(const PacketSpec& s) {
  if (s.l3 == L3::kIpv4) return s.frag_offset != 0;
  return std::any_of(s.ext.begin(), s.ext.end(),
                     [](const Ipv6Ext& e) { return e.type == kIpv6Fragment && e.frag_offset != 0; });
}

// The L4 segment (header + payload). `pseudo` is the pseudo-header sum for a
// segment of this length, computed by the caller's family.
template <typename PseudoFn>
std::vector<uint8_t> build_l4(const PacketSpec& s, PseudoFn pseudo) {
  std::vector<uint8_t> seg;
  const std::vector<uint8_t> body = payload(s);
  const bool header = !s.raw_l4 && !is_non_first_fragment(s);
  size_t csum_at = SIZE_MAX;
  bool use_pseudo = true;
  bool udp = false;
  if (header && s.proto == kTcp) {
    const size_t opt_len = round_up(s.tcp_options.size(), 4);
    put16(seg, s.sport);
    put16(seg, s.dport);
    put32(seg, s.seq);
    put32(seg, s.ack);
    const uint8_t doff = s.tcp_data_offset_override.value_or(static_cast<uint8_t>((20 + opt_len) / 4));
    put8(seg, static_cast<uint8_t>(doff << 4));
    put8(seg, s.tcp_flags);
    put16(seg, 65535);  // window
    csum_at = seg.size();
    put16(seg, 0);
    put16(seg, 0);  // urgent pointer
    seg.insert(seg.end(), s.tcp_options.begin(), s.tcp_options.end());
    seg.resize(20 + opt_len, 0);
  } else if (header && s.proto == kUdp) {
    put16(seg, s.sport);
    put16(seg, s.dport);
    put16(seg, static_cast<uint16_t>(8 + body.size()));
    csum_at = seg.size();
    put16(seg, 0);
    udp = true;
  } else if (header && s.proto == kSctp) {
    // Common header only; the CRC32c checksum is left 0 (nothing here checks it).
    put16(seg, s.sport);
    put16(seg, s.dport);
    put32(seg, 0);  // verification tag
    put32(seg, 0);  // checksum
  } else if (header && ((s.proto == kIcmp && s.l3 == L3::kIpv4) || (s.proto == kIcmpv6 && s.l3 == L3::kIpv6))) {
    put8(seg, s.icmp_type);
    put8(seg, s.icmp_code);
    csum_at = seg.size();
    put16(seg, 0);
    put32(seg, 0);                    // identifier/sequence, or NDP's reserved/flags word
    use_pseudo = s.proto == kIcmpv6;  // ICMPv4 has no pseudo-header
  }
  seg.insert(seg.end(), body.begin(), body.end());
  if (csum_at != SIZE_MAX) {
    uint16_t c = internet_checksum(seg.data(), seg.size(), use_pseudo ? pseudo(seg.size()) : 0);
    if (udp && c == 0) c = 0xffff;  // 0 means "no checksum" in UDP
    set16(seg, csum_at, c);
  }
  return seg;
}

void build_ipv4(const PacketSpec& s, std::vector<uint8_t>& f) {
  const std::vector<uint8_t> seg =
      build_l4(s, [&](size_t n) { return pseudo_header_sum_v4(s.src4, s.dst4, s.proto, n); });
  const size_t opt_len = std::min<size_t>(round_up(s.ipv4_options.size(), 4), 40);
  const size_t hlen = 20 + opt_len;
  const size_t at = f.size();
  put8(f, static_cast<uint8_t>(0x40 | (hlen / 4)));
  put8(f, s.tos);
  put16(f, static_cast<uint16_t>(hlen + seg.size()));
  put16(f, s.ip_id);
  put16(f, static_cast<uint16_t>((s.dont_fragment ? 0x4000 : 0) | (s.more_fragments ? 0x2000 : 0) |
                                 (s.frag_offset & 0x1fff)));
  put8(f, s.ttl);
  put8(f, s.proto);
  put16(f, 0);  // checksum, below
  put_bytes(f, s.src4);
  put_bytes(f, s.dst4);
  f.insert(f.end(), s.ipv4_options.begin(),
           s.ipv4_options.begin() + static_cast<ptrdiff_t>(std::min<size_t>(s.ipv4_options.size(), 40)));
  f.resize(at + hlen, 0);  // options padded with End-of-List
  set16(f, at + 10, internet_checksum(f.data() + at, hlen));
  f.insert(f.end(), seg.begin(), seg.end());

  if (s.ip_version_override) f[at] = static_cast<uint8_t>((*s.ip_version_override << 4) | (f[at] & 0x0f));
  if (s.ipv4_ihl_override) f[at] = static_cast<uint8_t>((f[at] & 0xf0) | (*s.ipv4_ihl_override & 0x0f));
  if (s.ipv4_total_length_override) set16(f, at + 2, *s.ipv4_total_length_override);
}

void build_ipv6_ext(const PacketSpec& s, size_t i, std::vector<uint8_t>& f) {
  const Ipv6Ext& e = s.ext[i];
  const uint8_t next = i + 1 < s.ext.size() ? s.ext[i + 1].type : s.proto;
  const size_t at = f.size();
  if (e.type == kIpv6Fragment) {
    put8(f, next);
    put8(f, 0);
    put16(f, static_cast<uint16_t>((e.frag_offset << 3) | (e.more_fragments ? 1 : 0)));
    put32(f, e.ident);
    return;
  }
  if (e.type == kAh) {
    // Next header, payload length in 4-octet units minus 2, reserved, SPI,
    // sequence number, ICV. IPv6 wants a multiple of 8 overall.
    const size_t len = std::max<size_t>(round_up(e.len, 4), 16);
    put8(f, next);
    put8(f, static_cast<uint8_t>(len / 4 - 2));
    put16(f, 0);
    put32(f, 0x1000);  // SPI
    put32(f, 1);       // sequence
    f.resize(at + len, 0);
    return;
  }
  // Hop-by-hop, destination options, routing (and unknown types): next
  // header, length in 8-octet units minus 1, then a PadN option / zeroed
  // routing data with segments left = 0.
  const size_t len = std::max<size_t>(round_up(e.len, 8), 8);
  put8(f, next);
  put8(f, static_cast<uint8_t>(len / 8 - 1));
  if (e.type == kIpv6Routing) {
    put8(f, 4);  // segment routing header type, segments left 0: skipped by hosts
    put8(f, 0);
  } else {
    put8(f, 1);  // PadN
    put8(f, static_cast<uint8_t>(len - 4));
  }
  f.resize(at + len, 0);
}

void build_ipv6(const PacketSpec& s, std::vector<uint8_t>& f) {
  // Pseudo header uses the final proto (RFC 8200 sec. 8.1).
  const std::vector<uint8_t> seg =
      build_l4(s, [&](size_t n) { return pseudo_header_sum_v6(s.src6, s.dst6, s.proto, n); });
  const size_t at = f.size();
  put32(f, (6u << 28) | (uint32_t{s.tos} << 20) | (s.flow_label & 0xfffff));
  put16(f, 0);  // payload length, below
  put8(f, s.ext.empty() ? s.proto : s.ext[0].type);
  put8(f, s.ttl);
  put_bytes(f, s.src6);
  put_bytes(f, s.dst6);
  for (size_t i = 0; i < s.ext.size(); ++i) build_ipv6_ext(s, i, f);
  f.insert(f.end(), seg.begin(), seg.end());
  set16(f, at + 4, s.ipv6_payload_length_override.value_or(static_cast<uint16_t>(f.size() - at - 40)));
  if (s.ip_version_override) f[at] = static_cast<uint8_t>((*s.ip_version_override << 4) | (f[at] & 0x0f));
}

void build_arp(const PacketSpec& s, std::vector<uint8_t>& f) {
  put16(f, 1);       // hardware: Ethernet
  put16(f, 0x0800);  // protocol: IPv4
  put8(f, 6);
  put8(f, 4);
  put16(f, 1);  // request
  put_bytes(f, s.src_mac);
  put_bytes(f, s.src4);
  put_bytes(f, Mac{});
  put_bytes(f, s.dst4);
}

}  // namespace

size_t l3_offset(const PacketSpec& spec) { return 14 + 4 * spec.vlans.size(); }

std::vector<uint8_t> build_packet(const PacketSpec& s) {
  std::vector<uint8_t> f;
  f.reserve(std::max<size_t>(s.min_frame_size, 128 + s.payload_len));
  put_bytes(f, s.dst_mac);
  put_bytes(f, s.src_mac);
  for (const VlanTag& v : s.vlans) {
    put16(f, v.tpid);
    put16(f, v.tci);
  }
  switch (s.l3) {
    case L3::kNone: {
      put16(f, s.ethertype);
      const std::vector<uint8_t> body = payload(s);
      f.insert(f.end(), body.begin(), body.end());
      break;
    }
    case L3::kArp:
      put16(f, kEtherTypeArp);
      build_arp(s, f);
      break;
    case L3::kIpv4:
      put16(f, kEtherTypeIpv4);
      build_ipv4(s, f);
      break;
    case L3::kIpv6:
      put16(f, kEtherTypeIpv6);
      build_ipv6(s, f);
      break;
  }
  if (f.size() < s.min_frame_size) f.resize(s.min_frame_size, 0);
  return f;
}

uint32_t ones_complement_sum(const uint8_t* data, size_t len, uint32_t initial) {
  uint64_t sum = initial;
  for (size_t i = 0; i + 1 < len; i += 2) sum += (uint32_t{data[i]} << 8) | data[i + 1];
  if (len & 1) sum += uint32_t{data[len - 1]} << 8;  // odd byte padded with zero
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint32_t>(sum);
}

uint16_t internet_checksum(const uint8_t* data, size_t len, uint32_t initial) {
  return static_cast<uint16_t>(~ones_complement_sum(data, len, initial));
}

uint32_t pseudo_header_sum_v4(const Ipv4Addr& src, const Ipv4Addr& dst, uint8_t proto, size_t l4_len) {
  uint32_t sum = ones_complement_sum(src.data(), 4);
  sum = ones_complement_sum(dst.data(), 4, sum);
  return ones_complement_sum(nullptr, 0, sum + proto + static_cast<uint32_t>(l4_len));
}

uint32_t pseudo_header_sum_v6(const Ipv6Addr& src, const Ipv6Addr& dst, uint8_t proto, size_t l4_len) {
  uint32_t sum = ones_complement_sum(src.data(), 16);
  sum = ones_complement_sum(dst.data(), 16, sum);
  // 32-bit upper-layer length and 24 zero bits + next header.
  sum += static_cast<uint32_t>(l4_len >> 16) + static_cast<uint32_t>(l4_len & 0xffff) + proto;
  return ones_complement_sum(nullptr, 0, sum);
}

std::string hex(const std::vector<uint8_t>& bytes) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%02x", bytes[i]);
    if (i != 0) out += (i % 16 == 0) ? '\n' : ' ';
    out += buf;
  }
  return out;
}

PacketSpec from_ps(uint16_t ps_port, uint16_t ip_id, size_t payload_len) {
  PacketSpec s;
  s.src4 = kTestPs;
  s.dst4 = kTestWorker;
  s.proto = kTcp;
  s.sport = ps_port;
  s.dport = kTestWorkerPort;
  s.ip_id = ip_id;
  s.payload_len = payload_len;
  return s;
}

PacketSpec to_ps(uint16_t ps_port, uint16_t ip_id, size_t payload_len) {
  PacketSpec s = from_ps(ps_port, ip_id, payload_len);
  std::swap(s.src4, s.dst4);
  std::swap(s.sport, s.dport);
  return s;
}

std::vector<uint8_t> udp_push_frame_of_length(size_t frame_len, uint16_t ip_id) {
  constexpr size_t kHeaders = 14 + 20 + 8;
  PacketSpec s = to_ps(2222, ip_id, frame_len > kHeaders ? frame_len - kHeaders : 0);
  s.proto = kUdp;
  s.payload_seed = static_cast<uint8_t>(frame_len);
  s.min_frame_size = 0;
  return build_packet(s);
}

}  // namespace psgate::pkt
