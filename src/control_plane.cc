// Control operations (control thread only; see control_plane.h).
#include "psgate/control_plane.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <spdlog/spdlog.h>

#include "psgate/snapshot.h"
#include "psgate/stats_json.h"
#include "psgate/units.h"

namespace psgate {

using json = nlohmann::json;
using Reply = Result<json>;

namespace {

Reply fail(std::string message) { return Reply::failure(std::move(message)); }

// Argument readers: each error names the argument.
Result<uint64_t> arg_uint(const json& req, const char* key, uint64_t max) {
  if (!req.contains(key)) return Result<uint64_t>::failure(std::string("missing argument \"") + key + "\"");
  const json& v = req[key];
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0))
    return Result<uint64_t>::failure(std::string("\"") + key + "\" must be a non-negative integer");
  const uint64_t n = v.get<uint64_t>();
  if (n > max) return Result<uint64_t>::failure(std::string("\"") + key + "\" must be at most " + std::to_string(max));
  return n;
}

// Tri-state optional argument: absent (unchanged), null (remove), or a value.
template <typename T>
struct Change {
  bool present = false;
  std::optional<T> value;
};

Result<Change<uint64_t>> arg_quantity(const json& req, const char* key,
                                      Result<uint64_t> (*parse)(std::string_view)) {
  Change<uint64_t> c;
  if (!req.contains(key)) return c;
  c.present = true;
  if (req[key].is_null()) return c;
  if (!req[key].is_string())
    return Result<Change<uint64_t>>::failure(std::string("\"") + key + "\" must be a string with a unit, or null");
  auto parsed = parse(req[key].get<std::string>());
  if (!parsed) return Result<Change<uint64_t>>::failure(std::string("\"") + key + "\": " + parsed.error());
  c.value = *parsed;
  return c;
}

Result<unsigned> arg_port(const json& req) {
  if (!req.contains("port") || !req["port"].is_string())
    return Result<unsigned>::failure("missing argument \"port\" (\"wire\" or \"host\")");
  const std::string p = req["port"].get<std::string>();
  for (unsigned i = 0; i < kPortCount; ++i)
    if (p == kPortNames[i]) return i;
  return Result<unsigned>::failure("unknown port \"" + p + "\" (expected \"wire\" or \"host\")");
}

std::string rate_text(uint64_t bytes_per_sec) {
  const double bps = static_cast<double>(bytes_per_sec) * 8;
  char buf[64];
  if (bps >= 1e9) std::snprintf(buf, sizeof buf, "%.6gGbit/s", bps / 1e9);
  else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.6gMbit/s", bps / 1e6);
  else if (bps >= 1e3) std::snprintf(buf, sizeof buf, "%.6gkbit/s", bps / 1e3);
  else std::snprintf(buf, sizeof buf, "%.6gbit/s", bps);
  return buf;
}

json rate_json(uint64_t bytes_per_sec) { return bytes_per_sec ? json(rate_text(bytes_per_sec)) : json(nullptr); }
json rate_spec_json(const std::optional<RateSpec>& r) {
  return r ? json(rate_text(r->rate_bps / 8)) : json(nullptr);
}

constexpr uint64_t kDefaultBurst = 64 * 1024;
constexpr uint64_t kPolicyDefaultIntervalNs = 1'000'000'000;
constexpr uint64_t kRoundRobinDefaultIntervalNs = 20'000'000'000;

}  // namespace

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const std::vector<CommandInfo>& ControlPlane::commands() {
  static const std::vector<CommandInfo> list = {
      {"health", "gateway status, version, uptime, snapshot generation"},
      {"jobs.list", "jobs in rank order with their rules, classes and progress"},
      {"jobs.add", "add a job: id, match (rules), optional name, rank, police, police_burst"},
      {"jobs.remove", "remove a job: id"},
      {"order", "set the job order: ids, highest priority first"},
      {"rank", "set one job's rank: id, rank"},
      {"class.set", "set a class's cap/floor/ECN threshold/DSCP: port, class, ..."},
      {"shaper.set", "set a port's shaper: port, rate (null: unshaped), burst"},
      {"progress", "report a job's progress: id, fraction, iteration, batch"},
      {"policy", "show or choose the scheduling policy: name, interval, rotate_on"},
      {"stats", "every counter, per port, class and job"},
      {"config", "the configuration in force"},
  };
  return list;
}

