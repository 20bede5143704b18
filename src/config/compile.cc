// SPDX-License-Identifier: BSD-3-Clause
// Specs -> the compiled forms the lcores read (see compile.h). Control path only.
#include "config/compile.h"

#include <rte_lcore.h>

#include <algorithm>
#include <string>

namespace psgate {

namespace {

bool same_rules(const std::vector<ClassifierRule>& a, const std::vector<ClassifierRule>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].value != b[i].value || !(a[i].match == b[i].match)) return false;
  return true;
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
                                                   const Snapshot* previous) {
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
    slot.cls[kPush] = static_cast<uint8_t>(class_for_rank(config, ranked.ranks.push_rank));
    slot.cls[kPull] = static_cast<uint8_t>(class_for_rank(config, ranked.ranks.pull_rank));
    if (job.spec.police) {
      slot.police_bytes_per_sec = bytes_per_sec(job.spec.police->rate_bps);
      slot.police_burst_bytes = job.spec.police->burst_bytes;
    }
    snap->jobs.push_back(JobEntry{job.slot, job.spec.id, job.spec.name, job.spec.rank});
  }

  // Rules are matched in the order the jobs were added (earlier jobs' rules
  // win), independent of rank, so a re-rank changes no rule.
  std::vector<const JobRecord*> by_age;
  for (const RankedJob& ranked : jobs) by_age.push_back(ranked.job);
  std::sort(by_age.begin(), by_age.end(),
            [](const JobRecord* a, const JobRecord* b) { return a->sequence < b->sequence; });
  std::vector<ClassifierRule> rules;
  for (const JobRecord* job : by_age)
    for (const MatchRule& rule : job->spec.match) rules.push_back(ClassifierRule{rule, job->slot});

  if (previous && previous->classifier && same_rules(previous->rules, rules)) {
    snap->classifier = previous->classifier;
    snap->rules_generation = previous->rules_generation;
  } else {
    auto classifier = Classifier::build(rules, "psg" + std::to_string(generation), rte_socket_id());
    if (!classifier.ok()) return R::failure("cannot build classifier: " + classifier.error());
    snap->classifier = std::shared_ptr<const Classifier>(std::move(*classifier));
    snap->rules_generation = generation;
  }
  snap->rules = std::move(rules);
  snap->ports = ports;
  return snap;
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
