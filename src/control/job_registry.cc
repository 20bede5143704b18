// SPDX-License-Identifier: BSD-3-Clause
// Job bookkeeping for the control plane (pure).
#include "psgate/job_registry.h"

#include <algorithm>
#include <unordered_set>

#include "psgate/text.h"
#include "psgate/units.h"

namespace psgate {

namespace {

template <typename T>
Result<T> fail(std::string message) {
  return Result<T>::failure(std::move(message));
}

std::string job_label(uint32_t id) { return "job " + std::to_string(id); }

Result<bool> validate_name(const std::string& name) {
  if (const std::string problem = name_problem(name); !problem.empty()) return fail<bool>("name " + problem);
  return true;
}

}  // namespace

JobRegistry::JobRegistry(uint32_t max_jobs) : max_jobs_(max_jobs), slot_use_(max_jobs, SlotUse::kFree) {}

Result<uint32_t> JobRegistry::allocate_slot() {
  for (uint32_t i = 0; i < max_jobs_; ++i) {
    const uint32_t slot = (next_slot_ + i) % max_jobs_;
    if (slot_use_[slot] == SlotUse::kFree) {
      slot_use_[slot] = SlotUse::kUsed;
      next_slot_ = (slot + 1) % max_jobs_;
      return slot;
    }
  }
  std::string why = "no free job slot (dataplane.max_jobs = " + std::to_string(max_jobs_) + ")";
  if (!draining_.empty())
    why += ": " + std::to_string(draining_.size()) +
           " of them wait for a removed job's queued packets to leave; try again shortly";
  return fail<uint32_t>(why);
}

std::vector<uint32_t> JobRegistry::draining_slots() const {
  std::vector<uint32_t> slots;
  slots.reserve(draining_.size());
  for (const Draining& d : draining_) slots.push_back(d.slot);
  return slots;
}

bool JobRegistry::drains_for(uint32_t slot, uint32_t job_id) const {
  return std::any_of(draining_.begin(), draining_.end(),
                     [&](const Draining& d) { return d.slot == slot && d.job_id == job_id; });
}

void JobRegistry::release_slot(uint32_t slot) {
  auto it = std::find_if(draining_.begin(), draining_.end(), [&](const Draining& d) { return d.slot == slot; });
  if (it == draining_.end()) return;
  draining_.erase(it);
  slot_use_[slot] = SlotUse::kFree;
}

Result<const JobRecord*> JobRegistry::add(JobRecord job, std::optional<uint32_t> rank, bool* no_slot) {
  if (no_slot) *no_slot = false;
  using R = Result<const JobRecord*>;
  JobSpec& spec = job.spec;
  if (spec.id == 0) return fail<const JobRecord*>("job id must be at least 1");
  if (find(spec.id)) return fail<const JobRecord*>(job_label(spec.id) + " already exists");
  if (spec.match.empty()) return fail<const JobRecord*>(job_label(spec.id) + ": at least one match rule is needed");
  if (spec.name.empty()) spec.name = "job-" + std::to_string(spec.id);
  if (auto ok = validate_name(spec.name); !ok) return fail<const JobRecord*>(job_label(spec.id) + ": " + ok.error());
  if (rank) {
    spec.rank = *rank;
  } else {
    uint32_t last = 0;
    bool any = false;
    for (const JobRecord& j : jobs_) {
      last = std::max(last, j.spec.rank);
      any = true;
    }
    // After every job: past the largest rank, or level with it when that is
    // already the largest there is (equal ranks go by age, so still last);
    // never wrapped round to 0, the top.
    spec.rank = !any ? 0 : last == UINT32_MAX ? UINT32_MAX : last + 1;
  }
  auto again = std::find_if(draining_.begin(), draining_.end(), [&](const Draining& d) { return d.job_id == spec.id; });
  if (again != draining_.end()) {
    job.slot = again->slot;
    slot_use_[job.slot] = SlotUse::kUsed;
    draining_.erase(again);
  } else {
    auto slot = allocate_slot();
    if (!slot) {
      if (no_slot) *no_slot = true;
      return fail<const JobRecord*>(job_label(spec.id) + ": " + slot.error());
    }
    job.slot = *slot;
  }
  job.sequence = next_sequence_++;
  job.partition = assign_partition(job.spec.match.size());
  index_[job.spec.id] = jobs_.size();
  jobs_.push_back(std::move(job));
  return R(&jobs_.back());
}

Result<bool> JobRegistry::remove(uint32_t id) {
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const JobRecord& j) { return j.spec.id == id; });
  if (it == jobs_.end()) return fail<bool>("no " + job_label(id));
  slot_use_[it->slot] = SlotUse::kDraining;
  draining_.push_back(Draining{it->slot, id});
  const uint32_t partition = it->partition;
  auto part = partition_rules_.find(partition);
  if (part != partition_rules_.end() && (part->second -= std::min(part->second, it->spec.match.size())) == 0)
    partition_rules_.erase(part);
  jobs_.erase(it);
  index_.clear();  // positions after the removed job moved
  for (size_t i = 0; i < jobs_.size(); ++i) index_[jobs_[i].spec.id] = i;
  join_if_thin(partition);
  return true;
}

