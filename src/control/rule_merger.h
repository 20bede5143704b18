// SPDX-License-Identifier: BSD-3-Clause
// Merges the older rule partitions into one classifier off the control
// thread. Partitions keep a change cheap (one small ACL rebuilt), but a
// packet that misses the flow cache visits one ACL per partition: with
// 100,000 rules in ~100 partitions a burst of new flows costs ~30x what one
// ACL costs. So once enough partitions have settled, their rules are built
// into one classifier on a thread of its own (an ACL of 100,000 rules takes
// seconds), and the control thread puts it in the next snapshot in place of
// the partitions it covers (config/compile.h: use_merged). The control thread
// never waits for it, except at shutdown.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "psgate/job_matcher.h"
#include "psgate/job_registry.h"
#include "psgate/result.h"

namespace psgate {

class RuleMerger {
 public:
  // A merge starts once this many settled partitions (all but the newest,
  // which is still filling) are not covered by the merge in force.
  static constexpr size_t kPartitionsToMerge = 4;
  // ... and the rules have not changed for this long: a merge during a burst
  // of changes would go stale at the next removal and only take CPU.
  static constexpr uint64_t kSettleNs = 2'000'000'000;

  RuleMerger() = default;
  ~RuleMerger();  // waits for a running merge (its ACL memory must be freed before DPDK's)
  RuleMerger(const RuleMerger&) = delete;
  RuleMerger& operator=(const RuleMerger&) = delete;

  // Starts merging the partitions of `partitions` but the newest, with the
  // rules of `jobs`, when that is worth it given `in_force` (may be null) and
  // no merge runs. Returns whether one started.
  // `rules_changed_ns`: when the partitions last changed.
  bool maybe_start(const std::vector<RulePartition>& partitions, const JobRegistry& jobs,
                   const std::shared_ptr<const MergedRules>& in_force, uint64_t rules_changed_ns, uint64_t now_ns);
  // A finished merge, once; null while none is ready (or it failed: logged,
  // and the next attempt waits a minute).
  std::shared_ptr<const MergedRules> take(uint64_t now_ns);
  bool running() const { return pending_.valid(); }

  // The gateway is stopping, and the stop waits for a running merge (the
  // destructor) whose result nobody will use: no merge starts from now on,
  // and one that runs is given back the calling thread's CPU priority (it
  // runs at the lowest, behind every other process of a busy host: a stop
  // waited 20 s for one of 99,000 rules on a loaded 2-CPU host, with
  // systemd's TimeoutStopSec at 30 s). Callable from any thread, while
  // another one runs maybe_start().
  void stop();

 private:
  // stop()'s side and the merge thread's, each written by one and read by
  // the other (seq_cst: one of the two always sees the other's store, so
  // the merge never stays at the lowest priority past a stop).
  std::atomic<bool> stopped_{false};
  std::atomic<pid_t> merge_tid_{0};  // the running merge's thread, 0 before it set its priority
  std::atomic<int> stop_nice_{0};    // the nice of the thread that called stop()
  std::future<Result<std::shared_ptr<const MergedRules>>> pending_;
  uint64_t retry_after_ns_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace psgate
