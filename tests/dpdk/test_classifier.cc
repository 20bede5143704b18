// SPDX-License-Identifier: BSD-3-Clause
// Classifier (DPDK ACL) against its semantics and against classify_reference.
// Rules and packets are built as structs: the text parsers are tested elsewhere.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "job_rules.h"
#include "psgate/classifier.h"
#include "psgate/job_matcher.h"

namespace psgate {
namespace {

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;
constexpr uint8_t kIcmp = 1;
constexpr uint8_t kIcmp6 = 58;
constexpr uint32_t kNo = Classifier::kNoMatch;

std::array<uint8_t, 16> addr(const char* text) {
  std::array<uint8_t, 16> a{};
  if (inet_pton(AF_INET, text, a.data()) == 1) return a;
  EXPECT_EQ(inet_pton(AF_INET6, text, a.data()), 1) << text;
  return a;
}

IpPrefix prefix(const char* text, uint8_t len) {
  IpPrefix p;
  p.family = std::string(text).find(':') == std::string::npos ? 4 : 6;
  p.addr = addr(text);
  p.length = len;
  return p;
}

// Chainable rule builder: R().src("10.0.0.0", 8).dport(80).proto(kTcp).
struct R {
  MatchRule m;
  R& src(const char* a, uint8_t len) {
    m.src = prefix(a, len);
    return *this;
  }
  R& dst(const char* a, uint8_t len) {
    m.dst = prefix(a, len);
    return *this;
  }
  // As a rule's text gives them: a range written out, the full one too,
  // asks for ports.
  R& sport(uint16_t lo, uint16_t hi) {
    m.sport = {lo, hi, lo == 0 && hi == 65535};
    return *this;
  }
  R& sport(uint16_t p) { return sport(p, p); }
  R& dport(uint16_t lo, uint16_t hi) {
    m.dport = {lo, hi, lo == 0 && hi == 65535};
    return *this;
  }
  R& dport(uint16_t p) { return dport(p, p); }
  R& proto(uint8_t p) {
    m.proto = p;
    return *this;
  }
  ClassifierRule val(uint32_t v) const { return {m, v}; }
};

enum class Kind { kL4, kNoPorts, kFragment };

ParsedPacket pkt(const char* src, const char* dst, uint8_t proto, uint16_t sport = 0, uint16_t dport = 0,
                 Kind kind = Kind::kL4) {
  ParsedPacket p;
  p.l3 = std::string(src).find(':') == std::string::npos ? L3Kind::kIpv4 : L3Kind::kIpv6;
  p.src = addr(src);
  p.dst = addr(dst);
  p.proto = proto;
  p.has_ports = kind == Kind::kL4;
  p.non_first_fragment = kind == Kind::kFragment;
  // Without an L4 header the port fields must not matter: leave junk in them.
  p.sport = kind == Kind::kL4 ? sport : 0xdead;
  p.dport = kind == Kind::kL4 ? dport : 0xbeef;
  return p;
}

std::unique_ptr<Classifier> must_build(const std::vector<ClassifierRule>& rules, const std::string& name = "t") {
  auto r = Classifier::build(rules, name, 0);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(*r) : nullptr;
}

// Classifies `pkts` in bursts whose sizes cycle through `burst_sizes`.
std::vector<uint32_t> classify_all(const Classifier& c, const std::vector<ParsedPacket>& pkts,
                                   const std::vector<unsigned>& burst_sizes) {
  std::vector<uint32_t> out(pkts.size(), 12345);
  std::vector<const ParsedPacket*> ptrs;
  for (const auto& p : pkts) ptrs.push_back(&p);
  size_t i = 0;
  for (size_t b = 0; i < pkts.size(); ++b) {
    const unsigned n = std::min<size_t>(burst_sizes[b % burst_sizes.size()], pkts.size() - i);
    c.classify(ptrs.data() + i, n, out.data() + i);
    i += n;
  }
  return out;
}

// ---------------------------------------------------------------------------
// Table-driven semantics.

struct Probe {
  const char* what;
  ParsedPacket p;
  uint32_t want;
};

struct Case {
  const char* name;
  std::vector<ClassifierRule> rules;
  std::vector<Probe> probes;
};

std::vector<Case> semantic_cases() {
  return {
      {"empty rule list matches nothing",
       {},
       {{"v4", pkt("10.0.0.1", "10.0.0.2", kTcp, 1, 2), kNo}, {"v6", pkt("fd00::1", "fd00::2", kUdp, 1, 2), kNo}}},
      {"empty rule matches every IP packet",
       {R().val(7)},
       {{"v4 tcp", pkt("10.0.0.1", "10.0.0.2", kTcp, 1, 2), 7},
        {"v6 icmpv6", pkt("fd00::1", "fd00::2", kIcmp6, 0, 0, Kind::kNoPorts), 7},
        {"v4 fragment", pkt("1.2.3.4", "5.6.7.8", kUdp, 0, 0, Kind::kFragment), 7}}},
      {"v4 host and prefix",
       {R().src("10.0.0.5", 32).val(1), R().dst("192.168.0.0", 16).val(2)},
       {{"src host", pkt("10.0.0.5", "1.1.1.1", kTcp, 1, 2), 1},
        {"src neighbour", pkt("10.0.0.4", "1.1.1.1", kTcp, 1, 2), kNo},
        {"dst in /16", pkt("10.0.0.4", "192.168.255.1", kTcp, 1, 2), 2},
        {"dst just outside /16", pkt("10.0.0.4", "192.169.0.0", kTcp, 1, 2), kNo},
        {"v6 never matches v4 rules", pkt("::a00:5", "::c0a8:1", kTcp, 1, 2), kNo}}},
      {"odd prefix lengths",
       {R().src("10.0.0.0", 9).val(1), R().dst("fd00:1234:5600::", 39).val(2),
        R().src("0.0.0.0", 0).dst("172.16.0.0", 12).val(3)},
       {{"/9 inside", pkt("10.127.1.1", "1.1.1.1", kUdp, 1, 2), 1},
        {"/9 outside", pkt("10.128.0.0", "1.1.1.1", kUdp, 1, 2), kNo},
        {"v6 /39 inside", pkt("fd00::1", "fd00:1234:57ff::1", kUdp, 1, 2), 2},
        {"v6 /39 outside", pkt("fd00::1", "fd00:1234:5800::", kUdp, 1, 2), kNo},
        {"v4 /0 src + /12 dst", pkt("8.8.8.8", "172.31.255.255", kIcmp, 0, 0, Kind::kNoPorts), 3},
        {"v4 /12 outside", pkt("8.8.8.8", "172.32.0.0", kUdp, 1, 2), kNo}}},
      {"v6 host and prefixes crossing 32-bit words",
       {R().src("fd00::5", 128).val(1), R().src("fd00:0:0:1::", 64).dst("fd00::", 16).val(2),
        R().dst("2001:db8::", 33).val(3)},
       {{"host", pkt("fd00::5", "::1", kTcp, 1, 2), 1},
        {"host last bit differs", pkt("fd00::4", "::1", kTcp, 1, 2), kNo},
        {"/64 src and /16 dst", pkt("fd00:0:0:1:ffff::1", "fd00:ffff::", kTcp, 1, 2), 2},
        {"/64 src, dst outside", pkt("fd00:0:0:1::1", "fd01::", kTcp, 1, 2), kNo},
        {"/33 in", pkt("::9", "2001:db8:7fff::", kTcp, 1, 2), 3},
        {"/33 out", pkt("::9", "2001:db8:8000::", kTcp, 1, 2), kNo},
        {"v4 never matches v6 rules", pkt("253.0.0.0", "32.1.13.184", kTcp, 1, 2), kNo}}},
      {"no-family rules match both families",
       {R().dport(2222).proto(kTcp).val(4)},
       {{"v4", pkt("10.0.0.1", "10.0.0.2", kTcp, 40000, 2222), 4},
        {"v6", pkt("fd00::1", "fd00::2", kTcp, 40000, 2222), 4},
        {"v6 udp", pkt("fd00::1", "fd00::2", kUdp, 40000, 2222), kNo},
        {"v4 other port", pkt("10.0.0.1", "10.0.0.2", kTcp, 40000, 2223), kNo}}},
      {"port ranges are inclusive and byte-order safe",
       {R().sport(0x0102, 0x0104).val(1), R().dport(2222, 2230).val(2), R().sport(65535).dport(0).val(3)},
       {{"sport lo", pkt("1.1.1.1", "2.2.2.2", kUdp, 0x0102, 9), 1},
        {"sport hi", pkt("1.1.1.1", "2.2.2.2", kUdp, 0x0104, 9), 1},
        {"sport byte-swapped lo (0x0201)", pkt("1.1.1.1", "2.2.2.2", kUdp, 0x0201, 9), kNo},
        {"dport lo", pkt("fd00::1", "fd00::2", kTcp, 9, 2222), 2},
        {"dport hi", pkt("fd00::1", "fd00::2", kTcp, 9, 2230), 2},
        {"dport hi+1", pkt("fd00::1", "fd00::2", kTcp, 9, 2231), kNo},
        {"dport lo-1", pkt("1.1.1.1", "2.2.2.2", kTcp, 9, 2221), kNo},
        {"extremes", pkt("1.1.1.1", "2.2.2.2", kTcp, 65535, 0), 3}}},
      {"proto",
       {R().proto(kUdp).val(1), R().proto(250).val(2)},
       {{"udp", pkt("1.1.1.1", "2.2.2.2", kUdp, 1, 2), 1},
        {"tcp", pkt("1.1.1.1", "2.2.2.2", kTcp, 1, 2), kNo},
        {"proto 250", pkt("fd00::1", "fd00::2", 250, 0, 0, Kind::kNoPorts), 2}}},
      // A port range, even one that holds 0, asks for ports: `dport=0-1023`
      // must not take the hosts' ICMP (they were ports 0/0 once, and did).
      {"packets without ports match no port range",
       {R().dport(1, 65535).val(1), R().dport(0, 10).val(3), R().sport(0).dport(0).val(5), R().proto(kIcmp).val(2),
        R().val(4)},
       {{"icmp skips the port ranges, even 0-10 and 0/0", pkt("1.1.1.1", "2.2.2.2", kIcmp, 0, 0, Kind::kNoPorts), 2},
        {"icmpv6 skips them and the icmp rule", pkt("fd00::1", "fd00::2", kIcmp6, 0, 0, Kind::kNoPorts), 4},
        {"tcp port 5", pkt("1.1.1.1", "2.2.2.2", kTcp, 7, 5), 1},
        {"udp to port 0 takes 0-10", pkt("1.1.1.1", "2.2.2.2", kUdp, 7, 0), 3},
        {"udp 0/0 takes 0-10 first", pkt("fd00::1", "fd00::2", kUdp, 0, 0), 3},
        {"an icmp later fragment skips them too", pkt("1.1.1.1", "2.2.2.2", kIcmp, 0, 0, Kind::kFragment), 2},
        {"a udp later fragment ignores the ranges", pkt("1.1.1.1", "2.2.2.2", kUdp, 0, 0, Kind::kFragment), 1}}},
      // The full range written out asks for ports as well: `dport=0-65535`
      // was taken for "no port key", and the rule for every IP packet.
      {"the full port range asks for ports too",
       {R().src("1.0.0.0", 8).dport(0, 65535).val(1), R().val(4)},
       {{"icmp is not taken", pkt("1.1.1.1", "2.2.2.2", kIcmp, 0, 0, Kind::kNoPorts), 4},
        {"esp is not taken", pkt("1.1.1.1", "2.2.2.2", 50, 0, 0, Kind::kNoPorts), 4},
        {"udp to any port is", pkt("1.1.1.1", "2.2.2.2", kUdp, 7, 65535), 1},
        {"an icmp later fragment is not", pkt("1.1.1.1", "2.2.2.2", kIcmp, 0, 0, Kind::kFragment), 4},
        {"a udp later fragment is", pkt("1.1.1.1", "2.2.2.2", kUdp, 0, 0, Kind::kFragment), 1}}},
      {"non-first fragments ignore ports but not addresses or proto",
       {R().src("10.0.0.0", 8).dport(2222).proto(kUdp).val(1), R().src("fd00::", 8).sport(1, 2).val(2)},
       {{"v4 fragment", pkt("10.1.1.1", "2.2.2.2", kUdp, 0, 0, Kind::kFragment), 1},
        {"v4 fragment other proto", pkt("10.1.1.1", "2.2.2.2", kTcp, 0, 0, Kind::kFragment), kNo},
        {"v4 fragment other src", pkt("11.1.1.1", "2.2.2.2", kUdp, 0, 0, Kind::kFragment), kNo},
        {"v4 first fragment, wrong port", pkt("10.1.1.1", "2.2.2.2", kUdp, 9, 9), kNo},
        {"v6 fragment", pkt("fd12::1", "::2", kTcp, 0, 0, Kind::kFragment), 2},
        {"v6 fragment outside", pkt("fe00::1", "::2", kTcp, 0, 0, Kind::kFragment), kNo},
        {"v6 full packet wrong port", pkt("fd12::1", "::2", kTcp, 3, 3), kNo}}},
      {"first matching rule wins",
       {R().src("10.0.0.5", 32).dport(80).val(10), R().src("10.0.0.0", 24).val(20), R().dport(80).val(30), R().val(40),
        R().src("10.0.0.5", 32).val(50)},
       {{"most specific first", pkt("10.0.0.5", "9.9.9.9", kTcp, 1, 80), 10},
        {"second", pkt("10.0.0.5", "9.9.9.9", kTcp, 1, 81), 20},
        {"third", pkt("10.0.1.5", "9.9.9.9", kTcp, 1, 80), 30},
        {"catch-all shadows the last", pkt("10.0.1.5", "9.9.9.9", kTcp, 1, 81), 40},
        {"catch-all v6", pkt("fd00::1", "fd00::2", kTcp, 1, 81), 40},
        {"fragment of 10.0.0.5 hits first", pkt("10.0.0.5", "9.9.9.9", kTcp, 0, 0, Kind::kFragment), 10}}},
      {"later general rule does not beat an earlier specific one across families",
       {R().dst("fd00::2", 128).val(1), R().val(2)},
       {{"v6 host", pkt("fd00::1", "fd00::2", kUdp, 5, 5), 1},
        {"v4 falls through", pkt("1.1.1.1", "2.2.2.2", kUdp, 5, 5), 2}}},
  };
}

TEST(ClassifierSemantics, TableDriven) {
  for (const Case& tc : semantic_cases()) {
    SCOPED_TRACE(tc.name);
    auto c = must_build(tc.rules);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->rule_count(), tc.rules.size());
    std::vector<ParsedPacket> pkts;
    for (const Probe& pr : tc.probes) pkts.push_back(pr.p);
    // Whole table as one burst, then one packet at a time.
    for (unsigned burst : {64u, 1u}) {
      auto got = classify_all(*c, pkts, {burst});
      for (size_t i = 0; i < tc.probes.size(); ++i) {
        EXPECT_EQ(got[i], tc.probes[i].want) << tc.probes[i].what << " (burst " << burst << ")";
        EXPECT_EQ(classify_reference(tc.rules, tc.probes[i].p), tc.probes[i].want)
            << "reference: " << tc.probes[i].what;
      }
    }
  }
}

TEST(ClassifierSemantics, MalformedAndNonIpNeverMatch) {
  std::vector<ClassifierRule> rules = {R().val(1)};
  auto c = must_build(rules);
  ASSERT_NE(c, nullptr);
  ParsedPacket bad = pkt("1.1.1.1", "2.2.2.2", kTcp, 1, 2);
  bad.malformed = true;
  ParsedPacket non_ip;  // l3 = kNonIp
  std::vector<ParsedPacket> pkts = {bad, non_ip, pkt("1.1.1.1", "2.2.2.2", kTcp, 1, 2)};
  auto got = classify_all(*c, pkts, {3});
  EXPECT_EQ(got, (std::vector<uint32_t>{kNo, kNo, 1}));
  EXPECT_FALSE(rule_matches(rules[0].match, bad));
  EXPECT_FALSE(rule_matches(rules[0].match, non_ip));
}

TEST(ClassifierSemantics, HostBitsInRulePrefixAreIgnored) {
  // IpPrefix promises zero host bits; the classifier must not depend on it.
  ClassifierRule r = R().src("10.0.0.255", 24).val(1);
  auto c = must_build({r});
  ASSERT_NE(c, nullptr);
  auto got = classify_all(*c, {pkt("10.0.0.1", "2.2.2.2", kTcp, 1, 2)}, {1});
  EXPECT_EQ(got[0], 1u);
  EXPECT_EQ(classify_reference(std::vector<ClassifierRule>{r}, pkt("10.0.0.1", "2.2.2.2", kTcp)), 1u);
}

TEST(ClassifierBuild, RejectsInvalidRules) {
  struct Bad {
    const char* what;
    ClassifierRule rule;
  };
  ClassifierRule mixed = R().src("10.0.0.0", 8).dst("fd00::", 8).val(1);
  ClassifierRule long_v4 = R().src("10.0.0.0", 8).val(1);
  long_v4.match.src->length = 33;
  ClassifierRule long_v6 = R().dst("fd00::", 8).val(1);
  long_v6.match.dst->length = 129;
  ClassifierRule bad_family = R().src("10.0.0.0", 8).val(1);
  bad_family.match.src->family = 5;
  ClassifierRule bad_range = R().val(1);
  bad_range.match.dport = {10, 9};
  const Bad table[] = {
      {"value kNoMatch", R().val(kNo)}, {"mixed families", mixed}, {"v4 length 33", long_v4},
      {"v6 length 129", long_v6},       {"family 5", bad_family},  {"port lo > hi", bad_range},
  };
  for (const Bad& b : table) {
    std::vector<ClassifierRule> rules = {R().val(1), b.rule};
    auto r = Classifier::build(rules, "bad", 0);
    EXPECT_FALSE(r.ok()) << b.what;
    EXPECT_FALSE(r.error().empty()) << b.what;
  }
}

TEST(ClassifierBuild, SameNameTwiceGivesIndependentClassifiers) {
  // rte_acl_create hands back an existing context of the same name; the
  // classifier must not end up sharing (and double freeing) tries.
  auto a = must_build({R().val(1)}, "same");
  auto b = must_build({R().val(2)}, "same");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  std::vector<ParsedPacket> pkts = {pkt("1.1.1.1", "2.2.2.2", kTcp, 1, 2),
                                    pkt("fd00::1", "fd00::2", kTcp, 0, 0, Kind::kFragment)};
  EXPECT_EQ(classify_all(*a, pkts, {2}), (std::vector<uint32_t>{1, 1}));
  EXPECT_EQ(classify_all(*b, pkts, {2}), (std::vector<uint32_t>{2, 2}));
  a.reset();
  EXPECT_EQ(classify_all(*b, pkts, {2}), (std::vector<uint32_t>{2, 2}));
}

// ---------------------------------------------------------------------------
// Randomized comparison against the reference.

class RandomRules {
 public:
  explicit RandomRules(uint32_t seed) : rng_(seed) {}

