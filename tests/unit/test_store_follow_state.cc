// SPDX-License-Identifier: BSD-3-Clause
// StoreFollowState: a watch that ends while the store still answers (cancelled
// for silence, or compacted) leaves the gateway connected but its view not
// current, until the next watch is created; the policy leader acts only on a
// current view.
#include "psgate/store_follow_state.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

TEST(StoreFollowState, CurrentOnlyWhileAWatchFollowsTheView) {
  StoreFollowState s;
  EXPECT_FALSE(s.connected());
  EXPECT_FALSE(s.view_current());
  s.read_whole();
  EXPECT_TRUE(s.connected());
  EXPECT_FALSE(s.view_current()) << "read, but no watch yet: changes after the read are not delivered";
  s.watch_created(100, 100);
  EXPECT_TRUE(s.connected());
  EXPECT_TRUE(s.view_current());
}

// The auditor's case: a watch cancelled for silence or compaction ended the
// watch loop without clearing "connected", so the leader ranked on the old
// view (jobs, order) until the prefix was read again and a watch created.
TEST(StoreFollowState, AWatchCancelledWhileTheStoreAnswersLeavesTheViewStale) {
  StoreFollowState s;
  s.read_whole();
  s.watch_created(100, 100);
  s.watch_ended();  // cancelled: silent, or compacted
  EXPECT_TRUE(s.connected()) << "the store still answers";
  EXPECT_FALSE(s.view_current()) << "nothing after the view is delivered any more";
  s.read_whole();
  EXPECT_FALSE(s.view_current()) << "read again, the watch not yet created";
  s.watch_created(100, 100);
  EXPECT_TRUE(s.view_current());
}

// The auditor's case: a watch created behind the store's head (written to
// since the read) may be cancelled "compacted" by etcd's sync loop ~100 ms
// after its "created" reply. Taken as current at creation, the leader ranked
// on the old view in between. It is current once the watch delivered
// something (etcd checks the compaction before it sends a watch anything).
TEST(StoreFollowState, AWatchBehindTheStoreIsCurrentOnlyOnceItDelivers) {
  StoreFollowState s;
  s.read_whole();
  EXPECT_FALSE(s.watch_created(105, 100)) << "the store moved on since the read: a compaction may cancel it";
  EXPECT_TRUE(s.connected());
  EXPECT_FALSE(s.view_current());
  EXPECT_TRUE(s.watch_delivered()) << "its first delivery makes the view current";
  EXPECT_TRUE(s.view_current());
  EXPECT_FALSE(s.watch_delivered()) << "current already: nothing newly current";
  EXPECT_TRUE(s.view_current());

  // Compacted before it delivered anything: never current.
  s.watch_ended();
  s.read_whole();
  EXPECT_FALSE(s.watch_created(200, 150));
  s.watch_ended();
  EXPECT_FALSE(s.view_current());
  EXPECT_FALSE(s.watch_delivered()) << "no watch in place: nothing delivered makes the view current";
  EXPECT_FALSE(s.view_current());

  // At the store's head: current at once (no compaction cancels a synced watch).
  s.read_whole();
  EXPECT_TRUE(s.watch_created(300, 300));
  EXPECT_TRUE(s.view_current());
  EXPECT_FALSE(s.watch_delivered());
}

TEST(StoreFollowState, AStoreLostIsNeitherConnectedNorCurrent) {
  StoreFollowState s;
  s.read_whole();
  s.watch_created(100, 100);
  s.lost();
  EXPECT_FALSE(s.connected());
  EXPECT_FALSE(s.view_current());
  s.read_whole();
  EXPECT_TRUE(s.connected());
  EXPECT_FALSE(s.view_current());
}

}  // namespace
}  // namespace psgate
