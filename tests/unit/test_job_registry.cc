// SPDX-License-Identifier: BSD-3-Clause
// JobRegistry's rule partitions (job_matcher.h relies on them): jobs fill
// the newest partition, partitions stay in age order, removals thin them
// and a thin partition joins its older neighbour.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "psgate/job_registry.h"

namespace psgate {
namespace {

JobRecord job(uint32_t id, size_t rules) {
  JobRecord j;
  j.spec.id = id;
  for (size_t r = 0; r < rules; ++r) {
    MatchRule m;
    m.dport = {static_cast<uint16_t>(r), static_cast<uint16_t>(r)};
    j.spec.match.push_back(m);
  }
  return j;
}

// Partition -> rules, and a check that partition numbers grow with age.
std::map<uint32_t, size_t> partitions_in_age_order(const JobRegistry& reg) {
  std::vector<const JobRecord*> jobs = reg.in_rank_order();
  std::sort(jobs.begin(), jobs.end(), [](auto* a, auto* b) { return a->sequence < b->sequence; });
  EXPECT_EQ(jobs, reg.in_age_order()) << "in_age_order is the order of sequence";
  std::map<uint32_t, size_t> rules;
  uint32_t last = 0;
  for (const JobRecord* j : jobs) {
    EXPECT_GE(j->partition, last) << "job " << j->spec.id << " is in an older partition than an older job";
    last = j->partition;
    rules[j->partition] += j->spec.match.size();
  }
  return rules;
}

TEST(JobRegistryPartitions, JobsFillTheNewestPartitionInAgeOrder) {
  JobRegistry reg(4096);
  const size_t per_job = 100;
  const uint32_t jobs = 100;  // 10,000 rules
  for (uint32_t id = 1; id <= jobs; ++id) ASSERT_TRUE(reg.add(job(id, per_job), std::nullopt));
  const auto rules = partitions_in_age_order(reg);
  const size_t per_partition = kRulesPerPartition / per_job;  // whole jobs that fit
  EXPECT_EQ(rules.size(), (jobs + per_partition - 1) / per_partition);
  for (const auto& [id, n] : rules) EXPECT_LE(n, kRulesPerPartition) << "partition " << id;
  EXPECT_EQ(reg.partition_count(), rules.size());
  // A re-rank moves nothing between partitions.
  const uint32_t before = reg.find(50)->partition;
  ASSERT_TRUE(reg.set_rank(50, 0));
  EXPECT_EQ(reg.find(50)->partition, before);
}

TEST(JobRegistryPartitions, AJobLargerThanAPartitionGetsItsOwn) {
  JobRegistry reg(16);
  ASSERT_TRUE(reg.add(job(1, 10), std::nullopt));
  ASSERT_TRUE(reg.add(job(2, kRulesPerPartition + 5), std::nullopt));
  ASSERT_TRUE(reg.add(job(3, 10), std::nullopt));
  EXPECT_NE(reg.find(1)->partition, reg.find(2)->partition);
  EXPECT_NE(reg.find(2)->partition, reg.find(3)->partition);
  partitions_in_age_order(reg);
}

TEST(JobRegistryPartitions, RemovalsThinPartitionsAndThinOnesJoinTheirOlderNeighbour) {
  JobRegistry reg(4096);
  const size_t per_job = kRulesPerPartition / 4;
  for (uint32_t id = 1; id <= 40; ++id) ASSERT_TRUE(reg.add(job(id, per_job), std::nullopt));
  ASSERT_EQ(reg.partition_count(), 10u);
  // Removing one job of a partition leaves the others where they were.
  const uint32_t p2 = reg.find(2)->partition;
  ASSERT_TRUE(reg.remove(1));
  EXPECT_EQ(reg.find(2)->partition, p2);
  EXPECT_EQ(reg.partition_count(), 10u);
  // Keep one job in every partition: 10 partitions for what fits in 3.
  for (uint32_t id = 1; id <= 40; ++id)
    if (id % 4 != 0 && reg.find(id)) {
      ASSERT_TRUE(reg.remove(id));
    }
  EXPECT_EQ(reg.size(), 10u);
  EXPECT_LE(reg.partition_count(), 4u) << "thin partitions join their older neighbours";
  const auto rules = partitions_in_age_order(reg);
  size_t total = 0;
  for (const auto& [id, n] : rules) total += n;
  EXPECT_EQ(total, 10 * per_job);
  // Jobs added later still land after every existing one.
  ASSERT_TRUE(reg.add(job(100, 1), std::nullopt));
  partitions_in_age_order(reg);
}

// A job added without a rank goes after every job, even when the last one
// has the largest rank there is (it once wrapped round to rank 0, the top).
TEST(JobRegistry, AJobAddedWithoutARankGoesLastEvenAfterTheLargestRank) {
  JobRegistry reg(8);
  ASSERT_TRUE(reg.add(job(1, 1), 0));
  ASSERT_TRUE(reg.add(job(2, 1), UINT32_MAX));
  ASSERT_TRUE(reg.add(job(3, 1), std::nullopt));
  const std::vector<const JobRecord*> order = reg.in_rank_order();
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order[0]->spec.id, 1u);
  EXPECT_EQ(order[1]->spec.id, 2u);
  EXPECT_EQ(order[2]->spec.id, 3u);
}

// A full two-slot registry whose job 1 was just removed: its slot, slot1, drains.
class JobRegistryDraining : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reg.add(job(1, 1), std::nullopt));
    ASSERT_TRUE(reg.add(job(2, 1), std::nullopt));
    slot1 = reg.find(1)->slot;
    ASSERT_TRUE(reg.remove(1));
  }
  JobRegistry reg{2};
  uint32_t slot1 = 0;
};

