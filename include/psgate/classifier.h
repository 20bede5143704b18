// SPDX-License-Identifier: BSD-3-Clause
// Rule matcher: an ordered list of match rules (first matching rule wins),
// compiled into DPDK ACL tries (IPv4, IPv6, and address-only variants for
// non-first fragments). Immutable once built: the control plane builds a new
// one and publishes it with the rest of a snapshot.
//
// Matching semantics (shared with rule_matches, the reference):
//   - a rule pinned to a family (by a prefix) only matches that family;
//   - src/dst prefixes, proto and port ranges must all hold;
//   - a packet without ports (ICMP, GRE, ESP, ...) matches no rule with a
//     port range (even one that holds 0), only rules without one;
//   - a non-first fragment ignores the rule's port ranges (no L4 header).
// Only IP packets that are not malformed are classified.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "psgate/match_rule.h"
#include "psgate/packet_parser.h"
#include "psgate/result.h"

struct rte_acl_ctx;

namespace psgate {

struct ClassifierRule {
  MatchRule match;
  uint32_t value;  // returned on match (a job slot); must not be kNoMatch
};

bool rule_matches(const MatchRule& rule, const ParsedPacket& pkt);
// Linear scan with the same semantics: the reference for tests.
uint32_t classify_reference(std::span<const ClassifierRule> rules, const ParsedPacket& pkt);

class Classifier {
 public:
  static constexpr uint32_t kNoMatch = UINT32_MAX;

  // Needs an initialised EAL (ACL memory comes from rte_malloc). `name` must be
  // unique among live classifiers (DPDK names ACL contexts).
  static Result<std::unique_ptr<Classifier>> build(std::span<const ClassifierRule> rules, const std::string& name,
                                                   int socket_id);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // pkts[i] must be IP and not malformed; n <= 64. out[i] = value or kNoMatch.
  void classify(const ParsedPacket* const pkts[], unsigned n, uint32_t out[]) const;

  size_t rule_count() const { return rule_count_; }

 private:
  Classifier() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t rule_count_ = 0;
};

}  // namespace psgate