  // Rules drawn from small address / port pools so that they overlap a lot:
  // ordering and shadowing are then exercised, not just disjoint lookups.
  ClassifierRule rule(uint32_t value) {
    MatchRule m;
    const unsigned fam_pick = pick(20);
    const uint8_t fam = fam_pick < 1 ? 0 : (fam_pick < 10 ? 4 : 6);
    if (fam != 0) {
      const unsigned which = pick(3);  // 0 src, 1 dst, 2 both
      if (which != 1) m.src = random_prefix(fam);
      if (which != 0) m.dst = random_prefix(fam);
    }
    m.sport = random_range();
    m.dport = random_range();
    if (pick(10) < 6) m.proto = random_proto(fam);
    // A rule without a prefix longer than the pool's 16-bit "site" part (in
    // particular a family-less one) covers a whole family; early in the list
    // it would shadow, and so hide, most rules after it. Narrow it to a few
    // destination ports.
    const bool broad = (!m.src || m.src->length < 16) && (!m.dst || m.dst->length < 16);
    if (broad) {
      const uint16_t p = random_port();
      m.dport = {p, static_cast<uint16_t>(std::min(65535u, p + pick(3)))};
    }
    return {m, value};
  }

  ParsedPacket packet(const std::vector<ClassifierRule>& rules) {
    ParsedPacket p;
    const bool from_rule = !rules.empty() && pick(10) < 6;
    const MatchRule* m = from_rule ? &rules[pick(rules.size())].match : nullptr;
    uint8_t fam = m != nullptr ? m->family() : 0;
    if (fam == 0) fam = pick(2) ? 4 : 6;
    p.l3 = fam == 4 ? L3Kind::kIpv4 : L3Kind::kIpv6;
    p.src = random_addr(fam, m != nullptr ? m->src : std::nullopt);
    p.dst = random_addr(fam, m != nullptr ? m->dst : std::nullopt);
    p.proto = (m != nullptr && m->proto && pick(10) < 8) ? *m->proto : random_proto(fam);
    const unsigned kind = pick(20);
    if (kind == 0) {
      p.non_first_fragment = true;
    } else if (kind == 1 || p.proto == kIcmp || p.proto == kIcmp6) {
      p.has_ports = false;
    } else {
      p.has_ports = true;
      p.sport = m != nullptr ? port_in(m->sport) : random_port();
      p.dport = m != nullptr ? port_in(m->dport) : random_port();
    }
    if (!p.has_ports) {
      p.sport = static_cast<uint16_t>(rng_());  // junk: must be ignored
      p.dport = static_cast<uint16_t>(rng_());
    }
    return p;
  }

