// SPDX-License-Identifier: BSD-3-Clause
// The network-control limit (control_limit.h) with a hand-ticked clock: what
// a flood gets through is the burst plus the rate times the time, charged on
// the wire's bytes; what passes keeps its order; what it drops is exactly
// the rest.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "psgate/control_limit.h"

namespace psgate {
namespace {

constexpr uint64_t kHz = 1'000'000;  // ticks of 1 us

struct Frame {
  uint32_t id = 0;
  uint32_t len = 0;
};

uint32_t frame_len(const Frame& f) { return f.len; }

TEST(ControlLimit, OffByDefaultAndWithRateZero) {
  ControlLimit none;
  EXPECT_FALSE(none.on);
  ControlLimit zero(0, 4096, 24, kHz, 0);
  EXPECT_FALSE(zero.on);
  ControlLimit some(1000, 4096, 24, kHz, 0);
  EXPECT_TRUE(some.on);
}

TEST(ControlLimit, AFloodGetsTheBurstThenTheRateOnTheWiresBytes) {
  // 1,000 B/s with a 1,000-byte burst; 64-byte frames charged 64 + 36 = 100.
  ControlLimit limit(1000, 1000, 36, kHz, 0);
  unsigned passed = 0;
  for (unsigned i = 0; i < 100; ++i) passed += limit.admit(64, 0);
  EXPECT_EQ(passed, 10u) << "a full bucket of 1,000 bytes holds ten 100-byte charges";
  // 0.5 s later: 500 bytes earned, five frames.
  passed = 0;
  for (unsigned i = 0; i < 100; ++i) passed += limit.admit(64, kHz / 2);
  EXPECT_EQ(passed, 5u);
  // An hour later the bucket is full again, no fuller.
  passed = 0;
  for (unsigned i = 0; i < 100; ++i) passed += limit.admit(64, 3600 * kHz);
  EXPECT_EQ(passed, 10u);
}

TEST(ControlLimit, LongRunRateIsExactUnderASteadyFlood) {
  // 10 Mbit/s = 1,250,000 B/s, 128 KiB burst, 88-byte charges (64 + 24),
  // offered at 1 frame a microsecond (88 MB/s, 70 times the rate) for 2 s.
  ControlLimit limit(1'250'000, 128 * 1024, 24, kHz, 0);
  uint64_t bytes = 0;
  for (uint64_t t = 0; t < 2 * kHz; ++t) bytes += limit.admit(64, t) ? 88 : 0;
  const uint64_t most = 128 * 1024 + 2 * 1'250'000;
  EXPECT_LE(bytes, most);
  EXPECT_GE(bytes + 88, most) << "the limit passes its whole rate, not less";
}

TEST(ControlLimit, PoliceKeepsThePassingInOrderAndDropsExactlyTheRest) {
  // 300-byte burst, no overhead: two 100-byte frames leave 100 bytes, a
  // 200-byte frame is refused and the 50-byte frames after it pass.
  ControlLimit limit(100, 300, 0, kHz, 0);
  const std::vector<Frame> in = {{1, 100}, {2, 100}, {3, 200}, {4, 50}, {5, 100}, {6, 50}};
  std::vector<Frame> items = in;
  Frame dropped[8];
  unsigned n_dropped = 0;
  const unsigned kept = limit.police(items.data(), 6, 0, frame_len, dropped, n_dropped);
  ASSERT_EQ(kept, 4u);
  const uint32_t kept_ids[] = {1, 2, 4, 6};
  for (unsigned i = 0; i < kept; ++i) EXPECT_EQ(items[i].id, kept_ids[i]);
  ASSERT_EQ(n_dropped, 2u);
  EXPECT_EQ(dropped[0].id, 3u);
  EXPECT_EQ(dropped[1].id, 5u);
  // One second later (100 bytes earned): the next burst's first frame passes.
  items = in;
  n_dropped = 0;
  EXPECT_EQ(limit.police(items.data(), 6, kHz, frame_len, dropped, n_dropped), 1u);
  EXPECT_EQ(items[0].id, 1u);
  EXPECT_EQ(n_dropped, 5u);
}

TEST(ControlLimit, PoliceOfAMixedRunKeepsOtherClassesUnchargedAndInOrder) {
  // The run-to-completion burst: class 0 frames among others (kOtherClass),
  // which pass whatever their size and cost the bucket nothing.
  ControlLimit limit(100, 300, 0, kHz, 0);
  const std::vector<Frame> in = {{1, 100}, {2, 9000}, {3, 200}, {4, 200}, {5, 9000}, {6, 50}};
  const bool control[] = {true, false, true, true, false, true};
  std::vector<Frame> items = in;
  std::vector<uint32_t> dropped;
  const unsigned kept = limit.police(
      6, 0, [&](unsigned i) { return control[in[i].id - 1] ? items[i].len : ControlLimit::kOtherClass; },
      [&](unsigned from, unsigned to) { items[to] = items[from]; },
      [&](unsigned i) { dropped.push_back(items[i].id); });
  ASSERT_EQ(kept, 4u);
  const uint32_t kept_ids[] = {1, 2, 3, 5};
  for (unsigned i = 0; i < kept; ++i) EXPECT_EQ(items[i].id, kept_ids[i]);
  EXPECT_EQ(dropped, (std::vector<uint32_t>{4, 6}));
}

TEST(ControlLimit, AFrameLargerThanTheBurstPassesAtTheRate) {
  // As any of psgate's buckets: a frame over the burst conforms on a full
  // bucket and is repaid by later refills, so it is never refused for good.
  ControlLimit limit(1000, 500, 0, kHz, 0);
  EXPECT_TRUE(limit.admit(1500, 0));
  EXPECT_FALSE(limit.admit(1500, kHz / 2));  // 500 earned repay the debt only
  EXPECT_TRUE(limit.admit(1500, 2 * kHz));
}

TEST(ControlLimit, AClockThatStepsBackEarnsNothing) {
  ControlLimit limit(1000, 100, 0, kHz, 10 * kHz);
  EXPECT_TRUE(limit.admit(100, 10 * kHz));
  EXPECT_FALSE(limit.admit(100, 10 * kHz - 5));
  EXPECT_FALSE(limit.admit(100, 10 * kHz + kHz / 20));  // 50 bytes earned
  EXPECT_TRUE(limit.admit(100, 10 * kHz + kHz / 10));
}

}  // namespace
}  // namespace psgate
