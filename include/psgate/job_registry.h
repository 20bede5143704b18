// The control plane's authoritative list of jobs: ids, rules, operator ranks,
// reported progress, and the counter slot each job owns. Pure (no DPDK): the
// control operations turn it into snapshots and persist it as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/config.h"
#include "psgate/result.h"

namespace psgate {

struct JobProgress {
  std::optional<double> fraction;      // 0..1
  std::optional<uint64_t> iteration;
  std::optional<uint64_t> batch;
};

struct JobRecord {
  uint32_t id = 0;
  std::string name;
  uint32_t rank = 0;                   // the operator's rank
  std::vector<MatchRule> match;
  std::optional<RateSpec> police;
  JobProgress progress;
  uint32_t slot = 0;                   // assigned by the registry
  uint64_t sequence = 0;               // insertion order: breaks rank ties
};

class JobRegistry {
 public:
  explicit JobRegistry(uint32_t max_jobs);

  // From the config's [[jobs]].
  static Result<JobRegistry> from_config(const ConfigSpec& config);
  // From a state file's JSON; any problem rejects the whole file.
  static Result<JobRegistry> from_state(const nlohmann::json& state, uint32_t max_jobs);
  nlohmann::json to_state() const;  // {"jobs": [...]}: what from_state reads

  // `rank` absent: after every existing job. Errors: duplicate id, no free slot,
  // no rules, bad name.
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
  uint32_t next_slot_ = 0;   // slots are handed out round-robin so a freed slot is reused last
  uint64_t next_sequence_ = 0;
};

}  // namespace psgate
