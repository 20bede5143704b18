// SPDX-License-Identifier: BSD-3-Clause
// The state file: its JSON format and its atomic replacement (see state_file.h).
#include "control/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace psgate {

using json = nlohmann::json;

namespace {

std::vector<const JobRecord*> in_age_order(const JobRegistry& registry) {
  std::vector<const JobRecord*> jobs = registry.in_rank_order();
  std::sort(jobs.begin(), jobs.end(), [](const JobRecord* a, const JobRecord* b) { return a->sequence < b->sequence; });
  return jobs;
}

void put_rank_and_progress(const JobRecord& j, json& entry) {
  entry["rank"] = j.spec.rank;
  if (j.progress.fraction) entry["progress_fraction"] = *j.progress.fraction;
  if (j.progress.iteration) entry["progress_iteration"] = *j.progress.iteration;
  if (j.progress.batch) entry["progress_batch"] = *j.progress.batch;
}

json jobs_to_json(const JobRegistry& registry) {
  json jobs = json::array();
  for (const JobRecord* j : in_age_order(registry)) {
    json rules = json::array();
    for (const MatchRule& r : j->spec.match) rules.push_back(to_string(r));
    json entry = {{"id", j->spec.id}, {"name", j->spec.name}, {"match", rules}};
    if (j->spec.police) {
      entry["police_bps"] = j->spec.police->rate_bps;
      entry["police_burst_bytes"] = j->spec.police->burst_bytes;
    }
    put_rank_and_progress(*j, entry);
    jobs.push_back(entry);
  }
  return {{"jobs", jobs}};
}

json policy_to_json(const PolicyParams& policy) {
  return {{"name", policy_name(policy.kind)},
          {"interval_ns", policy.interval_ns},
          {"rotate_on", policy.rotate_on == RotateOn::kIteration ? "iteration" : "time"}};
}

Result<PolicyParams> policy_from_json(const json& p) {
  auto kind = p.is_object() && p.contains("name") && p["name"].is_string()
                  ? policy_from_name(p["name"].get<std::string>())
                  : std::nullopt;
  if (!kind) return Result<PolicyParams>::failure("policy: unknown or missing name");
  PolicyParams policy;
  policy.kind = *kind;
  if (p.contains("interval_ns") && p["interval_ns"].is_number_unsigned())
    policy.interval_ns = p["interval_ns"].get<uint64_t>();
  policy.rotate_on = p.value("rotate_on", "time") == "iteration" ? RotateOn::kIteration : RotateOn::kTime;
  return policy;
}

Result<JobRegistry> jobs_from_json(const json& state, uint32_t max_jobs) {
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
    job.spec.id = static_cast<uint32_t>(**id);
    if (!entry.contains("name") || !entry["name"].is_string())
      return R::failure(where + ".name: missing or not a string");
    job.spec.name = entry["name"].get<std::string>();
    if (!entry.contains("match") || !entry["match"].is_array())
      return R::failure(where + ".match: missing or not a list");
    for (const auto& rule : entry["match"]) {
      if (!rule.is_string()) return R::failure(where + ".match: rules must be strings");
      auto parsed = parse_match_rule(rule.get<std::string>());
      if (!parsed) return R::failure(where + ".match: " + parsed.error());
      job.spec.match.push_back(*parsed);
    }
    if (police_bps->has_value() != police_burst->has_value())
      return R::failure(where + ": police_bps and police_burst_bytes go together");
    if (police_bps->has_value()) job.spec.police = RateSpec{**police_bps, **police_burst};
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

Result<std::array<PortLive, kPortCount>> ports_from_json(const json& ports, unsigned class_count) {
  using R = Result<std::array<PortLive, kPortCount>>;
  std::array<PortLive, kPortCount> live;
  if (!ports.is_object()) return R::failure("ports: not an object");
  auto u64 = [](const json& obj, const char* key, uint64_t& out) {
    if (!obj.contains(key) || !obj[key].is_number_unsigned()) return false;
    out = obj[key].get<uint64_t>();
    return true;
  };
  for (unsigned p = 0; p < kPortCount; ++p) {
    const std::string where = std::string("ports.") + kPortNames[p];
    if (!ports.contains(kPortNames[p]) || !ports[kPortNames[p]].is_object()) return R::failure(where + ": missing");
    const json& port = ports[kPortNames[p]];
    if (!u64(port, "shaper_bytes_per_sec", live[p].shaper_bytes_per_sec) ||
        !u64(port, "shaper_burst_bytes", live[p].shaper_burst_bytes))
      return R::failure(where + ": shaper_bytes_per_sec and shaper_burst_bytes must be non-negative integers");
    if (!port.contains("classes") || !port["classes"].is_array() || port["classes"].size() != class_count)
      return R::failure(where + ".classes: expected " + std::to_string(class_count) +
                        " classes (classes.count); the file was written for another configuration");
    for (const json& c : port["classes"]) {
      ClassLive cl;
      uint64_t ecn = 0;
      if (!c.is_object() || !u64(c, "cap_bytes_per_sec", cl.cap_bytes_per_sec) ||
          !u64(c, "cap_burst_bytes", cl.cap_burst_bytes) || !u64(c, "floor_bytes_per_sec", cl.floor_bytes_per_sec) ||
          !u64(c, "floor_burst_bytes", cl.floor_burst_bytes) || !u64(c, "ecn_threshold", ecn) || ecn > UINT32_MAX ||
          !c.contains("dscp") || !c["dscp"].is_number_integer())
        return R::failure(where + ".classes: each class needs its rates, bursts, ecn_threshold and dscp");
      cl.actions.ecn_threshold = static_cast<uint32_t>(ecn);
      const int64_t dscp = c["dscp"].get<int64_t>();
      if (dscp != kNoDscp && (dscp < 0 || dscp > 63)) return R::failure(where + ".classes: dscp out of range");
      cl.actions.dscp = static_cast<int>(dscp);
      live[p].classes.push_back(cl);
    }
  }
  return live;
}

// Applies the ranks file at `path` to `saved` when it is there and belongs to
// saved.revision; a ranks file of another revision is older than the state
// file and changes nothing.
Result<bool> apply_ranks_file(const std::string& path, SavedState& saved, unsigned class_count) {
  using R = Result<bool>;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return false;
  std::ifstream in(path);
  if (!in) return R::failure("ranks file " + path + ": cannot read: " + std::strerror(errno));
  const json ranks = json::parse(in, nullptr, false);
  if (ranks.is_discarded() || !ranks.is_object() || ranks.value("version", 0) != 1 || !ranks.contains("base") ||
      !ranks["base"].is_number_unsigned())
    return R::failure("ranks file " + path + ": not a version 1 ranks file (move it away to use the state file alone)");
  if (ranks["base"].get<uint64_t>() != saved.revision) return false;
  auto policy = policy_from_json(ranks.contains("policy") ? ranks["policy"] : json());
  if (!policy) return R::failure("ranks file " + path + ": " + policy.error());
  auto live = ports_from_json(ranks.contains("ports") ? ranks["ports"] : json(), class_count);
  if (!live) return R::failure("ranks file " + path + ": " + live.error());
  if (!ranks.contains("jobs") || !ranks["jobs"].is_array()) return R::failure("ranks file " + path + ": no jobs list");
  for (const json& entry : ranks["jobs"]) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_number_unsigned() || !entry.contains("rank") ||
        !entry["rank"].is_number_unsigned() || entry["rank"].get<uint64_t>() > UINT32_MAX)
      return R::failure("ranks file " + path + ": each job needs an id and a rank");
    const uint64_t id = entry["id"].get<uint64_t>();
    if (id > UINT32_MAX || !saved.jobs.find(static_cast<uint32_t>(id)))
      return R::failure("ranks file " + path + ": job " + std::to_string(id) + " is not in the state file");
    JobProgress progress;
    if (entry.contains("progress_fraction") && entry["progress_fraction"].is_number())
      progress.fraction = entry["progress_fraction"].get<double>();
    if (entry.contains("progress_iteration") && entry["progress_iteration"].is_number_unsigned())
      progress.iteration = entry["progress_iteration"].get<uint64_t>();
    if (entry.contains("progress_batch") && entry["progress_batch"].is_number_unsigned())
      progress.batch = entry["progress_batch"].get<uint64_t>();
    saved.jobs.set_rank(static_cast<uint32_t>(id), entry["rank"].get<uint32_t>());
    if (progress.fraction || progress.iteration || progress.batch) {
      if (auto ok = saved.jobs.set_progress(static_cast<uint32_t>(id), progress); !ok)
        return R::failure("ranks file " + path + ": job " + std::to_string(id) + ": " + ok.error());
    }
  }
  saved.policy = *policy;
  saved.live = std::move(*live);
  saved.ranks_applied = true;
  return true;
}

