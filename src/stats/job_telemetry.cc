// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/job_telemetry.h"

#include <atomic>

namespace psgate {

namespace {

// One pass over the state; `bursts_read` is the count it started from.
JobTelemetry read_once(const JobBurstState& s, uint64_t now, uint64_t gap_ticks, uint64_t hz, uint64_t& bursts_read) {
  auto ms = [hz](uint64_t ticks) { return hz ? static_cast<double>(ticks) * 1e3 / static_cast<double>(hz) : 0.0; };
  JobTelemetry t;
  bursts_read = s.bursts.get();
  std::atomic_thread_fence(std::memory_order_acquire);
  t.bursts = bursts_read;
  t.last_burst_bytes = s.last_burst_bytes.get();
  t.last_burst_ms = ms(s.last_burst_ticks.get());
  t.iteration_period_ms = ms(s.last_period_ticks.get());
  t.straggler_wait_ms = ms(s.last_straggler_ticks.get());
  // The floor before the burst: the lcore lowers it only after the burst
  // it refused is gone (telemetry_on_tx).
  const uint64_t floor = s.iteration_floor_bytes.get();
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t current = s.current_bytes.get();
  const uint64_t last_tx = s.last_tx_tsc.get();
  // Read after last_tx (the lcore writes them in the other order): a start
  // past last_tx is a new burst begun between the two reads, in progress.
  const uint64_t start = s.current_start_tsc.get();
  if (current != 0 && now > last_tx && now - last_tx > gap_ticks && start <= last_tx) {
    // Quiet for longer than the gap: the burst in progress has ended, though
    // the lcore only records it when the job sends again. It is an iteration
    // by the rule the lcore will apply (job_telemetry.h); a smaller one is
    // neither an iteration nor in progress.
    if (current >= floor) {
      ++t.bursts;
      t.last_burst_bytes = current;
      t.last_burst_ms = ms(last_tx - start);
    }
  } else {
    t.current_burst_bytes = current;
  }
  return t;
}

}  // namespace

JobTelemetry read_telemetry(const JobBurstState& s, uint64_t now, uint64_t gap_ticks, uint64_t hz) {
  // The lcore may close a burst between the reads: `bursts` from before it
  // with the next burst's fields would report one iteration fewer than a
  // read a moment earlier that counted the quiet burst (N+1, N, N+1: a
  // Prometheus counter that goes back reads as a reset, and a rate spike).
  // Read again until `bursts` held still around the read; a burst closes at
  // most once per gap, so the second read nearly always does.
  JobTelemetry t;
  for (int attempt = 0; attempt < 4; ++attempt) {
    uint64_t bursts_read = 0;
    t = read_once(s, now, gap_ticks, hz, bursts_read);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.bursts.get() == bursts_read) break;
  }
  return t;
}

}  // namespace psgate