  unsigned pick(size_t n) { return static_cast<unsigned>(rng_() % n); }

 private:
  IpPrefix random_prefix(uint8_t fam) {
    IpPrefix p;
    p.family = fam;
    const unsigned max = fam == 4 ? 32 : 128;
    const unsigned r = pick(10);
    // Mostly hosts and subnets below the pool's 16-bit "site" part; a few
    // short prefixes (down to /0) that cover every site.
    p.length = static_cast<uint8_t>(r < 5 ? max : (r < 9 ? 16 + pick(max - 15) : pick(16)));
    p.addr = pool_addr(fam);
    for (unsigned bit = p.length; bit < 128; ++bit) p.addr[bit / 8] &= ~(0x80 >> (bit % 8));
    return p;
  }

  std::array<uint8_t, 16> pool_addr(uint8_t fam) {
    // A few "sites" differing in a few high bits, random host parts.
    std::array<uint8_t, 16> a{};
    const unsigned n = fam == 4 ? 4 : 16;
    for (unsigned i = 0; i < n; ++i) a[i] = static_cast<uint8_t>(rng_());
    a[0] = fam == 4 ? static_cast<uint8_t>(10 + pick(3)) : 0xfd;
    a[1] = static_cast<uint8_t>(pick(4));
    if (fam == 6) a[7] = static_cast<uint8_t>(pick(4));  // a word boundary
    if (pick(2)) a[n - 1] = static_cast<uint8_t>(pick(4));
    return a;
  }