std::string io_error(const std::string& path, const char* what) {
  return "state file " + path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

Result<bool> check_state_path(const std::string& path) {
  using R = Result<bool>;
  if (path.empty()) return true;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return R::failure("state file " + path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                      "; [control] state must name a file");
  // The file is replaced through a temporary beside it: its directory must be
  // writable. One that does not exist yet is created at the first write, so
  // then the nearest existing ancestor must be.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir)
    dir = dir.parent_path();
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return R::failure("state file " + path + ": its directory " + dir.string() +
                      " is not writable: " + std::strerror(errno));
  return true;
}

Result<std::optional<SavedState>> read_state_file(const std::string& path, uint32_t max_jobs, unsigned class_count) {
  using R = Result<std::optional<SavedState>>;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return std::optional<SavedState>{};
  if (!std::filesystem::is_regular_file(path, ec))
    return R::failure("state file " + path + ": not a regular file; [control] state must name a file");
  std::ifstream in(path);
  if (!in) return R::failure("state file " + path + ": cannot read: " + std::strerror(errno));
  json state = json::parse(in, nullptr, false);
  if (state.is_discarded())
    return R::failure("state file " + path + ": not valid JSON (move it away to start from the config's jobs)");
  const int version = state.is_object() && state.contains("version") && state["version"].is_number_integer()
                          ? state["version"].get<int>()
                          : 0;
  if (version < 1 || version > 3)
    return R::failure("state file " + path + ": unknown format (expected \"version\": 1, 2 or 3)");
  auto jobs = jobs_from_json(state, max_jobs);
  if (!jobs) return R::failure("state file " + path + ": " + jobs.error() + " (nothing was loaded)");
  SavedState saved{std::move(*jobs), PolicyParams{}, std::nullopt};
  if (version >= 2) {
    auto live = ports_from_json(state.contains("ports") ? state["ports"] : json(), class_count);
    if (!live) return R::failure("state file " + path + ": " + live.error() + " (nothing was loaded)");
    saved.live = std::move(*live);
  }
  if (state.contains("policy")) {
    auto policy = policy_from_json(state["policy"]);
    if (!policy) return R::failure("state file " + path + ": " + policy.error() + " (nothing was loaded)");
    saved.policy = *policy;
  }
  if (version >= 3) {
    if (!state.contains("revision") || !state["revision"].is_number_unsigned())
      return R::failure("state file " + path + ": \"revision\" missing (nothing was loaded)");
    saved.revision = state["revision"].get<uint64_t>();
    if (auto ranks = apply_ranks_file(ranks_file_path(path), saved, class_count); !ranks)
      return R::failure(ranks.error() + " (nothing was loaded)");
  }
  return std::optional<SavedState>(std::move(saved));
}

std::string ranks_file_path(const std::string& state_path) { return state_path + ".ranks"; }

std::string state_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t revision) {
  // One job per line: readable, and a fraction of the size of an indented dump.
  std::string text = "{\"version\": 3, \"revision\": " + std::to_string(revision) +
                     ",\n \"policy\": " + policy_to_json(policy).dump() +
                     ",\n \"ports\": " + ports_to_json(live).dump() + ",\n \"jobs\": [";
  bool first = true;
  const json listed = jobs_to_json(jobs);
  for (const json& job : listed["jobs"]) {
    text += first ? "\n  " : ",\n  ";
    text += job.dump();
    first = false;
  }
  return text + "\n ]}\n";
}

