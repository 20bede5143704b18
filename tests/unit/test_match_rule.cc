// SPDX-License-Identifier: BSD-3-Clause
// parse_match_rule / parse_ip_prefix / to_string: field values, clear errors,
// and the canonical round trip on hand-picked and random rules.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "psgate/match_rule.h"

namespace psgate {
namespace {

IpPrefix v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t len) {
  IpPrefix p;
  p.family = 4;
  p.addr = {a, b, c, d};
  p.length = len;
  return p;
}

IpPrefix v6(std::initializer_list<uint8_t> bytes, uint8_t len) {
  IpPrefix p;
  p.family = 6;
  std::copy(bytes.begin(), bytes.end(), p.addr.begin());
  p.length = len;
  return p;
}

TEST(MatchRulePrefix, Good) {
  struct Case {
    const char* text;
    IpPrefix want;
    const char* canonical;
  } cases[] = {
      {"10.0.0.5/32", v4(10, 0, 0, 5, 32), "10.0.0.5/32"},
      {"10.0.0.5", v4(10, 0, 0, 5, 32), "10.0.0.5/32"},
      {"10.1.0.0/16", v4(10, 1, 0, 0, 16), "10.1.0.0/16"},
      {"0.0.0.0/0", v4(0, 0, 0, 0, 0), "0.0.0.0/0"},
      {"192.168.1.128/25", v4(192, 168, 1, 128, 25), "192.168.1.128/25"},
      {"fd00::5/128", v6({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, 128), "fd00::5/128"},
      {"fd00::5", v6({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, 128), "fd00::5/128"},
      {"FD00:0:0::/64", v6({0xfd}, 64), "fd00::/64"},
      {"::/0", v6({}, 0), "::/0"},
      {"2001:db8:8000::/33", v6({0x20, 0x01, 0x0d, 0xb8, 0x80}, 33), "2001:db8:8000::/33"},
      // IPv4-mapped: the IPv4 prefix, 96 bits shorter (as an IPv6 prefix it
      // matched no packet: no IPv6 packet carries a mapped address).
      {"::ffff:10.0.0.1/128", v4(10, 0, 0, 1, 32), "10.0.0.1/32"},
      {"::ffff:10.0.0.1", v4(10, 0, 0, 1, 32), "10.0.0.1/32"},
      {"::FFFF:a00:1", v4(10, 0, 0, 1, 32), "10.0.0.1/32"},
      {"0:0:0:0:0:ffff:10.1.0.0/112", v4(10, 1, 0, 0, 16), "10.1.0.0/16"},
      {"::ffff:0.0.0.0/96", v4(0, 0, 0, 0, 0), "0.0.0.0/0"},
      // Near but not mapped: these stay IPv6.
      {"::10.0.0.1", v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1}, 128), "::10.0.0.1/128"},
      {"::fffe:10.0.0.1", v6({0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 10, 0, 0, 1}, 128), "::fffe:a00:1/128"},
      {"64:ff9b::10.0.0.1", v6({0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1}, 128), "64:ff9b::a00:1/128"},
      {"::/80", v6({}, 80), "::/80"},
  };
  for (const auto& c : cases) {
    const auto r = parse_ip_prefix(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.text;
    EXPECT_EQ(to_string(*r), c.canonical);
  }
}

TEST(MatchRulePrefix, Bad) {
  struct Case {
    const char* text;
    const char* error_contains;
  } cases[] = {
      {"", "empty"},
      {"10.0.0.5/24", "host bits are set after /24 (the network is 10.0.0.0/24)"},
      {"10.0.0.128/24", "host bits"},
      {"fd00::5/64", "host bits are set after /64 (the network is fd00::/64)"},
      {"10.0.0.0/33", "prefix length must be a number 0-32"},
      {"fd00::/129", "0-128"},
      {"10.0.0.0/", "prefix length"},
      {"10.0.0.0/-1", "prefix length"},
      {"10.0.0.0/+8", "prefix length"},
      {"10.0.0.0/8/8", "prefix length"},
      {"10.0.0", "bad IPv4 address"},
      {"10.0.0.256", "bad IPv4 address"},
      {"host.example", "bad IPv4 address"},
      {"fd00:::1", "bad IPv6 address"},
      {"fe80::1%eth0", "bad IPv6 address"},
      {"::ffff:0.0.0.0/95", "an IPv4-mapped prefix is /96 (every IPv4 address) or longer"},
      {"::ffff:0:0/80", "an IPv4-mapped prefix is /96"},
      {"::ffff:10.0.0.1/120", "host bits are set after /120 (the network is ::ffff:10.0.0.0/120)"},
  };
  for (const auto& c : cases) {
    const auto r = parse_ip_prefix(c.text);
    ASSERT_FALSE(r.ok()) << c.text << " parsed as " << to_string(*r);
    EXPECT_NE(r.error().find(c.error_contains), std::string::npos) << c.text << ": " << r.error();
  }
  // A NUL must not end the address early.
  EXPECT_FALSE(parse_ip_prefix(std::string_view("10.0.0.5\0x", 10)).ok());
}

TEST(MatchRuleParse, Good) {
  struct Case {
    const char* text;
    MatchRule want;
    const char* canonical;
  };
  auto rule = [](std::optional<IpPrefix> src, std::optional<IpPrefix> dst, PortRange sport, PortRange dport,
                 std::optional<uint8_t> proto) {
    MatchRule r;
    r.src = src;
    r.dst = dst;
    r.sport = sport;
    r.dport = dport;
    r.proto = proto;
    return r;
  };
  const PortRange any;
  const Case cases[] = {
      {"src=10.0.0.5/32,sport=2222,proto=tcp", rule(v4(10, 0, 0, 5, 32), {}, {2222, 2222}, any, 6),
       "src=10.0.0.5/32,sport=2222,proto=tcp"},
      {"dst=fd00::5/128,dport=2222-2230,proto=udp",
       rule({}, v6({0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5}, 128), any, {2222, 2230}, 17),
       "dst=fd00::5/128,dport=2222-2230,proto=udp"},
      // Key order and spaces are free; the canonical form fixes them.
      {"proto=sctp, dport=9000 ,src=10.1.0.0/16", rule(v4(10, 1, 0, 0, 16), {}, any, {9000, 9000}, 132),
       "src=10.1.0.0/16,dport=9000,proto=sctp"},
      {"", MatchRule{}, ""},
      {"proto=icmp", rule({}, {}, any, any, 1), "proto=icmp"},
      {"proto=icmpv6,dst=fd00::/8", rule({}, v6({0xfd}, 8), any, any, 58), "dst=fd00::/8,proto=icmpv6"},
      {"proto=47", rule({}, {}, any, any, 47), "proto=47"},
      {"proto=6", rule({}, {}, any, any, 6), "proto=tcp"},
      {"proto=1", rule({}, {}, any, any, 1), "proto=icmp"},
      {"dst=::ffff:10.0.0.1/128,dport=2222,proto=tcp", rule({}, v4(10, 0, 0, 1, 32), any, {2222, 2222}, 6),
       "dst=10.0.0.1/32,dport=2222,proto=tcp"},
      {"src=::ffff:10.0.0.1,dst=10.0.0.2", rule(v4(10, 0, 0, 1, 32), v4(10, 0, 0, 2, 32), any, any, {}),
       "src=10.0.0.1/32,dst=10.0.0.2/32"},
      {"dst=::ffff:10.0.0.0/120,proto=icmp", rule({}, v4(10, 0, 0, 0, 24), any, any, 1), "dst=10.0.0.0/24,proto=icmp"},
      {"proto=255", rule({}, {}, any, any, 255), "proto=255"},
      // The full range written out still asks for a protocol with ports
      // (it was dropped, and the rule matched every IP packet).
      {"sport=0-65535", rule({}, {}, {0, 65535, true}, any, {}), "sport=0-65535"},
      {"src=10.0.0.0/8,dport=0-65535", rule(v4(10, 0, 0, 0, 8), {}, any, {0, 65535, true}, {}),
       "src=10.0.0.0/8,dport=0-65535"},
      {"sport=0", rule({}, {}, {0, 0}, any, {}), "sport=0"},
      {"dport=1-1", rule({}, {}, any, {1, 1}, {}), "dport=1"},
      {"src=10.0.0.1,dst=10.0.0.2", rule(v4(10, 0, 0, 1, 32), v4(10, 0, 0, 2, 32), any, any, {}),
       "src=10.0.0.1/32,dst=10.0.0.2/32"},
      {"sport=100-200", rule({}, {}, {100, 200}, any, {}), "sport=100-200"},
  };
  for (const auto& c : cases) {
    const auto r = parse_match_rule(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.error();
    EXPECT_EQ(*r, c.want) << c.text << " -> " << to_string(*r);
    EXPECT_EQ(to_string(*r), c.canonical) << c.text;
    const auto again = parse_match_rule(to_string(*r));
    ASSERT_TRUE(again.ok()) << again.error();
    EXPECT_EQ(*again, *r);
  }
}

TEST(MatchRuleParse, Bad) {
  struct Case {
    const char* text;
    const char* error_contains;
  } cases[] = {
      {"src=10.0.0.5/32,src=10.0.0.6/32", "src given more than once"},
      {"sport=1,sport=2", "sport given more than once"},
      {"proto=tcp,proto=udp", "proto given more than once"},
      {"srcip=10.0.0.5", "unknown key \"srcip\""},
      {"SRC=10.0.0.5", "unknown key \"SRC\""},
      {"tcp", "\"tcp\" is not key=value"},
      {"src=10.0.0.5/24", "src: \"10.0.0.5/24\" is not an IP prefix: host bits are set"},
      {"dst=10.0.0.5/33", "dst: "},
      {"src=10.0.0.5,dst=fd00::1", "src is IPv4 but dst is IPv6"},
      {"src=fd00::1,dst=10.0.0.1", "src is IPv6 but dst is IPv4"},
      {"sport=2230-2222", "range is backwards (2230 > 2222)"},
      {"dport=65536", "not a port"},
      {"dport=-1", "not a port"},
      {"dport=", "missing port"},
      {"dport=1-", "not a port"},
      {"dport=-5", "not a port"},
      {"dport=1-2-3", "not a port"},
      {"dport=0x10", "not a port"},
      {"dport=http", "not a port"},
      {"proto=256", "not a protocol"},
      {"proto=TCP", "not a protocol"},
      {"proto=", "not a protocol"},
      // 0 is "any" to iptables and socket(2); here it matched no packet.
      {"proto=0", "proto=0: not a protocol psgate can match"},
      {"proto=00,dport=80", "to match every protocol leave proto out"},
      {"src=::ffff:10.0.0.1,dst=fd00::1", "src is IPv4 but dst is IPv6; a rule matches one family (an IPv4-mapped"},
      {"dst=::ffff:10.0.0.1,proto=icmpv6", "icmpv6 never matches IPv4 (use icmp); an IPv4-mapped ::ffff: address"},
      {"dst=::ffff:10.0.0.0/64", "an IPv4-mapped prefix is /96"},
      {"proto=icmp,dport=1", "need proto tcp, udp or sctp"},
      {"proto=icmp,dport=0-65535", "need proto tcp, udp or sctp"},
      {"proto=47,sport=1", "need proto tcp, udp or sctp"},
      {"proto=icmp,src=fd00::1", "icmp never matches IPv6"},
      {"proto=icmpv6,dst=10.0.0.1", "icmpv6 never matches IPv4"},
      {"proto=tcp,", "empty item"},
      {",proto=tcp", "empty item"},
      {"proto=tcp,,sport=1", "empty item"},
      {"=tcp", "unknown key \"\""},
  };
  for (const auto& c : cases) {
    const auto r = parse_match_rule(c.text);
    ASSERT_FALSE(r.ok()) << c.text << " parsed as " << to_string(*r);
    EXPECT_NE(r.error().find(c.error_contains), std::string::npos) << c.text << ": " << r.error();
    // The whole rule is quoted so the operator can find it in the config.
    EXPECT_NE(r.error().find(std::string("\"") + c.text + "\""), std::string::npos) << r.error();
  }
}

// Random valid rules survive to_string -> parse unchanged, and to_string is
// a fixed point (canonical).
TEST(MatchRuleParse, RandomRoundTrip) {
  std::mt19937 rng(7);
  auto random_prefix = [&](uint8_t family) {
    IpPrefix p;
    p.family = family;
    const unsigned bits = family == 4 ? 32 : 128;
    p.length = static_cast<uint8_t>(rng() % (bits + 1));
    for (unsigned i = 0; i < bits / 8; ++i) p.addr[i] = static_cast<uint8_t>(rng());
    for (unsigned b = p.length; b < bits; ++b) p.addr[b / 8] &= ~(0x80u >> (b % 8));
    return p;
  };
  auto random_ports = [&] {
    PortRange r;
    if (rng() % 2) return r;
    const uint16_t a = static_cast<uint16_t>(rng()), b = static_cast<uint16_t>(rng());
    r.lo = std::min(a, b);
    r.hi = rng() % 3 ? std::max(a, b) : r.lo;
    return r;
  };
  for (int i = 0; i < 5000; ++i) {
    MatchRule r;
    const uint8_t family = rng() % 2 ? 4 : 6;
    if (rng() % 2) r.src = random_prefix(family);
    if (rng() % 2) r.dst = random_prefix(family);
    r.sport = random_ports();
    r.dport = random_ports();
    if (r.has_ports()) {
      const uint8_t port_protos[] = {6, 17, 132};
      if (rng() % 4) r.proto = port_protos[rng() % 3];
    } else if (rng() % 2) {
      r.proto = static_cast<uint8_t>(1 + rng() % 255);  // 0 is refused
      if (*r.proto == 1 && r.family() == 6) r.proto = 58;
      if (*r.proto == 58 && r.family() == 4) r.proto = 1;
    }
    const std::string text = to_string(r);
    const auto back = parse_match_rule(text);
    ASSERT_TRUE(back.ok()) << text << ": " << back.error();
    ASSERT_EQ(*back, r) << text;
    ASSERT_EQ(to_string(*back), text);
  }
}

// Every IPv4 prefix written in IPv4-mapped form reads as that IPv4 prefix.
TEST(MatchRulePrefix, RandomIpv4Mapped) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    IpPrefix p;
    p.family = 4;
    p.length = static_cast<uint8_t>(rng() % 33);
    for (unsigned b = 0; b < 4; ++b) p.addr[b] = static_cast<uint8_t>(rng());
    for (unsigned b = p.length; b < 32; ++b) p.addr[b / 8] &= ~(0x80u >> (b % 8));
    const std::string v4_text = to_string(p);
    const std::string mapped = "::ffff:" + v4_text.substr(0, v4_text.find('/')) + "/" + std::to_string(96 + p.length);
    const auto r = parse_ip_prefix(mapped);
    ASSERT_TRUE(r.ok()) << mapped << ": " << r.error();
    ASSERT_EQ(*r, p) << mapped << " -> " << to_string(*r);
  }
}

}  // namespace
}  // namespace psgate
