// SPDX-License-Identifier: BSD-3-Clause
// FullReadPages: a full read's page that did not arrive in time is asked
// for again in fewer keys (half those still to read), at one key with a
// longer deadline, up to a bound; pages that arrive well in time grow back;
// pages start small and never hold more than a page's bytes of values.
#include "psgate/full_read_pages.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kPageBytes = 64ull << 20;

TEST(FullReadPages, NeverAsksForMoreThanTheMostKeys) {
  FullReadPages p(128, 128, kPageBytes, 2000 * kMs, 16000 * kMs);
  EXPECT_EQ(p.keys(), 128);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  p.arrived(10 * kMs, p.keys(), p.keys() * 1000);
  EXPECT_EQ(p.keys(), 128) << "never more than the most";
}

// The CI failure: 210 values of 1.4 MB, 180 MB a page of 128, which a
// loaded etcd did not send within 2 s: every read failed at its first page.
TEST(FullReadPages, ALatePageIsAskedAgainInHalfTheKeysStillToRead) {
  FullReadPages p(128, 128, kPageBytes, 2000 * kMs, 16000 * kMs);
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
  FullReadPages p(4, 4, kPageBytes, 2000 * kMs, 16000 * kMs);
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
  FullReadPages p(128, 128, kPageBytes, 2000 * kMs, 16000 * kMs);
  for (int i = 0; i < 9; ++i) p.too_large(1000);  // 64 32 16 8 4 2 1, then 4 s, 8 s
  ASSERT_EQ(p.keys(), 1);
  ASSERT_EQ(p.deadline_ns(), 8000 * kMs);
  p.arrived(3000 * kMs, p.keys(), p.keys() * 1000);  // not within a quarter of 8 s: nothing changes
  EXPECT_EQ(p.deadline_ns(), 8000 * kMs);
  EXPECT_EQ(p.keys(), 1);
  p.arrived(1000 * kMs, p.keys(), p.keys() * 1000);
  EXPECT_EQ(p.deadline_ns(), 4000 * kMs) << "the deadline goes back first";
  EXPECT_EQ(p.keys(), 1);
  p.arrived(100 * kMs, p.keys(), p.keys() * 1000);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  EXPECT_EQ(p.keys(), 1);
  p.arrived(500 * kMs, p.keys(), p.keys() * 1000);  // a quarter of 2 s exactly: not well inside
  EXPECT_EQ(p.keys(), 1);
  int64_t keys = 1;
  for (int i = 0; i < 10; ++i) {
    p.arrived(100 * kMs, p.keys(), p.keys() * 1000);
    keys = std::min<int64_t>(128, keys * 2);
    EXPECT_EQ(p.keys(), keys);
  }
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
}

TEST(FullReadPages, StartsSmallAndDoublesWhilePagesArriveInTime) {
  FullReadPages p(16, 128, kPageBytes, 2000 * kMs, 16000 * kMs);
  EXPECT_EQ(p.keys(), 16);
  EXPECT_EQ(p.deadline_ns(), 2000 * kMs);
  p.arrived(100 * kMs, 16, 16 * 2000);
  EXPECT_EQ(p.keys(), 32);
  p.arrived(700 * kMs, 32, 32 * 2000);  // not well inside 2 s: stays
  EXPECT_EQ(p.keys(), 32);
  p.arrived(100 * kMs, 32, 32 * 2000);
  p.arrived(100 * kMs, 64, 64 * 2000);
  p.arrived(100 * kMs, 128, 128 * 2000);
  EXPECT_EQ(p.keys(), 128);
}

// 6 MB values (an etcd with --max-request-bytes raised): the first page of
// 16 keys is 96 MB; from then on a page holds at most 64 MiB of them.
TEST(FullReadPages, APageHoldsAtMostItsBytesAtTheLargestKeysSeen) {
  FullReadPages p(16, 128, kPageBytes, 2000 * kMs, 16000 * kMs);
  p.arrived(100 * kMs, 16, 16 * 6'000'000);
  EXPECT_EQ(p.keys(), 11) << "64 MiB of 6 MB keys";
  // Smaller keys after: the largest seen still bounds the page.
  p.arrived(100 * kMs, 11, 11 * 1000);
  EXPECT_EQ(p.keys(), 11);
  // One key larger than the page bytes: one key a page.
  p.arrived(100 * kMs, 1, 200'000'000);
  EXPECT_EQ(p.keys(), 1);
  // An empty page (the prefix's end) changes nothing of the size.
  p.arrived(100 * kMs, 0, 10);
  EXPECT_EQ(p.keys(), 1);
}

}  // namespace
}  // namespace psgate
