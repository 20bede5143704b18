// Job bookkeeping for the control plane (pure).
#include "psgate/job_registry.h"

#include <algorithm>
#include <unordered_set>

#include "psgate/units.h"

namespace psgate {

namespace {

template <typename T>
Result<T> fail(std::string message) {
  return Result<T>::failure(std::move(message));
}

std::string job_label(uint32_t id) { return "job " + std::to_string(id); }

Result<bool> validate_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return fail<bool>("name must be 1..64 characters");
  for (unsigned char ch : name)
    if (ch < 0x20 || ch == 0x7f) return fail<bool>("name must not contain control characters");
  return true;
}

}  // namespace

JobRegistry::JobRegistry(uint32_t max_jobs) : max_jobs_(max_jobs), slot_used_(max_jobs, false) {}

Result<uint32_t> JobRegistry::allocate_slot() {
  for (uint32_t i = 0; i < max_jobs_; ++i) {
    const uint32_t slot = (next_slot_ + i) % max_jobs_;
    if (!slot_used_[slot]) {
      slot_used_[slot] = true;
      next_slot_ = (slot + 1) % max_jobs_;
      return slot;
    }
  }
  return fail<uint32_t>("no free job slot (dataplane.max_jobs = " + std::to_string(max_jobs_) + ")");
}

Result<const JobRecord*> JobRegistry::add(JobRecord job, std::optional<uint32_t> rank) {
  using R = Result<const JobRecord*>;
  if (job.id == 0) return fail<const JobRecord*>("job id must be at least 1");
  if (find(job.id)) return fail<const JobRecord*>(job_label(job.id) + " already exists");
  if (job.match.empty()) return fail<const JobRecord*>(job_label(job.id) + ": at least one match rule is needed");
  if (job.name.empty()) job.name = "job-" + std::to_string(job.id);
  if (auto ok = validate_name(job.name); !ok) return fail<const JobRecord*>(job_label(job.id) + ": " + ok.error());
  if (rank) {
    job.rank = *rank;
  } else {
    uint32_t last = 0;
    bool any = false;
    for (const JobRecord& j : jobs_) {
      last = std::max(last, j.rank);
      any = true;
    }
    job.rank = any ? last + 1 : 0;
  }
  auto slot = allocate_slot();
  if (!slot) return fail<const JobRecord*>(job_label(job.id) + ": " + slot.error());
  job.slot = *slot;
  job.sequence = next_sequence_++;
  jobs_.push_back(std::move(job));
  return R(&jobs_.back());
}

Result<bool> JobRegistry::remove(uint32_t id) {
  auto it = std::find_if(jobs_.begin(), jobs_.end(), [&](const JobRecord& j) { return j.id == id; });
  if (it == jobs_.end()) return fail<bool>("no " + job_label(id));
  slot_used_[it->slot] = false;
  jobs_.erase(it);
  return true;
}

Result<bool> JobRegistry::set_order(const std::vector<uint32_t>& ids) {
  std::unordered_set<uint32_t> seen;
  for (uint32_t id : ids) {
    if (!find(id)) return fail<bool>("no " + job_label(id));
    if (!seen.insert(id).second) return fail<bool>(job_label(id) + " is listed twice");
  }
  std::vector<const JobRecord*> rest;
  for (const JobRecord* j : in_rank_order())
    if (!seen.count(j->id)) rest.push_back(j);
  std::vector<std::pair<uint32_t, uint32_t>> ranks;  // id -> new rank
  uint32_t r = 0;
  for (uint32_t id : ids) ranks.emplace_back(id, r++);
  for (const JobRecord* j : rest) ranks.emplace_back(j->id, r++);
  for (auto [id, rank] : ranks) const_cast<JobRecord*>(find(id))->rank = rank;
  return true;
}

Result<const JobRecord*> JobRegistry::set_rank(uint32_t id, uint32_t rank) {
  auto* job = const_cast<JobRecord*>(find(id));
  if (!job) return fail<const JobRecord*>("no " + job_label(id));
  job->rank = rank;
  return Result<const JobRecord*>(job);
}

Result<const JobRecord*> JobRegistry::set_progress(uint32_t id, const JobProgress& progress) {
  auto* job = const_cast<JobRecord*>(find(id));
  if (!job) return fail<const JobRecord*>("no " + job_label(id));
  if (progress.fraction && !(*progress.fraction >= 0.0 && *progress.fraction <= 1.0))
    return fail<const JobRecord*>("fraction must be between 0 and 1");
  if (progress.fraction) job->progress.fraction = progress.fraction;
  if (progress.iteration) job->progress.iteration = progress.iteration;
  if (progress.batch) job->progress.batch = progress.batch;
  return Result<const JobRecord*>(job);
}

const JobRecord* JobRegistry::find(uint32_t id) const {
  for (const JobRecord& j : jobs_)
    if (j.id == id) return &j;
  return nullptr;
}

