// SPDX-License-Identifier: BSD-3-Clause
// A job match rule as the operator writes it:
//   "src=10.0.0.5/32,sport=2222,proto=tcp"
//   "dst=fd00::5/128,dport=2222-2230,proto=udp"
// Keys: src, dst (IPv4 or IPv6 prefix; a bare address means a host prefix;
// an IPv4-mapped ::ffff:a.b.c.d/96+N is the IPv4 prefix a.b.c.d/N), sport,
// dport (port or lo-hi range; 0 is port 0, not "any"), proto (tcp, udp,
// sctp, icmp, icmpv6 or a number 1-255; 0 is refused). Every key is
// optional, each at most once; an empty rule matches every IP packet. src
// and dst, when both given, share one family.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psgate/result.h"

namespace psgate {

struct IpPrefix {
  uint8_t family = 4;              // 4 or 6
  std::array<uint8_t, 16> addr{};  // network byte order; IPv4 uses [0..3]
  uint8_t length = 0;              // prefix length in bits; host bits are zero
  bool operator==(const IpPrefix&) const = default;
};

struct PortRange {
  uint16_t lo = 0;
  uint16_t hi = 65535;
  // "sport=0-65535" written out: any port, but ports there must be (a
  // protocol with ports). Set only for the full range; any other range asks
  // for ports anyway.
  bool stated = false;
  bool is_any() const { return lo == 0 && hi == 65535; }
  // Whether the rule this belongs to matches only packets with ports.
  bool asks_ports() const { return stated || !is_any(); }
  bool operator==(const PortRange&) const = default;
};

struct MatchRule {
  std::optional<IpPrefix> src;
  std::optional<IpPrefix> dst;
  PortRange sport;
  PortRange dport;
  std::optional<uint8_t> proto;
  bool operator==(const MatchRule&) const = default;

  // 4 or 6 when a prefix pins the family, 0 when the rule fits both.
  uint8_t family() const {
    if (src) return src->family;
    if (dst) return dst->family;
    return 0;
  }
  bool has_ports() const { return sport.asks_ports() || dport.asks_ports(); }
};

// The upper-layer protocols whose header starts with ports (TCP, UDP, SCTP):
// the parser reads ports for exactly these, and a rule's port range can match
// no other (not even a later fragment's, which carries no L4 header).
inline constexpr bool protocol_has_ports(uint8_t proto) { return proto == 6 || proto == 17 || proto == 132; }

// Where a rule's text comes from. A new rule (the config file, jobs.add,
// psgatectl, a cluster store's job document) is refused when it cannot mean
// what it says (proto=0). A rule an older psgate accepted and kept in its
// state file is read as it ran (proto=0: the protocol field 0): refused, the
// upgraded gateway would not start, and a bump in the wire that does not
// start forwards nothing.
enum class RuleOrigin { kNew, kStored };

Result<MatchRule> parse_match_rule(std::string_view text, RuleOrigin origin = RuleOrigin::kNew);
Result<IpPrefix> parse_ip_prefix(std::string_view text);

// Canonical text form; parse_match_rule(to_string(r)) == r.
std::string to_string(const MatchRule& rule);
std::string to_string(const IpPrefix& prefix);

// A job's match rules. Copies share one list: a job's rules never change
// once it is added, yet the control plane copies its whole state for every
// change (control_plane.h), and with 100,000 rules a deep copy cost
// milliseconds per re-rank. The first change to a shared list copies it.
class RuleList {
 public:
  RuleList() = default;
  RuleList(std::vector<MatchRule> rules) : rules_(std::make_shared<std::vector<MatchRule>>(std::move(rules))) {}
  RuleList(std::initializer_list<MatchRule> rules) : RuleList(std::vector<MatchRule>(rules)) {}

  void push_back(const MatchRule& rule) { own().push_back(rule); }
  size_t size() const { return rules_ ? rules_->size() : 0; }
  bool empty() const { return size() == 0; }
  const MatchRule& operator[](size_t i) const { return (*rules_)[i]; }
  const MatchRule* begin() const { return rules_ ? rules_->data() : nullptr; }
  const MatchRule* end() const { return rules_ ? rules_->data() + rules_->size() : nullptr; }
  bool operator==(const RuleList& other) const {
    return rules_ == other.rules_ || std::equal(begin(), end(), other.begin(), other.end());
  }

 private:
  std::vector<MatchRule>& own() {
    if (!rules_) rules_ = std::make_shared<std::vector<MatchRule>>();
    else if (rules_.use_count() > 1) rules_ = std::make_shared<std::vector<MatchRule>>(*rules_);
    return *rules_;
  }
  std::shared_ptr<std::vector<MatchRule>> rules_;
};

}  // namespace psgate
