// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/job_telemetry.h"

namespace psgate {

JobTelemetry read_telemetry(const JobBurstState& s, uint64_t now, uint64_t gap_ticks, uint64_t hz) {
  auto ms = [hz](uint64_t ticks) { return hz ? static_cast<double>(ticks) * 1e3 / static_cast<double>(hz) : 0.0; };
  JobTelemetry t;
  t.bursts = s.bursts.get();
  t.last_burst_bytes = s.last_burst_bytes.get();
  t.last_burst_ms = ms(s.last_burst_ticks.get());
  t.iteration_period_ms = ms(s.last_period_ticks.get());
  t.straggler_wait_ms = ms(s.last_straggler_ticks.get());
  const uint64_t current = s.current_bytes.get();
  const uint64_t last_tx = s.last_tx_tsc.get();
  // Read after last_tx (the lcore writes them in the other order): a start
  // past last_tx is a new burst begun between the two reads, in progress.
  const uint64_t start = s.current_start_tsc.get();
  if (current != 0 && now > last_tx && now - last_tx > gap_ticks && start <= last_tx) {
    // Quiet for longer than the gap: the burst in progress has ended, though
    // the lcore only records it when the job sends again.
    ++t.bursts;
    t.last_burst_bytes = current;
    t.last_burst_ms = ms(last_tx - start);
  } else {
    t.current_burst_bytes = current;
  }
  return t;
}

}  // namespace psgate
