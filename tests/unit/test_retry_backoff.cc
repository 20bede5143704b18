// SPDX-License-Identifier: BSD-3-Clause
// RetryBackoff: a cluster view that fails to apply is not rebuilt every
// second (each try held the control thread for seconds, and the control
// socket stopped answering while the store held it).
#include "psgate/retry_backoff.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kS = 1'000'000'000;

TEST(RetryBackoff, TheSameContentWaitsLongerEachTimeUpToTheMax) {
  RetryBackoff<int> r(1 * kS, 8 * kS);
  uint64_t now = 100 * kS;
  EXPECT_TRUE(r.may_try(7, now)) << "nothing failed yet";
  const uint64_t expected[] = {1, 2, 4, 8, 8};
  for (uint64_t wait_s : expected) {
    ASSERT_TRUE(r.may_try(7, now));
    EXPECT_EQ(r.failed(7, now), wait_s * kS);
    EXPECT_FALSE(r.may_try(7, now + wait_s * kS - 1));
    now += wait_s * kS;
  }
  EXPECT_TRUE(r.may_try(7, now));
}

TEST(RetryBackoff, OtherContentIsTriedAtOnceAndStartsAfresh) {
  RetryBackoff<int> r(1 * kS, 60 * kS);
  (void)r.failed(7, 0);
  (void)r.failed(7, 1 * kS);  // 2 s
  EXPECT_FALSE(r.may_try(7, 2 * kS));
  EXPECT_FALSE(r.may_try(8, 2 * kS - 1)) << "nothing within the first backoff of a failure";
  EXPECT_TRUE(r.may_try(8, 2 * kS)) << "the store changed: tried once a second has passed";
  EXPECT_FALSE(r.may_try(7, 2 * kS)) << "the failed content still waits its own backoff";
  EXPECT_EQ(r.failed(8, 2 * kS), 1 * kS) << "a new content's first failure waits the first backoff";
  EXPECT_FALSE(r.may_try(8, 2 * kS + 1));
}

TEST(RetryBackoff, ASuccessForgetsTheFailure) {
  RetryBackoff<int> r(1 * kS, 60 * kS);
  (void)r.failed(7, 0);
  (void)r.failed(7, 1 * kS);
  r.succeeded();
  EXPECT_TRUE(r.may_try(7, 1 * kS));
  EXPECT_EQ(r.failed(7, 1 * kS), 1 * kS) << "failing again after a success starts at the first backoff";
}

}  // namespace
}  // namespace psgate