  std::array<uint8_t, 16> random_addr(uint8_t fam, const std::optional<IpPrefix>& inside) {
    std::array<uint8_t, 16> a = pool_addr(fam);
    if (inside && pick(10) < 9) {
      for (unsigned bit = 0; bit < inside->length; ++bit) {
        const uint8_t mask = static_cast<uint8_t>(0x80 >> (bit % 8));
        a[bit / 8] = static_cast<uint8_t>((a[bit / 8] & ~mask) | (inside->addr[bit / 8] & mask));
      }
    }
    if (fam == 4) std::fill(a.begin() + 4, a.end(), 0);
    return a;
  }

  PortRange random_range() {
    const unsigned r = pick(10);
    if (r < 5) return {};
    if (r < 8) {
      const uint16_t p = random_port();
      return {p, p};
    }
    // Mostly narrow ranges, occasionally a wide one.
    const uint16_t lo = random_port();
    const uint32_t width = pick(10) == 0 ? rng_() % 65536 : pick(2000);
    return {lo, static_cast<uint16_t>(std::min<uint32_t>(65535, lo + width))};
  }

  uint16_t random_port() {
    static constexpr uint16_t kPool[] = {0, 1, 80, 443, 2222, 2223, 2230, 0x0102, 0x0201, 65535};
    return pick(2) ? kPool[pick(std::size(kPool))] : static_cast<uint16_t>(rng_());
  }

