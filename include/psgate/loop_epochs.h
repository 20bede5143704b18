// SPDX-License-Identifier: BSD-3-Clause
// Loop epochs: a way for another thread to wait until every polling loop
// has begun a new iteration, so that no rx/tx burst that began before the
// wait is still running when it returns. psgate's data lcores
// (dataplane/port_link.h: a port's link going down) and psgate-gen's TX and
// RX loops report at the top of each iteration, outside every burst; the
// memif teardown guard (dataplane/memif_guard.cc) waits on them before a
// driver unmaps a peer's memory. The protocol and its fences are described
// in dataplane/port_link.h.
#pragma once

#include <rte_pause.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace psgate {

struct alignas(64) LcoreEpoch {
  std::atomic<uint64_t> seen{0};
};

class LoopEpochs {
 public:
  static constexpr uint64_t kOffline = UINT64_MAX;

  // Loops count as offline until they go online: a wait before then has
  // nobody to wait for.
  explicit LoopEpochs(unsigned loops) : epochs_(loops) {
    for (auto& e : epochs_) e.seen.store(kOffline, std::memory_order_relaxed);
  }

  // Loop side, once per iteration, outside every burst.
  void report(unsigned loop_index) {
    const uint64_t e = epoch_.load(std::memory_order_acquire);
    epochs_[loop_index].seen.store(e, std::memory_order_release);
  }
  void go_offline(unsigned loop_index) { epochs_[loop_index].seen.store(kOffline, std::memory_order_release); }
  // Before the first report after kOffline (loop entry, a wake).
  void go_online(unsigned loop_index) {
    epochs_[loop_index].seen.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  // Waits until every loop has started an iteration after this call (or is
  // offline), for at most `timeout`. Returns false on timeout (a loop
  // preempted for that long): the caller must treat what it guards as
  // still in use. Any thread may call it; concurrent callers are fine.
  bool quiesce(std::chrono::steady_clock::duration timeout = std::chrono::seconds(5)) {
    const uint64_t target = epoch_.fetch_add(1, std::memory_order_acq_rel) + 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);  // pairs with go_online's
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (const LcoreEpoch& l : epochs_) {
      unsigned spins = 0;
      while (l.seen.load(std::memory_order_acquire) < target) {
        rte_pause();
        if ((++spins & 1023) == 0 && std::chrono::steady_clock::now() >= deadline) return false;
      }
    }
    return true;
  }

 private:
  alignas(64) std::atomic<uint64_t> epoch_{1};
  std::vector<LcoreEpoch> epochs_;
};

// The loops a driver teardown must wait for (memif_guard.cc), set while
// they run; null otherwise. One per process: psgate's data plane, or
// psgate-gen's engine.
extern std::atomic<LoopEpochs*> g_teardown_guard;

}  // namespace psgate
