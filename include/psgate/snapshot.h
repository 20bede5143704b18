// SPDX-License-Identifier: BSD-3-Clause
// The immutable state the RX stage classifies with: jobs, their rules compiled
// into a Classifier, and the job -> class map. The control path builds a new
// Snapshot and publishes it with one pointer store (SnapshotPublisher); data
// lcores never see a half-built one and never take a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
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
  // Which job holds the slot (its sequence + 1; 0: none). A job new to its
  // slot starts with a full policer bucket, not the previous one's debt,
  // and is kept behind the default class's packets of before it
  // (sched_stage.cc, settle_job_class: a flow it takes over was there).
  uint64_t owner = 0;
};

// Compiled by config/compile.h; never changed once published.
struct Snapshot {
  uint32_t generation = 0;
  std::vector<JobEntry> jobs;   // in rank order (ties: control order)
  std::vector<SlotInfo> slots;  // max_jobs entries
  // The slots whose owner or policer differ from those of the snapshot of
  // generation `changed_since` (published just before this one), ascending.
  // An lcore that took that snapshot brings its per-slot state up to date
  // from these alone: a scan of every slot, 32 MB at max_jobs = 1M, takes it
  // off the wire for milliseconds at every change. 0: no list (the first
  // snapshot); an lcore that took neither scans every slot.
  uint32_t changed_since = 0;
  std::vector<uint32_t> changed_slots;
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

// Calls fn(slot) for every slot below `slots` whose per-slot state may
// differ from what an lcore synced from the snapshot of generation `synced`
// (`first`: none yet): the changed slots alone when `synced` is the one
// `snap` lists its changes against, else every slot. The rule the RX and
// scheduler lcores share (rx_sync_slots, sched_sync_slots).
template <typename Fn>
void for_each_slot_to_sync(const Snapshot& snap, uint32_t synced, bool first, size_t slots, Fn&& fn) {
  if (!first && snap.changed_since == synced) {
    for (uint32_t slot : snap.changed_slots)
      if (slot < slots) fn(slot);
  } else {
    for (size_t slot = 0; slot < slots; ++slot) fn(slot);
  }
}

// Holds the current snapshot. Three kinds of reader, two protections:
//   - data lcores load current() once per burst and report RCU quiescence
//     after each loop iteration (lock-free);
//   - the control thread, the only publisher, reads current() freely;
//   - other threads (stats printing, DPDK telemetry) go through read(),
//     which pins the snapshot with the readers' lock.
// publish() takes that lock only for the pointer swap. The lock is private, so
// no caller can hold it across a wait for the lcores' quiescence.
//
// A published snapshot is in force for every burst an lcore starts after the
// pointer store; only bursts already under way finish on the old one (as they
// would have with the old one kept). So publish() returns after the store and
// retires the old snapshot: freed once every lcore has reported quiescence
// since (rte_rcu_qsbr_start's token), by a later publish() or reclaim(). On a
// shared CPU that wait lasts until the lcore's thread is scheduled again, up
// to milliseconds: publish() used to wait it out, and it was most of a
// re-rank's p99 (perf/control-scale on 2 vCPUs). The waiting is still
// bounded: past kMaxRetired retired snapshots publish() waits for the oldest.
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
  // Control thread only. Makes `next` current and retires the old snapshot;
  // frees the retired ones no lcore can still hold. Blocks (the caller, never
  // a data lcore) only while kMaxRetired are waiting.
  void publish(std::unique_ptr<Snapshot> next);
  // Any thread, at stop: publish() no longer waits for retired snapshots (a
  // data lcore stuck in a driver call never frees them, and the control
  // thread waiting there could not be joined: the stop hung for good). What
  // is retired after this is freed by reclaim() or the destructor.
  void stop_waiting() { stop_waiting_.store(true, std::memory_order_release); }
  // Control thread only: frees the retired snapshots no lcore can still hold
  // (the control thread's tick calls it, so none lingers after the changes stop).
  void reclaim();
  // A grace period for what the current snapshot took away (a removed job's
  // slot): begun now, over once every data lcore has passed a quiescent
  // state since, after which none still classifies with an older snapshot.
  // Control thread only; grace_over never waits.
  uint64_t begin_grace() { return rte_rcu_qsbr_start(qsbr_); }
  bool grace_over(uint64_t token) const { return rte_rcu_qsbr_check(qsbr_, token, false) == 1; }
  // The readers' RCU state, for a test that holds a reader (register it,
  // put it online, report no quiescence) to see what waits for a grace
  // period: the run_once harness runs no lcore, so none would hold one.
  rte_rcu_qsbr* qsbr() const { return qsbr_; }

  // Retired snapshots share their rule partitions with the current one unless
  // the rules changed; each holds its slot table and job list (~150 KB with
  // 4,096 slots and 1,000 jobs) or, after a rebuild, its old partition.
  static constexpr size_t kMaxRetired = 64;

 private:
  struct Retired {
    const Snapshot* snapshot;
    uint64_t token;  // rte_rcu_qsbr_start's, at its retirement
  };
  std::atomic<const Snapshot*> current_;
  rte_rcu_qsbr* qsbr_;
  std::deque<Retired> retired_;  // oldest first (tokens increase)
  std::atomic<bool> stop_waiting_{false};
  mutable std::mutex readers_;  // read() against publish()'s swap; nothing else
};

}  // namespace psgate
