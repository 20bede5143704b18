// SPDX-License-Identifier: BSD-3-Clause
// Match rule text <-> MatchRule (see match_rule.h). Control path only.
//
// Rules the classifier could never match are rejected here rather than
// accepted silently: ports with a protocol that has none, ICMP with IPv6
// prefixes, a prefix with host bits set (usually a typo for the network),
// proto=0 (a wildcard elsewhere, here a header psgate reads past). An
// IPv4-mapped IPv6 prefix (::ffff:10.0.0.1/128) is read as the IPv4 prefix
// it names (10.0.0.1/32).
#include "psgate/match_rule.h"

#include <arpa/inet.h>

#include <charconv>
#include <string>

namespace psgate {
namespace {

constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoIcmpv6 = 58;
constexpr uint8_t kProtoSctp = 132;

struct ProtoName {
  std::string_view name;
  uint8_t number;
};
constexpr ProtoName kProtoNames[] = {
    {"tcp", kProtoTcp}, {"udp", kProtoUdp}, {"sctp", kProtoSctp}, {"icmp", kProtoIcmp}, {"icmpv6", kProtoIcmpv6},
};

std::string quote(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Plain decimal digits only: no sign, no spaces, no hex. Empty -> nullopt.
std::optional<uint64_t> parse_decimal(std::string_view s, uint64_t max) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

Result<PortRange> parse_port_range(std::string_view key, std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Result<PortRange>::failure(std::string(key) + "=" + std::string(text) + ": " + why);
  };
  if (text.empty()) return bad("missing port (expected e.g. 2222 or 2222-2230)");
  const size_t dash = text.find('-');
  const std::string_view lo_text = text.substr(0, dash);
  const std::string_view hi_text = dash == std::string_view::npos ? lo_text : text.substr(dash + 1);
  const auto lo = parse_decimal(lo_text, 65535);
  const auto hi = parse_decimal(hi_text, 65535);
  if (!lo || !hi) {
    return bad("not a port or port range 0-65535 (expected e.g. 2222 or 2222-2230)");
  }
  if (*lo > *hi) {
    return bad("range is backwards (" + std::to_string(*lo) + " > " + std::to_string(*hi) + ")");
  }
  // A range written out, the full one too, asks for a protocol with ports.
  return PortRange{static_cast<uint16_t>(*lo), static_cast<uint16_t>(*hi), *lo == 0 && *hi == 65535};
}

Result<uint8_t> parse_proto(std::string_view text, RuleOrigin origin) {
  for (const ProtoName& p : kProtoNames) {
    if (p.name == text) return p.number;
  }
  if (const auto n = parse_decimal(text, 255)) {
    // 0 is "any protocol" to iptables (-p 0) and to socket(2) (IPPROTO_IP),
    // and an unset number in a scheduler's JSON; here it could only be the
    // protocol field 0, IPv6's hop-by-hop header, which the packet parser
    // reads past (it never is a packet's upper-layer protocol). Accepted, a
    // rule meant for every protocol matched none, and its job's traffic fell
    // to the default class unsaid.
    if (*n == 0 && origin == RuleOrigin::kNew) {
      return Result<uint8_t>::failure(
          "proto=" + std::string(text) +
          ": not a protocol psgate can match (0 is IPv6's hop-by-hop header, which it reads past, never "
          "\"any\"); to match every protocol leave proto out");
    }
    return static_cast<uint8_t>(*n);
  }
  return Result<uint8_t>::failure("proto=" + std::string(text) +
                                  ": not a protocol (tcp, udp, sctp, icmp, icmpv6 or 1-255)");
}

// ::ffff:0:0/96, the IPv4-mapped IPv6 addresses (RFC 4291 2.5.5.2).
constexpr unsigned kMappedBits = 96;
bool is_ipv4_mapped(const IpPrefix& p) {
  if (p.family != 6) return false;
  for (unsigned i = 0; i < 10; ++i) {
    if (p.addr[i] != 0) return false;
  }
  return p.addr[10] == 0xff && p.addr[11] == 0xff;
}

const char* proto_name(uint8_t number) {
  for (const ProtoName& p : kProtoNames) {
    if (p.number == number) return p.name.data();  // literals: NUL-terminated
  }
  return nullptr;
}

}  // namespace

Result<IpPrefix> parse_ip_prefix(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return Result<IpPrefix>::failure(quote(text) + " is not an IP prefix: " + why);
  };
  if (text.empty()) return bad("empty (expected e.g. 10.0.0.0/24 or fd00::/64)");

