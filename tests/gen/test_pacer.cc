// SPDX-License-Identifier: BSD-3-Clause
// Pacer and JobDriver on an injected clock: long-run rate, burst cap,
// iteration phases. Simulated time only; nothing here measures real time.
#include <gtest/gtest.h>

#include <random>

#include "job_driver.h"
#include "pacer.h"

namespace psgate::gen {
namespace {

constexpr uint64_t kHz = 2'500'000'000;  // a 2.5 GHz TSC

struct RateCase {
  const char* what;
  uint64_t rate;                // units per second
  uint64_t depth;               // units
  std::vector<uint64_t> costs;  // cycled per item (1 = a packet; bits for bit rates)
  uint64_t max_poll_ns;         // the loop polls at random intervals up to this
};

// The loop a TX lcore runs: refill once per round, take what the credit allows.
uint64_t simulate(const RateCase& c, double seconds, uint64_t seed, uint64_t* items = nullptr) {
  std::mt19937_64 rng(seed);
  Pacer p(c.rate, kHz, c.depth, 0);
  const uint64_t end = static_cast<uint64_t>(seconds * kHz);
  uint64_t units = 0, n = 0;
  size_t next = 0;
  for (uint64_t now = 0; now < end;) {
    now += 1 + rng() % (c.max_poll_ns * kHz / 1'000'000'000);
    p.refill(now);
    while (p.try_take(c.costs[next])) {
      units += c.costs[next];
      next = (next + 1) % c.costs.size();
      ++n;
    }
  }
  if (items) *items = n;
  return units;
}

TEST(Pacer, LongRunRateWithinPointOnePercent) {
  const RateCase cases[] = {
      // Polls come at random intervals below the time the depth lasts, as
      // for a TX loop that is never preempted longer than that.
      {"10 kpps", 10'000, 32, {1}, 2'000'000},
      {"1.234567 Mpps", 1'234'567, 64, {1}, 40'000},
      {"14.88 Mpps", 14'880'952, 512, {1}, 30'000},
      {"9.5 Gbit/s imix", 9'500'000'000, 32 * 1514 * 8, {60 * 8, 590 * 8, 60 * 8, 1514 * 8}, 30'000},
      {"100 Mbit/s 1514 B", 100'000'000, 32 * 1514 * 8, {1514 * 8}, 2'000'000},
      {"1 kpps", 1'000, 32, {1}, 10'000'000},
  };
  for (const RateCase& c : cases) {
    const double seconds = 10;
    const double want = static_cast<double>(c.rate) * seconds;
    const double got = static_cast<double>(simulate(c, seconds, 1));
    EXPECT_NEAR(got / want, 1.0, 0.001) << c.what << ": " << got << " units, want " << want;
    // Never ahead of the rate by more than the depth.
    EXPECT_LE(got, want + static_cast<double>(c.depth)) << c.what;
  }
}

TEST(Pacer, ExactArithmeticOnOddClocks) {
  // 3 ticks per second, 7 units per second: 3 ticks give exactly 7.
  Pacer p(7, 3, 100, 0);
  p.refill(3);
  EXPECT_EQ(p.available(), 7u);
  p.refill(4);  // + 7/3 units: 9.33
  EXPECT_EQ(p.available(), 9u);
  p.refill(6);
  EXPECT_EQ(p.available(), 14u);
}

TEST(Pacer, DepthCapsTheBurstAfterIdle) {
  Pacer p(1'000'000, kHz, 48, 0);
  p.refill(kHz * 5);  // 5 s idle: 5 M units earned, 48 kept
  EXPECT_EQ(p.available(), 48u);
  int burst = 0;
  while (p.try_take(1)) ++burst;
  EXPECT_EQ(burst, 48);
  p.refill(kHz * 5 + kHz / 1'000'000 - 1);  // just under 1 us: nothing yet
  EXPECT_FALSE(p.try_take(1));
  p.refill(kHz * 5 + kHz / 1'000'000);
  EXPECT_TRUE(p.try_take(1));
  EXPECT_FALSE(p.try_take(1));
  // A clock that goes backwards adds nothing.
  p.refill(0);
  EXPECT_FALSE(p.try_take(1));
}

TEST(Pacer, CostAboveDepthNeverPasses) {
  Pacer p(1'000'000, kHz, 100, 0);
  p.refill(kHz);
  EXPECT_FALSE(p.try_take(101));
  EXPECT_TRUE(p.try_take(100));
}

JobProfile job(RateMode mode, uint64_t rate, unsigned dirs = 3) {
  JobProfile j;
  j.rate_mode = mode;
  j.rate = rate;
  j.dirs = dirs;
  return j;
}

TEST(JobDriver, ConstantDirections) {
  struct Case {
    unsigned dirs;
    std::vector<int> expect;
  } cases[] = {{3, {0, 1, 0, 1}}, {1u << kPush, {0, 0, 0}}, {1u << kPull, {1, 1, 1}}};
  for (const Case& c : cases) {
    JobDriver d(job(RateMode::kMax, 0, c.dirs), kHz, 1514, 32, 0);
    for (size_t i = 0; i < c.expect.size(); ++i) EXPECT_EQ(d.begin(i), c.expect[i]) << c.dirs << " round " << i;
    for (int k = 0; k < 1000; ++k) ASSERT_TRUE(d.admit(1514));  // max: no pacer
  }
}

TEST(JobDriver, PpsAndBitRatesOverTenSeconds) {
  struct Case {
    RateMode mode;
    uint64_t rate;
    uint32_t frame;      // bytes without FCS
    double want_frames;  // over 10 s
  } cases[] = {
      {RateMode::kPps, 5'000, 60, 50'000},
      {RateMode::kPps, 2'000'000, 1514, 20'000'000},
      {RateMode::kBps, 1'000'000'000, 1514, 1e10 / (1514 * 8)},
      {RateMode::kBps, 40'000'000, 60, 4e8 / (60 * 8)},
  };
  for (const Case& c : cases) {
    JobProfile j = job(c.mode, c.rate);
    JobDriver d(j, kHz, c.frame, 32, 0);
    std::mt19937_64 rng(3);
    double frames = 0;
    for (uint64_t now = 0; now < 10 * kHz;) {
      now += 1 + rng() % (kHz / 100'000);  // polls up to 10 us apart (< the 100 us depth)
      if (d.begin(now) < 0) continue;
      for (int k = 0; k < 32 && d.admit(c.frame); ++k) ++frames;
    }
    EXPECT_NEAR(frames / c.want_frames, 1.0, 0.001) << c.rate;
  }
}

// The driver is made before the links are awaited and settled; TX starts
// later. What the bucket would have banked in between is no credit: from
// start() on, a paced job sends at its rate and no more (it let pacer_depth
// x rate out at once, a run's rate over its TX time above the profile's).
TEST(JobDriver, CreditStartsEmptyWhenTxStarts) {
  JobProfile j = job(RateMode::kPps, 1'000);
  j.pacer_depth_ns = 1'000'000'000;  // 1 s: 1000 frames of depth
  JobDriver d(j, kHz, 60, 32, 0);
  const uint64_t start = 5 * kHz;  // 5 s of link wait and settle
  d.start(start);
  uint64_t frames = 0;
  for (uint64_t now = start; now <= start + kHz; now += kHz / 10'000) {
    if (d.begin(now) < 0) continue;
    while (d.admit(60)) ++frames;
  }
  EXPECT_LE(frames, 1'000u);  // 1 s at 1 kpps: not 1000 more from the wait
  EXPECT_GE(frames, 999u);
}

TEST(JobDriver, IterationPhases) {
  JobProfile j = job(RateMode::kMax, 0);
  j.pattern = Pattern::kIteration;
  j.workers = 2;
  j.push_bytes = 10'000;              // 20'000 B pushed per iteration
  j.pull_bytes = 20'000;              // 40'000 B pulled
  j.gap_ns = 1'000'000;               // 1 ms
  const uint64_t hz = 1'000'000'000;  // 1 tick = 1 ns
  JobDriver d(j, hz, 1000, 32, 0);
  uint64_t now = 0;
  for (uint64_t it = 0; it < 3; ++it) {
    uint64_t bytes[2] = {0, 0};
    // Push phase: 20 frames of 1000 B, in bursts of at most 7 here.
    int dir;
    while ((dir = d.begin(now)) == kPush) {
      int k = 0;
      while (k < 7 && d.admit(1000)) {
        bytes[kPush] += 1000;
        ++k;
      }
      if (k == 0) break;
    }
    EXPECT_EQ(bytes[kPush], 20'000u) << "iteration " << it;
    ASSERT_EQ(dir, kPull);
    while ((dir = d.begin(now)) == kPull) {
      int k = 0;
      while (k < 32 && d.admit(1000)) {
        bytes[kPull] += 1000;
        ++k;
      }
    }
    EXPECT_EQ(bytes[kPull], 40'000u) << "iteration " << it;
    // Compute gap: nothing for 1 ms.
    EXPECT_EQ(dir, -1);
    EXPECT_EQ(d.iterations(), it);
    EXPECT_EQ(d.begin(now + 999'999), -1);
    now += 1'000'000;
    EXPECT_EQ(d.begin(now), kPush);
    EXPECT_EQ(d.iterations(), it + 1);
  }
}

TEST(JobDriver, RefusedFramesReturnToThePhase) {
  JobProfile j = job(RateMode::kMax, 0);
  j.pattern = Pattern::kIteration;
  j.workers = 1;
  j.push_bytes = 5'000;
  j.pull_bytes = 1'000;
  JobDriver d(j, 1'000'000'000, 1000, 32, 0);
  ASSERT_EQ(d.begin(0), kPush);
  for (int k = 0; k < 5; ++k) ASSERT_TRUE(d.admit(1000));
  EXPECT_FALSE(d.admit(1000));
  d.refund(3000);  // the TX ring took only 2 of the 5
  ASSERT_EQ(d.begin(0), kPush);
  int more = 0;
  while (d.admit(1000)) ++more;
  EXPECT_EQ(more, 3);
  EXPECT_EQ(d.begin(0), kPull);
}

TEST(JobDriver, PacedIterationKeepsTheRate) {
  JobProfile j = job(RateMode::kPps, 100'000);
  j.pattern = Pattern::kIteration;
  j.workers = 4;
  j.push_bytes = 100'000;
  j.pull_bytes = 100'000;
  j.gap_ns = 0;
  JobDriver d(j, kHz, 1000, 32, 0);
  double frames = 0;
  for (uint64_t now = 0; now < 10 * kHz; now += kHz / 200'000) {  // polls every 5 us
    if (d.begin(now) < 0) continue;
    for (int k = 0; k < 32 && d.admit(1000); ++k) ++frames;
  }
  EXPECT_NEAR(frames / 1e6, 1.0, 0.001);
  EXPECT_NEAR(static_cast<double>(d.iterations()), 1e6 / 800, 1.0);  // 800 frames per iteration
}

}  // namespace
}  // namespace psgate::gen