ControlPlane::ControlPlane(Dataplane& dataplane, const ConfigSpec& config, JobRegistry jobs)
    : dataplane_(dataplane), config_(config), jobs_(std::move(jobs)), baselines_(config.max_jobs) {
  started_ns_ = monotonic_ns();
  live_ = live_params(config_);
}

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(Dataplane& dataplane, const ConfigSpec& config) {
  using R = Result<std::unique_ptr<ControlPlane>>;
  const std::string& path = config.control.state;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) {
    auto jobs = JobRegistry::from_config(config);
    if (!jobs) return R::failure(config.source + ": " + jobs.error());
    return std::unique_ptr<ControlPlane>(new ControlPlane(dataplane, config, std::move(*jobs)));
  }
  std::ifstream in(path);
  if (!in) return R::failure("state file " + path + ": cannot read: " + std::strerror(errno));
  json state = json::parse(in, nullptr, false);
  if (state.is_discarded())
    return R::failure("state file " + path + ": not valid JSON (move it away to start from the config's jobs)");
  if (!state.is_object() || state.value("version", 0) != 1)
    return R::failure("state file " + path + ": unknown format (expected \"version\": 1)");
  auto jobs = JobRegistry::from_state(state, config.max_jobs);
  if (!jobs) return R::failure("state file " + path + ": " + jobs.error() + " (nothing was loaded)");
  std::unique_ptr<ControlPlane> cp(new ControlPlane(dataplane, config, std::move(*jobs)));
  if (state.contains("policy")) {
    const json& p = state["policy"];
    auto kind = p.is_object() && p.contains("name") && p["name"].is_string()
                    ? policy_from_name(p["name"].get<std::string>())
                    : std::nullopt;
    if (!kind) return R::failure("state file " + path + ": policy: unknown or missing name (nothing was loaded)");
    cp->policy_.kind = *kind;
    if (p.contains("interval_ns") && p["interval_ns"].is_number_unsigned())
      cp->policy_.interval_ns = p["interval_ns"].get<uint64_t>();
    cp->policy_.rotate_on = p.value("rotate_on", "time") == "iteration" ? RotateOn::kIteration : RotateOn::kTime;
  }
  spdlog::info("state file {}: restored {} jobs, policy {}", path, cp->jobs_.size(), policy_name(cp->policy_.kind));
  return cp;
}

Result<bool> ControlPlane::start() { return publish(monotonic_ns()); }

std::unordered_map<uint32_t, JobRanks> ControlPlane::effective_ranks(uint64_t now_ns) {
  std::unordered_map<uint32_t, JobRanks> ranks;
  const std::vector<const JobRecord*> ordered = jobs_.in_rank_order();
  if (policy_.kind == PolicyKind::kStatic) {
    for (const JobRecord* j : ordered) ranks[j->id] = JobRanks{j->id, j->rank, j->rank};
    return ranks;
  }
  std::vector<PolicyJob> input;
  for (const JobRecord* j : ordered) {
    PolicyJob pj;
    pj.id = j->id;
    pj.progress_fraction = j->progress.fraction;
    pj.iteration = j->progress.iteration;
    pj.batch = j->progress.batch;
    const JobTelemetry t = dataplane_.job_telemetry(j->slot);
    pj.iterations_seen = t.bursts;
    pj.bytes_per_iteration = t.last_burst_bytes;
    pj.bytes_this_iteration = t.current_burst_bytes;
    input.push_back(pj);
  }
  for (const JobRanks& r : evaluate_policy(policy_, policy_state_, input, now_ns)) ranks[r.id] = r;
  return ranks;
}

