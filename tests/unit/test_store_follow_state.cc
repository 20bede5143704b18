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
  s.watch_created();
  EXPECT_TRUE(s.connected());
  EXPECT_TRUE(s.view_current());
}

// The auditor's case: a watch cancelled for silence or compaction ended the
// watch loop without clearing "connected", so the leader ranked on the old
// view (jobs, order) until the prefix was read again and a watch created.
TEST(StoreFollowState, AWatchCancelledWhileTheStoreAnswersLeavesTheViewStale) {
  StoreFollowState s;
  s.read_whole();
  s.watch_created();
  s.watch_ended();  // cancelled: silent, or compacted
  EXPECT_TRUE(s.connected()) << "the store still answers";
  EXPECT_FALSE(s.view_current()) << "nothing after the view is delivered any more";
  s.read_whole();
  EXPECT_FALSE(s.view_current()) << "read again, the watch not yet created";
  s.watch_created();
  EXPECT_TRUE(s.view_current());
}

TEST(StoreFollowState, AStoreLostIsNeitherConnectedNorCurrent) {
  StoreFollowState s;
  s.read_whole();
  s.watch_created();
  s.lost();
  EXPECT_FALSE(s.connected());
  EXPECT_FALSE(s.view_current());
  s.read_whole();
  EXPECT_TRUE(s.connected());
  EXPECT_FALSE(s.view_current());
}

}  // namespace
}  // namespace psgate