std::vector<const JobRecord*> JobRegistry::in_rank_order() const {
  std::vector<const JobRecord*> out;
  for (const JobRecord& j : jobs_) out.push_back(&j);
  std::sort(out.begin(), out.end(), [](const JobRecord* a, const JobRecord* b) {
    return a->rank != b->rank ? a->rank < b->rank : a->sequence < b->sequence;
  });
  return out;
}

Result<JobRegistry> JobRegistry::from_config(const ConfigSpec& config) {
  JobRegistry reg(config.max_jobs);
  for (const JobSpec& spec : config.jobs) {
    JobRecord job;
    job.id = spec.id;
    job.name = spec.name;
    job.match = spec.match;
    job.police = spec.police;
    auto added = reg.add(std::move(job), spec.rank);
    if (!added) return Result<JobRegistry>::failure(added.error());
  }
  return reg;
}

nlohmann::json JobRegistry::to_state() const {
  nlohmann::json jobs = nlohmann::json::array();
  for (const JobRecord* j : in_rank_order()) {
    nlohmann::json rules = nlohmann::json::array();
    for (const MatchRule& r : j->match) rules.push_back(to_string(r));
    nlohmann::json entry = {{"id", j->id}, {"name", j->name}, {"rank", j->rank}, {"match", rules}};
    if (j->police) {
      entry["police_bps"] = j->police->rate_bps;
      entry["police_burst_bytes"] = j->police->burst_bytes;
    }
    if (j->progress.fraction) entry["progress_fraction"] = *j->progress.fraction;
    if (j->progress.iteration) entry["progress_iteration"] = *j->progress.iteration;
    if (j->progress.batch) entry["progress_batch"] = *j->progress.batch;
    jobs.push_back(entry);
  }
  return {{"jobs", jobs}};
}

Result<JobRegistry> JobRegistry::from_state(const nlohmann::json& state, uint32_t max_jobs) {
  using R = Result<JobRegistry>;
  JobRegistry reg(max_jobs);
  if (!state.is_object() || !state.contains("jobs") || !state["jobs"].is_array())
    return R::failure("expected an object with a \"jobs\" list");
  size_t index = 0;
  for (const auto& entry : state["jobs"]) {
    const std::string where = "jobs[" + std::to_string(index++) + "]";
    if (!entry.is_object()) return R::failure(where + ": not an object");
    auto uint_field = [&](const char* key, bool required) -> Result<std::optional<uint64_t>> {
      if (!entry.contains(key)) {
        if (required) return Result<std::optional<uint64_t>>::failure(where + ": missing \"" + key + "\"");
        return std::optional<uint64_t>{};
      }
      if (!entry[key].is_number_unsigned())
        return Result<std::optional<uint64_t>>::failure(where + "." + key + ": not a non-negative integer");
      return std::optional<uint64_t>(entry[key].get<uint64_t>());
    };
    auto id = uint_field("id", true);
    auto rank = uint_field("rank", true);
    auto police_bps = uint_field("police_bps", false);
    auto police_burst = uint_field("police_burst_bytes", false);
    auto iteration = uint_field("progress_iteration", false);
    auto batch = uint_field("progress_batch", false);
    for (auto* f : {&id, &rank, &police_bps, &police_burst, &iteration, &batch})
      if (!*f) return R::failure(f->error());
    if (**id > UINT32_MAX || **rank > UINT32_MAX) return R::failure(where + ": id or rank out of range");
    JobRecord job;
    job.id = static_cast<uint32_t>(**id);
    if (!entry.contains("name") || !entry["name"].is_string()) return R::failure(where + ".name: missing or not a string");
    job.name = entry["name"].get<std::string>();
    if (!entry.contains("match") || !entry["match"].is_array()) return R::failure(where + ".match: missing or not a list");
    for (const auto& rule : entry["match"]) {
      if (!rule.is_string()) return R::failure(where + ".match: rules must be strings");
      auto parsed = parse_match_rule(rule.get<std::string>());
      if (!parsed) return R::failure(where + ".match: " + parsed.error());
      job.match.push_back(*parsed);
    }
    if (police_bps->has_value() != police_burst->has_value())
      return R::failure(where + ": police_bps and police_burst_bytes go together");
    if (police_bps->has_value()) job.police = RateSpec{**police_bps, **police_burst};
    if (entry.contains("progress_fraction")) {
      if (!entry["progress_fraction"].is_number()) return R::failure(where + ".progress_fraction: not a number");
      job.progress.fraction = entry["progress_fraction"].get<double>();
    }
    job.progress.iteration = *iteration;
    job.progress.batch = *batch;
    auto added = reg.add(std::move(job), static_cast<uint32_t>(**rank));
    if (!added) return R::failure(where + ": " + added.error());
  }
  return reg;
}

}  // namespace psgate