Result<bool> ControlPlane::publish(uint64_t now_ns) {
  auto ranks = effective_ranks(now_ns);
  std::vector<JobEntry> entries;
  for (const JobRecord* j : jobs_.in_rank_order()) {
    const JobRanks& r = ranks[j->id];
    JobEntry e;
    e.slot = j->slot;
    e.id = j->id;
    e.name = j->name;
    e.rank = j->rank;
    e.effective_rank[kPush] = r.push_rank;
    e.effective_rank[kPull] = r.pull_rank;
    e.match = j->match;
    e.police = j->police;
    e.sequence = j->sequence;
    entries.push_back(std::move(e));
  }
  // Only this thread publishes, so the current snapshot cannot go away here.
  auto snap = build_snapshot(config_, std::move(entries), generation_ + 1, &dataplane_.snapshot());
  if (!snap) return Result<bool>::failure(snap.error());
  (*snap)->ports = live_;
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    dataplane_.publisher().publish(std::move(*snap));
  }
  ++generation_;
  applied_ranks_ = std::move(ranks);
  return persist();
}

Result<bool> ControlPlane::persist() const {
  const std::string& path = config_.control.state;
  if (path.empty()) return true;
  json state = jobs_.to_state();
  state["version"] = 1;
  state["policy"] = {{"name", policy_name(policy_.kind)},
                     {"interval_ns", policy_.interval_ns},
                     {"rotate_on", policy_.rotate_on == RotateOn::kIteration ? "iteration" : "time"}};
  const std::string text = state.dump(2) + "\n";
  // write, fsync, rename, fsync the directory: a crash leaves the old file or the new one, never half of one.
  const std::string tmp = path + ".tmp";
  auto fail_io = [&](const char* what) {
    return Result<bool>::failure(std::string("state file ") + path + ": " + what + ": " + std::strerror(errno));
  };
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return fail_io("cannot create");
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      ::close(fd);
      return fail_io("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    return fail_io("cannot sync");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_io("cannot rename");
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return true;
}

void ControlPlane::tick(uint64_t now_ns) {
  if (policy_.kind == PolicyKind::kStatic) return;
  auto ranks = effective_ranks(now_ns);
  if (ranks == applied_ranks_) return;
  if (auto ok = publish(now_ns); !ok) spdlog::error("policy {}: {}", policy_name(policy_.kind), ok.error());
}

json ControlPlane::handle(const json& request) {
  if (!request.is_object()) return {{"ok", false}, {"error", "a request must be a JSON object"}};
  json reply;
  if (request.contains("id")) reply["id"] = request["id"];
  if (!request.contains("cmd") || !request["cmd"].is_string()) {
    reply["ok"] = false;
    reply["error"] = "missing \"cmd\" (a string naming the command)";
    return reply;
  }
  static const std::unordered_map<std::string, Handler> handlers = {
      {"health", &ControlPlane::cmd_health},       {"jobs.list", &ControlPlane::cmd_jobs_list},
      {"jobs.add", &ControlPlane::cmd_jobs_add},   {"jobs.remove", &ControlPlane::cmd_jobs_remove},
      {"order", &ControlPlane::cmd_order},         {"rank", &ControlPlane::cmd_rank},
      {"class.set", &ControlPlane::cmd_class_set}, {"shaper.set", &ControlPlane::cmd_shaper_set},
      {"progress", &ControlPlane::cmd_progress},   {"policy", &ControlPlane::cmd_policy},
      {"stats", &ControlPlane::cmd_stats},         {"config", &ControlPlane::cmd_config},
  };
  const std::string cmd = request["cmd"].get<std::string>();
  auto it = handlers.find(cmd);
  if (it == handlers.end()) {
    reply["ok"] = false;
    reply["error"] = "unknown command \"" + cmd + "\"";
    return reply;
  }
  Reply r = (this->*(it->second))(request);
  if (r) {
    reply["ok"] = true;
    reply["result"] = std::move(*r);
  } else {
    reply["ok"] = false;
    reply["error"] = r.error();
  }
  return reply;
}

json ControlPlane::job_json(const JobRecord& job, const Snapshot& snap) const {
  json rules = json::array();
  for (const MatchRule& r : job.match) rules.push_back(to_string(r));
  const SlotInfo& slot = snap.slots[job.slot];
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"id", job.id},
          {"name", job.name},
          {"rank", job.rank},
          {"class", slot.cls[kPull]},
          {"pull_class", slot.cls[kPull]},
          {"push_class", slot.cls[kPush]},
          {"match", rules},
          {"police", rate_spec_json(job.police)},
          {"progress",
           {{"fraction", opt(job.progress.fraction)},
            {"iteration", opt(job.progress.iteration)},
            {"batch", opt(job.progress.batch)}}}};
}