  const size_t slash = text.find('/');
  const std::string addr_text(text.substr(0, slash));
  // inet_pton stops at a NUL; "10.0.0.5\0junk" must not pass as 10.0.0.5.
  if (addr_text.find('\0') != std::string::npos) return bad("contains a NUL byte");
  IpPrefix prefix;
  if (addr_text.find(':') != std::string::npos) {
    prefix.family = 6;
    if (inet_pton(AF_INET6, addr_text.c_str(), prefix.addr.data()) != 1) {
      return bad("bad IPv6 address " + quote(addr_text));
    }
  } else {
    prefix.family = 4;
    if (inet_pton(AF_INET, addr_text.c_str(), prefix.addr.data()) != 1) {
      return bad("bad IPv4 address " + quote(addr_text) + " (expected dotted quad, e.g. 10.0.0.5)");
    }
  }
  const unsigned max_len = prefix.family == 4 ? 32 : 128;
  prefix.length = static_cast<uint8_t>(max_len);
  if (slash != std::string_view::npos) {
    const auto len = parse_decimal(text.substr(slash + 1), max_len);
    if (!len) {
      return bad("prefix length must be a number 0-" + std::to_string(max_len));
    }
    prefix.length = static_cast<uint8_t>(*len);
  }
  const bool mapped = is_ipv4_mapped(prefix);
  if (mapped && prefix.length < kMappedBits) {
    return bad("an IPv4-mapped prefix is /" + std::to_string(kMappedBits) + " (every IPv4 address) or longer");
  }

  // Host bits must be zero: "10.0.0.5/24" is more likely a typo for /32 or
  // for 10.0.0.0/24 than an intent, so say which network it would be.
  IpPrefix network = prefix;
  const unsigned bytes = max_len / 8;
  for (unsigned i = 0; i < bytes; ++i) {
    const int bits_in_byte = static_cast<int>(prefix.length) - static_cast<int>(i * 8);
    const uint8_t mask = bits_in_byte >= 8   ? 0xff
                         : bits_in_byte <= 0 ? 0x00
                                             : static_cast<uint8_t>(0xff << (8 - bits_in_byte));
    network.addr[i] &= mask;
  }
  if (!(network == prefix)) {
    return bad("host bits are set after /" + std::to_string(prefix.length) + " (the network is " + to_string(network) +
               ")");
  }
  if (mapped) {
    // ::ffff:a.b.c.d/96+N is the IPv4 prefix a.b.c.d/N: what a dual-stack
    // scheduler writes for an IPv4 peer (getpeername on an AF_INET6 socket
    // says ::ffff:10.0.0.1). No packet carries it as an IPv6 address (RFC
    // 4291 2.5.5.2: mapped addresses are a host's API form, never sent), so
    // as an IPv6 prefix the rule matched nothing and the job's traffic fell
    // to the default class. Canonical text is the IPv4 form.
    IpPrefix v4;
    v4.family = 4;
    std::copy(prefix.addr.begin() + 12, prefix.addr.end(), v4.addr.begin());
    v4.length = static_cast<uint8_t>(prefix.length - kMappedBits);
    return v4;
  }
  return prefix;
}

