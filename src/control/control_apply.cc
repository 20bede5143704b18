// SPDX-License-Identifier: BSD-3-Clause
// The control commands' handlers (control thread only, see control_plane.h):
// one apply() a request type, each a reply or a candidate state that
// handle_line commits (or, in cluster mode, forwards to the store), and the
// replies they build.
#include "psgate/control_plane.h"

#include <algorithm>
#include <memory>
#include <variant>

#include <spdlog/spdlog.h>

#include "config/compile.h"
#include "config/config_json.h"
#include "config/reload.h"
#include "control/control_server.h"
#include "control/state_file.h"
#include "psgate/control_commands.h"
#include "psgate/lcore_check.h"
#include "psgate/snapshot.h"
#include "stats/stats_json.h"

namespace psgate {

using json = nlohmann::json;

namespace {

// Exact (config_json.h): a reply shows what is in force, and
// parse_rate_bps reads it back to the same rate (never a rounded
// "123.457Mbit/s").
std::string rate_text(uint64_t bytes_per_second) { return rate_text_exact(bits_per_sec(bytes_per_second)); }

json rate_json(uint64_t bytes_per_second) {
  return bytes_per_second ? json(rate_text(bytes_per_second)) : json(nullptr);
}
json rate_spec_json(const std::optional<RateSpec>& r) {
  return r ? json(rate_text(bytes_per_sec(r->rate_bps))) : json(nullptr);
}

constexpr uint64_t kDefaultBurst = kControlDefaultBurstBytes;

// A refusal by one of the config's value checks (config.h), worded for the
// socket: the argument at fault, then the loader's own sentence.
std::string problem_text(const ValueProblem& p) { return "\"" + p.key + "\": " + p.problem; }

// Why a job id whose store document never parsed cannot be added, and how
// to free it.
std::string refused_job_hint(uint32_t id, const std::string& why) {
  const std::string n = std::to_string(id);
  return "job " + n + ": the cluster store holds a document for it that did not parse (" + why +
         "); `psgatectl jobs rm " + n + "` deletes it; nothing written";
}

// The class as the config states it (bit/s), from its form in force (bytes/s).
// The configuration in force: the loaded one with every live change applied
// (shapers, classes per port, the jobs with their ranks, rules and policers,
// the policy). Jobs in the order they were added: a rule of an earlier job
// wins, and the loader adds [[jobs]] in file order.
ConfigSpec config_in_force(const ConfigSpec& loaded, const ControlState& state) {
  ConfigSpec c = loaded;
  PortSpec* ports[kPortCount] = {&c.wire, &c.host};
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortLive& live = state.live[p];
    ports[p]->shaper.reset();
    if (live.shaper_bytes_per_sec)
      ports[p]->shaper = RateSpec{bits_per_sec(live.shaper_bytes_per_sec), live.shaper_burst_bytes};
    ports[p]->classes.clear();
    for (size_t k = 0; k < live.classes.size() && k < loaded.classes.size(); ++k)
      ports[p]->classes.push_back(class_spec(live.classes[k], loaded.classes[k].depth));
  }
  c.jobs.clear();
  for (const JobRecord* j : state.jobs.in_age_order()) c.jobs.push_back(j->spec);
  c.policy = state.policy;
  // The process's level (a reload may have changed it), in the config's words.
  const auto level = spdlog::level::to_string_view(spdlog::get_level());
  c.log_level.assign(level.data(), level.size());
  if (c.log_level == "warning") c.log_level = "warn";  // spdlog's name; the config says "warn"
  return c;
}

}  // namespace

json ControlPlane::job_json(const JobRecord& job, const Snapshot& snap) const {
  json rules = json::array();
  for (const MatchRule& r : job.spec.match) rules.push_back(to_string(r));
  const SlotInfo& slot = snap.slots[job.slot];
  auto opt = [](const auto& o) { return o ? json(*o) : json(nullptr); };
  return {{"id", job.spec.id},
          {"name", job.spec.name},
          {"rank", job.spec.rank},
          {"class", slot.cls[kPull]},
          {"pull_class", slot.cls[kPull]},
          {"push_class", slot.cls[kPush]},
          {"match", rules},
          {"police", rate_spec_json(job.spec.police)},
          {"progress",
           {{"fraction", opt(job.progress.fraction)},
            {"iteration", opt(job.progress.iteration)},
            {"batch", opt(job.progress.batch)}}}};
}

