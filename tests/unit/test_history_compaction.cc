// SPDX-License-Identifier: BSD-3-Clause
// HistoryCompaction: the leader compacts the history before the revision it
// saw one period earlier, and goes on doing so after the store started over
// (wiped, or restored from a snapshot: its revisions restart low) and in a
// later term.
#include "psgate/history_compaction.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kS = 1'000'000'000;

TEST(HistoryCompaction, EachPeriodCompactsBeforeTheRevisionSeenOnePeriodEarlier) {
  HistoryCompaction c(2 * kS);
  EXPECT_EQ(c.due(0, 100, 10 * kS), 0) << "the first step only takes a mark";
  EXPECT_EQ(c.due(0, 150, 11 * kS), 0) << "within the period";
  EXPECT_EQ(c.due(0, 300, 12 * kS), 100);
  c.compacted(0, 100);
  EXPECT_EQ(c.due(0, 500, 14 * kS), 300);
  c.compacted(0, 300);
  // An idle store: the mark is where it was compacted to, nothing to do.
  EXPECT_EQ(c.due(0, 500, 16 * kS), 500);
  c.compacted(0, 500);
  EXPECT_EQ(c.due(0, 500, 18 * kS), 0) << "already compacted to 500";
}

TEST(HistoryCompaction, NeverWhenNotConfigured) {
  HistoryCompaction c(0);
  for (uint64_t t = 0; t < 10; ++t) EXPECT_EQ(c.due(0, 100 + static_cast<int64_t>(t), t * kS), 0);
}

// The auditor's case: compacted to ~3014, then the store's data wiped and
// etcd restarted at the same endpoint ("revision went back from 3018 to
// 2"): the new store's history must be compacted too, long before it
// passes revision 3014 again (it would reach etcd's space quota first).
TEST(HistoryCompaction, AStoreThatStartedOverIsCompactedFromItsOwnRevisions) {
  HistoryCompaction c(2 * kS);
  (void)c.due(0, 3000, 0);
  ASSERT_EQ(c.due(0, 3014, 2 * kS), 3000);
  c.compacted(0, 3000);
  ASSERT_EQ(c.due(0, 3018, 4 * kS), 3014);
  c.compacted(0, 3014);
  // Epoch 1: the store started over.
  EXPECT_EQ(c.due(1, 2, 6 * kS), 0) << "a mark of the old store is no revision of this one";
  EXPECT_EQ(c.due(1, 40, 8 * kS), 2);
  c.compacted(1, 2);
  EXPECT_EQ(c.due(1, 90, 10 * kS), 40) << "compaction goes on in the new store, below the old store's 3014";
}

// Compacted in an earlier term, then the store replaced while another
// gateway led, and leading again: nothing of the earlier term holds back
// the new one, and its first period starts from what it sees now.
TEST(HistoryCompaction, ANewTermStartsAfresh) {
  HistoryCompaction c(2 * kS);
  (void)c.due(0, 2000, 0);
  ASSERT_EQ(c.due(0, 3014, 2 * kS), 2000);
  c.compacted(0, 3014);  // someone compacted further
  (void)c.due(0, 3018, 4 * kS);
  c.restart();
  EXPECT_EQ(c.due(0, 3100, 100 * kS), 0) << "a new term's first step only takes a mark";
  EXPECT_EQ(c.due(0, 3200, 102 * kS), 3100);
}

}  // namespace
}  // namespace psgate