// A removed job's slot drains: it is handed to no new job, even in a full
// table, until released (the control plane releases it once the removed
// job's queued packets have left); then it is free like any other.
TEST_F(JobRegistryDraining, ARemovedJobsSlotIsGivenToNoJobUntilReleased) {
  EXPECT_EQ(reg.draining_slots(), std::vector<uint32_t>{slot1});
  bool no_slot = false;
  auto refused = reg.add(job(3, 1), std::nullopt, &no_slot);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(no_slot);
  EXPECT_NE(refused.error().find("1 of them wait for a removed job's queued packets"), std::string::npos)
      << refused.error();
  JobRecord unnamed = job(4, 1);
  unnamed.spec.name = std::string("bad\x01name");  // refused for its name, whatever the slots
  EXPECT_FALSE(reg.add(unnamed, std::nullopt, &no_slot));
  EXPECT_FALSE(no_slot) << "a refusal for the name is not a wait for a slot";
  reg.release_slot(slot1 ^ 1);  // a slot in use: not released
  EXPECT_FALSE(reg.add(job(3, 1), std::nullopt));
  reg.release_slot(slot1);
  EXPECT_TRUE(reg.draining_slots().empty());
  auto added = reg.add(job(3, 1), std::nullopt);
  ASSERT_TRUE(added) << added.error();
  EXPECT_EQ((*added)->slot, slot1);
}

// With free slots elsewhere, a draining slot is passed over where
// round-robin would otherwise have reached it.
TEST(JobRegistrySlots, RoundRobinPassesOverADrainingSlot) {
  JobRegistry reg(3);
  ASSERT_TRUE(reg.add(job(1, 1), std::nullopt));  // slot 0
  ASSERT_TRUE(reg.add(job(2, 1), std::nullopt));  // slot 1
  ASSERT_TRUE(reg.remove(1));
  ASSERT_TRUE(reg.add(job(3, 1), std::nullopt));  // slot 2
  ASSERT_TRUE(reg.remove(2));
  auto added = reg.add(job(4, 1), std::nullopt);  // round-robin wraps to 0: draining, as is 1
  EXPECT_FALSE(added) << "slot " << (*added)->slot;
  reg.release_slot(1);
  added = reg.add(job(4, 1), std::nullopt);
  ASSERT_TRUE(added) << added.error();
  EXPECT_EQ((*added)->slot, 1u);
  EXPECT_EQ(reg.draining_slots(), std::vector<uint32_t>{0});
}

// A job added again while its old slot drains (its rules changed: removed
// and added, in one change or two) gets that slot back: the packets queued
// there are its own. Any other job still waits for it.
TEST_F(JobRegistryDraining, AJobAddedAgainTakesBackTheSlotItsRemovalLeftDraining) {
  EXPECT_FALSE(reg.add(job(3, 1), std::nullopt)) << "another job waits for the slot";
  EXPECT_TRUE(reg.drains_for(slot1, 1));
  EXPECT_FALSE(reg.drains_for(slot1, 3));
  EXPECT_FALSE(reg.drains_for(slot1 ^ 1, 2)) << "in use, not draining";
  auto again = reg.add(job(1, 2), std::nullopt);
  ASSERT_TRUE(again) << again.error();
  EXPECT_EQ((*again)->slot, slot1);
  EXPECT_TRUE(reg.draining_slots().empty());
  EXPECT_FALSE(reg.drains_for(slot1, 1));
  reg.release_slot(slot1);  // a slot in use again: nothing happens
  EXPECT_FALSE(reg.add(job(3, 1), std::nullopt));
  EXPECT_EQ(reg.find(1)->slot, slot1);
}

}  // namespace
}  // namespace psgate
