// SPDX-License-Identifier: BSD-3-Clause
// The state file: its JSON format and its atomic replacement (see state_file.h).
#include "control/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/control_request.h"  // parse_json_bounded
#include "psgate/text.h"             // read_text_fd
#include "psgate/units.h"            // bits_per_sec

namespace psgate {

using json = nlohmann::json;

namespace {

// A job's rules file: 100,000 rules are a few MiB; far more is no file
// psgate wrote.
constexpr size_t kMaxRulesFileBytes = 256u << 20;
constexpr size_t kMaxStateFileBytes = kMaxRulesFileBytes;

void put_rank_and_progress(const JobRecord& j, json& entry) {
  entry["rank"] = j.spec.rank;
  if (j.progress.fraction) entry["progress_fraction"] = *j.progress.fraction;
  if (j.progress.iteration) entry["progress_iteration"] = *j.progress.iteration;
  if (j.progress.batch) entry["progress_batch"] = *j.progress.batch;
}

json rules_json(const JobRecord& j) {
  json rules = json::array();
  for (const MatchRule& r : j.spec.match) rules.push_back(to_string(r));
  return rules;
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

Result<PolicyParams> policy_from_json(const json& p) {
  auto kind = p.is_object() && p.contains("name") && p["name"].is_string()
                  ? policy_from_name(p["name"].get<std::string>())
                  : std::nullopt;
  if (!kind) return Result<PolicyParams>::failure("policy: unknown or missing name");
  PolicyParams policy;
  policy.kind = *kind;
  policy.interval_ns = default_policy_interval_ns(*kind);  // a hand-written file may leave it out
  // What the socket accepts, nothing else: the file may have been edited by
  // hand, and an interval of 0 would silently stop a rotation.
  if (p.contains("interval_ns")) {
    if (!p["interval_ns"].is_number_unsigned() || !valid_policy_interval_ns(p["interval_ns"].get<uint64_t>()))
      return Result<PolicyParams>::failure("policy.interval_ns: not an integer of at least 1000000 (1 ms)");
    policy.interval_ns = p["interval_ns"].get<uint64_t>();
  }
  // Before 2026-11-29 a config without [policy] gave the static policy
  // round-robin's 20s, which static never uses. Read as the 1s such a
  // config gives now: else the file's record would differ from the same
  // config read again, and a start would take "the file's change of
  // policy" over a policy set on the socket.
  if (policy.kind == PolicyKind::kStatic && policy.interval_ns == 20'000'000'000)
    policy.interval_ns = default_policy_interval_ns(PolicyKind::kStatic);
  if (p.contains("rotate_on")) {
    const json& r = p["rotate_on"];
    const auto on = r.is_string() ? rotate_on_from_name(r.get_ref<const std::string&>()) : std::nullopt;
    if (!on) return Result<PolicyParams>::failure("policy.rotate_on: not \"time\" or \"iteration\"");
    policy.rotate_on = *on;
  }
  return policy;
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

Result<std::unordered_map<uint32_t, JobRanks>> cluster_ranks_from_json(const json& list) {
  using R = Result<std::unordered_map<uint32_t, JobRanks>>;
  const auto u32 = [](const json& v) { return v.is_number_unsigned() && v.get<uint64_t>() <= UINT32_MAX; };
  if (!list.is_array()) return R::failure("cluster_ranks: not a list of [job, pull_rank, push_rank]");
  std::unordered_map<uint32_t, JobRanks> ranks;
  for (const json& r : list) {
    if (!r.is_array() || r.size() != 3 || !u32(r[0]) || !u32(r[1]) || !u32(r[2]) || r[0].get<uint32_t>() == 0)
      return R::failure("cluster_ranks: " + r.dump() + " is not [job, pull_rank, push_rank] (whole numbers, job > 0)");
    const uint32_t id = r[0].get<uint32_t>();
    if (!ranks.emplace(id, JobRanks{id, r[1].get<uint32_t>(), r[2].get<uint32_t>()}).second)
      return R::failure("cluster_ranks: job " + std::to_string(id) + " listed twice");
  }
  return ranks;
}

// Whether an error opening or reading a file says nothing of its content:
// permissions, I/O, the process's limits. A file missing, too large, or a
// path that is not what it should be (ENOTDIR, ELOOP: a broken layout) does.
bool says_nothing_of_content(int err) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EIO:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case EINTR:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

// A job's rules: inline ("match", versions 1 and 2) or in its rules file
// (version 3, under `rules_dir`). `cannot_read` is set when the rules file
// could not be opened or read for a reason that says nothing of its content
// (says_nothing_of_content): the state may be sound, unlike one that names
// a missing file or holds a bad one.
Result<std::vector<MatchRule>> job_rules(const json& entry, const std::string& where, const std::string& rules_dir,
                                         std::string* rules_file, bool* cannot_read) {
  using R = Result<std::vector<MatchRule>>;
  json loaded;
  const json* match = nullptr;
  if (entry.contains("rules")) {
    if (!entry["rules"].is_string() || entry["rules"].get<std::string>().find('/') != std::string::npos ||
        entry["rules"].get<std::string>().empty() || entry["rules"] == "." || entry["rules"] == "..")
      return R::failure(where + ".rules: not a rules file name");
    *rules_file = entry["rules"].get<std::string>();
    const std::string path = rules_dir + "/" + *rules_file;
    // A regular file only: a FIFO put there would block the start (and
    // --check) for ever, a directory fail with a stream's riddle.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      *cannot_read = says_nothing_of_content(err);
      return R::failure(where + ": rules file " + path + ": cannot read: " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      *cannot_read = says_nothing_of_content(err);
      return R::failure(where + ": rules file " + path + ": cannot read: " + std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      return R::failure(where + ": rules file " + path + ": not a regular file");
    }
    std::string text;
    const int err = read_text_fd(fd, text, kMaxRulesFileBytes);
    ::close(fd);
    if (err) {
      *cannot_read = says_nothing_of_content(err);
      return R::failure(where + ": rules file " + path + ": cannot read: " + std::strerror(err));
    }
    loaded = parse_json_bounded(text);
    if (loaded.is_discarded())
      return R::failure(where + ": rules file " + path + ": " + (text.empty() ? "empty" : "not valid JSON") +
                        " (cut short?)");
    if (!loaded.is_object() || loaded.value("job", json()) != entry["id"])
      return R::failure(where + ": rules file " + path + ": not the rules of job " + entry["id"].dump());
    match = loaded.contains("match") ? &loaded["match"] : nullptr;
  } else {
    match = entry.contains("match") ? &entry["match"] : nullptr;
  }
  if (match == nullptr || !match->is_array()) return R::failure(where + ".match: missing or not a list");
  std::vector<MatchRule> rules;
  for (const auto& rule : *match) {
    if (!rule.is_string()) return R::failure(where + ".match: rules must be strings");
    // Read as it ran: a rule an older psgate took (proto=0) must not keep
    // the upgraded gateway from starting.
    auto parsed = parse_match_rule(rule.get<std::string>(), RuleOrigin::kStored);
    if (!parsed) return R::failure(where + ".match: " + parsed.error());
    rules.push_back(*parsed);
  }
  return rules;
}

Result<JobRegistry> jobs_from_json(const json& state, uint32_t max_jobs, const std::string& rules_dir,
                                   bool* cannot_read) {
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
    job.spec.name = stored_name(entry["name"].get<std::string>());
    std::string rules_file;
    auto rules = job_rules(entry, where, rules_dir, &rules_file, cannot_read);
    if (!rules) return R::failure(rules.error());
    job.spec.match = std::move(*rules);
    if (police_bps->has_value() != police_burst->has_value())
      return R::failure(where + ": police_bps and police_burst_bytes go together");
    // A file written before rates had to be whole bytes per second may hold
    // any bit rate; its bucket ran the rate truncated to bytes, so that is
    // what keeps running (the new check would refuse the whole file).
    if (police_bps->has_value()) job.spec.police = RateSpec{bits_per_sec(bytes_per_sec(**police_bps)), **police_burst};
    if (entry.contains("progress_fraction")) {
      const json& f = entry["progress_fraction"];
      if (!f.is_number() || !valid_progress_fraction(f.get<double>()))
        return R::failure(where + ".progress_fraction: not a number between 0 and 1");
      job.progress.fraction = f.get<double>();
    }
    job.progress.iteration = *iteration;
    job.progress.batch = *batch;
    auto added = reg.add(std::move(job), static_cast<uint32_t>(**rank));
    if (!added) return R::failure(where + ": " + added.error());
    reg.set_rules_file(static_cast<uint32_t>(**id), rules_file);
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
  // A rate in bytes/s whose bit rate does not fit 64 bits would wrap in
  // the loader's checks (2^61 + 1 bytes/s passing as 8 bit/s) while the
  // buckets ran on the huge value.
  auto rate_fits = [](uint64_t bytes_per_second) { return bytes_per_second <= UINT64_MAX / 8; };
  for (unsigned p = 0; p < kPortCount; ++p) {
    const std::string where = std::string("ports.") + kPortNames[p];
    if (!ports.contains(kPortNames[p]) || !ports[kPortNames[p]].is_object()) return R::failure(where + ": missing");
    const json& port = ports[kPortNames[p]];
    if (!u64(port, "shaper_bytes_per_sec", live[p].shaper_bytes_per_sec) ||
        !u64(port, "shaper_burst_bytes", live[p].shaper_burst_bytes))
      return R::failure(where + ": shaper_bytes_per_sec and shaper_burst_bytes must be non-negative integers");
    if (!rate_fits(live[p].shaper_bytes_per_sec)) return R::failure(where + ": shaper_bytes_per_sec out of range");
    if (!port.contains("classes") || !port["classes"].is_array() || port["classes"].size() != class_count)
      return R::failure(where + ".classes: expected " + std::to_string(class_count) +
                        " classes (classes.count); the file was written for another configuration");
    for (size_t k = 0; k < port["classes"].size(); ++k) {
      const json& c = port["classes"][k];
      const std::string at = where + ".classes[" + std::to_string(k) + "]";
      ClassLive cl;
      uint64_t ecn = 0;
      if (!c.is_object() || !u64(c, "cap_bytes_per_sec", cl.cap_bytes_per_sec) ||
          !u64(c, "cap_burst_bytes", cl.cap_burst_bytes) || !u64(c, "floor_bytes_per_sec", cl.floor_bytes_per_sec) ||
          !u64(c, "floor_burst_bytes", cl.floor_burst_bytes) || !u64(c, "ecn_threshold", ecn) || !c.contains("dscp") ||
          !c["dscp"].is_number_integer())
        return R::failure(at + ": needs its rates, bursts, ecn_threshold and dscp as integers");
      if (ecn > UINT32_MAX) return R::failure(at + ".ecn_threshold: out of range");
      if (!rate_fits(cl.cap_bytes_per_sec) || !rate_fits(cl.floor_bytes_per_sec))
        return R::failure(at + ": cap_bytes_per_sec or floor_bytes_per_sec out of range");
      cl.actions.ecn_threshold = static_cast<uint32_t>(ecn);
      // Signed: a number past 2^63 (unsigned in JSON) must not wrap to -1, "keep".
      if (c["dscp"].is_number_unsigned() && c["dscp"].get<uint64_t>() > 63)
        return R::failure(at + ".dscp: out of range (0..63, or -1 to keep)");
      const int64_t dscp = c["dscp"].get<int64_t>();
      if (dscp != kNoDscp && (dscp < 0 || dscp > 63))
        return R::failure(at + ".dscp: out of range (0..63, or -1 to keep)");
      cl.actions.dscp = static_cast<int>(dscp);
      live[p].classes.push_back(cl);
    }
  }
  return live;
}

// `kind`: "state file" or "rules file", as the operator looks for it.
std::string io_error(const char* kind, const std::string& path, const char* what) {
  return std::string(kind) + " " + path + ": " + what + ": " + std::strerror(errno);
}

}  // namespace

Result<bool> check_saved_state(const SavedState& s, const ConfigSpec& config) {
  auto refuse = [&](const std::string& what, const ValueProblem& p) {
    return Result<bool>::failure("state file " + config.control.state + ": " + what + ": \"" + p.key +
                                 "\": " + p.problem + " (nothing was loaded)");
  };
  if (s.live) {
    for (unsigned p = 0; p < kPortCount; ++p) {
      const PortLive& live = (*s.live)[p];
      if (live.shaper_bytes_per_sec)
        if (auto problem = check_shaper(RateSpec{bits_per_sec(live.shaper_bytes_per_sec), live.shaper_burst_bytes}))
          return refuse(std::string("shaper on ") + kPortNames[p], *problem);
      for (size_t c = 0; c < live.classes.size() && c < config.classes.size(); ++c)
        if (auto problem = check_class(class_spec(live.classes[c], config.classes[c].depth)))
          return refuse("class " + std::to_string(c) + " on " + kPortNames[p], *problem);
      if (auto problem = floors_problem(live))
        return refuse(std::string("port ") + kPortNames[p], ValueProblem{"floor", *problem});
    }
  }
  for (const JobRecord* j : s.jobs.in_rank_order())
    if (auto problem = check_job(j->spec)) return refuse("job " + std::to_string(j->spec.id), *problem);
  return true;
}

std::vector<std::string> take_file_changes(SavedState& saved, const FileSettings& now, const ConfigSpec& config) {
  std::vector<std::string> taken;
  if (!saved.live || !saved.file) return taken;
  taken = apply_file_changes(*saved.live, saved.policy, *saved.file, now, !config.cluster.has_value());
  // The merge above already lists a class the file changed; what is taken
  // below replaces that entry, so the start-up log names each key once.
  const auto note = [&taken](const std::string& key, const std::string& why) {
    const auto merged = std::find(taken.begin(), taken.end(), key);
    if (merged != taken.end()) taken.erase(merged);
    taken.push_back(key + why);
  };
  for (unsigned p = 0; p < kPortCount; ++p) {
    PortLive& port = (*saved.live)[p];
    const PortLive& file = now.ports[p];
    const PortLive& was = saved.file->ports[p];  // the file's, when the state was written
    const size_t n = std::min({port.classes.size(), file.classes.size(), config.classes.size()});
    bool took_class = false;
    for (size_t c = 0; c < n; ++c) {
      const unsigned depth = config.classes[c].depth;
      if (port.classes[c] == file.classes[c] || !check_class(class_spec(port.classes[c], depth))) continue;
      const std::string key = "classes." + std::to_string(c) + "." + kPortNames[p];
      // Only where the file is why it fails. It changed this class since
      // the state was written (a new cap below a saved floor): the class is
      // the file's. Or only the ECN threshold fails, which a new depth does
      // (the file's record has no depth): only the threshold is the file's,
      // the acknowledged cap, floor and DSCP stay. A saved class wrong by
      // itself otherwise (a hand edit) is left to check_saved_state, which
      // refuses the start naming it: taking the file's would silently drop
      // the acknowledged settings beside the bad one.
      ClassLive without_ecn = port.classes[c];
      without_ecn.actions.ecn_threshold = 0;
      const bool file_changed = c >= was.classes.size() || !(was.classes[c] == file.classes[c]);
      if (!file_changed && !check_class(class_spec(without_ecn, depth))) {
        port.classes[c].actions.ecn_threshold = file.classes[c].actions.ecn_threshold;
        note(key, ".ecn_threshold (the saved one does not fit the class's depth)");
        took_class = true;
        continue;
      }
      if (!file_changed) continue;
      port.classes[c] = file.classes[c];
      took_class = true;
      note(key, " (the whole class: the saved settings did not fit with the file's)");
    }
    // Likewise a port's floors: taken from the file only when it changed the
    // port (its shaper, a class) since the state was written, or a class was
    // just taken from it.
    if (floors_problem(port) && !(port == file) && (!(was == file) || took_class)) {
      port = file;
      // The whole port covers what was listed of it.
      const std::string suffix = std::string(".") + kPortNames[p];
      std::erase_if(taken, [&](const std::string& k) {
        return k == "shaper" + suffix || (k.starts_with("classes.") && k.find(suffix) != std::string::npos);
      });
      taken.push_back(std::string("classes.*.") + kPortNames[p] +
                      " and shaper (the whole port: the saved floors did not fit with the file's)");
    }
  }
  return taken;
}

Result<bool> check_state_file_kind(const std::string& path) {
  using R = Result<bool>;
  if (path.empty()) return true;
  struct stat st {};
  // A symbolic link is refused, dangling or not: the file is replaced by a
  // rename beside it, which would replace the link and leave its target
  // behind; a dangling one (a disk not mounted yet) would look like a first
  // start and hide the real state.
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return R::failure("state file " + path +
                      ": is a symbolic link; name the file itself in [control] state (it is replaced through a "
                      "temporary beside it)");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return R::failure("state file " + path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                      "; [control] state must name a file");
  return true;
}

Result<bool> check_state_dir_writable(const std::string& path) {
  using R = Result<bool>;
  if (path.empty()) return true;
  // The file is replaced through a temporary beside it: its directory must be
  // writable. One that does not exist yet is created at the first write, so
  // then the nearest existing ancestor must be.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir)
    dir = dir.parent_path();
  // A relative path's first part that does not exist yet ("fresh" of
  // "fresh/state.json") is made in the working directory.
  if (!std::filesystem::exists(dir, ec) && !dir.has_parent_path()) dir = ".";
  // A regular file where a directory must be (state = "a.toml/state.json"):
  // said so, not "permission denied".
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    return R::failure("state file " + path + ": " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    // A filesystem remounted read-only (after errors, at boot) under a
    // state file it holds is a disk condition: the file is read, and written
    // again once it can be. With no file there yet, nothing was ever written
    // there: a path in a read-only place (ProtectSystem= makes /etc and /usr
    // read-only for the service), refused as any unwritable directory is.
    struct stat st {};
    if (err == EROFS && ::stat(path.c_str(), &st) == 0) return false;
    return R::failure("state file " + path + ": its directory " + dir.string() +
                      " is not writable: " + std::strerror(err) +
                      (err == EROFS ? " (and holds no state file yet: name a writable directory)" : ""));
  }
  // Each added job's rules go to STATE.rules/: one this user may not write
  // (made by root, psgate now run as another user) refused every add while
  // --check and health said nothing. A read-only filesystem is the disk
  // condition above, not this.
  const std::string rules = rules_dir_path(path);
  if (std::filesystem::is_directory(rules, ec) && ::access(rules.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    if (err != EROFS)
      return R::failure("state file " + path + ": its rules directory " + rules +
                        " is not writable: " + std::strerror(err));
  }
  return true;
}

Result<bool> check_state_path(const std::string& path) {
  if (auto kind = check_state_file_kind(path); !kind) return kind;
  return check_state_dir_writable(path);
}

namespace {

Result<std::optional<SavedState>> read_state_file_checked(const std::string& path, uint32_t max_jobs,
                                                          unsigned class_count, StateReadFailure& failure) {
  using R = Result<std::optional<SavedState>>;
  failure = StateReadFailure::kCannotRead;
  if (path.empty()) return std::optional<SavedState>{};
  // No file is a first start (the config's jobs); a path that cannot be
  // looked at (permissions, I/O) is not: starting from the config would
  // hide the real state.
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)
    return R::failure("state file " + path + ": cannot look at it: " + ec.message());
  if (!std::filesystem::exists(st)) return std::optional<SavedState>{};
  failure = StateReadFailure::kDoesNotLoad;
  if (!std::filesystem::is_regular_file(st))
    return R::failure("state file " + path + ": not a regular file; [control] state must name a file");
  // Bounded as a rules file is (a file of an older version holds the rules
  // inline): a stray huge file is refused, not read into memory whole.
  std::string text;
  if (const int err = read_text_file(path, text, kMaxStateFileBytes)) {
    if (err != EFBIG) failure = StateReadFailure::kCannotRead;
    return R::failure(
        "state file " + path + ": cannot read: " +
        (err == EFBIG ? "larger than " + std::to_string(kMaxStateFileBytes >> 20) + " MiB" : read_text_error(err)));
  }
  json state = parse_json_bounded(text);
  if (state.is_discarded())
    return R::failure("state file " + path + ": not valid JSON, or nested deeper than " +
                      std::to_string(kMaxJsonDepth) + " levels (move it away to start from the config's jobs)");
  // Read as 64 bits: a larger number must not wrap into a known version.
  const int64_t version = state.is_object() && state.contains("version") && state["version"].is_number_integer()
                              ? state["version"].get<int64_t>()
                              : 0;
  if (version < 1 || version > 3)
    return R::failure("state file " + path + ": unknown format (expected \"version\": 1, 2 or 3)");
  if (version >= 3 && (!state.contains("rules_serial") || !state["rules_serial"].is_number_unsigned()))
    return R::failure("state file " + path +
                      ": \"rules_serial\" missing or not a non-negative integer (nothing was loaded)");
  bool rules_cannot_read = false;
  auto jobs = jobs_from_json(state, max_jobs, rules_dir_path(path), &rules_cannot_read);
  if (rules_cannot_read) failure = StateReadFailure::kCannotRead;
  if (!jobs) return R::failure("state file " + path + ": " + jobs.error() + " (nothing was loaded)");
  SavedState saved{std::move(*jobs), PolicyParams{}, std::nullopt, 0, {}, std::nullopt, std::nullopt, std::nullopt};
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
  if (version >= 3) saved.rules_serial = state["rules_serial"].get<uint64_t>();
  // The next name must be new: one the file names already (a rules_serial
  // hand-edited down, or a version 1 or 2 file's 0) would be written over a
  // live job's rules, and the removed job's file deleted a minute later
  // under the job that reuses its name.
  for (const JobRecord* j : saved.jobs.in_age_order())
    if (const auto serial = rules_file_serial(j->rules_file); serial && *serial >= saved.rules_serial)
      saved.rules_serial = *serial + 1;
  if (saved.rules_serial >= kRulesSerialLimit)
    return R::failure("state file " + path + ": \"rules_serial\" " + std::to_string(saved.rules_serial) +
                      " is past the largest psgate counts to (" + std::to_string(kRulesSerialLimit - 1) +
                      "): hand-edited? (nothing was loaded)");
  // The config file's record is a baseline, not state: one that cannot be
  // used (hand-edited, or of another classes.count, recorded after a reload
  // of a file that changed it) is left out, and the saved values stand, as
  // in a file written before psgate kept it.
  if (state.contains("file") && state["file"].is_object() && state["file"].contains("policy")) {
    const json& f = state["file"];
    auto policy = policy_from_json(f["policy"]);
    auto ports = ports_from_json(f.contains("ports") ? f["ports"] : json(), class_count);
    if (policy && ports) saved.file = FileSettings{*policy, std::move(*ports)};
  }
  if (state.contains("cluster_ranks")) {
    auto ranks = cluster_ranks_from_json(state["cluster_ranks"]);
    if (!ranks) return R::failure("state file " + path + ": " + ranks.error() + " (nothing was loaded)");
    saved.cluster_ranks = std::move(*ranks);
  }
  if (state.contains("policy_position")) {
    const json& p = state["policy_position"];
    if (!p.is_object() || !p.contains("top") || !p["top"].is_number_unsigned() ||
        p["top"].get<uint64_t>() > UINT32_MAX || !p.contains("since_unix_ns") ||
        !p["since_unix_ns"].is_number_unsigned())
      return R::failure("state file " + path +
                        ": policy_position: not {\"top\": a job id, \"since_unix_ns\": a time} (nothing was loaded)");
    saved.position =
        PolicyPosition{static_cast<uint32_t>(p["top"].get<uint64_t>()), p["since_unix_ns"].get<uint64_t>()};
  }
  saved.text = std::move(text);
  return std::optional<SavedState>(std::move(saved));
}

}  // namespace

Result<std::optional<SavedState>> read_state_file(const std::string& path, uint32_t max_jobs, unsigned class_count,
                                                  StateReadFailure* failure) {
  StateReadFailure why = StateReadFailure::kCannotRead;
  // Every field is type-checked before it is read; this is the backstop for
  // one that is not, so that a hand-edited file is a clear error (exit 2 at
  // start-up), never an uncaught exception.
  try {
    auto saved = read_state_file_checked(path, max_jobs, class_count, why);
    if (failure) *failure = why;
    return saved;
  } catch (const std::exception& e) {
    if (failure) *failure = StateReadFailure::kDoesNotLoad;
    return Result<std::optional<SavedState>>::failure("state file " + path + ": " + e.what() + " (nothing was loaded)");
  }
}

std::string config_jobs_unlike_state(const std::vector<JobSpec>& config_jobs, const JobRegistry& state_jobs) {
  std::vector<std::string> differences;
  auto same_but_rank = [](JobSpec a, const JobSpec& b) {
    a.rank = b.rank;
    return a == b;
  };
  std::set<uint32_t> in_config;
  for (const JobSpec& job : config_jobs) {
    in_config.insert(job.id);
    const JobRecord* saved = state_jobs.find(job.id);
    if (saved == nullptr) differences.push_back("job " + std::to_string(job.id) + " is not in the state file");
    else if (!same_but_rank(job, saved->spec)) differences.push_back("job " + std::to_string(job.id) + " differs");
  }
  for (const JobRecord* saved : state_jobs.in_age_order())
    if (!in_config.count(saved->spec.id))
      differences.push_back("job " + std::to_string(saved->spec.id) + " is not in the config");
  std::string out;
  constexpr size_t kNamed = 5;
  for (size_t i = 0; i < differences.size() && i < kNamed; ++i) out += (i ? ", " : "") + differences[i];
  if (differences.size() > kNamed) out += " and " + std::to_string(differences.size() - kNamed) + " more";
  return out;
}

std::string rules_dir_path(const std::string& state_path) { return state_path + ".rules"; }

std::string rules_file_name(uint32_t job_id, uint64_t serial) {
  return "job-" + std::to_string(job_id) + "." + std::to_string(serial) + ".json";
}

std::optional<uint64_t> rules_file_serial(const std::string& name) {
  // job-<id>.<serial>.json
  const size_t dot = name.find('.');
  if (name.rfind("job-", 0) != 0 || dot == std::string::npos || !name.ends_with(".json")) return std::nullopt;
  const std::string digits = name.substr(dot + 1, name.size() - 5 - (dot + 1));
  if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const uint64_t serial = std::stoull(digits);
  if (serial >= kRulesSerialLimit) return std::nullopt;
  return serial;
}

std::string rules_file_text(const JobRecord& job) {
  return json{{"job", job.spec.id}, {"match", rules_json(job)}}.dump() + "\n";
}

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

PolicyState resume_policy_state(const PolicyPosition& position, uint64_t interval_ns, uint64_t now_ns,
                                uint64_t now_unix_ns) {
  PolicyState state;
  const uint64_t ago = now_unix_ns > position.since_unix_ns ? now_unix_ns - position.since_unix_ns : 0;
  state.started = true;
  state.last_rotation_ns = now_ns - std::min({ago, interval_ns, now_ns});
  state.top_known = true;
  state.top_id = position.top_id;
  // The jobs' iteration counts start again at 0 with the data plane.
  state.top_iterations_seen = 0;
  return state;
}

namespace {

// Writes `text` to a temporary beside `path`, fsyncs it and renames it over
// `path`: a crash leaves the old file or the new one, never half of one.
// `sync`: the data made durable before the rename; write_rules_files
// passes false and syncs the filesystem once for many files.
Result<bool> replace_file(const char* kind, const std::string& path, const std::string& text, bool sync = true) {
  // A new file of a name of its own (mkostemp: O_EXCL, no link followed): a
  // symbolic link planted at a fixed name (a state directory others can
  // write) had root write the state over its target and the rename make the
  // link the state file; and two writers (a gateway run without its lock)
  // shared one temporary, one renaming the other's half-written file.
  std::string tmp = path + ".tmp.XXXXXX";
  auto fail_io = [&](const char* what) {
    Result<bool> r = Result<bool>::failure(io_error(kind, path, what));
    ::unlink(tmp.c_str());  // never leave a partial temporary behind (it may fill a small disk)
    return r;
  };
  make_directories_durably(std::filesystem::path(path).parent_path().string());
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Result<bool>::failure(io_error(kind, path, "cannot create"));
  if (::fchmod(fd, 0640) != 0) {
    ::close(fd);
    return fail_io("cannot set the mode of");
  }
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
  if (sync && ::fsync(fd) != 0) {
    ::close(fd);
    return fail_io("cannot sync");
  }
  if (::close(fd) != 0) return fail_io("cannot close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_io("cannot rename");
  return true;
}

}  // namespace

void make_directories_durably(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || std::filesystem::exists(dir, ec)) return;
  // A directory made here is durable once its parent is synced: without it
  // a power loss could take the directory, and every file acknowledged in
  // it, with it. Best effort: the files' own directory syncs follow.
  std::vector<std::filesystem::path> made;
  for (auto p = std::filesystem::path(dir); !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path())
    made.push_back(p);
  std::filesystem::create_directories(dir, ec);
  for (const auto& m : made) (void)sync_directory(m.parent_path().string());
}

Result<bool> sync_directory(const std::string& dir) {
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = dfd >= 0 && ::fsync(dfd) == 0;
  if (dfd >= 0) ::close(dfd);
  if (!ok) return Result<bool>::failure("directory " + dir + ": cannot sync: " + std::strerror(errno));
  return true;
}

Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning) {
  if (auto replaced = replace_file("state file", path, text); !replaced) return replaced;
  // The rename is durable once the directory is synced. Past the rename the
  // new file is the one every reader (and a restart) sees, so the change is
  // made: a failing directory sync cannot undo it and is only reported.
  if (auto synced = sync_directory(std::filesystem::path(path).parent_path().string()); !synced && warning)
    *warning = "state file " + path + ": " + synced.error();
  return true;
}

Result<bool> write_rules_file(const std::string& dir, const std::string& name, const std::string& text) {
  return replace_file("rules file", dir + "/" + name, text);
}

Result<bool> write_rules_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  // Many files are made durable by one syncfs, not a sync each: 4 ms apiece
  // held the control thread 16 s for 4,000 jobs a scheduler wrote to the
  // cluster store at once, every gateway's control socket and stop signals
  // waiting. A few are synced each: syncfs waits for every process's dirty
  // data on the filesystem. Until this returns no state file names them
  // (a crash leaves them unnamed, set aside at the next start).
  constexpr size_t kOneSyncFrom = 64;
  const bool one_sync = files.size() >= kOneSyncFrom;
  // A failure takes back what was written: no state file will name them,
  // and a refused change must leave nothing behind (commit() removes only
  // the files its jobs name).
  std::vector<std::string> written;
  int dfd = -1;
  auto undo = [&](Result<bool> failed) {
    if (dfd >= 0) ::close(dfd);
    for (const std::string& path : written) ::unlink(path.c_str());
    return failed;
  };
  if (one_sync) {
    // Opened before the writes: syncfs reports the write-back errors met
    // since (Linux 5.8 and later, as Debian 12's 6.1).
    make_directories_durably(dir);
    dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
      return undo(Result<bool>::failure("rules directory " + dir + ": cannot open: " + std::strerror(errno)));
  }
  written.reserve(files.size());
  for (const auto& [name, text] : files) {
    if (auto w = replace_file("rules file", dir + "/" + name, text, !one_sync); !w) return undo(w);
    written.push_back(dir + "/" + name);
  }
  if (one_sync && ::syncfs(dfd) != 0)
    return undo(Result<bool>::failure("rules directory " + dir + ": cannot sync: " + std::strerror(errno)));
  if (dfd >= 0) ::close(dfd);
  return true;
}

namespace {

// The rules files directly in `dir` that no job of `jobs` names.
std::vector<std::filesystem::path> unnamed_rules_files(const std::string& dir, const JobRegistry& jobs) {
  std::set<std::string> named;
  for (const JobRecord* j : jobs.in_age_order()) named.insert(j->rules_file);
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) == 0 && !named.count(name) && entry.is_regular_file(ec)) out.push_back(entry.path());
  }
  return out;
}

}  // namespace

