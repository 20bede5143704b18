// SPDX-License-Identifier: BSD-3-Clause
// Publishes snapshots (control path only); config/compile.cc builds them.
#include "psgate/snapshot.h"

#include <spdlog/spdlog.h>

#include <cstdint>
#include <ctime>

namespace psgate {

SnapshotPublisher::SnapshotPublisher(std::unique_ptr<Snapshot> initial, rte_rcu_qsbr* qsbr)
    : current_(initial.release()), qsbr_(qsbr) {}

// The lcores have stopped by now (the data plane goes first), so nothing can
// hold a retired snapshot.
SnapshotPublisher::~SnapshotPublisher() {
  for (const Retired& r : retired_) delete r.snapshot;
  delete current_.load(std::memory_order_relaxed);
}

void SnapshotPublisher::read(const std::function<void(const Snapshot&)>& fn) const {
  std::lock_guard<std::mutex> lock(readers_);
  fn(*current());
}

void SnapshotPublisher::publish(std::unique_ptr<Snapshot> next) {
  const Snapshot* old = nullptr;
  {
    // After the swap no read() can reach `old`: one that started before it
    // held the lock and has returned.
    std::lock_guard<std::mutex> lock(readers_);
    old = current_.exchange(next.release(), std::memory_order_acq_rel);
  }
  if (!old) return;  // the first snapshot: nobody read before it
  // Every reader that could still hold `old` passes a quiescent state after
  // its current loop iteration; offline readers (stopped lcores) are skipped.
  retired_.push_back(Retired{old, rte_rcu_qsbr_start(qsbr_)});
  reclaim();
  // Poll with sleeps rather than rte_rcu_qsbr_synchronize's spin: the control
  // thread may share a CPU with the threads the lcores are waiting for.
  // A data lcore that passes no quiescent state (stuck in a driver call)
  // holds the control thread here: said once a second, so that a control
  // socket that stopped answering has a reason in the log.
  // Said at each whole second of waiting, counted from the wait's start
  // (whole seconds of the clock would say "1 s" after a few milliseconds),
  // and only while it still waits (reclaim may just have ended it).
  auto now_ns = [] {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  };
  const int64_t began = now_ns();
  int64_t said_s = 0;
  while (retired_.size() > kMaxRetired && !stop_waiting_.load(std::memory_order_acquire)) {
    timespec pause{0, 20'000};
    nanosleep(&pause, nullptr);
    reclaim();
    if (retired_.size() <= kMaxRetired) break;
    if (const int64_t waited_s = (now_ns() - began) / 1'000'000'000; waited_s > said_s) {
      said_s = waited_s;
      spdlog::error(
          "publishing a snapshot has waited {} s for a data lcore to pass a quiescent state: {} snapshots "
          "wait to be freed, and the control thread with them (is an lcore stuck in a driver call?)",
          waited_s, retired_.size());
    }
  }
}

void SnapshotPublisher::reclaim() {
  while (!retired_.empty() && rte_rcu_qsbr_check(qsbr_, retired_.front().token, false) == 1) {
    delete retired_.front().snapshot;
    retired_.pop_front();
  }
}

}  // namespace psgate
