// SPDX-License-Identifier: BSD-3-Clause
// LiveCalls: a stop cancels every call in flight and every one started
// after it; a call that ended is never touched.
#include "psgate/live_calls.h"

#include <gtest/gtest.h>

#include <optional>

namespace psgate {
namespace {

struct FakeCall {
  int cancels = 0;
  void TryCancel() { ++cancels; }
};

TEST(LiveCalls, StopCancelsEveryCallInFlightOnce) {
  LiveCalls<FakeCall> calls;
  FakeCall a, b;
  LiveCall<FakeCall> ga(calls, a);
  LiveCall<FakeCall> gb(calls, b);
  EXPECT_EQ(calls.in_flight(), 2u);
  EXPECT_EQ(a.cancels, 0) << "nothing is cancelled before a stop";
  calls.stop();
  EXPECT_TRUE(calls.stopped());
  EXPECT_EQ(a.cancels, 1);
  EXPECT_EQ(b.cancels, 1);
}

TEST(LiveCalls, ACallThatEndedIsNotTouchedByTheStop) {
  LiveCalls<FakeCall> calls;
  FakeCall ended;
  { LiveCall<FakeCall> g(calls, ended); }
  EXPECT_EQ(calls.in_flight(), 0u);
  calls.stop();
  EXPECT_EQ(ended.cancels, 0);
}

TEST(LiveCalls, ACallStartedAfterTheStopIsCancelledAsItStarts) {
  LiveCalls<FakeCall> calls;
  calls.stop();
  FakeCall late;
  std::optional<LiveCall<FakeCall>> g;
  g.emplace(calls, late);
  EXPECT_EQ(late.cancels, 1) << "a call begun after a stop must not wait for its deadline";
  EXPECT_EQ(calls.in_flight(), 0u) << "and is not kept: it may end before the registry does";
  g.reset();
  calls.stop();
  EXPECT_EQ(late.cancels, 1);
}

}  // namespace
}  // namespace psgate