std::string ranks_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t revision) {
  std::string text = "{\"version\": 1, \"base\": " + std::to_string(revision) +
                     ",\n \"policy\": " + policy_to_json(policy).dump() +
                     ",\n \"ports\": " + ports_to_json(live).dump() + ",\n \"jobs\": [";
  bool first = true;
  for (const JobRecord* j : in_age_order(jobs)) {
    json entry = {{"id", j->spec.id}};
    put_rank_and_progress(*j, entry);
    text += first ? "\n  " : ",\n  ";
    text += entry.dump();
    first = false;
  }
  return text + "\n ]}\n";
}

Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning) {
  // write, fsync, rename, fsync the directory: a crash leaves the old file or the new one, never half of one.
  const std::string tmp = path + ".tmp";
  auto fail_io = [&](const char* what) {
    Result<bool> r = Result<bool>::failure(io_error(path, what));
    ::unlink(tmp.c_str());  // never leave a partial temporary behind (it may fill a small disk)
    return r;
  };
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return Result<bool>::failure(io_error(path, "cannot create"));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return fail_io("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail_io("cannot sync");
  }
  if (::close(fd) != 0) return fail_io("cannot close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_io("cannot rename");
  // The rename is durable once the directory is synced. Past the rename the
  // new file is the one every reader (and a restart) sees, so the change is
  // made: a failing directory sync cannot undo it and is only reported.
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if ((dfd < 0 || ::fsync(dfd) != 0) && warning) *warning = io_error(path, "cannot sync its directory");
  if (dfd >= 0) ::close(dfd);
  return true;
}

}  // namespace psgate
