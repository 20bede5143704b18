// SPDX-License-Identifier: BSD-3-Clause
// Scheduling policies: tables of (jobs -> ranks) per policy, round-robin over a
// hand-ticked timeline, and random inputs checked against an O(n^2) reference
// ("rank = how many jobs sort strictly before me") that shares no code with
// the stable sort in src/policy/policy.cc.
#include "psgate/policy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace psgate {
namespace {

constexpr uint64_t kSec = 1'000'000'000;  // ns
constexpr uint64_t kMs = 1'000'000;       // ns

constexpr PolicyKind kAllKinds[] = {
    PolicyKind::kStatic,   PolicyKind::kFifo,  PolicyKind::kTensorLightsOne, PolicyKind::kRoundRobin,
    PolicyKind::kProgress, PolicyKind::kBatch, PolicyKind::kShortestFirst,
};

PolicyJob job(uint32_t id) {
  PolicyJob j;
  j.id = id;
  return j;
}
PolicyJob with_progress(uint32_t id, std::optional<double> f) {
  PolicyJob j = job(id);
  j.reported.fraction = f;
  return j;
}
PolicyJob with_batch(uint32_t id, std::optional<uint64_t> b) {
  PolicyJob j = job(id);
  j.reported.batch = b;
  return j;
}
PolicyJob with_bytes(uint32_t id, uint64_t per_iter, uint64_t this_iter) {
  PolicyJob j = job(id);
  j.bytes_per_iteration = per_iter;
  j.bytes_this_iteration = this_iter;
  return j;
}
PolicyJob with_iters(uint32_t id, uint64_t seen) {
  PolicyJob j = job(id);
  j.iterations_seen = seen;
  return j;
}

// Expected ranks given as {pull, push} pairs, one per input job in input order.
std::vector<JobRanks> expect(const std::vector<PolicyJob>& jobs,
                             const std::vector<std::pair<uint32_t, uint32_t>>& ranks) {
  std::vector<JobRanks> out;
  for (size_t i = 0; i < jobs.size() && i < ranks.size(); ++i)
    out.push_back(JobRanks{jobs[i].id, ranks[i].first, ranks[i].second});
  return out;
}
// Same rank both ways.
std::vector<std::pair<uint32_t, uint32_t>> same(const std::vector<uint32_t>& r) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (uint32_t x : r) out.emplace_back(x, x);
  return out;
}

std::string describe(const std::vector<JobRanks>& v) {
  std::string s;
  for (const JobRanks& r : v)
    s += "{" + std::to_string(r.id) + ":" + std::to_string(r.pull_rank) + "/" + std::to_string(r.push_rank) + "} ";
  return s;
}

// ---------------------------------------------------------------------------
// Stateless policies: one table.

struct TableCase {
  const char* name;
  PolicyKind kind;
  std::vector<PolicyJob> jobs;
  std::vector<std::pair<uint32_t, uint32_t>> ranks;  // {pull, push} per input job
};

