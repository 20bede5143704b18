// SPDX-License-Identifier: BSD-3-Clause
// Starved is not stuck: the stall clock counts an lcore's CPU time while it is
// runnable and the wall clock while it sleeps; the kernel's figures are read
// for real.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "psgate/lcore_stall.h"

namespace psgate {
namespace {

constexpr uint64_t kMs = 1'000'000;

ThreadSample running(uint64_t cpu_ms) { return {true, true, cpu_ms * kMs}; }
ThreadSample asleep(uint64_t cpu_ms) { return {true, false, cpu_ms * kMs}; }

TEST(LcoreStallClock, ProgressStartsAgainFromNothing) {
  LcoreStallClock clock;
  clock.progressed(100 * kMs, running(5));
  clock.advance(600 * kMs, running(505));
  EXPECT_EQ(clock.stalled_ns(), 500 * kMs);
  clock.progressed(700 * kMs, running(605));
  EXPECT_EQ(clock.stalled_ns(), 0u);
}

TEST(LcoreStallClock, AnLcoreAsleepInADriverCallStallsByTheWallClock) {
  // Blocked in poll(2) behind a TX ring that never drains: state S, no CPU.
  LcoreStallClock clock;
  clock.progressed(1'000 * kMs, running(40));
  clock.advance(1'100 * kMs, asleep(41));
  clock.advance(2'100 * kMs, asleep(41));
  EXPECT_EQ(clock.stalled_ns(), 1'100 * kMs);
}

TEST(LcoreStallClock, AnLcoreSpinningInADriverCallStallsByItsCpuTime) {
  LcoreStallClock clock;
  clock.progressed(1'000 * kMs, running(40));
  for (uint64_t t = 1'100; t <= 2'200; t += 100) clock.advance(t * kMs, running(40 + (t - 1'000)));
  EXPECT_EQ(clock.stalled_ns(), 1'200 * kMs);
}

TEST(LcoreStallClock, AStarvedLcoreIsNotStalled) {
  // Runnable, given 30 ms of CPU in 1.97 s by a loaded host: 30 ms stalled.
  LcoreStallClock clock;
  clock.progressed(1'000 * kMs, running(40));
  clock.advance(1'970 * kMs, running(50));
  clock.advance(2'970 * kMs, running(70));
  EXPECT_EQ(clock.stalled_ns(), 30 * kMs);
  // Then it falls asleep in a driver call: the wall clock counts from there.
  clock.advance(3'970 * kMs, asleep(70));
  EXPECT_EQ(clock.stalled_ns(), 1'030 * kMs);
}

TEST(LcoreStallClock, AThreadTheKernelSaysNothingAboutStallsByTheWallClock) {
  LcoreStallClock clock;
  clock.progressed(1'000 * kMs, ThreadSample{});
  clock.advance(2'200 * kMs, ThreadSample{});
  EXPECT_EQ(clock.stalled_ns(), 1'200 * kMs);
  // CPU time read above the interval (two reads a moment apart) counts the
  // interval, no more; a clock that went backwards adds nothing.
  LcoreStallClock other;
  other.progressed(1'000 * kMs, running(40));
  other.advance(1'100 * kMs, running(400));
  EXPECT_EQ(other.stalled_ns(), 100 * kMs);
  other.advance(900 * kMs, running(300));
  EXPECT_EQ(other.stalled_ns(), 100 * kMs);
}

TEST(SampleThread, NoSuchThreadIsUnknown) {
  EXPECT_FALSE(sample_thread(0).known);
  EXPECT_FALSE(sample_thread(-5).known);
  EXPECT_FALSE(sample_thread(1 << 30).known);
}

// The kernel's figures, read for real: a sleeping thread is not runnable and
// uses no CPU; a spinning one is runnable and its CPU time grows with it.
TEST(SampleThread, ReadsTheStateAndTheCpuTimeOfAThread) {
  if (access("/proc/self/schedstat", R_OK) != 0) GTEST_SKIP() << "this kernel has no schedstat (CONFIG_SCHED_INFO)";
  std::atomic<int> tid{0};
  std::atomic<int> phase{0};  // 0 asleep, 1 spinning, 2 done
  std::thread worker([&] {
    tid = static_cast<int>(gettid());
    while (phase.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    while (phase.load() == 1) {
    }
  });
  while (tid.load() == 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const ThreadSample sleeping = sample_thread(tid);
  ASSERT_TRUE(sleeping.known);
  phase = 1;
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // past its last nap
  const ThreadSample first = sample_thread(tid);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const ThreadSample spun = sample_thread(tid);
  phase = 2;
  worker.join();
  // Asleep in 100 ms naps (awake for microseconds of each); the spin is
  // runnable every time.
  EXPECT_FALSE(sleeping.runnable);
  EXPECT_TRUE(first.runnable);
  EXPECT_TRUE(spun.runnable);
  // 300 ms of spinning on a machine that may be busy: at least a tenth of it.
  EXPECT_GT(spun.cpu_ns, first.cpu_ns + 30 * kMs) << first.cpu_ns << " -> " << spun.cpu_ns;
  EXPECT_GE(first.cpu_ns, sleeping.cpu_ns);
}

}  // namespace
}  // namespace psgate