uint32_t JobRegistry::assign_partition(size_t rules) {
  // The newest partition, while the job fits; a job never goes into an older
  // one, so partitions stay in age order.
  if (partition_rules_.empty() || partition_rules_.rbegin()->second + rules > kRulesPerPartition)
    partition_rules_.emplace(next_partition_++, 0);
  auto newest = std::prev(partition_rules_.end());
  newest->second += rules;
  return newest->first;
}

void JobRegistry::join_if_thin(uint32_t partition) {
  auto part = partition_rules_.find(partition);
  if (part == partition_rules_.end() || part == std::prev(partition_rules_.end()) || part == partition_rules_.begin() ||
      part->second * 4 > kRulesPerPartition)
    return;
  auto older = std::prev(part);
  if (older->second + part->second > kRulesPerPartition) return;
  for (JobRecord& j : jobs_)
    if (j.partition == partition) j.partition = older->first;
  older->second += part->second;
  partition_rules_.erase(part);
}

Result<bool> JobRegistry::set_order(const std::vector<uint32_t>& ids) {
  std::unordered_set<uint32_t> seen;
  for (uint32_t id : ids) {
    if (!find(id)) return fail<bool>("no " + job_label(id));
    if (!seen.insert(id).second) return fail<bool>(job_label(id) + " is listed twice");
  }
  std::vector<const JobRecord*> rest;
  for (const JobRecord* j : in_rank_order())
    if (!seen.count(j->spec.id)) rest.push_back(j);
  std::vector<std::pair<uint32_t, uint32_t>> ranks;  // id -> new rank
  uint32_t r = 0;
  for (uint32_t id : ids) ranks.emplace_back(id, r++);
  for (const JobRecord* j : rest) ranks.emplace_back(j->spec.id, r++);
  for (auto [id, rank] : ranks) const_cast<JobRecord*>(find(id))->spec.rank = rank;
  return true;
}

Result<const JobRecord*> JobRegistry::set_rank(uint32_t id, uint32_t rank) {
  auto* job = const_cast<JobRecord*>(find(id));
  if (!job) return fail<const JobRecord*>("no " + job_label(id));
  job->spec.rank = rank;
  return Result<const JobRecord*>(job);
}

Result<const JobRecord*> JobRegistry::set_progress(uint32_t id, const JobProgress& progress) {
  auto* job = const_cast<JobRecord*>(find(id));
  if (!job) return fail<const JobRecord*>("no " + job_label(id));
  if (progress.fraction && !valid_progress_fraction(*progress.fraction))
    return fail<const JobRecord*>("fraction must be between 0 and 1");
  if (progress.fraction) job->progress.fraction = progress.fraction;
  if (progress.iteration) job->progress.iteration = progress.iteration;
  if (progress.batch) job->progress.batch = progress.batch;
  return Result<const JobRecord*>(job);
}

void JobRegistry::set_rules_file(uint32_t id, std::string name) {
  if (auto* job = const_cast<JobRecord*>(find(id))) job->rules_file = std::move(name);
}

const JobRecord* JobRegistry::find(uint32_t id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &jobs_[it->second];
}

std::vector<const JobRecord*> JobRegistry::in_age_order() const {
  std::vector<const JobRecord*> out;
  out.reserve(jobs_.size());
  for (const JobRecord& j : jobs_) out.push_back(&j);  // appended by add(), erase keeps the order
  return out;
}

std::vector<const JobRecord*> JobRegistry::in_rank_order() const {
  std::vector<const JobRecord*> out;
  for (const JobRecord& j : jobs_) out.push_back(&j);
  std::sort(out.begin(), out.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->spec.rank != b->spec.rank ? a->spec.rank < b->spec.rank : a->sequence < b->sequence;
  });
  return out;
}

Result<JobRegistry> JobRegistry::from_config(const ConfigSpec& config) {
  JobRegistry reg(config.max_jobs);
  for (const JobSpec& spec : config.jobs) {
    JobRecord job;
    job.spec = spec;
    auto added = reg.add(std::move(job), spec.rank);
    if (!added) return Result<JobRegistry>::failure(added.error());
  }
  return reg;
}

}  // namespace psgate
