// SPDX-License-Identifier: BSD-3-Clause
// Specs -> the compiled forms the lcores read (see compile.h). Control path only.
#include "config/compile.h"

#include <rte_lcore.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>
#include <string>

#include "psgate/packet_parser.h"  // kMaxVlanTags

namespace psgate {

namespace {

// One partition to compile: its jobs in age order, and the previous
// snapshot's partition of the same id and members, if there is one to reuse.
struct PartitionPlan {
  uint32_t id = 0;
  std::vector<const JobRecord*> jobs;
  std::vector<PartitionMember> members;
  std::shared_ptr<const Classifier> reused;
};

std::vector<PartitionPlan> plan_partitions(const std::vector<RankedJob>& jobs, const Snapshot* previous) {
  // Rules are matched in the order the jobs were added (earlier jobs' rules
  // win), independent of rank, so a re-rank changes no rule. The registry
  // keeps partitions in age order too (job_matcher.h).
  std::vector<const JobRecord*> by_age;
  by_age.reserve(jobs.size());
  for (const RankedJob& ranked : jobs) by_age.push_back(ranked.job);
  std::sort(by_age.begin(), by_age.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->sequence < b->sequence; });
  std::vector<PartitionPlan> plans;
  for (const JobRecord* job : by_age) {
    if (plans.empty() || plans.back().id != job->partition) plans.push_back(PartitionPlan{job->partition, {}, {}, {}});
    plans.back().jobs.push_back(job);
    plans.back().members.push_back(PartitionMember{job->slot, job->sequence});
  }
  if (previous) {
    const auto& old = previous->partitions;
    auto it = old.begin();
    for (PartitionPlan& plan : plans) {
      while (it != old.end() && it->id < plan.id) ++it;
      if (it != old.end() && it->id == plan.id && it->members == plan.members) plan.reused = it->classifier;
    }
  }
  return plans;
}

}  // namespace

std::array<PortLive, kPortCount> compile_ports(const ConfigSpec& config) {
  std::array<PortLive, kPortCount> ports;
  const PortSpec* specs[kPortCount] = {&config.wire, &config.host};
  for (unsigned p = 0; p < kPortCount; ++p) {
    if (specs[p]->shaper) {
      ports[p].shaper_bytes_per_sec = bytes_per_sec(specs[p]->shaper->rate_bps);
      ports[p].shaper_burst_bytes = specs[p]->shaper->burst_bytes;
    }
    for (const ClassSpec& cls : port_classes(config, p)) {  // [classes.N] with [classes.N.<port>]
      ClassLive c;
      if (cls.cap) {
        c.cap_bytes_per_sec = bytes_per_sec(cls.cap->rate_bps);
        c.cap_burst_bytes = cls.cap->burst_bytes;
      }
      if (cls.floor) {
        c.floor_bytes_per_sec = bytes_per_sec(cls.floor->rate_bps);
        c.floor_burst_bytes = cls.floor->burst_bytes;
      }
      c.actions = ClassActions{cls.ecn_threshold, cls.dscp};
      ports[p].classes.push_back(c);
    }
  }
  return ports;
}

PortSchedConfig compile_scheduler(const ConfigSpec& config, unsigned port, const PortLive& live, uint64_t tsc_hz) {
  const PortSpec& spec = port == 0 ? config.wire : config.host;
  PortSchedConfig sc;
  sc.tick_hz = tsc_hz;
  sc.overhead_bytes = spec.overhead_bytes;
  sc.priority_headroom_bytes = spec.headroom_bytes;
  sc.priority_headroom_permille = spec.headroom_permille;
  sc.max_frame_bytes = max_frame_bytes(spec.mtu, kMaxVlanTags);
  sc.shaper_bytes_per_sec = live.shaper_bytes_per_sec;
  sc.shaper_burst_bytes = live.shaper_burst_bytes;
  for (size_t c = 0; c < config.classes.size(); ++c) {
    const ClassLive& cl = live.classes[c];
    sc.classes.push_back(ClassSchedConfig{config.classes[c].depth, cl.cap_bytes_per_sec, cl.cap_burst_bytes,
                                          cl.floor_bytes_per_sec, cl.floor_burst_bytes});
  }
  return sc;
}

