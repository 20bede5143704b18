// The control operations: every change an operator or a scheduler can make,
// applied by building a new snapshot and publishing it (never by touching a
// data lcore's state), then persisted to the state file. One registry of
// commands (name, help, handler) serves the control socket; psgatectl mirrors
// it one to one. See docs/control-protocol.md.
//
// Threading: handle() and tick() run on the control thread only. The other
// non-lcore readers (stats printing, DPDK telemetry) use the *_locked
// accessors, which hold the snapshot mutex that publishing takes, so a
// snapshot is never freed under them.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/config.h"
#include "psgate/control_request.h"  // CommandInfo, the typed requests
#include "psgate/dataplane.h"
#include "psgate/job_registry.h"
#include "psgate/policy.h"
#include "psgate/result.h"
#include "psgate/snapshot.h"

namespace psgate {

class ControlPlane {
 public:
  // Loads the state file if `config.control.state` names one that exists
  // (jobs, order and policy come from it then); otherwise starts from the
  // config's [[jobs]]. A corrupt state file is an error: nothing is loaded.
  static Result<std::unique_ptr<ControlPlane>> create(Dataplane& dataplane, const ConfigSpec& config);

  // Publishes the initial job set (the state file's, if any).
  Result<bool> start();

  // One request object -> one reply object ({"ok": ...}).
  nlohmann::json handle(const nlohmann::json& request);
  // Periodic work on the control thread: policy evaluation.
  void tick(uint64_t now_ns);

  static const std::vector<CommandInfo>& commands();
  size_t job_count() const { return jobs_.size(); }

  // Counters with per-job baselines applied (a reused job slot starts from zero).
  Totals totals_locked(bool with_histograms);
  // Calls fn(snapshot) with the snapshot pinned. fn must not call back into
  // totals_locked or with_snapshot (same mutex).
  void with_snapshot(const std::function<void(const Snapshot&)>& fn);

 private:
  ControlPlane(Dataplane& dataplane, const ConfigSpec& config, JobRegistry jobs);

  // The operations, one per command, on requests parse_control_request has
  // already checked; they check only what needs the current state.
  Result<nlohmann::json> apply(const HealthRequest&);
  Result<nlohmann::json> apply(const JobsListRequest&);
  Result<nlohmann::json> apply(const JobsAddRequest&);
  Result<nlohmann::json> apply(const JobsRemoveRequest&);
  Result<nlohmann::json> apply(const OrderRequest&);
  Result<nlohmann::json> apply(const RankRequest&);
  Result<nlohmann::json> apply(const ClassSetRequest&);
  Result<nlohmann::json> apply(const ShaperSetRequest&);
  Result<nlohmann::json> apply(const ProgressRequest&);
  Result<nlohmann::json> apply(const PolicyRequest&);
  Result<nlohmann::json> apply(const StatsRequest&);
  Result<nlohmann::json> apply(const ConfigRequest&);

  // Effective ranks under the current policy, by job id.
  std::unordered_map<uint32_t, JobRanks> effective_ranks(uint64_t now_ns);
  // Builds and publishes a snapshot from jobs_ + config_, then persists.
  Result<bool> publish(uint64_t now_ns);
  Result<bool> persist() const;
  nlohmann::json job_json(const JobRecord& job, const Snapshot& snap) const;
  nlohmann::json policy_json() const;
  Totals adjusted(Totals totals) const;

  Dataplane& dataplane_;
  ConfigSpec config_;  // the configuration in force (live changes applied)
  JobRegistry jobs_;
  PolicyParams policy_;
  PolicyState policy_state_;
  std::unordered_map<uint32_t, JobRanks> applied_ranks_;
  std::array<PortLive, kPortCount> live_;  // shaper and class parameters in force, per port
  std::vector<JobTotals> baselines_;  // by slot: counters when the slot was assigned
  uint32_t generation_ = 1;
  uint64_t started_ns_ = 0;
  std::mutex snapshot_mutex_;
};

// The configuration as JSON, in the TOML's structure (units in text form).
nlohmann::json config_to_json(const ConfigSpec& config);

uint64_t monotonic_ns();

}  // namespace psgate