json ControlPlane::job_json(uint32_t id) const {
  // Cluster mode: another writer may have removed the job before this reply.
  const JobRecord* job = state_.jobs.find(id);
  return job ? job_json(*job, dataplane_.snapshot()) : json(nullptr);
}

json ControlPlane::policy_json() const {
  const PolicyParams& policy = state_.policy;
  return {{"name", policy_name(policy.kind)},
          {"interval", duration_text_exact(policy.interval_ns)},  // "1500us" reads back as set, not as "1ms"
          {"rotate_on", rotate_on_name(policy.rotate_on)}};
}

namespace {

json class_json(unsigned port, unsigned cls, const ClassLive& c) {
  return json{{"port", kPortNames[port]},
              {"class", cls},
              {"cap", rate_json(c.cap_bytes_per_sec)},
              {"floor", rate_json(c.floor_bytes_per_sec)},
              {"ecn_threshold", c.actions.ecn_threshold},
              {"dscp", c.actions.dscp == kNoDscp ? json(nullptr) : json(c.actions.dscp)}};
}

}  // namespace

Result<ControlPlane::Outcome> ControlPlane::apply(const HealthRequest&) const {
  // Degraded while a port's link is down: psgate runs, but that direction
  // carries nothing (its traffic is dropped as link_down).
  // Also while a port's device refuses everything (stalled): its link may
  // say up, but that direction carries nothing (tx_failed).
  const auto links = dataplane_.links();
  const auto stalled = dataplane_.ports_stalled();
  json ports = json::object();
  json down = json::array();
  json stuck = json::array();
  // And while a kernel interface's MTU is below the port's: its larger
  // frames are dropped (oversize) that the configuration says it carries.
  json short_mtu = json::array();
  for (unsigned p = 0; p < kPortCount; ++p) {
    ports[kPortNames[p]] = link_json(links[p]);
    if (!links[p].up) down.push_back(kPortNames[p]);
    if (stalled[p] && links[p].up) stuck.push_back(kPortNames[p]);
    if (links[p].short_mtu) short_mtu.push_back(kPortNames[p]);
  }
  // In cluster mode, also while the store is unreachable: forwarding goes on,
  // on the last order applied (fail static), but changes are refused. And
  // while the state file cannot be written: a start without the store would
  // come up on an older state.
  // Or out of step with it: its view not applied, a document refused
  // while the last good one stays, or not registered (a name in use).
  // In either mode, while the state file cannot be written: the state in
  // force unwritten (a start on a full or read-only disk), or a change
  // refused for it (the next one would be too).
  const json cluster = cluster_ ? cluster_status() : json();
  const bool store_lost = cluster_ && !cluster.at("trouble").get_ref<const std::string&>().empty();
  const bool unsaved = !state_file_error().empty();
  // And while a data lcore is stuck (in a driver call): the ports it serves
  // forward nothing, whatever their links say.
  const std::vector<unsigned> lcores_stuck = dataplane_.stuck_lcores();
  json health{
      {"status", down.empty() && stuck.empty() && short_mtu.empty() && lcores_stuck.empty() && !store_lost && !unsaved
                     ? "ok"
                     : "degraded"},
      {"ports_down", down},
      {"ports_stalled", stuck},
      {"ports_short_mtu", short_mtu},
      {"lcores_stuck", lcores_stuck},
      {"links", ports},
      {"version", PSGATE_VERSION},
      {"protocol", kControlProtocolVersion},
      {"uptime_s", static_cast<double>(monotonic_ns() - started_ns_) / 1e9},
      {"generation", generation_},
      {"lcores", dataplane_.describe_lcores()},
      {"jobs", state_.jobs.size()},
      {"job_slots_draining", state_.jobs.draining_count()},
      {"policy", policy_name(state_.policy.kind)},
      {"policy_errors", policy_errors_},
      {"rules", rules_json()},
      {"state_file_error", state_file_error()}};
  if (cluster_) health["cluster"] = cluster;
  return Outcome{std::move(health)};
}