json ControlPlane::policy_json() const {
  return {{"name", policy_name(policy_.kind)},
          {"interval", std::to_string(policy_.interval_ns / 1'000'000) + "ms"},
          {"rotate_on", policy_.rotate_on == RotateOn::kIteration ? "iteration" : "time"}};
}

Reply ControlPlane::cmd_health(const json&) {
  return json{{"status", "ok"},
              {"version", PSGATE_VERSION},
              {"uptime_s", static_cast<double>(monotonic_ns() - started_ns_) / 1e9},
              {"generation", generation_},
              {"lcores", dataplane_.describe_lcores()},
              {"jobs", jobs_.size()},
              {"policy", policy_name(policy_.kind)}};
}

Reply ControlPlane::cmd_jobs_list(const json&) {
  json list = json::array();
  const Snapshot& snap = dataplane_.snapshot();  // control thread: no publish can run meanwhile
  for (const JobRecord* j : jobs_.in_rank_order()) list.push_back(job_json(*j, snap));
  return json{{"jobs", list}};
}

Reply ControlPlane::cmd_jobs_add(const json& req) {
  auto id = arg_uint(req, "id", UINT32_MAX);
  if (!id) return fail(id.error());
  JobRecord job;
  job.id = static_cast<uint32_t>(*id);
  if (!req.contains("match") || !req["match"].is_array() || req["match"].empty())
    return fail("\"match\" must be a non-empty list of rule strings");
  size_t i = 0;
  for (const json& r : req["match"]) {
    if (!r.is_string()) return fail("match[" + std::to_string(i) + "] must be a string");
    auto rule = parse_match_rule(r.get<std::string>());
    if (!rule) return fail("match[" + std::to_string(i) + "]: " + rule.error());
    job.match.push_back(*rule);
    ++i;
  }
  if (req.contains("name")) {
    if (!req["name"].is_string()) return fail("\"name\" must be a string");
    job.name = req["name"].get<std::string>();
  }
  std::optional<uint32_t> rank;
  if (req.contains("rank")) {
    auto r = arg_uint(req, "rank", UINT32_MAX);
    if (!r) return fail(r.error());
    rank = static_cast<uint32_t>(*r);
  }
  auto police = arg_quantity(req, "police", parse_rate_bps);
  if (!police) return fail(police.error());
  auto police_burst = arg_quantity(req, "police_burst", parse_size_bytes);
  if (!police_burst) return fail(police_burst.error());
  if (police->value) {
    if (*police->value < 8) return fail("\"police\" must be at least 8bit/s");
    job.police = RateSpec{*police->value, police_burst->value.value_or(kDefaultBurst)};
  }
  auto added = jobs_.add(std::move(job), rank);
  if (!added) return fail(added.error());
  const JobRecord* rec = *added;
  const uint32_t slot = rec->slot;
  const uint32_t new_id = rec->id;
  {
    // A reused slot carries its previous job's counts: start this job from them.
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    baselines_[slot] = dataplane_.read_totals(false).jobs[slot];
  }
  if (auto ok = publish(monotonic_ns()); !ok) {
    jobs_.remove(new_id);
    return fail(ok.error());
  }
  return json{{"job", job_json(*jobs_.find(new_id), dataplane_.snapshot())}};
}

