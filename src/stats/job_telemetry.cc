// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/job_telemetry.h"

#include <atomic>
#include <thread>

namespace psgate {

namespace {

// One pass over the state.
JobTelemetry read_once(const JobBurstState& s, uint64_t now, uint64_t gap_ticks, uint64_t hz) {
  auto ms = [hz](uint64_t ticks) { return hz ? static_cast<double>(ticks) * 1e3 / static_cast<double>(hz) : 0.0; };
  JobTelemetry t;
  t.bursts = s.bursts.get();
  t.last_burst_bytes = s.last_burst_bytes.get();
  t.last_burst_ms = ms(s.last_burst_ticks.get());
  t.iteration_period_ms = ms(s.last_period_ticks.get());
  t.straggler_wait_ms = ms(s.last_straggler_ticks.get());
  const uint64_t floor = s.iteration_floor_bytes.get();
  const uint64_t current = s.current_bytes.get();
  const uint64_t last_tx = s.last_tx_tsc.get();
  // Read after last_tx (the lcore writes them in the other order): a start
  // past last_tx is a new burst begun between the two reads, in progress.
  const uint64_t start = s.current_start_tsc.get();
  // Quiet by a quarter gap more than the lcore's own test: the lcore's clock
  // is read once per loop, so its next transmission may carry a time a
  // little before this reader's `now`; a burst counted here as ended must
  // not be found still open by the next read (a count that goes back).
  if (current != 0 && now > last_tx && now - last_tx > gap_ticks + gap_ticks / 4 && start <= last_tx) {
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
  // The lcore may close a burst (or reset the slot) during the read: the
  // count from before it with the fields after it could report the quiet
  // burst twice, or one iteration fewer than a read a moment earlier (a
  // Prometheus counter that goes back reads as a reset, and a rate spike).
  // A sequence lock: read again until no close overlapped the read. A
  // close takes a few instructions and comes at most once per gap, so the
  // second read nearly always holds.
  // An lcore preempted mid-close (a VM's vCPU descheduled) could keep the
  // sequence odd for a while: after a bounded number of tries the last read
  // stands, as before there was a lock.
  for (int attempt = 0; attempt < 64; ++attempt) {
    const uint64_t before = s.close_seq.get();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before & 1) {  // a close under way
      std::this_thread::yield();
      continue;
    }
    const JobTelemetry t = read_once(s, now, gap_ticks, hz);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.close_seq.get() == before) return t;
  }
  return read_once(s, now, gap_ticks, hz);
}

}  // namespace psgate
