// SPDX-License-Identifier: BSD-3-Clause
// Publishes snapshots (control path only); config/compile.cc builds them.
#include "psgate/snapshot.h"

#include <ctime>

namespace psgate {

SnapshotPublisher::SnapshotPublisher(std::unique_ptr<Snapshot> initial, rte_rcu_qsbr* qsbr)
    : current_(initial.release()), qsbr_(qsbr) {}

SnapshotPublisher::~SnapshotPublisher() { delete current_.load(std::memory_order_relaxed); }

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
  // Poll with sleeps rather than rte_rcu_qsbr_synchronize's spin: the control
  // thread may share a CPU with the threads the lcores are waiting for.
  const uint64_t token = rte_rcu_qsbr_start(qsbr_);
  while (rte_rcu_qsbr_check(qsbr_, token, false) == 0) {
    timespec pause{0, 20'000};
    nanosleep(&pause, nullptr);
  }
  delete old;
}

}  // namespace psgate
