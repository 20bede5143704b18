// SPDX-License-Identifier: BSD-3-Clause
// The control plane's authoritative list of jobs: ids, rules, operator ranks,
// reported progress, and the counter slot each job owns. Pure (no DPDK): the
// control operations compile it into snapshots (config/compile.h) and persist
// it in the state file (control/state_file.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "psgate/config.h"
#include "psgate/policy.h"  // JobProgress
#include "psgate/result.h"

namespace psgate {

// A job as the registry holds it: the user's spec (from [[jobs]] or `jobs
// add`; `order` and `rank` change its rank), what the job reported, and what
// the registry assigned. Snapshots are compiled from it (config/compile.h).
struct JobRecord {
  JobSpec spec;
  JobProgress progress;
  uint32_t slot = 0;       // assigned by the registry
  uint64_t sequence = 0;   // insertion order: breaks rank ties
  uint32_t partition = 0;  // the rule partition its rules are matched in (job_matcher.h)
  std::string rules_file;  // its rules file in the state (state_file.h); empty until written
};

// Rules per partition of the matcher: a job joins the newest partition while
// its rules fit, so adding or removing a job rebuilds at most this many rules
// (plus the job's own, when one job alone has more). The trade: a burst that
// misses the flow cache visits one ACL per partition until one matches, so
// fewer, larger partitions match faster and rebuild slower. Measured with
// perf/control-scale (1,000 jobs x 100 rules, 2 vCPUs): removing a job from a
// full partition of 2,048 took p50 71 / p99 97 ms, too close to the 100 ms
// target; 1,024 halves the rebuild.
inline constexpr size_t kRulesPerPartition = 1024;

class JobRegistry {
 public:
  explicit JobRegistry(uint32_t max_jobs);

  // From the config's [[jobs]].
  static Result<JobRegistry> from_config(const ConfigSpec& config);

  // `rank` absent: after every existing job (job.spec.rank is ignored).
  // A job added again while the slot it was removed from still drains gets
  // that slot back: the packets queued there are its own (a job whose rules
  // changed, removed and added in one change, keeps its slot).
  // Errors: duplicate id, no free slot (one another job's removal left
  // draining does not count), no rules, bad name. `no_slot`, if given, says
  // whether it failed for want of a slot alone.
  Result<const JobRecord*> add(JobRecord job, std::optional<uint32_t> rank, bool* no_slot = nullptr);
  // The job's slot is not free at once: it drains (draining_slots) until
  // release_slot, so a new job is neither charged with the removed one's
  // still-queued packets nor given them (a slot's packets follow its job's
  // class). The control plane releases it once no lcore can still admit to
  // it and every packet it admitted has left or been dropped.
  Result<bool> remove(uint32_t id);
  // Slots of removed jobs not released yet, in removal order.
  std::vector<uint32_t> draining_slots() const;
  // Whether `slot` drains the packets of the removed job `job_id` (which,
  // added again, takes it back: JobRegistry::add).
  bool drains_for(uint32_t slot, uint32_t job_id) const;
  size_t draining_count() const { return draining_.size(); }
  // Makes a draining slot free (anything else: nothing happens).
  void release_slot(uint32_t slot);
  // Listed jobs take ranks 0..n-1 in that order; the others follow (n, n+1, ...)
  // in their current order. Errors: unknown or repeated id.
  Result<bool> set_order(const std::vector<uint32_t>& ids);
  Result<const JobRecord*> set_rank(uint32_t id, uint32_t rank);
  Result<const JobRecord*> set_progress(uint32_t id, const JobProgress& progress);
  // Where the state keeps the job's rules (control/state_file.h).
  void set_rules_file(uint32_t id, std::string name);

  const JobRecord* find(uint32_t id) const;
  // Sorted by (rank, sequence): the operator's order.
  std::vector<const JobRecord*> in_rank_order() const;
  // The order they were added (sequence): rule precedence, and the state
  // file's order. The registry keeps its jobs that way, so no sort.
  std::vector<const JobRecord*> in_age_order() const;
  size_t size() const { return jobs_.size(); }
  uint32_t max_jobs() const { return max_jobs_; }
  size_t partition_count() const { return partition_rules_.size(); }

 private:
  Result<uint32_t> allocate_slot();
  uint32_t assign_partition(size_t rules);
  // After a removal: a partition (not the newest, still filling) left at a
  // quarter full or less joins its older neighbour when both fit in one, so
  // partitions do not thin out into many small ones. Its jobs are the next
  // in age after the neighbour's, so age order holds, and only the
  // neighbour is rebuilt: a bounded cost, never a rebuild of every rule.
  void join_if_thin(uint32_t partition);

  uint32_t max_jobs_;
  std::vector<JobRecord> jobs_;
  std::unordered_map<uint32_t, size_t> index_;  // job id -> position in jobs_
  enum class SlotUse : uint8_t { kFree, kUsed, kDraining };
  std::vector<SlotUse> slot_use_;
  struct Draining {
    uint32_t slot;    // a kDraining slot
    uint32_t job_id;  // the job it was removed from
  };
  std::vector<Draining> draining_;  // in removal order
  uint32_t next_slot_ = 0;          // slots are handed out round-robin so a freed slot is reused last
  uint64_t next_sequence_ = 0;
  std::map<uint32_t, size_t> partition_rules_;  // partition -> rules in it (no empty ones)
  uint32_t next_partition_ = 0;
};

}  // namespace psgate
