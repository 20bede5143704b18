// SPDX-License-Identifier: BSD-3-Clause
// How long a data lcore has gone without finishing a loop iteration, not
// counting the time it was runnable but given no CPU.
//
// A stuck lcore (asleep in a driver call that never returns, or spinning
// inside one) makes no progress while it sleeps or holds its CPU; a starved
// one (a loaded host gives its runnable thread no CPU: a nice -20
// neighbour pinned to its core, a real-time task, a busy 2-vCPU guest)
// makes none either, but is not stuck: it loops again as soon as it runs.
// Wall-clock time alone called both stuck (health degraded, a stop given up
// as "stuck in a driver call"). The clock below adds, between two samples
// of the thread without progress, the whole interval when the thread was
// not runnable (asleep, blocked: state S or D) and only the CPU time it
// used when it was (state R: running, or waiting for a CPU). The kernel's
// run-queue wait (schedstat's second field) cannot be used instead: it is
// added only when the waiting thread gets a CPU, so a starved thread's reads
// stay the same until the starving ends.
// Pure but for sample_thread(): the caller reads the clocks.
#pragma once

#include <cstdint>

namespace psgate {

struct ThreadSample {
  bool known = false;     // the kernel said (a thread of this process, /proc mounted)
  bool runnable = false;  // state R: on a CPU, or waiting for one
  uint64_t cpu_ns = 0;    // CPU time used so far (schedstat's first field)
};

// /proc/self/task/<tid>/stat and schedstat; `known` false when either
// cannot be read (tid 0, a thread gone, no /proc).
ThreadSample sample_thread(int tid);

class LcoreStallClock {
 public:
  // The lcore was seen finishing an iteration: nothing stalled.
  void progressed(uint64_t now_ns, const ThreadSample& sample) {
    stalled_ns_ = 0;
    last_ns_ = now_ns;
    last_cpu_ns_ = sample.cpu_ns;
  }
  // No iteration finished since the last call: adds what of the interval
  // counts (an unknown thread: all of it, wall-clock as before).
  void advance(uint64_t now_ns, const ThreadSample& sample) {
    const uint64_t wall = now_ns > last_ns_ ? now_ns - last_ns_ : 0;
    const uint64_t cpu = sample.cpu_ns > last_cpu_ns_ ? sample.cpu_ns - last_cpu_ns_ : 0;
    stalled_ns_ += sample.known && sample.runnable ? (cpu < wall ? cpu : wall) : wall;
    last_ns_ = now_ns;
    last_cpu_ns_ = sample.cpu_ns;
  }
  uint64_t stalled_ns() const { return stalled_ns_; }

 private:
  uint64_t stalled_ns_ = 0;
  uint64_t last_ns_ = 0;
  uint64_t last_cpu_ns_ = 0;
};

}  // namespace psgate
