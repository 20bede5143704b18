// SPDX-License-Identifier: BSD-3-Clause
// FullReadPages: a full read's page that did not arrive in time is asked
// for again in fewer keys (half those still to read), at one key with a
// longer deadline, up to a bound; pages that arrive well in time grow back.
#include "psgate/full_read_pages.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kMs = 1'000'000;

TEST(FullReadPages, StartsAtTheMostKeysAndTheFirstDeadline) {
  FullReadPages p(128, 2000 * kMs, 16000 * kMs);
  EXPECT_EQ(p.keys(), 128);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  p.arrived(10 * kMs);
  EXPECT_EQ(p.keys(), 128) << "never more than the most";
}

// The CI failure: 210 values of 1.4 MB, 180 MB a page of 128, which a
// loaded etcd did not send within 2 s: every read failed at its first page.
TEST(FullReadPages, ALatePageIsAskedAgainInHalfTheKeysStillToRead) {
  FullReadPages p(128, 2000 * kMs, 16000 * kMs);
  EXPECT_TRUE(p.too_large(210));
  EXPECT_EQ(p.keys(), 64);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs) << "fewer keys first, the deadline stays";
  // Fewer keys left than a page asks for: half of those, not of the page
  // (a page of 64 over 20 keys would be the same 20 again).
  EXPECT_TRUE(p.too_large(20));
  EXPECT_EQ(p.keys(), 10);
  EXPECT_TRUE(p.too_large(0)) << "0: not known, half the page";
  EXPECT_EQ(p.keys(), 5);
}

TEST(FullReadPages, AtOneKeyTheDeadlineDoublesUpToTheBoundThenItGivesUp) {
  FullReadPages p(4, 2000 * kMs, 16000 * kMs);
  EXPECT_TRUE(p.too_large(100));
  EXPECT_EQ(p.keys(), 2);
  EXPECT_TRUE(p.too_large(100));
  EXPECT_EQ(p.keys(), 1);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  EXPECT_TRUE(p.too_large(100));
  EXPECT_EQ(p.deadline_ns(), 4000 * kMs);
  EXPECT_TRUE(p.too_large(100));
  EXPECT_EQ(p.deadline_ns(), 8000 * kMs);
  EXPECT_TRUE(p.too_large(1));
  EXPECT_EQ(p.deadline_ns(), 16000 * kMs);
  EXPECT_FALSE(p.too_large(1)) << "one key at the longest deadline: nothing smaller to ask";
  EXPECT_EQ(p.keys(), 1);
  EXPECT_EQ(p.deadline_ns(), 16000 * kMs);
}

TEST(FullReadPages, PagesWellInTimeGrowBackDeadlineFirst) {
  FullReadPages p(128, 2000 * kMs, 16000 * kMs);
  for (int i = 0; i < 9; ++i) p.too_large(1000);  // 64 32 16 8 4 2 1, then 4 s, 8 s
  ASSERT_EQ(p.keys(), 1);
  ASSERT_EQ(p.deadline_ns(), 8000 * kMs);
  p.arrived(3000 * kMs);  // not within a quarter of 8 s: nothing changes
  EXPECT_EQ(p.deadline_ns(), 8000 * kMs);
  EXPECT_EQ(p.keys(), 1);
  p.arrived(1000 * kMs);
  EXPECT_EQ(p.deadline_ns(), 4000 * kMs) << "the deadline goes back first";
  EXPECT_EQ(p.keys(), 1);
  p.arrived(100 * kMs);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  EXPECT_EQ(p.keys(), 1);
  p.arrived(500 * kMs);  // a quarter of 2 s exactly: not well inside
  EXPECT_EQ(p.keys(), 1);
  int64_t keys = 1;
  for (int i = 0; i < 10; ++i) {
    p.arrived(100 * kMs);
    keys = std::min<int64_t>(128, keys * 2);
    EXPECT_EQ(p.keys(), keys);
  }
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
}

}  // namespace
}  // namespace psgate
