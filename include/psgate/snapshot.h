// SPDX-License-Identifier: BSD-3-Clause
// The immutable state the RX stage classifies with: jobs, their rules compiled
// into a Classifier, and the job -> class map. The control path builds a new
// Snapshot and publishes it with one pointer store (SnapshotPublisher); data
// lcores never see a half-built one and never take a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rte_rcu_qsbr.h>

#include "psgate/classifier.h"
#include "psgate/config.h"
#include "psgate/counters.h"
#include "psgate/job_matcher.h"
#include "psgate/port_live.h"  // ClassActions, ClassLive, PortLive
#include "psgate/result.h"

namespace psgate {

// A job as the threads that may not touch the control plane's registry (stats
// printing, DPDK telemetry) see it: the listing part of the snapshot, in rank
// order. What the lcores read of a job is its SlotInfo.
struct JobEntry {
  uint32_t slot = 0;  // stable index for counters while the job exists
  uint32_t id = 0;
  std::string name;
  uint32_t rank = 0;  // the operator's rank
};

// A job's compiled fast-path form, what the RX stage reads per packet, by slot.
struct SlotInfo {
  std::array<uint8_t, 2> cls{};  // by Direction (push, pull)
  uint8_t active = 0;
  uint64_t police_bytes_per_sec = 0;  // 0: not policed
  uint64_t police_burst_bytes = 0;
};

// Compiled by config/compile.h; never changed once published.
struct Snapshot {
  uint32_t generation = 0;
  std::vector<JobEntry> jobs;   // in rank order (ties: control order)
  std::vector<SlotInfo> slots;  // max_jobs entries
  // Compiled rules, by partition; a partition whose jobs did not change is
  // shared with the previous snapshot, so a re-rank costs no ACL build and a
  // job added or removed rebuilds one partition. The flow cache stores job
  // slots, which a re-rank does not change either, so it is keyed by
  // rules_generation, which moves whenever any partition does.
  JobMatcher matcher;  // values are job slots
  uint32_t rules_generation = 0;
  // The partitions the matcher is made of: all of them, or `merged` in place
  // of the older ones (compile.h: use_merged). The partitions are kept even
  // then, so a change that makes the merge stale costs no rebuild.
  std::vector<RulePartition> partitions;
  std::shared_ptr<const MergedRules> merged;
  std::array<PortLive, kPortCount> ports;
};

// Holds the current snapshot. Three kinds of reader, two protections:
//   - data lcores load current() once per burst and report RCU quiescence
//     after each loop iteration (lock-free);
//   - the control thread, the only publisher, reads current() freely;
//   - other threads (stats printing, DPDK telemetry) go through read(),
//     which pins the snapshot with the readers' lock.
// publish() takes that lock only for the pointer swap and waits for the
// lcores' quiescence after releasing it. The lock is private, so no caller can
// hold it across the wait (which may take a while: it sleeps between polls).
class SnapshotPublisher {
 public:
  // `qsbr` must outlive the publisher; reader thread ids are registered by the
  // lcores. `initial` may be null: then nothing may read until the first publish.
  SnapshotPublisher(std::unique_ptr<Snapshot> initial, rte_rcu_qsbr* qsbr);
  ~SnapshotPublisher();

  // Acquire pairs with publish's release store: the reader sees a fully built snapshot.
  const Snapshot* current() const { return current_.load(std::memory_order_acquire); }
  // Calls fn with the current snapshot pinned (not freed until fn returns).
  // fn must not call read() or publish() (the lock is not recursive).
  void read(const std::function<void(const Snapshot&)>& fn) const;
  // Control thread only. Blocks the caller (never a data lcore) until the old
  // snapshot is unreachable, then frees it.
  void publish(std::unique_ptr<Snapshot> next);

 private:
  std::atomic<const Snapshot*> current_;
  rte_rcu_qsbr* qsbr_;
  mutable std::mutex readers_;  // read() against publish()'s swap; nothing else
};

}  // namespace psgate