Reply ControlPlane::cmd_jobs_remove(const json& req) {
  auto id = arg_uint(req, "id", UINT32_MAX);
  if (!id) return fail(id.error());
  auto removed = jobs_.remove(static_cast<uint32_t>(*id));
  if (!removed) return fail(removed.error());
  if (auto ok = publish(monotonic_ns()); !ok) return fail(ok.error());
  return json{{"removed", *id}};
}

Reply ControlPlane::cmd_order(const json& req) {
  if (!req.contains("ids") || !req["ids"].is_array()) return fail("\"ids\" must be a list of job ids");
  std::vector<uint32_t> ids;
  for (const json& v : req["ids"]) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) return fail("\"ids\" must hold job ids");
    ids.push_back(v.get<uint32_t>());
  }
  auto ok = jobs_.set_order(ids);
  if (!ok) return fail(ok.error());
  if (auto p = publish(monotonic_ns()); !p) return fail(p.error());
  return cmd_jobs_list(req);
}

Reply ControlPlane::cmd_rank(const json& req) {
  auto id = arg_uint(req, "id", UINT32_MAX);
  if (!id) return fail(id.error());
  auto rank = arg_uint(req, "rank", UINT32_MAX);
  if (!rank) return fail(rank.error());
  auto job = jobs_.set_rank(static_cast<uint32_t>(*id), static_cast<uint32_t>(*rank));
  if (!job) return fail(job.error());
  if (auto p = publish(monotonic_ns()); !p) return fail(p.error());
  return json{{"job", job_json(**job, dataplane_.snapshot())}};
}

Reply ControlPlane::cmd_class_set(const json& req) {
  auto port = arg_port(req);
  if (!port) return fail(port.error());
  auto cls = arg_uint(req, "class", config_.class_count - 1);
  if (!cls) return fail(cls.error());
  ClassLive want = live_[*port].classes[*cls];
  auto cap = arg_quantity(req, "cap", parse_rate_bps);
  auto cap_burst = arg_quantity(req, "cap_burst", parse_size_bytes);
  auto floor = arg_quantity(req, "floor", parse_rate_bps);
  auto floor_burst = arg_quantity(req, "floor_burst", parse_size_bytes);
  for (auto* r : {&cap, &cap_burst, &floor, &floor_burst})
    if (!*r) return fail(r->error());
  if (cap->present) want.cap_bytes_per_sec = cap->value ? *cap->value / 8 : 0;
  if (cap_burst->value) want.cap_burst_bytes = *cap_burst->value;
  if (want.cap_bytes_per_sec && !want.cap_burst_bytes) want.cap_burst_bytes = kDefaultBurst;
  if (floor->present) want.floor_bytes_per_sec = floor->value ? *floor->value / 8 : 0;
  if (floor_burst->value) want.floor_burst_bytes = *floor_burst->value;
  if (want.floor_bytes_per_sec && !want.floor_burst_bytes) want.floor_burst_bytes = kDefaultBurst;
  for (uint64_t b : {want.cap_burst_bytes, want.floor_burst_bytes})
    if (b && (b < 64 || b > (uint64_t{512} << 20))) return fail("bursts must be between 64B and 512MiB");
  if ((cap->value && *cap->value < 8) || (floor->value && *floor->value < 8)) return fail("rates must be at least 8bit/s");
  if (want.cap_bytes_per_sec && want.floor_bytes_per_sec > want.cap_bytes_per_sec)
    return fail("the floor cannot exceed the cap");
  if (req.contains("ecn_threshold")) {
    auto t = arg_uint(req, "ecn_threshold", 65535);
    if (!t) return fail(t.error());
    want.ecn_threshold = static_cast<uint32_t>(*t);
  }
  if (req.contains("dscp")) {
    if (req["dscp"].is_null()) {
      want.dscp = kNoDscp;
    } else {
      auto d = arg_uint(req, "dscp", 63);
      if (!d) return fail(d.error());
      want.dscp = static_cast<int>(*d);
    }
  }
  const ClassLive before = live_[*port].classes[*cls];
  live_[*port].classes[*cls] = want;
  if (auto p = publish(monotonic_ns()); !p) {
    live_[*port].classes[*cls] = before;
    return fail(p.error());
  }
  return json{{"port", kPortNames[*port]},
              {"class", *cls},
              {"cap", rate_json(want.cap_bytes_per_sec)},
              {"floor", rate_json(want.floor_bytes_per_sec)},
              {"ecn_threshold", want.ecn_threshold},
              {"dscp", want.dscp == kNoDscp ? json(nullptr) : json(want.dscp)}};
}