void remove_state_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  // The one fixed name earlier versions wrote through.
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path + ".tmp", ec)))
    std::filesystem::remove(path + ".tmp", ec);
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 6 && name.starts_with(prefix) && entry.is_regular_file(ec))
      std::filesystem::remove(entry.path(), ec);
  }
}

uint64_t next_rules_serial_in(const std::string& dir) {
  uint64_t next = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (auto serial = rules_file_serial(name)) next = std::max(next, *serial + 1);
    // Files set aside (set_aside_unnamed_rules_files) count too: moved back
    // by hand (operations.md), none may have a live file's name.
    if (name.rfind("unnamed-", 0) == 0 && entry.is_directory(ec)) {
      std::error_code sub_ec;
      for (const auto& aside : std::filesystem::directory_iterator(entry.path(), sub_ec))
        if (auto serial = rules_file_serial(aside.path().filename().string())) next = std::max(next, *serial + 1);
    }
  }
  return next;
}

void remove_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs) {
  std::error_code ec;
  for (const auto& path : unnamed_rules_files(dir, jobs)) std::filesystem::remove(path, ec);
}

RulesSetAside set_aside_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs, const std::string& aside) {
  RulesSetAside out;
  const auto files = unnamed_rules_files(dir, jobs);
  if (files.empty()) return out;
  // A directory of its own, never an existing one (two starts in the same
  // second): the files of the first must not be replaced by the second's.
  std::string to = (std::filesystem::path(dir) / aside).string();
  for (unsigned n = 2; ::mkdir(to.c_str(), 0750) != 0; ++n) {
    if (errno != EEXIST || n > 100) {
      out.error = "cannot make " + to + ": " + std::strerror(errno);
      return out;
    }
    to = (std::filesystem::path(dir) / (aside + "-" + std::to_string(n))).string();
  }
  out.directory = to;
  for (const auto& path : files) {
    std::error_code ec;
    std::filesystem::rename(path, std::filesystem::path(to) / path.filename(), ec);
    if (ec) out.error = "cannot move " + path.string() + ": " + ec.message();
    else ++out.moved;
  }
  // Durable: the files' new names first, then the directory's own.
  (void)sync_directory(to);
  (void)sync_directory(dir);
  return out;
}

}  // namespace psgate
