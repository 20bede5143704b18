// SPDX-License-Identifier: BSD-3-Clause
// Scheduling policies as pure functions: (params, state, jobs, now) -> ranks.
//
// Ranks are 0 = highest priority. The input jobs arrive in the operator's order
// (set by `order`/`rank`, ties by id); the output has one JobRanks per input
// job, in input order, never sorted. Nothing here reads a clock, touches a
// global or does I/O: the control-plane timer passes `now_ns` and keeps
// `PolicyState` between calls, so a test can replay any timeline by hand.
//
// Semantics, per policy (n = number of jobs, i = position in the input):
//   static            rank = i.
//   fifo              rank = 0 for every job: one class, the papers' baseline.
//   tensorlights-one  the first input job rank 0, every other job rank 1.
//   round-robin       the operator's order rotated left by r = rotation % n, so
//                     job i gets rank (i - r) mod n and job r is on top.
//                     * kTime: the first evaluation only starts the clock
//                       (started, last_rotation_ns = now). Afterwards an
//                       evaluation at least one whole interval after the last
//                       rotation rotates once, and last_rotation_ns advances
//                       by the k whole intervals elapsed (not to now) so that
//                       irregular timer ticks do not make the period drift:
//                       evaluated at least once an interval, rotation ==
//                       floor((now - start) / interval). Never more than once
//                       per evaluation: with an interval shorter than the
//                       evaluation period, k rotations at once would skip
//                       jobs' turns (k a multiple of n: the same job on top
//                       for ever), and after a stall every job in turn gets
//                       the top rather than a jump. Time is tracked even
//                       while there are no jobs. interval_ns == 0 disables
//                       rotation (no division by zero; the config rejects 0
//                       anyway), and a `now` before last_rotation_ns rotates
//                       nothing (no unsigned underflow).
//                     * kIteration: rotate once when the job currently on top
//                       has completed a PS burst since the last rotation
//                       (its iterations_seen > top_iterations_seen), then
//                       record the new top job's count. At most one rotation
//                       per evaluation: bursts are what we count, not time.
//                       The interval bounds a turn: a top job that completes
//                       no burst for that long (it finished, stalled, or
//                       pulls without the gaps that end a burst) gives up
//                       the top, so it cannot starve the others for good.
//                       The first evaluation with jobs only records the top
//                       job's count. If the top job's count is below the
//                       recorded one, a different job has reached the top
//                       (jobs were added or removed): re-record without
//                       rotating rather than wait for it to catch up.
//                     Jobs added or removed between evaluations change n, and
//                     `rotation % n` with it: the job on top would change at
//                     every job change, its turn cut short or another given
//                     two. So the rotation is first re-anchored on the job
//                     that was on top (rotation advanced until it is on top
//                     again); if that job left, the first job after it in
//                     the last evaluation's order that is still there takes
//                     the top (several may have changed at once), and its
//                     turn starts.
//   progress          JPAS greedy: reported.fraction ascending, least
//                     progressed first. A job that never reported counts as 0
//                     (it is in its early stage, which JPAS shortens), as
//                     does NaN. Ties keep input order; ranks are 0..n-1.
//   batch             app-aware SDN: reported batch ascending; a job that never
//                     reported counts as batch 0 (it has just started). Ties
//                     keep input order. The job at sorted position p gets
//                     pull_rank 2p and push_rank 2p+1: within a job, pull
//                     (from the PS) goes before push (to the PS), and every
//                     direction of an earlier job beats every direction of a
//                     later one.
//   shortest-first    MLNet-like: bytes remaining in the current iteration
//                     ascending, remaining = bytes_per_iteration -
//                     min(bytes_this_iteration, bytes_per_iteration). Jobs
//                     with unknown bytes_per_iteration (0) go after all known
//                     ones. Ties keep input order; ranks are 0..n-1.
// Every result's ranks lie in [0, 2n) (in [0, n) except for batch).
#include "psgate/policy.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace psgate {
namespace {

// Same rank in both directions.
JobRanks both(uint32_t id, uint32_t rank) { return JobRanks{id, rank, rank}; }

// Stable-sorts input positions by `key(job)` ascending and returns, for each
// input position, its position in the sorted order. Stability is what makes
// ties fall back to the operator's order.
template <typename Key>
std::vector<uint32_t> sorted_positions(const std::vector<PolicyJob>& jobs, Key key) {
  std::vector<uint32_t> order(jobs.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return key(jobs[a]) < key(jobs[b]); });
  std::vector<uint32_t> pos(jobs.size());
  for (uint32_t p = 0; p < order.size(); ++p) pos[order[p]] = p;
  return pos;
}

// Re-anchors round-robin's rotation on the job on top at the last
// evaluation; see the file comment.
void keep_top(PolicyState& state, const std::vector<PolicyJob>& jobs, uint64_t now_ns) {
  const size_t n = jobs.size();
  if (!state.top_known || n == 0) return;
  const size_t r = state.rotation % n;
  size_t at = n;
  for (size_t i = 0; i < n && at == n; ++i)
    if (jobs[i].id == state.top_id) at = i;
  if (at == n) {
    // It left: the first job after it in the last order that is still
    // there (several may have changed at once), else the first.
    std::unordered_map<uint32_t, size_t> index;
    for (size_t i = 0; i < n; ++i) index.emplace(jobs[i].id, i);
    const size_t m = state.order.size();
    const size_t from =
        static_cast<size_t>(std::find(state.order.begin(), state.order.end(), state.top_id) - state.order.begin());
    at = 0;
    for (size_t k = 1; k < m; ++k) {
      auto it = index.find(state.order[(from + k) % m]);
      if (it != index.end()) {
        at = it->second;
        break;
      }
    }
    state.last_rotation_ns = now_ns;
    state.top_iterations_seen = jobs[at].iterations_seen;
  }
  state.rotation += (at + n - r) % n;
}

