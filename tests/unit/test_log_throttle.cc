// SPDX-License-Identifier: BSD-3-Clause
// LogThrottle: a storm of one event (clients that never read, SIGHUPs in a
// loop, a failure at every round) is one log line per interval, and each
// line says how many it stands for.
#include "psgate/log_throttle.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kS = 1'000'000'000;

TEST(LogThrottle, TheFirstIsSaidAtOnceEvenAtTimeZero) {
  LogThrottle t(1 * kS);
  EXPECT_TRUE(t.admit(0)) << "a clock at 0 is not 'said before'";
  EXPECT_EQ(t.held_back(), 0u);
  EXPECT_FALSE(t.admit(1));
}

TEST(LogThrottle, AStormIsOneLinePerIntervalCountingWhatItHeldBack) {
  LogThrottle t(1 * kS);
  uint64_t said = 0;
  // 1,000 events 10 ms apart: 10 s.
  for (uint64_t i = 0; i < 1000; ++i) {
    if (t.admit(100 * kS + i * 10'000'000)) {
      ++said;
      if (said > 1) {
        EXPECT_EQ(t.held_back(), 99u) << "the 99 between two lines a second apart";
      }
    }
  }
  EXPECT_EQ(said, 10u);
  EXPECT_EQ(t.total(), 1000u);
}

TEST(LogThrottle, ALineIsDueAgainExactlyOneIntervalLater) {
  LogThrottle t(60 * kS);
  ASSERT_TRUE(t.admit(5 * kS));
  EXPECT_FALSE(t.admit(65 * kS - 1));
  EXPECT_TRUE(t.admit(65 * kS));
  EXPECT_EQ(t.held_back(), 1u);
  EXPECT_TRUE(t.admit(200 * kS)) << "a quiet spell: said at once";
  EXPECT_EQ(t.held_back(), 0u);
  EXPECT_EQ(t.total(), 4u);
}

// A link that flaps: the line of the first change, then nothing within the
// interval, then, once it is due and whether or not the state changes
// again, one line for what the held-back changes left.
TEST(LogThrottle, CatchUpSaysOnceWhatTheHeldBackOccurrencesLeft) {
  LogThrottle t(1 * kS);
  EXPECT_FALSE(t.catch_up(0)) << "nothing held back";
  ASSERT_TRUE(t.admit(10 * kS));
  EXPECT_FALSE(t.catch_up(12 * kS)) << "nothing held back: the last line still tells";
  ASSERT_TRUE(t.admit(20 * kS));
  for (uint64_t i = 1; i <= 5; ++i) EXPECT_FALSE(t.admit(20 * kS + i * 100'000'000));
  EXPECT_FALSE(t.catch_up(21 * kS - 1)) << "not due yet";
  EXPECT_TRUE(t.catch_up(21 * kS));
  EXPECT_EQ(t.held_back(), 5u);
  EXPECT_FALSE(t.catch_up(30 * kS)) << "said once";
  EXPECT_EQ(t.total(), 7u) << "a catch-up line is not an occurrence";
  EXPECT_FALSE(t.admit(21 * kS + 1)) << "an interval after the catch-up line";
}

}  // namespace
}  // namespace psgate