std::vector<TableCase> table_cases() {
  const std::vector<PolicyJob> four{job(40), job(7), job(13), job(2)};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {
      // static: the operator's order, whatever the ids or reports say.
      {"static_empty", PolicyKind::kStatic, {}, {}},
      {"static_one", PolicyKind::kStatic, {job(9)}, same({0})},
      {"static_four", PolicyKind::kStatic, four, same({0, 1, 2, 3})},
      {"static_ignores_reports",
       PolicyKind::kStatic,
       {with_progress(1, 0.9), with_progress(2, 0.1), with_batch(3, 0)},
       same({0, 1, 2})},

      // fifo: one class.
      {"fifo_empty", PolicyKind::kFifo, {}, {}},
      {"fifo_four", PolicyKind::kFifo, four, same({0, 0, 0, 0})},

      // tensorlights-one: the first input job above all others.
      {"tl1_empty", PolicyKind::kTensorLightsOne, {}, {}},
      {"tl1_one", PolicyKind::kTensorLightsOne, {job(5)}, same({0})},
      {"tl1_four", PolicyKind::kTensorLightsOne, four, same({0, 1, 1, 1})},

      // progress: least progressed first; never reported and NaN count as 0.
      {"progress_empty", PolicyKind::kProgress, {}, {}},
      {"progress_ascending",
       PolicyKind::kProgress,
       {with_progress(1, 0.8), with_progress(2, 0.2), with_progress(3, 0.5)},
       same({2, 0, 1})},
      {"progress_ties_keep_input_order",
       PolicyKind::kProgress,
       {with_progress(1, 0.5), with_progress(2, 0.1), with_progress(3, 0.5), with_progress(4, 0.1)},
       same({2, 0, 3, 1})},
      {"progress_unreported_is_zero",
       PolicyKind::kProgress,
       {with_progress(1, 0.3), job(2), with_progress(3, 0.0), job(4)},
       same({3, 0, 1, 2})},
      {"progress_nan_is_zero",
       PolicyKind::kProgress,
       {with_progress(1, 0.3), with_progress(2, nan), with_progress(3, 0.1)},
       same({2, 0, 1})},
      {"progress_all_equal_is_static",
       PolicyKind::kProgress,
       {with_progress(1, 1.0), with_progress(2, 1.0), with_progress(3, 1.0)},
       same({0, 1, 2})},

      // batch: earlier batch first; pull 2p, push 2p+1; unreported = batch 0.
      {"batch_empty", PolicyKind::kBatch, {}, {}},
      {"batch_one", PolicyKind::kBatch, {with_batch(1, 7)}, {{0, 1}}},
      {"batch_ascending",
       PolicyKind::kBatch,
       {with_batch(1, 30), with_batch(2, 10), with_batch(3, 20)},
       {{4, 5}, {0, 1}, {2, 3}}},
      {"batch_ties_keep_input_order",
       PolicyKind::kBatch,
       {with_batch(1, 5), with_batch(2, 5), with_batch(3, 1)},
       {{2, 3}, {4, 5}, {0, 1}}},
      {"batch_unreported_is_zero",
       PolicyKind::kBatch,
       {with_batch(1, 1), job(2), with_batch(3, 0)},
       {{4, 5}, {0, 1}, {2, 3}}},
      {"batch_huge_numbers",
       PolicyKind::kBatch,
       {with_batch(1, UINT64_MAX), with_batch(2, UINT64_MAX - 1)},
       {{2, 3}, {0, 1}}},

      // shortest-first: fewest bytes remaining; unknown size last.
      {"sf_empty", PolicyKind::kShortestFirst, {}, {}},
      {"sf_remaining",
       PolicyKind::kShortestFirst,
       // remaining: 900, 100, 500
       {with_bytes(1, 1000, 100), with_bytes(2, 1000, 900), with_bytes(3, 600, 100)},
       same({2, 0, 1})},
      {"sf_overshoot_counts_as_zero",
       PolicyKind::kShortestFirst,
       // remaining: 0 (overshoot), 1, 0 (exactly done)
       {with_bytes(1, 100, 5000), with_bytes(2, 100, 99), with_bytes(3, 100, 100)},
       same({0, 2, 1})},
      {"sf_unknown_last",
       PolicyKind::kShortestFirst,
       // 1 unknown, 2 remaining 10^12, 3 unknown (even with bytes sent), 4 remaining 1
       {with_bytes(1, 0, 0), with_bytes(2, 1'000'000'000'000, 0), with_bytes(3, 0, 77), with_bytes(4, 10, 9)},
       same({2, 1, 3, 0})},
      {"sf_ties_keep_input_order",
       PolicyKind::kShortestFirst,
       {with_bytes(1, 100, 50), with_bytes(2, 80, 30), with_bytes(3, 50, 0)},
       same({0, 1, 2})},
  };
}

void PrintTo(const TableCase& c, std::ostream* os) { *os << c.name; }

class PolicyTable : public ::testing::TestWithParam<TableCase> {};

