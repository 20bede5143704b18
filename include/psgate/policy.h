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
  kStatic,          // the operator's order
  kFifo,            // every job in one class: the baseline the papers compare against
  kTensorLightsOne, // the operator's first job on top, all others below it
  kRoundRobin,      // rotate the operator's order every interval (TensorLights-RR)
  kProgress,        // JPAS: least reported progress first, ties keep operator order
  kBatch,           // app-aware SDN: earlier batch first; within a job pull before push
  kShortestFirst,   // MLNet-like: fewest bytes remaining in the current iteration first
};

std::optional<PolicyKind> policy_from_name(std::string_view name);
const char* policy_name(PolicyKind kind);

enum class RotateOn { kTime, kIteration };

struct PolicyParams {
  PolicyKind kind = PolicyKind::kStatic;
  uint64_t interval_ns = 20'000'000'000;  // round-robin rotation period
  RotateOn rotate_on = RotateOn::kTime;
};

// What a policy knows about one job. Jobs are given in the operator's order
// (the order set by `order`/`rank`, ties by id).
struct PolicyJob {
  uint32_t id = 0;
  // Reported by the job (psgatectl progress); absent when never reported.
  std::optional<double> progress_fraction;
  std::optional<uint64_t> iteration;
  std::optional<uint64_t> batch;
  // Measured from traffic.
  uint64_t iterations_seen = 0;        // completed PS bursts
  uint64_t bytes_per_iteration = 0;    // 0 when unknown
  uint64_t bytes_this_iteration = 0;   // since the current burst began
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
  uint64_t rotation = 0;             // how many times the order rotated
  uint64_t last_rotation_ns = 0;     // when
  bool started = false;
  uint64_t top_iterations_seen = 0;  // rotate-on-iteration: the top job's count at the last rotation
};

// Returns one JobRanks per input job, in input order. Pure: the same inputs
// and state give the same output and the same new state.
std::vector<JobRanks> evaluate_policy(const PolicyParams& params, PolicyState& state,
                                      const std::vector<PolicyJob>& jobs, uint64_t now_ns);

}  // namespace psgate
