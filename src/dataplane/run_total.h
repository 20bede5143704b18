// SPDX-License-Identifier: BSD-3-Clause
// Fast-path helper: counters of consecutive packets that share a key (a class,
// a job) are added once per run. The common burst is one job in one class, and
// one add per burst instead of per packet takes a chain of dependent memory
// increments off the fast path.
#pragma once

#include <cstdint>

namespace psgate {

struct RunTotal {
  uint32_t key = UINT32_MAX;
  uint32_t packets = 0;
  uint64_t bytes = 0;
};

// Adds one packet to the run; a new key first hands the finished run to `flush`.
// The caller flushes the last run itself.
template <typename Flush>
inline void run_add(RunTotal& run, uint32_t key, uint32_t bytes, Flush&& flush) {
  if (key != run.key) {
    if (run.packets) flush(run);
    run = RunTotal{key, 0, 0};
  }
  ++run.packets;
  run.bytes += bytes;
}

}  // namespace psgate