Reply ControlPlane::cmd_shaper_set(const json& req) {
  auto port = arg_port(req);
  if (!port) return fail(port.error());
  auto rate = arg_quantity(req, "rate", parse_rate_bps);
  if (!rate) return fail(rate.error());
  if (!rate->present) return fail("missing argument \"rate\" (a rate, or null for unshaped)");
  auto burst = arg_quantity(req, "burst", parse_size_bytes);
  if (!burst) return fail(burst.error());
  PortLive& live = live_[*port];
  const PortLive before = live;
  if (rate->value && *rate->value < 8) return fail("rates must be at least 8bit/s");
  live.shaper_bytes_per_sec = rate->value ? *rate->value / 8 : 0;
  if (burst->value) live.shaper_burst_bytes = *burst->value;
  if (live.shaper_bytes_per_sec && !live.shaper_burst_bytes) live.shaper_burst_bytes = kDefaultBurst;
  if (live.shaper_burst_bytes && (live.shaper_burst_bytes < 64 || live.shaper_burst_bytes > (uint64_t{512} << 20))) {
    live = before;
    return fail("bursts must be between 64B and 512MiB");
  }
  if (auto p = publish(monotonic_ns()); !p) {
    live = before;
    return fail(p.error());
  }
  return json{{"port", kPortNames[*port]},
              {"rate", rate_json(live.shaper_bytes_per_sec)},
              {"burst", live.shaper_bytes_per_sec ? json(std::to_string(live.shaper_burst_bytes) + "B") : json(nullptr)}};
}

Reply ControlPlane::cmd_progress(const json& req) {
  auto id = arg_uint(req, "id", UINT32_MAX);
  if (!id) return fail(id.error());
  JobProgress p;
  if (req.contains("fraction")) {
    if (!req["fraction"].is_number()) return fail("\"fraction\" must be a number between 0 and 1");
    p.fraction = req["fraction"].get<double>();
  }
  if (req.contains("iteration")) {
    auto it = arg_uint(req, "iteration", UINT64_MAX);
    if (!it) return fail(it.error());
    p.iteration = *it;
  }
  if (req.contains("batch")) {
    auto b = arg_uint(req, "batch", UINT64_MAX);
    if (!b) return fail(b.error());
    p.batch = *b;
  }
  if (!p.fraction && !p.iteration && !p.batch) return fail("give at least one of \"fraction\", \"iteration\", \"batch\"");
  auto job = jobs_.set_progress(static_cast<uint32_t>(*id), p);
  if (!job) return fail(job.error());
  const uint32_t job_id = (*job)->id;
  // Progress moves the order only under progress-driven policies; persist it either way.
  if (policy_.kind == PolicyKind::kProgress || policy_.kind == PolicyKind::kBatch) {
    tick(monotonic_ns());
  }
  if (auto ok = persist(); !ok) return fail(ok.error());
  return json{{"job", job_json(*jobs_.find(job_id), dataplane_.snapshot())}};
}

