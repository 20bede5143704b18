// SPDX-License-Identifier: BSD-3-Clause
// The ACL alone: Classifier::classify (one DPDK ACL) and JobMatcher::classify
// (rules in partitions, as a snapshot holds them before the background merge)
// over bursts of ParsedPackets, the flow cache's misses in the RX stage.
//
// Rules are what jobs carry (pkt::job_like_rules, the set
// tests/dpdk/test_classifier.cc's HundredThousandRules checks): host or subnet prefixes, a third of them IPv6,
// with a port or port range and mostly a protocol. 7 packets in 8 are made to
// match a random rule, the rest match none (unclassified traffic walks the
// whole trie too).
#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "job_rules.h"
#include "micro.h"
#include "psgate/classifier.h"
#include "psgate/job_matcher.h"

namespace psgate::micro {

namespace {

constexpr uint8_t kTcp = 6;
constexpr uint8_t kUdp = 17;

std::vector<ClassifierRule> make_rules(uint32_t n) {
  std::vector<ClassifierRule> rules;
  rules.reserve(n);
  for (const MatchRule& m : pkt::job_like_rules(n)) rules.push_back({m, static_cast<uint32_t>(rules.size())});
  return rules;
}

// A packet inside `r` (host bits, free ports and the other address random).
ParsedPacket matching(const MatchRule& r, std::mt19937& rng) {
  ParsedPacket p;
  const IpPrefix& pre = r.src ? *r.src : *r.dst;
  p.l3 = pre.family == 6 ? L3Kind::kIpv6 : L3Kind::kIpv4;
  p.l3_offset = 14;
  auto& mine = r.src ? p.src : p.dst;
  auto& other = r.src ? p.dst : p.src;
  mine = pre.addr;
  const unsigned bytes = pre.family == 6 ? 16 : 4;
  for (unsigned bit = pre.length; bit < bytes * 8; ++bit)
    if (rng() & 1) mine[bit / 8] |= static_cast<uint8_t>(0x80 >> (bit % 8));
  for (unsigned b = 0; b < bytes; ++b) other[b] = static_cast<uint8_t>(rng());
  if (pre.family == 6) other[0] = 0xfd;
  else other[0] = 10;
  p.proto = r.proto ? *r.proto : (rng() & 1 ? kTcp : kUdp);
  p.has_ports = true;
  auto in = [&rng](const PortRange& pr) {
    return static_cast<uint16_t>(pr.lo + rng() % (static_cast<uint32_t>(pr.hi - pr.lo) + 1));
  };
  p.sport = in(r.sport);
  p.dport = in(r.dport);
  return p;
}

// 4,096 packets (a working set well beyond one burst), 1 in 8 matching nothing:
// an address in 192.168/16 or fd99::/16, which no rule holds.
std::vector<ParsedPacket> make_packets(const std::vector<ClassifierRule>& rules) {
  std::mt19937 rng(7);
  std::vector<ParsedPacket> pkts;
  for (unsigned i = 0; i < 4096; ++i) {
    ParsedPacket p = matching(rules[rng() % rules.size()].match, rng);
    if (i % 8 == 7) {
      if (p.l3 == L3Kind::kIpv4) p.src = p.dst = {192, 168, static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng())};
      else p.src[1] = p.dst[1] = 0x99;
    }
    pkts.push_back(p);
  }
  return pkts;
}

// Built on first use and kept: a 100,000-rule ACL takes seconds to build.
// Never freed: the EAL's memory goes with the process.
struct RuleSet {
  std::vector<ClassifierRule> rules;
  std::vector<ParsedPacket> pkts;
  const Classifier* one = nullptr;      // every rule in one ACL
  const JobMatcher* matcher = nullptr;  // partitions of `partition` rules, when asked for
};

// nullptr, with the reason in `error`, when an ACL could not be built.
const RuleSet* rule_set(uint32_t n, uint32_t partition, std::string& error) {
  auto fail = [&error](const std::string& why) -> const RuleSet* {
    error = why;
    return nullptr;
  };
  static std::map<std::pair<uint32_t, uint32_t>, RuleSet*> sets;
  const auto key = std::make_pair(n, partition);
  if (auto it = sets.find(key); it != sets.end()) return it->second;
  auto* s = new RuleSet;
  s->rules = make_rules(n);
  s->pkts = make_packets(s->rules);
  // Short: the classifier adds ".<serial>.<suffix>" within DPDK's 32 bytes.
  const std::string name = "m" + std::to_string(n) + (partition ? "p" : "");
  if (partition == 0) {
    auto c = Classifier::build(s->rules, name, SOCKET_ID_ANY);
    if (!c) return fail(c.error());
    s->one = c->release();
  } else {
    std::vector<RulePartition> parts;
    for (uint32_t at = 0; at < n; at += partition) {
      const uint32_t len = std::min(partition, n - at);
      std::vector<ClassifierRule> part(s->rules.begin() + at, s->rules.begin() + at + len);
      auto c = Classifier::build(part, name + "_" + std::to_string(parts.size()), SOCKET_ID_ANY);
      if (!c) return fail(c.error());
      parts.push_back(RulePartition{static_cast<uint32_t>(parts.size()), {}, std::move(*c)});
    }
    s->matcher = new JobMatcher(std::move(parts));
  }
  return sets[key] = s;
}

template <typename Matcher>
void run(benchmark::State& state, const RuleSet& s, const Matcher& m) {
  std::vector<const ParsedPacket*> ptrs;
  for (const auto& p : s.pkts) ptrs.push_back(&p);
  uint32_t out[kBurst];
  size_t at = 0;
  uint64_t matched = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    m.classify(&ptrs[at], kBurst, out);
    at = (at + kBurst) % ptrs.size();
    for (uint32_t v : out) matched += v != Classifier::kNoMatch;
    benchmark::DoNotOptimize(out);
  }
  pp.finish();
  state.counters["match_ratio"] = static_cast<double>(matched) / (static_cast<double>(state.iterations()) * kBurst);
}

void bench_classifier(benchmark::State& state, uint32_t rules) {
  std::string error;
  const RuleSet* s = rule_set(rules, 0, error);
  if (s == nullptr) return state.SkipWithError(error.c_str());
  run(state, *s, *s->one);
}

void bench_matcher(benchmark::State& state, uint32_t rules, uint32_t partition) {
  std::string error;
  const RuleSet* s = rule_set(rules, partition, error);
  if (s == nullptr) return state.SkipWithError(error.c_str());
  run(state, *s, *s->matcher);
}

}  // namespace

void register_classify() {
  benchmark::RegisterBenchmark("acl/classifier/1_rule", bench_classifier, 1u);
  benchmark::RegisterBenchmark("acl/classifier/1k_rules", bench_classifier, 1000u);
  benchmark::RegisterBenchmark("acl/classifier/100k_rules", bench_classifier, 100000u);
  // 10 partitions of 100 rules, as 10 jobs of 100 rules each hold them
  // until the background merge: a packet visits partitions until one
  // matches, so an unmatched one pays for all 10.
  benchmark::RegisterBenchmark("acl/job_matcher/1k_rules_10_partitions", bench_matcher, 1000u, 100u);
}

}  // namespace psgate::micro