// Advances round-robin's rotation count; see the file comment.
void advance_rotation(const PolicyParams& params, PolicyState& state, const std::vector<PolicyJob>& jobs,
                      uint64_t now_ns) {
  if (params.rotate_on == RotateOn::kTime) {
    if (!state.started) {
      state.started = true;
      state.last_rotation_ns = now_ns;
      return;
    }
    if (params.interval_ns == 0 || now_ns < state.last_rotation_ns) return;
    const uint64_t k = (now_ns - state.last_rotation_ns) / params.interval_ns;
    if (k == 0) return;
    ++state.rotation;
    state.last_rotation_ns += k * params.interval_ns;  // <= now_ns, cannot overflow
    return;
  }

  // kIteration: nothing to watch without jobs; keep the state as it is so the
  // first job to arrive is baselined rather than compared with a stale count.
  if (jobs.empty()) return;
  const auto top = [&]() -> const PolicyJob& { return jobs[state.rotation % jobs.size()]; };
  if (!state.started) {
    state.started = true;
    state.last_rotation_ns = now_ns;
    state.top_iterations_seen = top().iterations_seen;
    return;
  }
  const uint64_t seen = top().iterations_seen;
  const bool turn_over = params.interval_ns != 0 && now_ns >= state.last_rotation_ns &&
                         now_ns - state.last_rotation_ns >= params.interval_ns;
  if (seen < state.top_iterations_seen && !turn_over) {
    state.top_iterations_seen = seen;  // a different job is on top now: its turn starts
    state.last_rotation_ns = now_ns;
    return;
  }
  if (seen == state.top_iterations_seen && !turn_over) return;
  ++state.rotation;
  state.last_rotation_ns = now_ns;
  state.top_iterations_seen = top().iterations_seen;
}

}  // namespace

const char* rotate_on_name(RotateOn on) { return on == RotateOn::kIteration ? "iteration" : "time"; }

std::optional<RotateOn> rotate_on_from_name(std::string_view name) {
  if (name == "time") return RotateOn::kTime;
  if (name == "iteration") return RotateOn::kIteration;
  return std::nullopt;
}

std::optional<PolicyKind> policy_from_name(std::string_view name) {
  for (const PolicyName& n : kPolicyNames)
    if (n.name == name) return n.kind;
  return std::nullopt;
}

const char* policy_name(PolicyKind kind) {
  for (const PolicyName& n : kPolicyNames)
    if (n.kind == kind) return n.name.data();  // literals: NUL-terminated
  return "unknown";
}

std::string policy_name_list() {
  std::string out;
  for (const PolicyName& n : kPolicyNames) {
    if (!out.empty()) out += ", ";
    out += n.name;
  }
  return out;
}

std::vector<JobRanks> evaluate_policy(const PolicyParams& params, PolicyState& state,
                                      const std::vector<PolicyJob>& jobs, uint64_t now_ns) {
  const size_t n = jobs.size();
  std::vector<JobRanks> out;
  out.reserve(n);

  switch (params.kind) {
    case PolicyKind::kStatic:
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, static_cast<uint32_t>(i)));
      break;

    case PolicyKind::kFifo:
      for (const PolicyJob& j : jobs) out.push_back(both(j.id, 0));
      break;

    case PolicyKind::kTensorLightsOne:
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, i == 0 ? 0 : 1));
      break;

    case PolicyKind::kRoundRobin: {
      keep_top(state, jobs, now_ns);
      advance_rotation(params, state, jobs, now_ns);
      if (n == 0) break;
      const size_t r = state.rotation % n;
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, static_cast<uint32_t>((i + n - r) % n)));
      state.top_known = true;
      state.top_id = jobs[r].id;
      state.order.resize(n);
      for (size_t i = 0; i < n; ++i) state.order[i] = jobs[i].id;
      break;
    }

    case PolicyKind::kProgress: {
      const auto pos = sorted_positions(jobs, [](const PolicyJob& j) {
        const double f = j.reported.fraction.value_or(0.0);
        return std::isnan(f) ? 0.0 : f;  // NaN would break the strict weak order
      });
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, pos[i]));
      break;
    }

    case PolicyKind::kBatch: {
      const auto pos = sorted_positions(jobs, [](const PolicyJob& j) { return j.reported.batch.value_or(0); });
      for (size_t i = 0; i < n; ++i) out.push_back(JobRanks{jobs[i].id, 2 * pos[i], 2 * pos[i] + 1});
      break;
    }

    case PolicyKind::kShortestFirst: {
      const auto pos = sorted_positions(jobs, [](const PolicyJob& j) {
        const bool unknown = j.bytes_per_iteration == 0;
        const uint64_t remaining = j.bytes_per_iteration - std::min(j.bytes_this_iteration, j.bytes_per_iteration);
        return std::pair{unknown, remaining};  // known (false) before unknown (true)
      });
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, pos[i]));
      break;
    }

    default:  // an out-of-range kind: behave as static rather than return nothing
      for (size_t i = 0; i < n; ++i) out.push_back(both(jobs[i].id, static_cast<uint32_t>(i)));
      break;
  }
  return out;
}

}  // namespace psgate
