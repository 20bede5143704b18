// Builds and publishes classification snapshots (control path only).
#include "psgate/snapshot.h"

#include <rte_lcore.h>

#include <ctime>

#include <algorithm>
#include <string>

namespace psgate {

std::vector<JobEntry> jobs_from_config(const ConfigSpec& config) {
  std::vector<JobEntry> jobs;
  jobs.reserve(config.jobs.size());
  for (uint32_t i = 0; i < config.jobs.size(); ++i) {
    const JobSpec& spec = config.jobs[i];
    jobs.push_back(JobEntry{i, spec.id, spec.name, spec.rank, {spec.rank, spec.rank}, spec.match, spec.police, i});
  }
  return jobs;
}

namespace {

bool same_rules(const std::vector<ClassifierRule>& a, const std::vector<ClassifierRule>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].value != b[i].value || !(a[i].match == b[i].match)) return false;
  return true;
}

}  // namespace

Result<std::unique_ptr<Snapshot>> build_snapshot(const ConfigSpec& config, std::vector<JobEntry> jobs,
                                                 uint32_t generation, const Snapshot* previous) {
  auto snap = std::make_unique<Snapshot>();
  snap->generation = generation;
  snap->slots.resize(config.max_jobs);

  std::vector<ClassifierRule> rules;
  for (const JobEntry& job : jobs) {
    if (job.slot >= config.max_jobs) {
      return Result<std::unique_ptr<Snapshot>>::failure("job " + std::to_string(job.id) +
                                                        ": no free job slot (max_jobs)");
    }
    SlotInfo& slot = snap->slots[job.slot];
    slot.active = 1;
    for (unsigned dir = 0; dir < 2; ++dir)
      slot.cls[dir] = static_cast<uint8_t>(class_for_rank(config, job.effective_rank[dir]));
    if (job.police) {
      slot.police_bytes_per_sec = job.police->rate_bps / 8;
      slot.police_burst_bytes = job.police->burst_bytes;
    }
  }
  std::vector<const JobEntry*> by_age;
  for (const JobEntry& job : jobs) by_age.push_back(&job);
  std::sort(by_age.begin(), by_age.end(), [](const JobEntry* a, const JobEntry* b) { return a->sequence < b->sequence; });
  for (const JobEntry* job : by_age)
    for (const MatchRule& rule : job->match) rules.push_back(ClassifierRule{rule, job->slot});

  if (previous && previous->classifier && same_rules(previous->rules, rules)) {
    snap->classifier = previous->classifier;
    snap->rules_generation = previous->rules_generation;
  } else {
    auto classifier = Classifier::build(rules, "psg" + std::to_string(generation), rte_socket_id());
    if (!classifier.ok()) {
      return Result<std::unique_ptr<Snapshot>>::failure("cannot build classifier: " + classifier.error());
    }
    snap->classifier = std::shared_ptr<const Classifier>(std::move(*classifier));
    snap->rules_generation = generation;
  }
  snap->rules = std::move(rules);
  snap->jobs = std::move(jobs);
  snap->ports = live_params(config);
  return snap;
}

std::array<PortLive, kPortCount> live_params(const ConfigSpec& config) {
  std::array<PortLive, kPortCount> ports;
  const PortSpec* specs[kPortCount] = {&config.wire, &config.host};
  for (unsigned p = 0; p < kPortCount; ++p) {
    if (specs[p]->shaper) {
      ports[p].shaper_bytes_per_sec = specs[p]->shaper->rate_bps / 8;
      ports[p].shaper_burst_bytes = specs[p]->shaper->burst_bytes;
    }
    for (const ClassSpec& cls : config.classes) {
      ClassLive c;
      if (cls.cap) {
        c.cap_bytes_per_sec = cls.cap->rate_bps / 8;
        c.cap_burst_bytes = cls.cap->burst_bytes;
      }
      if (cls.floor) {
        c.floor_bytes_per_sec = cls.floor->rate_bps / 8;
        c.floor_burst_bytes = cls.floor->burst_bytes;
      }
      c.ecn_threshold = cls.ecn_threshold;
      c.dscp = cls.dscp;
      ports[p].classes.push_back(c);
    }
  }
  return ports;
}

SnapshotPublisher::SnapshotPublisher(std::unique_ptr<Snapshot> initial, rte_rcu_qsbr* qsbr)
    : current_(initial.release()), qsbr_(qsbr) {}

SnapshotPublisher::~SnapshotPublisher() { delete current_.load(std::memory_order_relaxed); }

void SnapshotPublisher::publish(std::unique_ptr<Snapshot> next) {
  const Snapshot* old = current_.exchange(next.release(), std::memory_order_acq_rel);
  // Every reader that could still hold `old` passes a quiescent state after
  // its current loop iteration; offline readers (stopped lcores) are skipped.
  // Poll with sleeps rather than rte_rcu_qsbr_synchronize's spin: the control
  // thread may share a CPU with the threads the lcores are waiting for.
  const uint64_t token = rte_rcu_qsbr_start(qsbr_);
  while (rte_rcu_qsbr_check(qsbr_, token, false) == 0) {
    timespec pause{0, 20'000};
    nanosleep(&pause, nullptr);
  }
  delete old;
}

}  // namespace psgate
