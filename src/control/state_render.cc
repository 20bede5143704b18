// SPDX-License-Identifier: BSD-3-Clause
// The state file's text (version 3), rendered again only where the state
// changed (StateTextRenderer, state_file.h).
#include "control/state_file.h"

#include <algorithm>
#include <bit>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace psgate {

using json = nlohmann::json;

namespace {

void put_rank_and_progress(const JobRecord& j, json& entry) {
  entry["rank"] = j.spec.rank;
  if (j.progress.fraction) entry["progress_fraction"] = *j.progress.fraction;
  if (j.progress.iteration) entry["progress_iteration"] = *j.progress.iteration;
  if (j.progress.batch) entry["progress_batch"] = *j.progress.batch;
}

// A job's line in the state file (one JSON object).
std::string job_line(const JobRecord& j) {
  json entry = {{"id", j.spec.id}, {"name", j.spec.name}, {"rules", j.rules_file}};
  if (j.spec.police) {
    entry["police_bps"] = j.spec.police->rate_bps;
    entry["police_burst_bytes"] = j.spec.police->burst_bytes;
  }
  put_rank_and_progress(j, entry);
  return entry.dump();
}

json policy_to_json(const PolicyParams& policy) {
  return {{"name", policy_name(policy.kind)},
          {"interval_ns", policy.interval_ns},
          {"rotate_on", rotate_on_name(policy.rotate_on)}};
}

// By id, so that one state renders one text.
std::string cluster_ranks_to_text(const std::unordered_map<uint32_t, JobRanks>& ranks) {
  std::vector<JobRanks> sorted;
  sorted.reserve(ranks.size());
  for (const auto& [id, r] : ranks) sorted.push_back(r);
  std::sort(sorted.begin(), sorted.end(), [](const JobRanks& a, const JobRanks& b) { return a.id < b.id; });
  std::string text = "[";
  for (const JobRanks& r : sorted) {
    if (text.size() > 1) text += ",";
    text += "[" + std::to_string(r.id) + "," + std::to_string(r.pull_rank) + "," + std::to_string(r.push_rank) + "]";
  }
  return text + "]";
}

json ports_to_json(const std::array<PortLive, kPortCount>& live) {
  json ports = json::object();
  for (unsigned p = 0; p < kPortCount; ++p) {
    json classes = json::array();
    for (const ClassLive& c : live[p].classes)
      classes.push_back({{"cap_bytes_per_sec", c.cap_bytes_per_sec},
                         {"cap_burst_bytes", c.cap_burst_bytes},
                         {"floor_bytes_per_sec", c.floor_bytes_per_sec},
                         {"floor_burst_bytes", c.floor_burst_bytes},
                         {"ecn_threshold", c.actions.ecn_threshold},
                         {"dscp", c.actions.dscp}});
    ports[kPortNames[p]] = {{"shaper_bytes_per_sec", live[p].shaper_bytes_per_sec},
                            {"shaper_burst_bytes", live[p].shaper_burst_bytes},
                            {"classes", classes}};
  }
  return ports;
}

}  // namespace

bool StateTextRenderer::JobLine::renders(const JobRecord& j) const {
  // The fraction by its bits: 0.0 == -0.0, yet they print differently.
  auto bits = [](const std::optional<double>& f) {
    return f ? std::optional(std::bit_cast<uint64_t>(*f)) : std::nullopt;
  };
  return rank == j.spec.rank && bits(progress.fraction) == bits(j.progress.fraction) &&
         progress.iteration == j.progress.iteration && progress.batch == j.progress.batch && police == j.spec.police &&
         name == j.spec.name && rules_file == j.rules_file;
}

std::string StateTextRenderer::render(const JobRegistry& jobs, const PolicyParams& policy,
                                      const std::array<PortLive, kPortCount>& live, uint64_t rules_serial,
                                      const FileSettings* file,
                                      const std::unordered_map<uint32_t, JobRanks>* cluster_ranks,
                                      const PolicyPosition* position) {
  if (!ports_text_ || !(ports_ == live)) {
    ports_ = live;
    ports_text_ = ports_to_json(live).dump();
  }
  if (!file) {
    file_.reset();
    file_text_.clear();
  } else if (!file_ || !(*file_ == *file)) {
    file_ = *file;
    file_text_ =
        ",\n \"file\": " + json{{"policy", policy_to_json(file->policy)}, {"ports", ports_to_json(file->ports)}}.dump();
  }
  if (!cluster_ranks) {
    cluster_ranks_.reset();
    cluster_ranks_text_.clear();
  } else if (!cluster_ranks_ || *cluster_ranks_ != *cluster_ranks) {
    cluster_ranks_ = *cluster_ranks;
    cluster_ranks_text_ = ",\n \"cluster_ranks\": " + cluster_ranks_to_text(*cluster_ranks);
  }
  ++renders_;
  // One job per line: readable, and a fraction of the size of an indented dump.
  std::string text = "{\"version\": 3, \"rules_serial\": " + std::to_string(rules_serial) +
                     ",\n \"policy\": " + policy_to_json(policy).dump() + ",\n \"ports\": " + *ports_text_ +
                     file_text_ + cluster_ranks_text_;
  if (position)
    text += ",\n \"policy_position\": " +
            json{{"top", position->top_id}, {"since_unix_ns", position->since_unix_ns}}.dump();
  text += ",\n \"jobs\": [";
  text.reserve(text.size() + jobs.size() * (lines_.empty() ? 128 : text_per_job_) + 8);
  bool first = true;
  for (const JobRecord* j : jobs.in_age_order()) {
    JobLine& line = lines_[j->spec.id];
    if (line.text.empty() || !line.renders(*j)) {
      line.name = j->spec.name;
      line.rules_file = j->rules_file;
      line.police = j->spec.police;
      line.rank = j->spec.rank;
      line.progress = j->progress;
      line.text = job_line(*j);
    }
    line.render = renders_;
    text += first ? "\n  " : ",\n  ";
    text += line.text;
    first = false;
  }
  // Forget removed jobs' lines (their ids may come back with other fields,
  // which renders() would catch anyway; this only bounds the memory).
  if (lines_.size() > jobs.size()) std::erase_if(lines_, [&](const auto& kv) { return kv.second.render != renders_; });
  if (jobs.size() > 0) text_per_job_ = text.size() / jobs.size() + 1;
  return text + "\n ]}\n";
}

std::string state_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t rules_serial,
                            const FileSettings* file, const std::unordered_map<uint32_t, JobRanks>* cluster_ranks,
                            const PolicyPosition* position) {
  return StateTextRenderer().render(jobs, policy, live, rules_serial, file, cluster_ranks, position);
}

}  // namespace psgate
