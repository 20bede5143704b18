// SPDX-License-Identifier: BSD-3-Clause
// Reading the state file: its JSON (every version) and the rules files it
// names, checked field by field, into a SavedState (state_file.h).
#include "control/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
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

}  // namespace psgate