Result<std::unique_ptr<Snapshot>> compile_snapshot(const ConfigSpec& config, const std::vector<RankedJob>& jobs,
                                                   const std::array<PortLive, kPortCount>& ports, uint32_t generation,
                                                   const Snapshot* previous, const CompileControl& control) {
  using R = Result<std::unique_ptr<Snapshot>>;
  auto snap = std::make_unique<Snapshot>();
  snap->generation = generation;
  snap->slots.resize(config.max_jobs);
  snap->jobs.reserve(jobs.size());
  for (const RankedJob& ranked : jobs) {
    const JobRecord& job = *ranked.job;
    if (job.slot >= config.max_jobs)
      return R::failure("job " + std::to_string(job.spec.id) + ": no free job slot (max_jobs)");
    SlotInfo& slot = snap->slots[job.slot];
    slot.active = 1;
    slot.owner = job.sequence + 1;
    slot.cls[kPush] = static_cast<uint8_t>(class_for_rank(config, ranked.ranks.push_rank));
    slot.cls[kPull] = static_cast<uint8_t>(class_for_rank(config, ranked.ranks.pull_rank));
    if (job.spec.police) {
      slot.police_bytes_per_sec = bytes_per_sec(job.spec.police->rate_bps);
      slot.police_burst_bytes = job.spec.police->burst_bytes;
    }
    snap->jobs.push_back(JobEntry{job.slot, job.spec.id, job.spec.name, job.spec.rank});
  }

  if (previous != nullptr && previous->slots.size() == snap->slots.size()) {
    snap->changed_since = previous->generation;
    for (size_t s = 0; s < snap->slots.size(); ++s) {
      const SlotInfo& was = previous->slots[s];
      const SlotInfo& now = snap->slots[s];
      if (was.owner != now.owner || was.police_bytes_per_sec != now.police_bytes_per_sec ||
          was.police_burst_bytes != now.police_burst_bytes)
        snap->changed_slots.push_back(static_cast<uint32_t>(s));
    }
  }

  std::vector<PartitionPlan> plans = plan_partitions(jobs, previous);
  // Partitions whose jobs changed are built, in parallel (TBB, control path
  // only: the workers inherit the control thread's CPUs, never a data
  // lcore's); the others are shared with the previous snapshot.
  std::vector<std::string> errors(plans.size());
  std::vector<std::shared_ptr<const Classifier>> built(plans.size());
  // Per partition, written by the worker that built it: its build's length
  // and rule count, for the report.
  std::vector<uint64_t> build_ns(plans.size(), 0);
  std::vector<size_t> build_rules(plans.size(), 0);
  // A stop asked: set by the first worker that sees it, so the others skip
  // what is left without asking again. A partition is the unit: a stop
  // waits for the builds under way (one per worker), never for the rest.
  std::atomic<bool> stopped{false};
  const int socket = static_cast<int>(rte_socket_id());  // the control thread's (SOCKET_ID_ANY if not an lcore)
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  tbb::parallel_for(size_t{0}, plans.size(), [&](size_t k) {
    const PartitionPlan& plan = plans[k];
    if (plan.reused) return;
    if (stopped.load(std::memory_order_relaxed)) return;
    if (control.stop_asked && control.stop_asked()) {
      stopped.store(true, std::memory_order_relaxed);
      return;
    }
    try {
      const auto t0 = Clock::now();
      std::vector<ClassifierRule> rules;
      for (const JobRecord* job : plan.jobs)
        for (const MatchRule& rule : job->spec.match) rules.push_back(ClassifierRule{rule, job->slot});
      auto classifier = Classifier::build(rules, "psg" + std::to_string(plan.id), socket);
      if (!classifier.ok()) errors[k] = "partition " + std::to_string(plan.id) + ": " + classifier.error();
      else built[k] = std::shared_ptr<const Classifier>(std::move(*classifier));
      build_rules[k] = rules.size();
      build_ns[k] =
          static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
    } catch (const std::bad_alloc&) {
      errors[k] = "partition " + std::to_string(plan.id) + ": out of memory";
    }
  });
  // What this compile built: the caller's report, and a stop's error.
  CompileReport report;
  report.partitions = plans.size();
  report.build_ns =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - started).count());
  size_t to_build = 0;
  for (size_t k = 0; k < plans.size(); ++k) {
    to_build += plans[k].reused ? 0 : 1;
    if (!built[k]) continue;
    ++report.partitions_built;
    report.rules_built += build_rules[k];
    if (build_ns[k] > report.longest_ns) {
      report.longest_ns = build_ns[k];
      report.longest_rules = build_rules[k];
    }
  }
  if (control.report) *control.report = report;
  // What was built goes with `built`, before anything is published: a
  // stopped compile leaves nothing behind.
  if (stopped.load())
    return R::failure(std::string(kCompileStopped) + " (" + std::to_string(report.partitions_built) + " of " +
                      std::to_string(to_build) + " rule partitions built)");
  bool rebuilt = previous == nullptr || previous->partitions.size() != plans.size();
  std::vector<RulePartition> partitions;
  partitions.reserve(plans.size());
  for (size_t k = 0; k < plans.size(); ++k) {
    if (!errors[k].empty()) return R::failure("cannot build classifier: " + errors[k]);
    rebuilt = rebuilt || !plans[k].reused;
    partitions.push_back(
        RulePartition{plans[k].id, std::move(plans[k].members), plans[k].reused ? plans[k].reused : built[k]});
  }
  snap->partitions = std::move(partitions);
  snap->matcher = JobMatcher(snap->partitions);
  // Classification is the same with or without a merge, so the flow cache
  // (keyed by rules_generation) stays valid across merges.
  snap->rules_generation = rebuilt ? generation : previous->rules_generation;
  if (previous && previous->merged) use_merged(*snap, previous->merged);
  snap->ports = ports;
  return snap;
}

bool use_merged(Snapshot& snap, const std::shared_ptr<const MergedRules>& merged) {
  std::vector<PartitionMember> covered;
  for (const RulePartition& p : snap.partitions)
    if (p.id <= merged->last_partition) covered.insert(covered.end(), p.members.begin(), p.members.end());
  if (covered != merged->members) return false;
  std::vector<RulePartition> parts{RulePartition{merged->last_partition, merged->members, merged->classifier}};
  for (const RulePartition& p : snap.partitions)
    if (p.id > merged->last_partition) parts.push_back(p);
  snap.matcher = JobMatcher(std::move(parts));
  snap.merged = merged;
  return true;
}

Result<std::unique_ptr<Snapshot>> compile_config_snapshot(const ConfigSpec& config, uint32_t generation) {
  auto registry = JobRegistry::from_config(config);
  if (!registry) return Result<std::unique_ptr<Snapshot>>::failure(config.source + ": " + registry.error());
  std::vector<RankedJob> jobs;
  for (const JobRecord* job : registry->in_rank_order())
    jobs.push_back(RankedJob{job, JobRanks{job->spec.id, job->spec.rank, job->spec.rank}});
  return compile_snapshot(config, jobs, compile_ports(config), generation, nullptr);
}

}  // namespace psgate