TEST_P(PolicyTable, RanksMatchTable) {
  const TableCase& c = GetParam();
  PolicyParams params;
  params.kind = c.kind;
  PolicyState state;
  const PolicyState before = state;
  const auto got = evaluate_policy(params, state, c.jobs, 123 * kSec);
  const auto want = expect(c.jobs, c.ranks);
  ASSERT_EQ(c.ranks.size(), c.jobs.size()) << "bad table row";
  EXPECT_EQ(got, want) << "got " << describe(got) << "\nwant " << describe(want);
  // Stateless policies leave the round-robin state alone.
  EXPECT_EQ(state.rotation, before.rotation);
  EXPECT_EQ(state.started, before.started);
  EXPECT_EQ(state.last_rotation_ns, before.last_rotation_ns);
  EXPECT_EQ(state.top_iterations_seen, before.top_iterations_seen);
}

INSTANTIATE_TEST_SUITE_P(Policy, PolicyTable, ::testing::ValuesIn(table_cases()),
                         [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------
// Round-robin on the clock.

// Ranks of the operator's order rotated left by r: job i gets (i - r) mod n.
std::vector<uint32_t> rotated(size_t n, uint64_t rotation) {
  std::vector<uint32_t> r(n);
  for (size_t i = 0; i < n; ++i) r[i] = static_cast<uint32_t>((i + n - rotation % n) % n);
  return r;
}

struct TimeStep {
  uint64_t now_ns;
  uint64_t rotation;  // expected after the evaluation
};

struct TimeCase {
  const char* name;
  uint64_t interval_ns;
  std::vector<TimeStep> steps;
};

void PrintTo(const TimeCase& c, std::ostream* os) { *os << c.name; }

class PolicyRoundRobinTime : public ::testing::TestWithParam<TimeCase> {};

TEST_P(PolicyRoundRobinTime, RotatesOncePerWholeInterval) {
  const TimeCase& c = GetParam();
  const std::vector<PolicyJob> jobs{job(10), job(20), job(30)};
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.interval_ns = c.interval_ns;
  PolicyState state;
  for (const TimeStep& s : c.steps) {
    const auto got = evaluate_policy(params, state, jobs, s.now_ns);
    EXPECT_EQ(state.rotation, s.rotation) << "at " << s.now_ns;
    EXPECT_EQ(got, expect(jobs, same(rotated(jobs.size(), s.rotation)))) << "at " << s.now_ns << ": " << describe(got);
  }
}

const uint64_t t0 = 1'000 * kSec;  // an arbitrary start, not 0

INSTANTIATE_TEST_SUITE_P(
    Policy, PolicyRoundRobinTime,
    ::testing::Values(
        // Default 20 s; the first call only starts the clock.
        TimeCase{"default_interval",
                 20 * kSec,
                 {{t0, 0},
                  {t0 + 20 * kSec - 1, 0},
                  {t0 + 20 * kSec, 1},
                  {t0 + 39 * kSec, 1},
                  {t0 + 41 * kSec, 2},
                  {t0 + 41 * kSec, 2},
                  {t0 + 60 * kSec, 3}}},
        // Evaluated less often than the interval (every 1.5): one rotation
        // per evaluation, never a jump over a job's turn.
        TimeCase{"one_rotation_per_evaluation",
                 10 * kSec,
                 {{t0, 0}, {t0 + 15 * kSec, 1}, {t0 + 30 * kSec, 2}, {t0 + 45 * kSec, 3}, {t0 + 60 * kSec, 4}}},
        // After a long gap (a stalled control thread), the next job's turn,
        // not a jump of 7; the period stays anchored (no drift): the next
        // rotation is due at 8 s, not at 8 s + 5 ns.
        TimeCase{"long_gap", kSec, {{0, 0}, {7 * kSec + 5, 1}, {8 * kSec - 1, 1}, {8 * kSec, 2}}},
        // Time going backwards (a test's or a caller's mistake) rotates nothing.
        TimeCase{"clock_backwards", kSec, {{t0, 0}, {t0 + 2 * kSec, 1}, {t0 + kSec, 1}, {t0 + 3 * kSec, 2}}},
        // interval 0 means never (no division by zero).
        TimeCase{"zero_interval_never_rotates", 0, {{t0, 0}, {t0 + 100 * kSec, 0}}}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PolicyRoundRobin, IrregularEvaluationsMatchFloorOfElapsed) {
  // Random gaps between evaluations, from none to a whole interval (the
  // control thread evaluates every 100 ms): rotation must always be
  // floor((now - start) / interval), the period anchored to the start.
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    const uint64_t interval = std::uniform_int_distribution<uint64_t>(1, 30 * kSec)(rng);
    std::uniform_int_distribution<uint64_t> gap(0, interval);
    const uint64_t start = std::uniform_int_distribution<uint64_t>(0, 1'000'000 * kSec)(rng);
    const size_t n = 1 + seed % 6;
    std::vector<PolicyJob> jobs;
    for (uint32_t i = 0; i < n; ++i) jobs.push_back(job(100 + i));

    PolicyParams params;
    params.kind = PolicyKind::kRoundRobin;
    params.interval_ns = interval;
    PolicyState state;
    uint64_t now = start;
    for (int step = 0; step < 500; ++step) {
      const auto got = evaluate_policy(params, state, jobs, now);
      const uint64_t want = (now - start) / interval;
      ASSERT_EQ(state.rotation, want) << "seed " << seed << " step " << step;
      ASSERT_EQ(state.last_rotation_ns, start + want * interval);
      ASSERT_EQ(got, expect(jobs, same(rotated(n, want)))) << describe(got);
      now += gap(rng);
    }
  }
}

// An interval shorter than the evaluation period: each evaluation passes the
// top on to the next job. (Rotating by every whole interval elapsed, two jobs
// with 50 ms turns evaluated every 100 ms rotated by 2: the same job on top
// for ever.)
TEST(PolicyRoundRobin, AnIntervalShorterThanTheEvaluationPeriodStillGivesEveryJobATurn) {
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.interval_ns = 50 * kMs;
  PolicyState state;
  const std::vector<PolicyJob> jobs{job(1), job(2)};
  std::vector<uint32_t> tops;
  for (uint64_t t = 0; t <= 500 * kMs; t += 100 * kMs) {
    const auto got = evaluate_policy(params, state, jobs, t0 + t);
    tops.push_back(got[0].pull_rank == 0 ? 1 : 2);
  }
  EXPECT_EQ(tops, (std::vector<uint32_t>{1, 2, 1, 2, 1, 2}));
}

TEST(PolicyRoundRobin, JobsAddedAndRemovedBetweenEvaluations) {
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.interval_ns = 10 * kSec;
  PolicyState state;

  // No jobs yet: the clock still runs, nothing comes out.
  EXPECT_TRUE(evaluate_policy(params, state, {}, t0).empty());
  EXPECT_TRUE(evaluate_policy(params, state, {}, t0 + 10 * kSec).empty());
  EXPECT_EQ(state.rotation, 1u);

  struct Step {
    std::vector<uint32_t> ids;
    uint64_t now_ns;
    uint64_t rotation;
    std::vector<uint32_t> ranks;
  };
  // A job added or removed does not move the top: the job on top keeps its
  // turn (by rotation % n alone, removing job 2 below put job 4 on top in
  // the middle of job 3's turn).
  const std::vector<Step> steps{
      {{1, 2, 3}, t0 + 15 * kSec, 1, {2, 0, 1}},        // 1 % 3 = 1: job 2 on top
      {{1, 2, 3, 4}, t0 + 20 * kSec, 2, {2, 3, 0, 1}},  // job added; the turn passes to job 3
      {{1, 3, 4}, t0 + 25 * kSec, 4, {2, 0, 1}},        // job 2 removed: job 3 keeps the top
      {{4}, t0 + 30 * kSec, 4, {0}},                    // job 3 left: the next, job 4, from now
      {{}, t0 + 40 * kSec, 5, {}},                      // none; the clock runs
      {{5, 6}, t0 + 51 * kSec, 6, {0, 1}},              // job 4 left: job 5 at its position
      {{5, 6}, t0 + 61 * kSec - 1, 6, {0, 1}},          // job 5's turn started at 51 s
      {{5, 6}, t0 + 61 * kSec, 7, {1, 0}},
  };
  for (const Step& s : steps) {
    std::vector<PolicyJob> jobs;
    for (uint32_t id : s.ids) jobs.push_back(job(id));
    const auto got = evaluate_policy(params, state, jobs, s.now_ns);
    EXPECT_EQ(state.rotation, s.rotation) << "at " << (s.now_ns - t0) / kSec << " s";
    EXPECT_EQ(got, expect(jobs, same(s.ranks))) << "at " << (s.now_ns - t0) / kSec << " s: " << describe(got);
  }
}

// Several jobs change at once (a batch of adds and removes, or a cluster
// leader that evaluates once a second): when the top job left, the top goes
// to the first job after it in the order that is still there, not to
// whichever job now sits at its old position.
TEST(PolicyRoundRobin, WhenTheTopLeavesWithOthersTheNextRemainingJobTakesIt) {
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.interval_ns = 10 * kSec;
  PolicyState state;
  std::vector<PolicyJob> jobs{job(1), job(2), job(3), job(4), job(5)};
  evaluate_policy(params, state, jobs, t0);
  evaluate_policy(params, state, jobs, t0 + 10 * kSec);
  const auto third = evaluate_policy(params, state, jobs, t0 + 20 * kSec);
  ASSERT_EQ(third, expect(jobs, same({3, 4, 0, 1, 2}))) << describe(third);  // job 3 on top
  jobs = {job(2), job(4), job(5)};                                           // jobs 1 and 3 removed
  const auto got = evaluate_policy(params, state, jobs, t0 + 25 * kSec);
  EXPECT_EQ(got, expect(jobs, same({2, 0, 1}))) << "job 5 skipped job 4's turn: " << describe(got);
}

// ---------------------------------------------------------------------------
// Round-robin at iteration boundaries.

struct IterStep {
  std::vector<PolicyJob> jobs;
  uint64_t rotation;  // expected after the evaluation
  std::vector<uint32_t> ranks;
};

struct IterCase {
  const char* name;
  std::vector<IterStep> steps;
};

void PrintTo(const IterCase& c, std::ostream* os) { *os << c.name; }

class PolicyRoundRobinIteration : public ::testing::TestWithParam<IterCase> {};

TEST_P(PolicyRoundRobinIteration, RotatesWhenTopJobFinishesABurst) {
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.rotate_on = RotateOn::kIteration;
  params.interval_ns = 1000 * kSec;  // a turn's bound, not reached here
  PolicyState state;
  uint64_t now = t0;
  int i = 0;
  for (const IterStep& s : GetParam().steps) {
    const auto got = evaluate_policy(params, state, s.jobs, now);
    EXPECT_EQ(state.rotation, s.rotation) << "step " << i;
    EXPECT_EQ(got, expect(s.jobs, same(s.ranks))) << "step " << i << ": " << describe(got);
    now += 100 * kSec;  // below the interval: time must not rotate anything here
    ++i;
  }
}

// A top job that completes no burst (it finished, stalled, or pulls without
// the gaps that end one) keeps the top for one interval at most: the others
// are not starved for good. Its turn starts when it reaches the top.
TEST(PolicyRoundRobin, OnIterationATopJobThatFinishesNoBurstGivesUpTheTopAfterTheInterval) {
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.rotate_on = RotateOn::kIteration;
  params.interval_ns = 10 * kSec;
  PolicyState state;
  const std::vector<PolicyJob> jobs{with_iters(1, 5), with_iters(2, 0)};
  evaluate_policy(params, state, jobs, t0);
  evaluate_policy(params, state, jobs, t0 + 10 * kSec - 1);
  EXPECT_EQ(state.rotation, 0u) << "a turn ended before its interval";
  evaluate_policy(params, state, jobs, t0 + 10 * kSec);
  EXPECT_EQ(state.rotation, 1u) << "job 1 kept the top without finishing a burst";
  evaluate_policy(params, state, jobs, t0 + 20 * kSec - 1);
  EXPECT_EQ(state.rotation, 1u);
  evaluate_policy(params, state, jobs, t0 + 20 * kSec);
  EXPECT_EQ(state.rotation, 2u);
}

INSTANTIATE_TEST_SUITE_P(
    Policy, PolicyRoundRobinIteration,
    ::testing::Values(IterCase{"top_job_bursts_drive_rotation",
                               {
                                   // First evaluation records job 1's count (5), no rotation.
                                   {{with_iters(1, 5), with_iters(2, 0), with_iters(3, 0)}, 0, {0, 1, 2}},
                                   // Others finish bursts: the top job did not, nothing moves.
                                   {{with_iters(1, 5), with_iters(2, 9), with_iters(3, 9)}, 0, {0, 1, 2}},
                                   // Job 1 finishes a burst: job 2 goes on top, its 9 recorded.
                                   {{with_iters(1, 6), with_iters(2, 9), with_iters(3, 9)}, 1, {2, 0, 1}},
                                   {{with_iters(1, 7), with_iters(2, 9), with_iters(3, 9)}, 1, {2, 0, 1}},
                                   // Job 2 finishes three bursts at once: still one rotation.
                                   {{with_iters(1, 7), with_iters(2, 12), with_iters(3, 9)}, 2, {1, 2, 0}},
                                   {{with_iters(1, 7), with_iters(2, 12), with_iters(3, 10)}, 3, {0, 1, 2}},
                                   // Wrapped around: job 1 on top again with 7 recorded.
                                   {{with_iters(1, 7), with_iters(2, 12), with_iters(3, 10)}, 3, {0, 1, 2}},
                                   {{with_iters(1, 8), with_iters(2, 12), with_iters(3, 10)}, 4, {2, 0, 1}},
                               }},
                      IterCase{"no_jobs_then_jobs_baselines",
                               {
                                   {{}, 0, {}},
                                   // The first job to appear is baselined, not compared with 0.
                                   {{with_iters(1, 50), with_iters(2, 3)}, 0, {0, 1}},
                                   {{with_iters(1, 51), with_iters(2, 3)}, 1, {1, 0}},
                               }},
                      IterCase{"top_job_removed",
                               {
                                   {{with_iters(1, 5), with_iters(2, 2), with_iters(3, 20)}, 0, {0, 1, 2}},
                                   {{with_iters(1, 6), with_iters(2, 2), with_iters(3, 20)}, 1, {2, 0, 1}},
                                   // Job 2 (on top) is removed: job 3, next in the order, takes
                                   // the top with its count (20) recorded, and keeps it until it
                                   // finishes a burst (by rotation % n alone it rotated at once).
                                   {{with_iters(1, 6), with_iters(3, 20)}, 1, {1, 0}},
                                   {{with_iters(1, 6), with_iters(3, 21)}, 2, {0, 1}},
                                   {{with_iters(1, 7), with_iters(3, 21)}, 3, {1, 0}},
                               }},
                      IterCase{"lower_count_on_top_rebaselines",
                               {
                                   {{with_iters(1, 100), with_iters(2, 1)}, 0, {0, 1}},
                                   // Job 1 removed, job 2 (count 1 < 100 recorded) now on top:
                                   // re-record instead of waiting for 100 bursts.
                                   {{with_iters(2, 1), with_iters(4, 0)}, 0, {0, 1}},
                                   {{with_iters(2, 2), with_iters(4, 0)}, 1, {1, 0}},
                               }},
                      IterCase{"single_job",
                               {
                                   {{with_iters(1, 0)}, 0, {0}},
                                   {{with_iters(1, 1)}, 1, {0}},
                                   {{with_iters(1, 1)}, 1, {0}},
                                   {{with_iters(1, 2)}, 2, {0}},
                               }}),
    [](const auto& info) { return std::string(info.param.name); });

// ---------------------------------------------------------------------------
// Names.

TEST(PolicyName, RoundTripsEveryKind) {
  std::set<std::string> names;
  for (PolicyKind k : kAllKinds) {
    const std::string name = policy_name(k);
    EXPECT_TRUE(names.insert(name).second) << "duplicate name " << name;
    const auto back = policy_from_name(name);
    ASSERT_TRUE(back.has_value()) << name;
    EXPECT_EQ(*back, k) << name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"static", "fifo", "tensorlights-one", "round-robin", "progress", "batch",
                                          "shortest-first"}));
}