  uint16_t port_in(const PortRange& r) {
    if (pick(10) == 0) return random_port();
    return static_cast<uint16_t>(r.lo + pick(uint32_t{r.hi} - r.lo + 1));
  }

  uint8_t random_proto(uint8_t fam) {
    static constexpr uint8_t kPool[] = {kTcp, kUdp, kTcp, kUdp, 132, kIcmp, kIcmp6};
    (void)fam;
    return pick(8) ? kPool[pick(std::size(kPool))] : static_cast<uint8_t>(rng_());
  }

  std::mt19937 rng_;
};

TEST(ClassifierRandom, MatchesReference) {
  RandomRules gen(20240611);
  for (unsigned n_rules : {1u, 50u, 2000u}) {
    SCOPED_TRACE("rules=" + std::to_string(n_rules));
    std::vector<ClassifierRule> rules;
    for (uint32_t i = 0; i < n_rules; ++i) rules.push_back(gen.rule(1000 + i));
    const auto t0 = std::chrono::steady_clock::now();
    auto c = must_build(rules, "rand");
    const auto t1 = std::chrono::steady_clock::now();
    ASSERT_NE(c, nullptr);
    std::printf("[ info     ] %u random rules built in %lld ms\n", n_rules,
                static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count()));

    const size_t n_pkts = n_rules >= 2000 ? 30000 : 5000;
    std::vector<ParsedPacket> pkts;
    for (size_t i = 0; i < n_pkts; ++i) pkts.push_back(gen.packet(rules));

    std::vector<unsigned> bursts;
    for (unsigned b = 1; b <= 64; ++b) bursts.push_back(b);
    std::shuffle(bursts.begin(), bursts.end(), std::mt19937(n_rules));
    const auto got = classify_all(*c, pkts, bursts);

    size_t mismatches = 0;
    size_t matched = 0;
    std::set<uint32_t> winners;
    for (size_t i = 0; i < pkts.size(); ++i) {
      const uint32_t want = classify_reference(rules, pkts[i]);
      matched += want != kNo;
      winners.insert(want);
      if (got[i] != want && ++mismatches <= 10) {
        ADD_FAILURE() << "packet " << i << ": got " << got[i] << " want " << want << " (l3=" << int(pkts[i].l3)
                      << " proto=" << int(pkts[i].proto) << " frag=" << pkts[i].non_first_fragment
                      << " ports=" << pkts[i].has_ports << ")";
      }
    }
    EXPECT_EQ(mismatches, 0u);
    // The generator must actually exercise matches, or the comparison is vacuous.
    EXPECT_GT(matched, pkts.size() / 4);
    EXPECT_LT(matched, pkts.size());
    // ... and many different rules must win, or shadowing hid most of the list.
    EXPECT_GT(winners.size(), std::min<size_t>(n_rules, 1000) / 2);
    std::printf("[ info     ] %u rules: %zu/%zu packets matched, %zu distinct winners\n", n_rules, matched, pkts.size(),
                winners.size());
  }
}

