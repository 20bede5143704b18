// SPDX-License-Identifier: BSD-3-Clause
// The snapshot's rule matcher: the jobs' rules split into partitions, each a
// Classifier (DPDK ACL) of its own, so that a change rebuilds one partition
// rather than every rule (issue 12: 100,000 rules, a job added in
// milliseconds).
//
// Partitions follow job age: a job joins the newest partition while that has
// room (JobRegistry assigns it), so every job in partition k is older than
// every job in partition k+1. First match wins across all rules in job-age
// order; with age-ordered partitions that is "the first partition with a
// match, and its first matching rule", so a packet stops at the first
// partition that matches it. Immutable once built; partitions that did not
// change are shared between snapshots.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "psgate/classifier.h"

namespace psgate {

// What a partition was built from, to tell whether the next snapshot can
// reuse it: its jobs in age order.
struct PartitionMember {
  uint32_t slot = 0;
  uint64_t sequence = 0;
  bool operator==(const PartitionMember&) const = default;
};

struct RulePartition {
  uint32_t id = 0;  // the registry's partition number: the age order
  std::vector<PartitionMember> members;
  // Built from the members' rules (values are job slots). A member's rules
  // never change while it keeps its sequence: a job is immutable once added.
  std::shared_ptr<const Classifier> classifier;
};

// Old partitions merged into one classifier in the background (control/
// rule_merger.h): the same rules in the same order, so the same results,
// with one ACL where there were many. Valid while the partitions up to
// `last_partition` hold exactly `members`; a job removed from one of them
// makes it stale (the snapshot then goes back to the partitions themselves,
// which it keeps).
struct MergedRules {
  uint32_t last_partition = 0;
  std::vector<PartitionMember> members;  // in age order
  std::shared_ptr<const Classifier> classifier;
};

class JobMatcher {
 public:
  JobMatcher() = default;
  explicit JobMatcher(std::vector<RulePartition> partitions) : partitions_(std::move(partitions)) {}

  // As Classifier::classify: pkts[i] IP and not malformed; out[i] = job slot
  // or Classifier::kNoMatch. Any n (handled in chunks of 64).
  void classify(const ParsedPacket* const pkts[], unsigned n, uint32_t out[]) const;

  const std::vector<RulePartition>& partitions() const { return partitions_; }
  size_t rule_count() const;

 private:
  std::vector<RulePartition> partitions_;  // ascending id
};

}  // namespace psgate