TEST(PolicyName, UnknownNamesAreRejected) {
  for (const char* bad : {"", "Static", "FIFO", "round_robin", "roundrobin", "rr", "static ", " fifo", "tensorlights",
                          "shortest", "progress\n", "unknown"}) {
    EXPECT_FALSE(policy_from_name(bad).has_value()) << "'" << bad << "'";
  }
  // A name with an embedded NUL is not "static".
  EXPECT_FALSE(policy_from_name(std::string_view("static\0x", 8)).has_value());
}

// ---------------------------------------------------------------------------
// Random inputs: shape of every result, and the sorting policies against a
// reference that counts predecessors instead of sorting.

PolicyJob random_job(uint32_t id, std::mt19937_64& rng) {
  // Few distinct values so that ties are common.
  std::uniform_int_distribution<int> small(0, 4);
  PolicyJob j = job(id);
  if (small(rng) != 0) j.reported.fraction = small(rng) / 4.0;
  if (small(rng) != 0) j.reported.batch = small(rng);
  if (small(rng) != 0) j.reported.iteration = small(rng);
  j.iterations_seen = small(rng);
  j.bytes_per_iteration = small(rng) == 0 ? 0 : 1000 * small(rng);
  j.bytes_this_iteration = 500 * small(rng);
  return j;
}

