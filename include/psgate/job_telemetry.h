// SPDX-License-Identifier: BSD-3-Clause
// Per-job telemetry measured from traffic, with no help from the training
// framework: the PS's pull bursts (model sent to the workers), from which
// come the iteration count, bytes per iteration, iteration period, burst
// duration, and a straggler proxy (how long after the first worker's copy of
// the model finished the last one finished).
//
// Measured at the scheduler of the wire egress (pull direction), where every
// packet of a job's pull traffic passes one lcore. A burst ends when the job
// sends nothing for `gap` ticks; the end is noticed lazily by the next packet,
// and by readers, which treat a quiet current burst as ended.
//
// Not every burst is an iteration: a keepalive after a quiet spell, or the
// PS's ACKs to the workers' pushes while the barrier waits, make a short
// burst of their own between two pulls. A burst smaller than 1/16 of the
// last iteration is not counted as one (kIterationFloorDivisor). While
// iterations keep coming, that floor stays, however many small bursts lie
// between them (each worker's push ACKed apart); only once none has been
// counted for kFloorPatiencePeriods of its period (at least
// kFloorPatienceGaps gaps) does each smaller burst halve it, so a job whose
// iterations really shrank is believed again after a few of them.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>

#include "psgate/counters.h"

namespace psgate {

inline constexpr unsigned kTrackedWorkers = 16;
inline constexpr uint64_t kBurstGapNs = 5'000'000;      // 5 ms of silence ends a burst
inline constexpr uint64_t kIterationFloorDivisor = 16;  // an iteration is at least 1/16 of the one before
inline constexpr uint64_t kFloorPatiencePeriods = 4;
inline constexpr uint64_t kFloorPatienceGaps = 200;  // 1 s at the 5 ms gap

struct alignas(64) JobBurstState {
  // Read by the control thread.
  Counter bursts;  // completed iterations (bursts at least iteration_floor_bytes long)
  Counter last_burst_bytes;
  Counter last_burst_ticks;       // duration of the last completed iteration
  Counter last_period_ticks;      // start-to-start of the last two iterations
  Counter last_straggler_ticks;   // last completed iteration: last worker finish - first worker finish
  Counter iteration_floor_bytes;  // a smaller burst is not an iteration (0: any burst is)
  // Odd while the lcore closes a burst or resets the slot: a reader retries
  // a read that overlapped one (a sequence lock; read_telemetry).
  Counter close_seq;
  Counter current_bytes;
  Counter current_start_tsc;
  Counter last_tx_tsc;
  // Owner-only: where the last completed iteration started (0: none yet).
  uint64_t iteration_start_tsc = 0;
  // Owner-only: per-worker finish times of the current burst (by destination).
  std::array<uint32_t, kTrackedWorkers> worker_key{};
  std::array<uint64_t, kTrackedWorkers> worker_last_tsc{};
  uint32_t workers = 0;
  // worker_key -> position + 1 (0 = empty), open addressing with linear
  // probing at most 1/16 full: a packet finds its worker in about one probe
  // instead of scanning all tracked workers (all 16 when it is not tracked).
  // 1/16, not 1/4: a job with more than 16 workers sends most packets to
  // untracked ones, and at 1/4 one in four of those probed an occupied entry,
  // a branch mispredicted that often (psgate-micro telemetry/saw_worker/
  // 64_workers: 16 -> 9 cycles a packet; up to 16 workers 4-5 -> 3).
  std::array<uint8_t, 16 * kTrackedWorkers> worker_index{};
};

// Fast path, owner lcore only. For each transmitted run of a job's packets
// (all sent at `now`): telemetry_on_tx once with the run's bytes, then
// telemetry_saw_worker for each packet's destination.
inline void telemetry_on_tx(JobBurstState& s, uint64_t now, uint64_t bytes, uint64_t gap_ticks) {
  const uint64_t last = s.last_tx_tsc.get();
  if (s.current_bytes.get() != 0 && now - last > gap_ticks) [[unlikely]] {
    // The previous burst ended at `last`. Readers retry a read that
    // overlaps what follows (the count, the last burst's fields and the
    // open burst change together). Fences free on x86.
    s.close_seq.inc();
    std::atomic_thread_fence(std::memory_order_release);
    const uint64_t start = s.current_start_tsc.get();
    const uint64_t burst_bytes = s.current_bytes.get();
    const uint64_t floor = s.iteration_floor_bytes.get();
    if (burst_bytes >= floor) {
      s.last_burst_bytes.add(burst_bytes - s.last_burst_bytes.get());
      s.last_burst_ticks.add((last - start) - s.last_burst_ticks.get());
      uint64_t first = UINT64_MAX, final_finish = 0;
      for (uint32_t i = 0; i < s.workers; ++i) {
        first = s.worker_last_tsc[i] < first ? s.worker_last_tsc[i] : first;
        final_finish = s.worker_last_tsc[i] > final_finish ? s.worker_last_tsc[i] : final_finish;
      }
      const uint64_t straggler = s.workers > 1 ? final_finish - first : 0;
      s.last_straggler_ticks.add(straggler - s.last_straggler_ticks.get());
      if (s.iteration_start_tsc != 0)
        s.last_period_ticks.add((start - s.iteration_start_tsc) - s.last_period_ticks.get());
      s.iteration_start_tsc = start;
      s.iteration_floor_bytes.add(burst_bytes / kIterationFloorDivisor - floor);
      s.bursts.inc();
    }
    s.current_bytes.add(0 - s.current_bytes.get());  // back to zero (wraps exactly)
    s.workers = 0;
    s.worker_index.fill(0);
    const uint64_t patience =
        std::max(kFloorPatiencePeriods * s.last_period_ticks.get(), kFloorPatienceGaps * gap_ticks);
    if (burst_bytes < floor && start - s.iteration_start_tsc > patience) {
      // Not an iteration, and none for long: smaller ones are believed sooner.
      s.iteration_floor_bytes.add(floor / 2 - floor);
    }
    std::atomic_thread_fence(std::memory_order_release);
    s.close_seq.inc();
  }
  if (s.current_bytes.get() == 0) s.current_start_tsc.add(now - s.current_start_tsc.get());
  s.current_bytes.add(bytes);
  s.last_tx_tsc.add(now - last);
}

// Owner lcore only, when a slot changes hands: the next job starts with no
// iterations, sizes or open burst of its own, not the previous job's (its
// first packet would have closed that burst as its own first iteration).
inline void telemetry_reset(JobBurstState& s) {
  s.close_seq.inc();  // readers retry a read that overlaps the reset
  std::atomic_thread_fence(std::memory_order_release);
  for (Counter* c : {&s.current_bytes, &s.current_start_tsc, &s.last_tx_tsc}) c->add(0 - c->get());
  for (Counter* c : {&s.bursts, &s.last_burst_bytes, &s.last_burst_ticks, &s.last_period_ticks, &s.last_straggler_ticks,
                     &s.iteration_floor_bytes})
    c->add(0 - c->get());  // to zero, as readers see counters: one relaxed store each
  s.iteration_start_tsc = 0;
  s.workers = 0;
  s.worker_index.fill(0);
  std::atomic_thread_fence(std::memory_order_release);
  s.close_seq.inc();
}

inline void telemetry_saw_worker(JobBurstState& s, uint32_t worker_key, uint64_t now) {
  constexpr unsigned kMask = 16 * kTrackedWorkers - 1;
  unsigned h = (worker_key * 0x9e3779b1u) >> 24 & kMask;  // the multiply's top bits mix every key bit
  for (uint8_t at; (at = s.worker_index[h]) != 0; h = (h + 1) & kMask) {
    if (s.worker_key[at - 1u] == worker_key) {
      s.worker_last_tsc[at - 1u] = now;
      return;
    }
  }
  if (s.workers < kTrackedWorkers) {
    s.worker_key[s.workers] = worker_key;
    s.worker_last_tsc[s.workers] = now;
    s.worker_index[h] = static_cast<uint8_t>(++s.workers);
  }
}

// What readers see, in user units.
struct JobTelemetry {
  uint64_t bursts = 0;               // completed iterations seen (a quiet current burst counts)
  uint64_t last_burst_bytes = 0;     // bytes per iteration (last complete one)
  uint64_t current_burst_bytes = 0;  // bytes of the iteration in progress (0 when quiet)
  double last_burst_ms = 0;
  double iteration_period_ms = 0;
  double straggler_wait_ms = 0;
};

JobTelemetry read_telemetry(const JobBurstState& s, uint64_t now_tsc, uint64_t gap_ticks, uint64_t tsc_hz);

}  // namespace psgate