TEST(ClassifierScale, HundredThousandRules) {
  // Job rules in practice: host or subnet prefixes plus a port or port range.
  RandomRules gen(7);
  constexpr uint32_t kRules = 100000;
  std::vector<ClassifierRule> rules;
  for (const MatchRule& m : pkt::job_like_rules(kRules)) rules.push_back({m, static_cast<uint32_t>(rules.size())});
  const auto t0 = std::chrono::steady_clock::now();
  auto c = must_build(rules, "big");
  const auto t1 = std::chrono::steady_clock::now();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->rule_count(), kRules);

  std::vector<ParsedPacket> pkts;
  for (int i = 0; i < 3000; ++i) pkts.push_back(gen.packet(rules));
  const auto got = classify_all(*c, pkts, {32});
  size_t matched = 0;
  for (size_t i = 0; i < pkts.size(); ++i) {
    const uint32_t want = classify_reference(rules, pkts[i]);
    matched += want != kNo;
    ASSERT_EQ(got[i], want) << "packet " << i;
  }
  EXPECT_GT(matched, pkts.size() / 4);
  std::printf("[ info     ] %u rules built in %lld ms; %zu of %zu sampled packets matched\n", kRules,
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(t1 - t0).count()), matched,
              pkts.size());
}

// The partitioned matcher (job_matcher.h) gives exactly what one classifier
// of all rules, in the same order, gives: the first partition with a match
// wins, and within it the first matching rule. Overlapping random rules make
// later partitions' rules shadowed by earlier ones, which is what this checks.
TEST(JobMatcherRandom, PartitionsMatchOneListInOrder) {
  RandomRules gen(424242);
  std::vector<ClassifierRule> rules;
  for (uint32_t i = 0; i < 2000; ++i) rules.push_back(gen.rule(i));
  std::mt19937 rng(5);
  for (unsigned max_part : {5u, 40u, 300u, 2000u}) {
    SCOPED_TRACE("partition size up to " + std::to_string(max_part));
    std::vector<RulePartition> parts;
    for (size_t at = 0; at < rules.size();) {
      const size_t n = std::min<size_t>(rules.size() - at, 1 + rng() % max_part);
      std::vector<ClassifierRule> part(rules.begin() + at, rules.begin() + at + n);
      auto c = must_build(part, "part");
      ASSERT_NE(c, nullptr);
      parts.push_back(RulePartition{static_cast<uint32_t>(parts.size()), {}, std::move(c)});
      at += n;
    }
    const JobMatcher matcher(std::move(parts));
    EXPECT_EQ(matcher.rule_count(), rules.size());
    std::vector<ParsedPacket> pkts;
    for (int i = 0; i < 4000; ++i) pkts.push_back(gen.packet(rules));
    std::vector<const ParsedPacket*> ptrs;
    for (const auto& p : pkts) ptrs.push_back(&p);
    // Bursts of every size up to 64, and one larger than the matcher's chunk.
    std::vector<uint32_t> got(pkts.size(), 12345);
    size_t i = 0;
    for (unsigned b = 1; i < pkts.size(); b = b % 70 + 1) {
      const unsigned n = static_cast<unsigned>(std::min<size_t>(b, pkts.size() - i));
      matcher.classify(&ptrs[i], n, &got[i]);
      i += n;
    }
    size_t matched = 0, mismatches = 0;
    for (size_t k = 0; k < pkts.size(); ++k) {
      const uint32_t want = classify_reference(rules, pkts[k]);
      matched += want != kNo;
      if (got[k] != want && ++mismatches <= 5)
        ADD_FAILURE() << "packet " << k << ": got " << got[k] << " want " << want;
    }
    EXPECT_EQ(mismatches, 0u);
    EXPECT_GT(matched, pkts.size() / 4);
  }
}

TEST(JobMatcherRandom, EmptyMatcherMatchesNothing) {
  const JobMatcher matcher;
  ParsedPacket p = pkt("10.0.0.1", "10.0.0.2", kTcp, 1, 2);
  const ParsedPacket* ptr = &p;
  uint32_t out = 7;
  matcher.classify(&ptr, 1, &out);
  EXPECT_EQ(out, kNo);
}

}  // namespace
}  // namespace psgate