// rank of job i = number of jobs j that sort before it: key_j < key_i, or an
// equal key earlier in the input.
template <typename Key>
std::vector<uint32_t> reference_ranks(const std::vector<PolicyJob>& jobs, Key key) {
  std::vector<uint32_t> r(jobs.size(), 0);
  for (size_t i = 0; i < jobs.size(); ++i)
    for (size_t j = 0; j < jobs.size(); ++j)
      if (key(jobs[j]) < key(jobs[i]) || (!(key(jobs[i]) < key(jobs[j])) && j < i)) ++r[i];
  return r;
}

std::vector<JobRanks> reference(PolicyKind kind, const std::vector<PolicyJob>& jobs) {
  std::vector<JobRanks> out;
  const size_t n = jobs.size();
  switch (kind) {
    case PolicyKind::kProgress: {
      const auto r = reference_ranks(jobs, [](const PolicyJob& j) { return j.reported.fraction.value_or(0.0); });
      for (size_t i = 0; i < n; ++i) out.push_back({jobs[i].id, r[i], r[i]});
      break;
    }
    case PolicyKind::kBatch: {
      const auto r = reference_ranks(jobs, [](const PolicyJob& j) { return j.reported.batch.value_or(0); });
      for (size_t i = 0; i < n; ++i) out.push_back({jobs[i].id, 2 * r[i], 2 * r[i] + 1});
      break;
    }
    case PolicyKind::kShortestFirst: {
      // Unknown size as "infinitely many bytes left".
      const auto r = reference_ranks(jobs, [](const PolicyJob& j) -> double {
        if (j.bytes_per_iteration == 0) return INFINITY;
        return j.bytes_this_iteration >= j.bytes_per_iteration
                   ? 0.0
                   : static_cast<double>(j.bytes_per_iteration - j.bytes_this_iteration);
      });
      for (size_t i = 0; i < n; ++i) out.push_back({jobs[i].id, r[i], r[i]});
      break;
    }
    default:
      break;
  }
  return out;
}

