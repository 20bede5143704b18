// SPDX-License-Identifier: BSD-3-Clause
// The control plane's authoritative list of jobs: ids, rules, operator ranks,
// reported progress, and the counter slot each job owns. Pure (no DPDK): the
// control operations compile it into snapshots (config/compile.h) and persist
// it in the state file (control/state_file.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
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
  uint32_t slot = 0;      // assigned by the registry
  uint64_t sequence = 0;  // insertion order: breaks rank ties
};

class JobRegistry {
 public:
  explicit JobRegistry(uint32_t max_jobs);

  // From the config's [[jobs]].
  static Result<JobRegistry> from_config(const ConfigSpec& config);

  // `rank` absent: after every existing job (job.spec.rank is ignored).
  // Errors: duplicate id, no free slot, no rules, bad name.
  Result<const JobRecord*> add(JobRecord job, std::optional<uint32_t> rank);
  Result<bool> remove(uint32_t id);
  // Listed jobs take ranks 0..n-1 in that order; the others follow (n, n+1, ...)
  // in their current order. Errors: unknown or repeated id.
  Result<bool> set_order(const std::vector<uint32_t>& ids);
  Result<const JobRecord*> set_rank(uint32_t id, uint32_t rank);
  Result<const JobRecord*> set_progress(uint32_t id, const JobProgress& progress);

  const JobRecord* find(uint32_t id) const;
  // Sorted by (rank, sequence): the operator's order.
  std::vector<const JobRecord*> in_rank_order() const;
  size_t size() const { return jobs_.size(); }
  uint32_t max_jobs() const { return max_jobs_; }

 private:
  Result<uint32_t> allocate_slot();

  uint32_t max_jobs_;
  std::vector<JobRecord> jobs_;
  std::vector<bool> slot_used_;
  uint32_t next_slot_ = 0;  // slots are handed out round-robin so a freed slot is reused last
  uint64_t next_sequence_ = 0;
};

}  // namespace psgate