Reply ControlPlane::cmd_policy(const json& req) {
  if (!req.contains("name")) return json{{"policy", policy_json()}};
  if (!req["name"].is_string()) return fail("\"name\" must be a string");
  auto kind = policy_from_name(req["name"].get<std::string>());
  if (!kind)
    return fail("unknown policy \"" + req["name"].get<std::string>() +
                "\" (static, fifo, tensorlights-one, round-robin, progress, batch, shortest-first)");
  PolicyParams next;
  next.kind = *kind;
  next.interval_ns = *kind == PolicyKind::kRoundRobin ? kRoundRobinDefaultIntervalNs : kPolicyDefaultIntervalNs;
  if (req.contains("interval")) {
    if (!req["interval"].is_string()) return fail("\"interval\" must be a duration such as \"20s\"");
    auto d = parse_duration_ns(req["interval"].get<std::string>());
    if (!d) return fail("\"interval\": " + d.error());
    if (*d < 1'000'000) return fail("\"interval\" must be at least 1ms");
    next.interval_ns = *d;
  }
  if (req.contains("rotate_on")) {
    const std::string r = req["rotate_on"].is_string() ? req["rotate_on"].get<std::string>() : "";
    if (r != "time" && r != "iteration") return fail("\"rotate_on\" must be \"time\" or \"iteration\"");
    if (*kind != PolicyKind::kRoundRobin) return fail("\"rotate_on\" applies to round-robin only");
    next.rotate_on = r == "iteration" ? RotateOn::kIteration : RotateOn::kTime;
  }
  const PolicyParams before = policy_;
  const PolicyState before_state = policy_state_;
  policy_ = next;
  policy_state_ = PolicyState{};
  if (auto p = publish(monotonic_ns()); !p) {
    policy_ = before;
    policy_state_ = before_state;
    return fail(p.error());
  }
  return json{{"policy", policy_json()}};
}

Totals ControlPlane::adjusted(Totals t) const {
  for (size_t slot = 0; slot < t.jobs.size() && slot < baselines_.size(); ++slot) {
    JobTotals& j = t.jobs[slot];
    const JobTotals& b = baselines_[slot];
    for (unsigned d = 0; d < 2; ++d) {
      j.admitted_packets[d] -= b.admitted_packets[d];
      j.admitted_bytes[d] -= b.admitted_bytes[d];
      j.sent_packets[d] -= b.sent_packets[d];
      j.sent_bytes[d] -= b.sent_bytes[d];
    }
    j.policed -= b.policed;
    j.drops -= b.drops;
  }
  return t;
}

Reply ControlPlane::cmd_stats(const json&) {
  const Snapshot& snap = dataplane_.snapshot();
  json out = totals_to_json(adjusted(dataplane_.read_totals(true)), snap);
  for (json& j : out["jobs"]) {
    const JobRecord* rec = jobs_.find(j["id"].get<uint32_t>());
    if (!rec) continue;
    const JobTelemetry t = dataplane_.job_telemetry(rec->slot);
    j["telemetry"] = telemetry_json(t);
  }
  out["generation"] = generation_;
  out["policy"] = policy_name(policy_.kind);
  return out;
}

Reply ControlPlane::cmd_config(const json&) {
  json out = config_to_json(config_);
  json live;
  for (unsigned p = 0; p < kPortCount; ++p) {
    json classes = json::array();
    for (size_t c = 0; c < live_[p].classes.size(); ++c) {
      const ClassLive& cl = live_[p].classes[c];
      classes.push_back({{"class", c},
                         {"cap", rate_json(cl.cap_bytes_per_sec)},
                         {"floor", rate_json(cl.floor_bytes_per_sec)},
                         {"ecn_threshold", cl.ecn_threshold},
                         {"dscp", cl.dscp == kNoDscp ? json(nullptr) : json(cl.dscp)}});
    }
    live[kPortNames[p]] = {{"shaper", rate_json(live_[p].shaper_bytes_per_sec)}, {"classes", classes}};
  }
  out["live"] = live;
  json jobs = json::array();
  const Snapshot& snap = dataplane_.snapshot();
  for (const JobRecord* j : jobs_.in_rank_order()) jobs.push_back(job_json(*j, snap));
  out["jobs"] = jobs;
  out["policy"] = policy_json();
  return out;
}

Totals ControlPlane::totals_locked(bool with_histograms) {
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  return adjusted(dataplane_.read_totals(with_histograms));
}

void ControlPlane::with_snapshot(const std::function<void(const Snapshot&)>& fn) {
  std::lock_guard<std::mutex> lock(snapshot_mutex_);
  fn(dataplane_.snapshot());
}

}  // namespace psgate