TEST(PolicyProperty, EveryPolicyGivesOneEntryPerJobInInputOrder) {
  std::mt19937_64 rng(20240611);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 40)(rng);
    std::vector<PolicyJob> jobs;
    std::vector<uint32_t> ids;
    // Distinct ids in a random (not sorted) order.
    std::set<uint32_t> used;
    while (jobs.size() < n) {
      const uint32_t id = std::uniform_int_distribution<uint32_t>(1, 1000)(rng);
      if (!used.insert(id).second) continue;
      jobs.push_back(random_job(id, rng));
    }
    const uint64_t now = std::uniform_int_distribution<uint64_t>(0, 1'000'000 * kSec)(rng);

    for (PolicyKind kind : kAllKinds) {
      for (RotateOn on : {RotateOn::kTime, RotateOn::kIteration}) {
        if (on == RotateOn::kIteration && kind != PolicyKind::kRoundRobin) continue;
        PolicyParams params;
        params.kind = kind;
        params.rotate_on = on;
        params.interval_ns = 1 + now % (40 * kSec);
        PolicyState state;
        state.started = trial % 2 == 0;
        state.rotation = trial;
        state.last_rotation_ns = now / 2;
        state.top_iterations_seen = trial % 3;
        PolicyState state2 = state;

        const auto got = evaluate_policy(params, state, jobs, now);
        const std::string ctx =
            std::string(policy_name(kind)) + " trial " + std::to_string(trial) + ": " + describe(got);
        ASSERT_EQ(got.size(), n) << ctx;
        for (size_t i = 0; i < n; ++i) {
          EXPECT_EQ(got[i].id, jobs[i].id) << ctx;
          EXPECT_LT(got[i].pull_rank, 2 * n) << ctx;
          EXPECT_LT(got[i].push_rank, 2 * n) << ctx;
        }

        // Deterministic: the same inputs and state give the same result and state.
        const auto again = evaluate_policy(params, state2, jobs, now);
        EXPECT_EQ(again, got) << ctx;
        EXPECT_EQ(state2.rotation, state.rotation) << ctx;
        EXPECT_EQ(state2.last_rotation_ns, state.last_rotation_ns) << ctx;
        EXPECT_EQ(state2.top_iterations_seen, state.top_iterations_seen) << ctx;
        EXPECT_EQ(state2.started, state.started) << ctx;

        // Policies that order jobs give each a distinct position.
        if (kind != PolicyKind::kFifo && kind != PolicyKind::kTensorLightsOne) {
          std::set<uint32_t> positions;
          for (const JobRanks& r : got) {
            const uint32_t p = kind == PolicyKind::kBatch ? r.pull_rank / 2 : r.pull_rank;
            if (kind == PolicyKind::kBatch) {
              EXPECT_EQ(r.pull_rank % 2, 0u) << ctx;
              EXPECT_EQ(r.push_rank, r.pull_rank + 1) << ctx;
            } else {
              EXPECT_EQ(r.push_rank, r.pull_rank) << ctx;
            }
            EXPECT_LT(p, n) << ctx;
            positions.insert(p);
          }
          EXPECT_EQ(positions.size(), n) << "not a permutation: " << ctx;
        }

        if (kind == PolicyKind::kProgress || kind == PolicyKind::kBatch || kind == PolicyKind::kShortestFirst) {
          const auto want = reference(kind, jobs);
          EXPECT_EQ(got, want) << ctx << "\nwant " << describe(want);
        }
      }
    }
  }
}

// Ties among many jobs: a sort that is stable only for small inputs (as
// std::sort's insertion-sort cutoff is) fails here.
TEST(PolicyStability, ManyTiedJobsKeepInputOrder) {
  for (PolicyKind kind : {PolicyKind::kProgress, PolicyKind::kBatch, PolicyKind::kShortestFirst}) {
    std::vector<PolicyJob> jobs;
    for (uint32_t i = 0; i < 200; ++i) {
      // Three distinct keys, interleaved, ids descending so id order != input order.
      PolicyJob j = job(1000 - i);
      j.reported.fraction = (i * 7 % 3) / 2.0;
      j.reported.batch = i * 7 % 3;
      j.bytes_per_iteration = 3000;
      j.bytes_this_iteration = 1000 * (i * 7 % 3);
      jobs.push_back(j);
    }
    PolicyParams params;
    params.kind = kind;
    PolicyState state;
    const auto got = evaluate_policy(params, state, jobs, 0);
    EXPECT_EQ(got, reference(kind, jobs)) << policy_name(kind);
  }
}

}  // namespace
}  // namespace psgate
