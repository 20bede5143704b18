// SPDX-License-Identifier: BSD-3-Clause
// Pull-burst telemetry (job_telemetry.h) with an injected clock: burst edges,
// bytes, period, the straggler proxy, and worker tracking beyond its capacity.
#include <gtest/gtest.h>

#include "psgate/job_telemetry.h"

#include <vector>

namespace psgate {
namespace {

constexpr uint64_t kGap = 1000;      // ticks of silence that end a burst
constexpr uint64_t kHz = 1'000'000;  // 1 tick = 1 us, so ms = ticks / 1000

// One transmitted run of one packet to `worker` at `now`.
void send(JobBurstState& s, uint64_t now, uint32_t worker, uint32_t bytes = 1000) {
  telemetry_on_tx(s, now, bytes, kGap);
  telemetry_saw_worker(s, worker, now);
}

TEST(JobTelemetry, BurstEdgesBytesPeriodAndStraggler) {
  JobBurstState s;
  // Burst 1 starts at 10'000: worker 1 done at 10'100, worker 2 at 10'300, worker 3 at 10'500.
  send(s, 10'000, 1);
  send(s, 10'100, 1);
  send(s, 10'200, 2);
  send(s, 10'300, 2);
  send(s, 10'500, 3);
  EXPECT_EQ(s.bursts.get(), 0u);
  JobTelemetry t = read_telemetry(s, 10'600, kGap, kHz);
  EXPECT_EQ(t.bursts, 0u);
  EXPECT_EQ(t.current_burst_bytes, 5000u);
  // Quiet past the gap: readers already see the burst as complete.
  t = read_telemetry(s, 12'000, kGap, kHz);
  EXPECT_EQ(t.bursts, 1u);
  EXPECT_EQ(t.last_burst_bytes, 5000u);
  EXPECT_DOUBLE_EQ(t.last_burst_ms, 0.5);

  // Burst 2 at 30'000: the lcore closes burst 1 when the job sends again.
  send(s, 30'000, 7, 400);
  EXPECT_EQ(s.bursts.get(), 1u);
  EXPECT_EQ(s.last_burst_bytes.get(), 5000u);
  EXPECT_EQ(s.last_burst_ticks.get(), 500u);
  EXPECT_EQ(s.last_straggler_ticks.get(), 400u) << "last worker finished 400 ticks after the first";
  EXPECT_EQ(s.last_period_ticks.get(), 0u) << "one iteration has no period yet";
  // Burst 2 forgot burst 1's workers: one worker, no straggler.
  send(s, 30'050, 7, 400);
  send(s, 60'000, 7);
  EXPECT_EQ(s.bursts.get(), 2u);
  EXPECT_EQ(s.last_burst_bytes.get(), 800u);
  EXPECT_EQ(s.last_straggler_ticks.get(), 0u);
  t = read_telemetry(s, 60'000, kGap, kHz);
  EXPECT_DOUBLE_EQ(t.iteration_period_ms, 20.0) << "start to start of the two completed iterations";
}

// A burst of 64 KB every 10'000 ticks, with a lone 100-byte packet (a
// keepalive, or an ACK to a worker's push) in the quiet spell between: the
// lone packets are bursts of their own but not iterations, and the period
// runs from pull to pull.
TEST(JobTelemetry, ALonePacketBetweenPullsIsNotAnIteration) {
  JobBurstState s;
  uint64_t now = 100'000;
  for (unsigned it = 0; it < 5; ++it, now += 10'000) {
    for (unsigned k = 0; k < 64; ++k) send(s, now + k, k % 4, 1000);
    send(s, now + 5'000, 1, 100);  // past the gap after the pull, and before the next one
  }
  send(s, now, 1, 1000);  // closes the last lone packet's burst
  EXPECT_EQ(s.bursts.get(), 5u) << "the lone packets were counted as iterations";
  EXPECT_EQ(s.last_burst_bytes.get(), 64'000u);
  EXPECT_EQ(s.last_period_ticks.get(), 10'000u);
  EXPECT_EQ(s.last_burst_ticks.get(), 63u);
  // A reader between a pull and the next one sees the quiet lone packet as
  // neither an iteration nor one in progress.
  JobBurstState r;
  for (unsigned k = 0; k < 64; ++k) send(r, 10'000 + k, 1, 1000);
  send(r, 15'000, 1, 100);
  const JobTelemetry t = read_telemetry(r, 17'000, kGap, kHz);
  EXPECT_EQ(t.bursts, 1u);
  EXPECT_EQ(t.last_burst_bytes, 64'000u);
  EXPECT_EQ(t.current_burst_bytes, 0u);
}

// A job whose iterations become 100 times smaller for good is believed again:
// once no iteration has been counted for the patience (here 200 gaps, as no
// period is known yet), each refused burst halves the floor (64'000 / 16 =
// 4000, then 2000, 1000, 500; 640 bytes pass).
TEST(JobTelemetry, IterationsThatShrankForGoodAreBelievedAgain) {
  JobBurstState s;
  send(s, 10'000, 1, 64'000);
  uint64_t now = 110'000;
  std::vector<uint64_t> counts;
  for (unsigned it = 0; it < 8; ++it, now += 100'000) {
    send(s, now, 1, 640);
    counts.push_back(s.bursts.get());
  }
  // Each send closes the burst before it: the 64 KB one, then the small
  // ones, started 100'000, 200'000 (not past the patience yet), 300'000, ...
  // ticks after the 64 KB one.
  EXPECT_EQ(counts, (std::vector<uint64_t>{1, 1, 1, 1, 1, 1, 2, 3}));
  EXPECT_EQ(s.last_burst_bytes.get(), 640u);
  EXPECT_EQ(s.iteration_floor_bytes.get(), 40u);
}

// Many small bursts between two pulls (each worker's push ACKed apart, more
// than the gap from the next): while pulls keep coming, none of them is an
// iteration, however many there are (halving the floor at each would have
// let the seventh through, and every one after).
TEST(JobTelemetry, ManySmallBurstsBetweenPullsAreNeverIterations) {
  JobBurstState s;
  uint64_t now = 1'000'000;
  for (unsigned it = 0; it < 6; ++it, now += 100'000) {
    for (unsigned k = 0; k < 64; ++k) send(s, now + k, k % 4, 1000);
    for (unsigned a = 1; a <= 12; ++a) send(s, now + a * 5'000, a, 100);
  }
  send(s, now, 1, 1000);
  EXPECT_EQ(s.bursts.get(), 6u);
  EXPECT_EQ(s.last_burst_bytes.get(), 64'000u);
  EXPECT_EQ(s.last_period_ticks.get(), 100'000u);
}

// A reader that loads last_tx_tsc, then current_start_tsc, while the job
// resumes between the two loads (the lcore writes the start first): it sees
// the old last transmission with the new burst's start. That is a burst in
// progress, not one that ended and lasted last_tx - start (which underflows
// to some 2^64 ticks).
TEST(JobTelemetry, ABurstThatResumedBetweenTheReadersLoadsIsInProgress) {
  JobBurstState s;
  send(s, 10'000, 1);
  send(s, 10'500, 1);
  // The lcore, resuming at 20'000, has written the new start but not yet
  // last_tx (telemetry_on_tx's order).
  s.current_start_tsc.add(20'000 - s.current_start_tsc.get());
  const JobTelemetry t = read_telemetry(s, 20'001, kGap, kHz);
  EXPECT_EQ(t.bursts, 0u) << "no burst ended as far as the reader can tell";
  EXPECT_EQ(t.last_burst_ms, 0.0);
  EXPECT_EQ(t.current_burst_bytes, 2000u);
}

TEST(JobTelemetry, TracksTheFirstWorkersAndFindsThemAgain) {
  JobBurstState s;
  // 40 workers with keys that share low bits (addresses of one subnet): the
  // first kTrackedWorkers are tracked, the rest ignored, none tracked twice.
  const uint64_t start = 1'000'000;
  for (uint32_t w = 0; w < 40; ++w) send(s, start + w, 0x0a000000u + (w << 8));
  EXPECT_EQ(s.workers, kTrackedWorkers);
  // Every tracked worker sends again, later; worker 0 last of all.
  for (uint32_t w = kTrackedWorkers; w-- > 0;) send(s, start + 500 - w, 0x0a000000u + (w << 8));
  EXPECT_EQ(s.workers, kTrackedWorkers) << "a tracked worker was added twice";
  for (uint32_t w = 0; w < kTrackedWorkers; ++w) {
    EXPECT_EQ(s.worker_key[w], 0x0a000000u + (w << 8));
    EXPECT_EQ(s.worker_last_tsc[w], start + 500 - w);
  }
  send(s, start + 10'000, 1);  // next burst closes this one
  EXPECT_EQ(s.last_straggler_ticks.get(), kTrackedWorkers - 1u);
  EXPECT_EQ(s.workers, 1u);
}

TEST(JobTelemetry, UntrackedWorkersDoNotCountAndANewBurstForgetsTheOld) {
  JobBurstState s;
  const uint64_t start = 1'000'000;
  for (uint32_t w = 0; w < kTrackedWorkers; ++w) send(s, start, 100 + w);
  // An untracked worker finishing after every tracked one is not counted.
  send(s, start + 905, 100);
  send(s, start + 950, 999);
  EXPECT_EQ(s.workers, kTrackedWorkers);
  send(s, start + 10'000, 102);  // closes the burst: tracked finishes span start .. start + 905
  EXPECT_EQ(s.last_straggler_ticks.get(), 905u);
  // Burst 2 starts empty whatever burst 1 left in the arrays (102 was its
  // entry 2, 100 its entry 0): 102 is entry 0 now, 100 entry 1.
  EXPECT_EQ(s.workers, 1u);
  EXPECT_EQ(s.worker_key[0], 102u);
  send(s, start + 10'010, 100);
  send(s, start + 10'040, 102);
  EXPECT_EQ(s.workers, 2u);
  EXPECT_EQ(s.worker_key[1], 100u);
  EXPECT_EQ(s.worker_last_tsc[0], start + 10'040);
  EXPECT_EQ(s.worker_last_tsc[1], start + 10'010);
  send(s, start + 20'000, 7);
  EXPECT_EQ(s.last_straggler_ticks.get(), 30u);
}

}  // namespace
}  // namespace psgate
