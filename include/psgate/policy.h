// SPDX-License-Identifier: BSD-3-Clause
// Scheduling policies from the literature, as pure functions: from the jobs,
// their reported and measured state, and the time, to ranks. The control plane
// runs the chosen one on a timer and applies the result through the same
// snapshot path as an operator's order change.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace psgate {

enum class PolicyKind {
  kStatic,           // the operator's order
  kFifo,             // every job in one class: the baseline the papers compare against
  kTensorLightsOne,  // the operator's first job on top, all others below it
  kRoundRobin,       // rotate the operator's order every interval (TensorLights-RR)
  kProgress,         // JPAS: least reported progress first, ties keep operator order
  kBatch,            // app-aware SDN: earlier batch first; within a job pull before push
  kShortestFirst,    // MLNet-like: fewest bytes remaining in the current iteration first
};

// Every policy's name, in the order documents and help list them: the one
// list that the config, the control protocol, psgatectl and the docs use.
struct PolicyName {
  std::string_view name;
  PolicyKind kind;
};
inline constexpr PolicyName kPolicyNames[] = {
    {"static", PolicyKind::kStatic},
    {"fifo", PolicyKind::kFifo},
    {"tensorlights-one", PolicyKind::kTensorLightsOne},
    {"round-robin", PolicyKind::kRoundRobin},
    {"progress", PolicyKind::kProgress},
    {"batch", PolicyKind::kBatch},
    {"shortest-first", PolicyKind::kShortestFirst},
};

std::optional<PolicyKind> policy_from_name(std::string_view name);
const char* policy_name(PolicyKind kind);
// "static, fifo, ..., shortest-first": the names for an error or a help line.
std::string policy_name_list();

enum class RotateOn { kTime, kIteration };
// "time" / "iteration": the one spelling of RotateOn in every file, request
// and document that carries it.
const char* rotate_on_name(RotateOn on);
std::optional<RotateOn> rotate_on_from_name(std::string_view name);

// A policy's interval when none is given: round-robin's rotation period
// 20s, the others' re-evaluation 1s (the `policy` command's defaults).
constexpr uint64_t default_policy_interval_ns(PolicyKind kind) {
  return kind == PolicyKind::kRoundRobin ? 20'000'000'000ull : 1'000'000'000ull;
}

struct PolicyParams {
  PolicyKind kind = PolicyKind::kStatic;
  // Round-robin's rotation period, the others' re-evaluation period. The
  // default is the default kind's, so a config without [policy] reports what
  // `policy static` would set.
  uint64_t interval_ns = default_policy_interval_ns(PolicyKind::kStatic);
  RotateOn rotate_on = RotateOn::kTime;
  bool operator==(const PolicyParams&) const = default;
};

// The shortest rotation period any input may set (the socket, the config,
// the state file): shorter would only churn the data plane's classes.
inline constexpr uint64_t kMinPolicyIntervalNs = 1'000'000;  // 1ms
inline bool valid_policy_interval_ns(uint64_t ns) { return ns >= kMinPolicyIntervalNs; }

// What a job reports about itself (psgatectl progress); each field absent
// until first reported. The registry keeps it; policies rank on it.
struct JobProgress {
  std::optional<double> fraction;  // 0..1
  std::optional<uint64_t> iteration;
  std::optional<uint64_t> batch;
};

// A progress fraction any input may carry: 0..1 (NaN is not).
inline bool valid_progress_fraction(double f) { return f >= 0.0 && f <= 1.0; }

// What a policy knows about one job. Jobs are given in the operator's order
// (the order set by `order`/`rank`, ties by id). Not a model of a job but the
// policy's input: what the job reported plus what the data plane measured,
// without rules or slots, so that policies stay pure and testable alone. The
// control plane fills it from its registry and the telemetry.
struct PolicyJob {
  uint32_t id = 0;
  JobProgress reported;
  // Measured from traffic.
  uint64_t iterations_seen = 0;       // completed PS bursts
  uint64_t bytes_per_iteration = 0;   // 0 when unknown
  uint64_t bytes_this_iteration = 0;  // since the current burst began
};

// Per-job result: ranks for each direction (0 = highest). Most policies give
// both directions the same rank; `batch` ranks pull above push.
struct JobRanks {
  uint32_t id = 0;
  uint32_t pull_rank = 0;
  uint32_t push_rank = 0;
  bool operator==(const JobRanks&) const = default;
};

// State a policy carries between evaluations (round-robin's rotation).
struct PolicyState {
  uint64_t rotation = 0;          // how many times the order rotated
  uint64_t last_rotation_ns = 0;  // when
  bool started = false;
  uint64_t top_iterations_seen = 0;  // rotate-on-iteration: the top job's count at the last rotation
  // The job round-robin put on top at the last evaluation, and the jobs'
  // order then (ids): jobs added or removed re-anchor the rotation on it, or
  // on the first job after it that is still there (policy.cc).
  bool top_known = false;
  uint32_t top_id = 0;
  std::vector<uint32_t> order;
};

// Returns one JobRanks per input job, in input order. Pure: the same inputs
// and state give the same output and the same new state.
std::vector<JobRanks> evaluate_policy(const PolicyParams& params, PolicyState& state,
                                      const std::vector<PolicyJob>& jobs, uint64_t now_ns);

}  // namespace psgate