json ControlPlane::rules_json() const {
  const Snapshot& snap = dataplane_.snapshot();  // control thread: no publish can run meanwhile
  return {{"count", snap.matcher.rule_count()},
          {"partitions", snap.partitions.size()},
          {"matched_in", snap.matcher.partitions().size()},
          {"merge", snap.merged         ? "in force"
                    : merger_.running() ? "running"
                                        : "none"}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const JobsListRequest&) const {
  json list = json::array();
  const Snapshot& snap = dataplane_.snapshot();  // control thread: no publish can run meanwhile
  for (const JobRecord* j : state_.jobs.in_rank_order()) list.push_back(job_json(*j, snap));
  return Outcome{json{{"jobs", list}}};
}

namespace {

// jobs.add and each job of jobs.load: into the registry, then the loader's
// checks on a [[jobs]] entry (the name as the registry completed it, the
// rules, the policer).
Result<const JobRecord*> add_job(JobRegistry& jobs, const JobsAddRequest& req) {
  JobRecord job;
  job.spec.id = req.id;
  job.spec.name = req.name;
  job.spec.match = req.rules;
  job.spec.police = req.police;
  auto added = jobs.add(std::move(job), req.rank);
  if (!added) return added;
  if (auto problem = check_job((*added)->spec))
    return Result<const JobRecord*>::failure("job " + std::to_string(req.id) + ": " + problem_text(*problem));
  return added;
}

}  // namespace

const std::string* ControlPlane::refused_job_document(uint32_t id) const {
  if (!cluster_ || !cluster_view_) return nullptr;
  auto it = cluster_view_->refused_jobs.find(id);
  return it == cluster_view_->refused_jobs.end() ? nullptr : &it->second.why;
}

Result<ControlPlane::Outcome> ControlPlane::apply(const JobsAddRequest& req) const {
  if (const std::string* why = refused_job_document(req.id))
    return Result<Outcome>::failure(refused_job_hint(req.id, *why));
  ControlState next = state_;
  auto added = add_job(next.jobs, req);
  if (!added) return Result<Outcome>::failure(added.error());
  const uint32_t id = (*added)->spec.id;
  return Outcome{Candidate{std::move(next), [id](const ControlPlane& cp) { return json{{"job", cp.job_json(id)}}; }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const JobsLoadRequest& req) const {
  ControlState next = state_;
  json ids = json::array();
  for (size_t i = 0; i < req.jobs.size(); ++i) {
    if (const std::string* why = refused_job_document(req.jobs[i].id))
      return Result<Outcome>::failure("jobs[" + std::to_string(i) + "]: " + refused_job_hint(req.jobs[i].id, *why) +
                                      "; none added");
    auto added = add_job(next.jobs, req.jobs[i]);
    if (!added) return Result<Outcome>::failure("jobs[" + std::to_string(i) + "]: " + added.error() + "; none added");
    ids.push_back(req.jobs[i].id);
  }
  return Outcome{Candidate{std::move(next), [ids](const ControlPlane&) { return json{{"added", ids}}; }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const JobsRemoveRequest& req) const {
  ControlState next = state_;
  auto removed = next.jobs.remove(req.id);
  if (!removed) {
    // A job document in the store that never parsed (written by hand or by
    // a broken scheduler): this gateway does not hold the job (one that had
    // it in force before the bad write does), but its key blocks the id;
    // removing the job is deleting that key.
    if (const std::string* why = refused_job_document(req.id)) {
      const uint32_t id = req.id;
      const std::string note =
          "the cluster store's document for job " + std::to_string(id) + " did not parse (" + *why + "); deleted";
      return Outcome{Candidate{std::move(next),
                               [id, note](const ControlPlane&) {
                                 return json{{"removed", id}, {"note", note}};
                               },
                               refused_job_removal(*cluster_keys_, *cluster_view_, id)}};
    }
    return Result<Outcome>::failure(removed.error());
  }
  const uint32_t id = req.id;
  return Outcome{Candidate{std::move(next), [id](const ControlPlane&) { return json{{"removed", id}}; }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const OrderRequest& req) const {
  ControlState next = state_;
  auto ok = next.jobs.set_order(req.ids);
  if (!ok) return Result<Outcome>::failure(ok.error());
  return Outcome{
      Candidate{std::move(next), [](const ControlPlane& cp) { return std::get<json>(*cp.apply(JobsListRequest{})); }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const RankRequest& req) const {
  ControlState next = state_;
  auto job = next.jobs.set_rank(req.id, req.rank);
  if (!job) return Result<Outcome>::failure(job.error());
  const uint32_t id = req.id;
  return Outcome{Candidate{std::move(next), [id](const ControlPlane& cp) { return json{{"job", cp.job_json(id)}}; }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const ClassSetRequest& req) const {
  const unsigned port = req.port, cls = req.cls;
  // With no option it is a read: nothing is compiled, published or written.
  const bool read_only = !req.cap_bps.present && !req.cap_burst_bytes.present && !req.floor_bps.present &&
                         !req.floor_burst_bytes.present && !req.ecn_threshold && !req.dscp.present;
  if (read_only) return Outcome{class_json(port, cls, state_.live[port].classes[cls])};
  ClassLive want = state_.live[port].classes[cls];
  // Rates arrive in bit/s, classes run in bytes/s. A null burst changes nothing;
  // a burst of 0 (or none yet) takes the default once a rate is set.
  if (req.cap_bps.present) want.cap_bytes_per_sec = req.cap_bps.value ? bytes_per_sec(*req.cap_bps.value) : 0;
  if (req.cap_burst_bytes.value) want.cap_burst_bytes = *req.cap_burst_bytes.value;
  if (want.cap_bytes_per_sec && !want.cap_burst_bytes) want.cap_burst_bytes = kDefaultBurst;
  if (req.floor_bps.present) want.floor_bytes_per_sec = req.floor_bps.value ? bytes_per_sec(*req.floor_bps.value) : 0;
  if (req.floor_burst_bytes.value) want.floor_burst_bytes = *req.floor_burst_bytes.value;
  if (want.floor_bytes_per_sec && !want.floor_burst_bytes) want.floor_burst_bytes = kDefaultBurst;
  if (req.ecn_threshold) want.actions.ecn_threshold = *req.ecn_threshold;
  if (req.dscp.present) want.actions.dscp = req.dscp.value ? static_cast<int>(*req.dscp.value) : kNoDscp;
  // A burst for a rate that is not set would be kept unseen (no reply or
  // `config` shows it) and taken by a later rate in place of the default:
  // refused, as a config file's is.
  if (req.cap_burst_bytes.value && !want.cap_bytes_per_sec)
    return Result<Outcome>::failure("class " + std::to_string(cls) + " on " + kPortNames[port] +
                                    ": cap_burst given without a cap (set both, or the cap first)");
  if (req.floor_burst_bytes.value && !want.floor_bytes_per_sec)
    return Result<Outcome>::failure("class " + std::to_string(cls) + " on " + kPortNames[port] +
                                    ": floor_burst given without a floor (set both, or the floor first)");
  // The parser checked the request's own values; the class as it would be in
  // force (with what the request does not name, and the class's depth) must
  // pass the loader's own check, so the socket accepts what a config file may
  // state and nothing else.
  if (auto problem = check_class(class_spec(want, config_.classes[cls].depth)))
    return Result<Outcome>::failure("class " + std::to_string(cls) + " on " + kPortNames[port] + ": " +
                                    problem_text(*problem));
  ControlState next = state_;
  next.live[port].classes[cls] = want;
  return Outcome{Candidate{std::move(next), [port, cls](const ControlPlane& cp) {
                             return class_json(port, cls, cp.state_.live[port].classes[cls]);
                           }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const ShaperSetRequest& req) const {
  if (req.burst_bytes && !req.rate_bps)  // kept unseen, and taken by a later rate: refused, as in a config file
    return Result<Outcome>::failure(std::string("shaper on ") + kPortNames[req.port] +
                                    ": burst given without a rate (set both)");
  ControlState next = state_;
  PortLive& live = next.live[req.port];
  live.shaper_bytes_per_sec = req.rate_bps ? bytes_per_sec(*req.rate_bps) : 0;
  if (req.burst_bytes) live.shaper_burst_bytes = *req.burst_bytes;
  if (live.shaper_bytes_per_sec && !live.shaper_burst_bytes) live.shaper_burst_bytes = kDefaultBurst;
  // The burst in force may come from the config rather than this request;
  // the loader's check (check_shaper) decides, as for a config file.
  if (live.shaper_bytes_per_sec)
    if (auto problem = check_shaper(RateSpec{bits_per_sec(live.shaper_bytes_per_sec), live.shaper_burst_bytes}))
      return Result<Outcome>::failure(std::string("shaper on ") + kPortNames[req.port] + ": " + problem_text(*problem));
  const unsigned port = req.port;
  return Outcome{Candidate{
      std::move(next), [port](const ControlPlane& cp) {
        const PortLive& l = cp.state_.live[port];
        return json{{"port", kPortNames[port]},
                    {"rate", rate_json(l.shaper_bytes_per_sec)},
                    {"burst", l.shaper_bytes_per_sec ? json(size_text_exact(l.shaper_burst_bytes)) : json(nullptr)}};
      }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const ProgressRequest& req) const {
  JobProgress p;
  p.fraction = req.fraction;
  p.iteration = req.iteration;
  p.batch = req.batch;
  ControlState next = state_;
  auto job = next.jobs.set_progress(req.id, p);
  if (!job) return Result<Outcome>::failure(job.error());
  // Progress is persisted; it moves the order only under progress-driven
  // policies, and commit() publishes only when the order moves.
  const uint32_t id = req.id;
  return Outcome{Candidate{std::move(next), [id](const ControlPlane& cp) { return json{{"job", cp.job_json(id)}}; }}};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const PolicyRequest& req) const {
  if (!req.kind) return Outcome{json{{"policy", policy_json()}}};
  ControlState next = state_;
  next.policy.kind = *req.kind;
  next.policy.interval_ns = req.interval_ns.value_or(default_policy_interval_ns(*req.kind));
  next.policy.rotate_on = req.rotate_on.value_or(RotateOn::kTime);
  // A new policy (or new settings) starts afresh; the one in force sent
  // again keeps its place: a scheduler that repeats its policy more often
  // than round-robin's interval must not keep the first job on top.
  if (!(next.policy == state_.policy)) next.policy_state = PolicyState{};
  Candidate change{std::move(next), [](const ControlPlane& cp) { return json{{"policy", cp.policy_json()}}; }};
  change.names_policy = true;
  return Outcome{std::move(change)};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const StatsRequest&) const {
  const Snapshot& snap = dataplane_.snapshot();
  json out = totals_to_json(adjusted(dataplane_.read_totals(true)), snap);
  for (json& j : out["jobs"]) {
    const JobRecord* rec = state_.jobs.find(j["id"].get<uint32_t>());
    if (!rec) continue;
    j["telemetry"] = telemetry_json(own_telemetry(*rec));
  }
  out["generation"] = generation_;
  out["policy"] = policy_name(state_.policy.kind);
  // Cluster mode: whether the store is reachable, since when not, and the
  // revision in force, beside the counters a monitor already reads.
  if (cluster_) out["cluster"] = cluster_status();
  return Outcome{std::move(out)};
}

Result<ControlPlane::Outcome> ControlPlane::apply(const ConfigRequest&) const {
  // What a config file would state to start this gateway as it runs now
  // (psgatectl config --toml writes it out).
  return Outcome{config_to_json(config_in_force(config_, state_))};
}

// `reload` (systemctl reload): the config file read again. The settings the
// socket can change are applied where the file changed them since it was
// last read; everything else that differs is named as needing a restart. A
// file that does not load changes nothing, and the reply says why.
namespace {

// What a start checks beyond the parser (daemon/start_checks.cc: the CPUs, the socket's
// and the state file's paths), for the keys a reload leaves to the next
// start: a reload that answers "needs a restart: lcores.data" for a file
// that start would refuse (exit 2) leaves a service that does not come back.
Result<bool> next_start_problem(const ConfigSpec& now, const ReloadPlan& plan) {
  auto changed = [&](std::string_view prefix) {
    return std::any_of(plan.restart_needed.begin(), plan.restart_needed.end(),
                       [&](const std::string& key) { return key.starts_with(prefix); });
  };
  if (changed("lcores.")) {
    if (auto lcores = check_lcores_exist(now, start_affinity_cpus(), now.source, online_cpus()); !lcores) return lcores;
  }
  if (changed("control.socket")) {
    if (auto sock = ControlServer::check_path(now.control.socket); !sock)
      return Result<bool>::failure(now.source + ": " + sock.error());
  }
  if (changed("control.state")) {
    if (auto kind = check_state_file_kind(now.control.state); !kind) return kind;
  }
  return true;
}

}  // namespace

Result<ControlPlane::Outcome> ControlPlane::apply(const ReloadRequest&) const {
  auto file = read_config_for_reload(config_.source);
  if (!file) return Result<Outcome>::failure(file.error() + " (nothing reloaded)");
  const ReloadPlan plan = plan_reload(config_, *state_.config_file, *file);
  if (auto start = next_start_problem(*file, plan); !start)
    return Result<Outcome>::failure(start.error() + " (nothing reloaded: the next start would refuse this file)");
  auto now = std::make_shared<const ConfigSpec>(std::move(*file));
  const ConfigSpec& base = reload_base(config_, *state_.config_file, *now);
  json applied = json::array(), not_applied = json::array();
  ControlState next = state_;
  next.config_file = now;
  std::string refused;  // the class settings that do not fit what runs
  bool refused_for_depth = false, refused_for_socket = false;
  if (!plan.classes.empty() || !plan.shapers.empty()) {
    const auto compiled = compile_ports(*now);
    // Shapers against the file as last read, as the plan found them changed;
    // classes against the base (the same file, unless the last read had
    // another class count: then what runs), compiled once when they agree.
    const auto compiled_last = compile_ports(*state_.config_file);
    const auto compiled_base = &base == state_.config_file.get() ? compiled_last : compile_ports(base);
    for (const auto& [port, cls] : plan.classes) {
      const std::string key = "classes." + std::to_string(cls) + "." + kPortNames[port];
      // Only the settings the file changed; socket changes to the others stay.
      const ClassLive want = merge_class_change(state_.live[port].classes[cls], compiled_base[port].classes[cls],
                                                compiled[port].classes[cls]);
      // Checked against the depth that runs (a new depth waits for a
      // restart), as the `class` command checks: an ECN threshold the file
      // sets for its new depth may not fit the running one. Then the whole
      // reload is refused: applying the rest would record the file as read,
      // and a later reload would never try this class again.
      const uint32_t running_depth = port_classes(config_, port)[cls].depth;
      if (auto problem = check_class(class_spec(want, running_depth))) {
        // The file loaded, so its own class is sound. What does not fit is
        // its new depth, not yet running, or a setting the socket changed
        // since the last read (a cap below the file's new floor), or both:
        // the operator needs to know what to fix, all of it at once.
        const uint32_t file_depth = port_classes(*now, port)[cls].depth;
        const bool socket_bound = check_class(class_spec(want, file_depth)).has_value();
        const bool depth_bound =
            !socket_bound || check_class(class_spec(compiled[port].classes[cls], running_depth)).has_value();
        refused_for_depth |= depth_bound;
        refused_for_socket |= socket_bound;
        std::string causes;
        if (depth_bound) causes = "with the running depth " + std::to_string(running_depth);
        if (socket_bound)
          causes += (causes.empty() ? "" : ", and ") +
                    std::string("with the settings `psgatectl class` changed since the file was read");
        refused += (refused.empty() ? "" : "; ") + key + ": " + problem_text(*problem) + " (" + causes + ")";
        continue;
      }
      next.live[port].classes[cls] = want;
      applied.push_back(key);
    }
    for (unsigned port : plan.shapers) {
      (void)merge_shaper_change(next.live[port], compiled_last[port], compiled[port]);
      // The file's shaper is sound with the file's floors (it loaded); what
      // can make it too low is a floor `psgatectl class` set since. Said
      // here with its key and remedy: commit() would refuse it naming
      // neither.
      if (const auto problem = floors_problem(next.live[port])) {
        refused_for_socket = true;
        refused += (refused.empty() ? "" : "; ") + std::string("shaper.") + kPortNames[port] + ": " + *problem +
                   " (with the floors `psgatectl class` set since the file was read)";
        continue;
      }
      applied.push_back(std::string("shaper.") + kPortNames[port]);
    }
    // The file's floors are sound with the file's shaper (it loaded); what
    // can make them too many is a shaper `psgatectl shaper` lowered since,
    // which the file leaves alone. Said with the floors' keys: commit()
    // would name neither them nor the remedy.
    for (unsigned port = 0; port < kPortCount; ++port) {
      if (std::find(plan.shapers.begin(), plan.shapers.end(), port) != plan.shapers.end()) continue;
      const auto problem = floors_problem(next.live[port]);
      if (!problem) continue;
      std::string keys;
      for (const auto& [p, cls] : plan.classes) {
        if (p != port ||
            next.live[port].classes[cls].floor_bytes_per_sec == state_.live[port].classes[cls].floor_bytes_per_sec)
          continue;
        keys += (keys.empty() ? "" : ", ") + std::string("classes.") + std::to_string(cls) + "." + kPortNames[port] +
                ".floor";
      }
      if (keys.empty()) continue;  // not the file's doing: commit() says it
      refused_for_socket = true;
      // The socket's doing: a shaper lowered, or other classes' floors raised.
      const bool shaper_moved = next.live[port].shaper_bytes_per_sec != compiled_last[port].shaper_bytes_per_sec;
      refused += (refused.empty() ? "" : "; ") + keys + ": " + *problem +
                 (shaper_moved ? " (with the shaper `psgatectl shaper` set since the file was read)"
                               : " (with the floors `psgatectl class` set since the file was read)");
    }
  }
  if (!refused.empty()) {
    std::string remedy;
    const auto add = [&remedy](const char* text) { remedy += (remedy.empty() ? ": " : "; ") + std::string(text); };
    if (refused_for_depth)
      add("a new depth takes effect at a restart, and class settings that need it can be set then with "
          "`psgatectl class`");
    if (refused_for_socket)
      add("set the class with `psgatectl class` so that the file's change fits, or change the file");
    return Result<Outcome>::failure(refused + ". Nothing reloaded" + remedy);
  }
  if (plan.policy) {
    if (cluster_) {
      not_applied.push_back({{"key", "policy"},
                             {"why",
                              "cluster mode: the policy is the cluster's; `psgatectl policy` writes it to the "
                              "store"}});
    } else {
      if (!(now->policy == next.policy)) next.policy_state = PolicyState{};  // as the policy command
      next.policy = now->policy;
      applied.push_back("policy");
    }
  }
  if (plan.jobs)
    not_applied.push_back({{"key", "jobs"},
                           {"why",
                            "[[jobs]] seed the job table only at a start without a state file; change jobs "
                            "with `psgatectl jobs` (or `jobs load`)"}});
  // The log level: no command changes it, so the file's is the one to have.
  const auto level = spdlog::level::from_str(now->log_level);
  const bool log_changed = spdlog::get_level() != level;
  if (log_changed) applied.push_back("log.level");
  json reply{{"file", config_.source},
             {"applied", applied},
             {"restart_needed", plan.restart_needed},
             {"not_applied", not_applied}};
  // Nothing the state holds changed: a read (nothing compiled or written).
  // The log level is a process setting outside the state; set it here.
  if (applied.empty() || (applied.size() == 1 && log_changed)) {
    if (log_changed) spdlog::set_level(level);
    return Outcome{std::move(reply)};
  }
  return Outcome{Candidate{std::move(next), [reply, level, log_changed](const ControlPlane&) {
                             if (log_changed) spdlog::set_level(level);
                             return reply;
                           }}};
}

}  // namespace psgate
