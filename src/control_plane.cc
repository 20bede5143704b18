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
#include <variant>

#include <spdlog/spdlog.h>

#include "psgate/snapshot.h"
#include "psgate/stats_json.h"

namespace psgate {

using json = nlohmann::json;
using Reply = Result<json>;

namespace {

Reply fail(std::string message) { return Reply::failure(std::move(message)); }

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

constexpr uint64_t kDefaultBurst = kControlDefaultBurstBytes;
constexpr uint64_t kPolicyDefaultIntervalNs = 1'000'000'000;
constexpr uint64_t kRoundRobinDefaultIntervalNs = 20'000'000'000;

}  // namespace

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const std::vector<CommandInfo>& ControlPlane::commands() { return control_commands(); }

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
  dataplane_.poll_links();
  if (policy_.kind == PolicyKind::kStatic) return;
  auto ranks = effective_ranks(now_ns);
  if (ranks == applied_ranks_) return;
  if (auto ok = publish(now_ns); !ok) spdlog::error("policy {}: {}", policy_name(policy_.kind), ok.error());
}

json ControlPlane::handle(const json& request) {
  json reply;
  if (request.is_object() && request.contains("id")) reply["id"] = request["id"];
  auto parsed = parse_control_request(request, config_.class_count);
  Reply r = parsed ? std::visit([this](const auto& req) { return apply(req); }, *parsed) : fail(parsed.error());
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

Reply ControlPlane::apply(const HealthRequest&) {
  // Degraded while a port's link is down: psgate runs, but that direction
  // carries nothing (its traffic is dropped as link_down).
  const auto links = dataplane_.links();
  json ports = json::object();
  json down = json::array();
  for (unsigned p = 0; p < kPortCount; ++p) {
    ports[kPortNames[p]] = link_json(links[p]);
    if (!links[p].up) down.push_back(kPortNames[p]);
  }
  return json{{"status", down.empty() ? "ok" : "degraded"},
              {"ports_down", down},
              {"links", ports},
              {"version", PSGATE_VERSION},
              {"uptime_s", static_cast<double>(monotonic_ns() - started_ns_) / 1e9},
              {"generation", generation_},
              {"lcores", dataplane_.describe_lcores()},
              {"jobs", jobs_.size()},
              {"policy", policy_name(policy_.kind)}};
}

Reply ControlPlane::apply(const JobsListRequest&) {
  json list = json::array();
  const Snapshot& snap = dataplane_.snapshot();  // control thread: no publish can run meanwhile
  for (const JobRecord* j : jobs_.in_rank_order()) list.push_back(job_json(*j, snap));
  return json{{"jobs", list}};
}

Reply ControlPlane::apply(const JobsAddRequest& req) {
  JobRecord job;
  job.id = req.id;
  job.name = req.name;
  job.match = req.rules;
  job.police = req.police;
  auto added = jobs_.add(std::move(job), req.rank);
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

Reply ControlPlane::apply(const JobsRemoveRequest& req) {
  auto removed = jobs_.remove(req.id);
  if (!removed) return fail(removed.error());
  if (auto ok = publish(monotonic_ns()); !ok) return fail(ok.error());
  return json{{"removed", req.id}};
}

Reply ControlPlane::apply(const OrderRequest& req) {
  auto ok = jobs_.set_order(req.ids);
  if (!ok) return fail(ok.error());
  if (auto p = publish(monotonic_ns()); !p) return fail(p.error());
  return apply(JobsListRequest{});
}

Reply ControlPlane::apply(const RankRequest& req) {
  auto job = jobs_.set_rank(req.id, req.rank);
  if (!job) return fail(job.error());
  if (auto p = publish(monotonic_ns()); !p) return fail(p.error());
  return json{{"job", job_json(**job, dataplane_.snapshot())}};
}

Reply ControlPlane::apply(const ClassSetRequest& req) {
  ClassLive want = live_[req.port].classes[req.cls];
  // Rates arrive in bit/s, classes run in bytes/s. A null burst changes nothing;
  // a burst of 0 (or none yet) takes the default once a rate is set.
  if (req.cap_bps.present) want.cap_bytes_per_sec = req.cap_bps.value ? *req.cap_bps.value / 8 : 0;
  if (req.cap_burst_bytes.value) want.cap_burst_bytes = *req.cap_burst_bytes.value;
  if (want.cap_bytes_per_sec && !want.cap_burst_bytes) want.cap_burst_bytes = kDefaultBurst;
  if (req.floor_bps.present) want.floor_bytes_per_sec = req.floor_bps.value ? *req.floor_bps.value / 8 : 0;
  if (req.floor_burst_bytes.value) want.floor_burst_bytes = *req.floor_burst_bytes.value;
  if (want.floor_bytes_per_sec && !want.floor_burst_bytes) want.floor_burst_bytes = kDefaultBurst;
  // The parser checked the request's own values; these need the values in force.
  for (uint64_t b : {want.cap_burst_bytes, want.floor_burst_bytes})
    if (b && (b < kControlMinBurstBytes || b > kControlMaxBurstBytes))
      return fail("bursts must be between 64B and 512MiB");
  if (want.cap_bytes_per_sec && want.floor_bytes_per_sec > want.cap_bytes_per_sec)
    return fail("the floor cannot exceed the cap");
  if (req.ecn_threshold) want.ecn_threshold = *req.ecn_threshold;
  if (req.dscp.present) want.dscp = req.dscp.value ? static_cast<int>(*req.dscp.value) : kNoDscp;
  const ClassLive before = live_[req.port].classes[req.cls];
  live_[req.port].classes[req.cls] = want;
  if (auto p = publish(monotonic_ns()); !p) {
    live_[req.port].classes[req.cls] = before;
    return fail(p.error());
  }
  return json{{"port", kPortNames[req.port]},
              {"class", req.cls},
              {"cap", rate_json(want.cap_bytes_per_sec)},
              {"floor", rate_json(want.floor_bytes_per_sec)},
              {"ecn_threshold", want.ecn_threshold},
              {"dscp", want.dscp == kNoDscp ? json(nullptr) : json(want.dscp)}};
}

Reply ControlPlane::apply(const ShaperSetRequest& req) {
  PortLive& live = live_[req.port];
  const PortLive before = live;
  live.shaper_bytes_per_sec = req.rate_bps ? *req.rate_bps / 8 : 0;
  if (req.burst_bytes) live.shaper_burst_bytes = *req.burst_bytes;
  if (live.shaper_bytes_per_sec && !live.shaper_burst_bytes) live.shaper_burst_bytes = kDefaultBurst;
  // The burst in force may come from the config rather than this request.
  if (live.shaper_burst_bytes &&
      (live.shaper_burst_bytes < kControlMinBurstBytes || live.shaper_burst_bytes > kControlMaxBurstBytes)) {
    live = before;
    return fail("bursts must be between 64B and 512MiB");
  }
  if (auto p = publish(monotonic_ns()); !p) {
    live = before;
    return fail(p.error());
  }
  return json{{"port", kPortNames[req.port]},
              {"rate", rate_json(live.shaper_bytes_per_sec)},
              {"burst", live.shaper_bytes_per_sec ? json(std::to_string(live.shaper_burst_bytes) + "B") : json(nullptr)}};
}

Reply ControlPlane::apply(const ProgressRequest& req) {
  JobProgress p;
  p.fraction = req.fraction;
  p.iteration = req.iteration;
  p.batch = req.batch;
  auto job = jobs_.set_progress(req.id, p);
  if (!job) return fail(job.error());
  const uint32_t job_id = (*job)->id;
  // Progress moves the order only under progress-driven policies; persist it either way.
  if (policy_.kind == PolicyKind::kProgress || policy_.kind == PolicyKind::kBatch) {
    tick(monotonic_ns());
  }
  if (auto ok = persist(); !ok) return fail(ok.error());
  return json{{"job", job_json(*jobs_.find(job_id), dataplane_.snapshot())}};
}

Reply ControlPlane::apply(const PolicyRequest& req) {
  if (!req.kind) return json{{"policy", policy_json()}};
  PolicyParams next;
  next.kind = *req.kind;
  next.interval_ns = req.interval_ns.value_or(*req.kind == PolicyKind::kRoundRobin ? kRoundRobinDefaultIntervalNs
                                                                                     : kPolicyDefaultIntervalNs);
  next.rotate_on = req.rotate_on.value_or(RotateOn::kTime);
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

Reply ControlPlane::apply(const StatsRequest&) {
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

Reply ControlPlane::apply(const ConfigRequest&) {
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
