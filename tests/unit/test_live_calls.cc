// SPDX-License-Identifier: BSD-3-Clause
// LiveCalls: a stop cancels every call in flight and every one started
// after it; a call that ended is never touched.
#include "psgate/live_calls.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

struct FakeCall {
  int cancels = 0;
  void TryCancel() { ++cancels; }
};

TEST(LiveCalls, StopCancelsEveryCallInFlightOnce) {
  LiveCalls<FakeCall> calls;
  FakeCall a, b;
  calls.enter(a);
  calls.enter(b);
  EXPECT_EQ(calls.in_flight(), 2u);
  EXPECT_EQ(a.cancels, 0) << "nothing is cancelled before a stop";
  calls.stop();
  EXPECT_TRUE(calls.stopped());
  EXPECT_EQ(a.cancels, 1);
  EXPECT_EQ(b.cancels, 1);
  calls.leave(a);
  calls.leave(b);
}

TEST(LiveCalls, ACallThatEndedIsNotTouchedByTheStop) {
  LiveCalls<FakeCall> calls;
  FakeCall ended;
  calls.enter(ended);
  calls.leave(ended);
  EXPECT_EQ(calls.in_flight(), 0u);
  calls.stop();
  EXPECT_EQ(ended.cancels, 0);
}

TEST(LiveCalls, ACallStartedAfterTheStopIsCancelledAsItStarts) {
  LiveCalls<FakeCall> calls;
  calls.stop();
  FakeCall late;
  calls.enter(late);
  EXPECT_EQ(late.cancels, 1) << "a call begun after a stop must not wait for its deadline";
  EXPECT_EQ(calls.in_flight(), 0u) << "and is not kept: it may end before the registry does";
  calls.leave(late);
  calls.stop();
  EXPECT_EQ(late.cancels, 1);
}

}  // namespace
}  // namespace psgate