Result<MatchRule> parse_match_rule(std::string_view text, RuleOrigin origin) {
  MatchRule rule;
  bool seen_src = false, seen_dst = false, seen_sport = false, seen_dport = false, seen_proto = false;
  bool mapped = false;  // an IPv6-form (::ffff:) prefix read as IPv4
  auto bad = [&](const std::string& why) {
    return Result<MatchRule>::failure("bad match rule " + quote(text) + ": " + why);
  };

  if (trim(text).empty()) return rule;  // matches every IP packet

  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos) comma = text.size();
    const std::string_view item = trim(text.substr(start, comma - start));
    start = comma + 1;

    if (item.empty()) return bad("empty item (stray comma?)");
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return bad(quote(item) + " is not key=value (keys: src, dst, sport, dport, proto)");
    }
    const std::string_view key = trim(item.substr(0, eq));
    const std::string_view value = trim(item.substr(eq + 1));

    auto once = [&](bool& seen) {
      const bool dup = seen;
      seen = true;
      return !dup;
    };
    if (key == "src" || key == "dst") {
      if (!once(key == "src" ? seen_src : seen_dst)) {
        return bad(std::string(key) + " given more than once");
      }
      auto prefix = parse_ip_prefix(value);
      if (!prefix) return bad(std::string(key) + ": " + prefix.error());
      (key == "src" ? rule.src : rule.dst) = *prefix;
      mapped = mapped || (prefix->family == 4 && value.find(':') != std::string_view::npos);
    } else if (key == "sport" || key == "dport") {
      if (!once(key == "sport" ? seen_sport : seen_dport)) {
        return bad(std::string(key) + " given more than once");
      }
      auto range = parse_port_range(key, value);
      if (!range) return bad(range.error());
      (key == "sport" ? rule.sport : rule.dport) = *range;
    } else if (key == "proto") {
      if (!once(seen_proto)) return bad("proto given more than once");
      auto proto = parse_proto(value, origin);
      if (!proto) return bad(proto.error());
      rule.proto = *proto;
    } else {
      return bad("unknown key " + quote(key) + " (keys: src, dst, sport, dport, proto)");
    }
    if (comma == text.size()) break;
  }

  if (rule.src && rule.dst && rule.src->family != rule.dst->family) {
    return bad("src is IPv" + std::to_string(rule.src->family) + " but dst is IPv" + std::to_string(rule.dst->family) +
               "; a rule matches one family" + (mapped ? " (an IPv4-mapped ::ffff: address is IPv4)" : ""));
  }
  if (rule.has_ports() && rule.proto && !protocol_has_ports(*rule.proto)) {
    return bad("sport/dport need proto tcp, udp or sctp (or no proto); proto " + std::to_string(*rule.proto) +
               " has no ports");
  }
  if (rule.proto && *rule.proto == kProtoIcmp && rule.family() == 6) {
    return bad("proto icmp never matches IPv6 (use icmpv6)");
  }
  if (rule.proto && *rule.proto == kProtoIcmpv6 && rule.family() == 4) {
    return bad(std::string("proto icmpv6 never matches IPv4 (use icmp)") +
               (mapped ? "; an IPv4-mapped ::ffff: address is IPv4" : ""));
  }
  return rule;
}

std::string to_string(const IpPrefix& prefix) {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(prefix.family == 6 ? AF_INET6 : AF_INET, prefix.addr.data(), buf, sizeof(buf));
  return std::string(buf) + "/" + std::to_string(prefix.length);
}

std::string to_string(const MatchRule& rule) {
  std::string out;
  auto add = [&](std::string_view key, const std::string& value) {
    if (!out.empty()) out += ',';
    out += key;
    out += '=';
    out += value;
  };
  auto ports = [](const PortRange& r) {
    return r.lo == r.hi ? std::to_string(r.lo) : std::to_string(r.lo) + "-" + std::to_string(r.hi);
  };
  if (rule.src) add("src", to_string(*rule.src));
  if (rule.dst) add("dst", to_string(*rule.dst));
  if (rule.sport.asks_ports()) add("sport", ports(rule.sport));
  if (rule.dport.asks_ports()) add("dport", ports(rule.dport));
  if (rule.proto) {
    const char* name = proto_name(*rule.proto);
    add("proto", name ? std::string(name) : std::to_string(*rule.proto));
  }
  return out;
}

}  // namespace psgate
