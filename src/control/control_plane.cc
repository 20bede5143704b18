// SPDX-License-Identifier: BSD-3-Clause
// Control operations (control thread only; see control_plane.h).
#include "psgate/control_plane.h"

#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <thread>
#include <variant>

#include <spdlog/spdlog.h>

#include "config/compile.h"
#include "control/state_file.h"
#include "psgate/control_commands.h"
#include "psgate/snapshot.h"

namespace psgate {

using json = nlohmann::json;
using Reply = Result<json>;

namespace {

Reply fail(std::string message) { return Reply::failure(std::move(message)); }

}  // namespace

uint64_t monotonic_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

ControlPlane::ControlPlane(Dataplane& dataplane, const ConfigSpec& config, ControlState initial)
    : dataplane_(dataplane),
      config_(config),
      state_(std::move(initial)),
      write_state_([](const std::string& path, const std::string& text) {
        std::string warning;
        auto written = write_state_text(path, text, &warning);
        if (!warning.empty()) spdlog::warn("{}", warning);
        return written;
      }),
      // compile_snapshot, given up when a stop is asked (stop_background_work,
      // or start()'s stop signal) and reporting what it built.
      build_snapshot_([this](const ConfigSpec& config, const std::vector<RankedJob>& jobs,
                             const std::array<PortLive, kPortCount>& ports, uint32_t generation,
                             const Snapshot* previous) {
        CompileControl control{
            [this] { return stopping_.load(std::memory_order_relaxed) || (start_stop_asked_ && start_stop_asked_()); },
            &last_compile_};
        return compile_snapshot(config, jobs, ports, generation, previous, control);
      }),
      baselines_(config.max_jobs) {
  state_.config_file = std::make_shared<const ConfigSpec>(config);
  started_ns_ = monotonic_ns();
  {
    timespec ts{};
    clock_gettime(CLOCK_REALTIME, &ts);
    started_unix_ns_ = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  publish_status();
}

namespace {

// The directory's identity and last change, or nullopt when there is none.
std::optional<DirectoryId> directory_id(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return std::nullopt;
  return DirectoryId{st.st_dev, st.st_ino,
                     static_cast<uint64_t>(st.st_mtim.tv_sec) * 1'000'000'000ull + st.st_mtim.tv_nsec};
}

}  // namespace

namespace {

// Now in UTC, as a file name's suffix: 20261130T012345Z.
std::string utc_stamp() {
  char stamp[32] = "";
  const time_t now = time(nullptr);
  tm utc{};
  strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime_r(&now, &utc));
  return stamp;
}

// Cluster mode: a state file that does not load here (more jobs than
// dataplane.max_jobs now allows, a corrupt copy) is this host's copy, not
// the authority, and must not keep the gateway from following the store
// (exit 2, restarted for ever). It is renamed aside, kept for a look, and
// the gateway starts as without one: its rules files are set aside by
// start() as no state names them. True when it was.
bool set_aside_unloadable_state(const std::string& path, const std::string& why) {
  // A name of its own, never an earlier copy's (two starts in one second,
  // or a clock stepped back): rename would replace it unsaid.
  const std::string stamped = path + ".unloadable-" + utc_stamp();
  std::string aside = stamped;
  struct stat st {};
  for (unsigned n = 2; ::lstat(aside.c_str(), &st) == 0; ++n) {
    if (n > 100) return false;
    aside = stamped + "-" + std::to_string(n);
  }
  if (::rename(path.c_str(), aside.c_str()) != 0) return false;
  spdlog::error(
      "state file {} does not load ({}); cluster mode: renamed to {}, starting without it and following "
      "the store",
      path, why, aside);
  return true;
}

}  // namespace

Result<std::unique_ptr<ControlPlane>> ControlPlane::create(Dataplane& dataplane, const ConfigSpec& config) {
  using R = Result<std::unique_ptr<ControlPlane>>;
  auto usable = check_state_path(config.control.state);
  if (!usable) return R::failure(usable.error());
  StateReadFailure failure{};
  auto saved = read_state_file(config.control.state, config.max_jobs, config.class_count, &failure);
  // Only a file read and found wrong: one that could not be read (EACCES,
  // EIO) may be a sound copy, and stays where it is.
  if (!saved && config.cluster && failure == StateReadFailure::kDoesNotLoad &&
      set_aside_unloadable_state(config.control.state, saved.error()))
    saved = std::optional<SavedState>{};
  if (!saved) return R::failure(saved.error());
  if (!*saved) {
    auto jobs = JobRegistry::from_config(config);
    if (!jobs) return R::failure(config.source + ": " + jobs.error());
    return std::unique_ptr<ControlPlane>(new ControlPlane(
        dataplane, config, ControlState{std::move(*jobs), config.policy, {}, compile_ports(config), {}, {}}));
  }
  SavedState& s = **saved;
  const bool had_live = s.live.has_value();
  // What the file changed since the state file was written is the file's
  // (an edit, then a restart rather than a reload); the rest is the saved
  // state's, socket changes included. A state file without the record
  // (written by an older psgate) keeps its own, as it always did. Merged
  // first, then checked: the file's edit may be what makes the saved values
  // fit (a new depth with its new ECN threshold).
  const std::vector<std::string> from_file =
      take_file_changes(s, FileSettings{config.policy, compile_ports(config)}, config);
  if (auto valid = check_saved_state(s, config); !valid) {
    if (!config.cluster || !set_aside_unloadable_state(config.control.state, valid.error()))
      return R::failure(valid.error());
    return create(dataplane, config);  // as without a state file now
  }
  // A rule an older psgate took and a new one refuses (proto=0, read as it
  // ran: RuleOrigin::kStored) matches no packet; said at each start, since
  // `config --toml` writes it into a file that --check then refuses.
  for (const JobRecord* job : s.jobs.in_age_order()) {
    for (const MatchRule& rule : job->spec.match) {
      if (rule.proto && *rule.proto == 0)
        spdlog::warn(
            "state file: job {} has the rule \"{}\", which an older psgate accepted: proto=0 matches no "
            "packet (leave proto out to match every protocol), and a config file or jobs.add now refuses "
            "it; give the job new rules (psgatectl jobs rm {}, then jobs add {} --match ...)",
            job->spec.id, to_string(rule), job->spec.id, job->spec.id);
    }
  }
  ControlState initial{std::move(s.jobs), s.policy, {}, had_live ? std::move(*s.live) : compile_ports(config), {}, {}};
  // The ranks this gateway forwarded on in a cluster, in force until the
  // store is read (a restart while it is unreachable goes on ranking as
  // the others do). Not in single-host mode: a gateway taken out of a
  // cluster ranks by its own policy (and writes them out of its file).
  if (config.cluster) initial.cluster_ranks = std::move(s.cluster_ranks);
  // Round-robin goes on with the turn it was in (not while the policy is
  // the config file's, changed since: a new policy starts afresh, as the
  // policy command starts it).
  const bool policy_from_file = std::find(from_file.begin(), from_file.end(), "policy") != from_file.end();
  std::unique_ptr<ControlPlane> cp(new ControlPlane(dataplane, config, std::move(initial)));
  if (s.position && !config.cluster && !policy_from_file && persists_position(cp->state_.policy))
    cp->state_.policy_state =
        resume_policy_state(*s.position, cp->state_.policy.interval_ns, cp->started_ns_, cp->started_unix_ns_);
  cp->rules_serial_ = s.rules_serial;
  cp->state_was_read_ = true;
  cp->rules_dir_id_ = directory_id(rules_dir_path(config.control.state));
  // What is on disk: start() then rewrites the file only if its rendering
  // differs (an older format), not at every start.
  cp->persisted_text_ = std::move(s.text);
  // On a filesystem mounted read-only, as if unwritten: start() tries the
  // write, fails, and reports health degraded with the reason, retrying each
  // second, rather than a healthy gateway that refuses every change.
  if (!*usable) cp->persisted_text_.clear();
  spdlog::info("state file {}: restored {} jobs, policy {}{}{}; the config's [[jobs]] are not used while it exists",
               config.control.state, cp->state_.jobs.size(), policy_name(cp->state_.policy.kind),
               had_live ? ", class and shaper settings" : "", cp->state_.cluster_ranks ? ", the cluster's ranks" : "");
  // An edit of [[jobs]] that this start does not apply is said so, not
  // left to an info line.
  if (const std::string unlike = config.cluster ? "" : config_jobs_unlike_state(config.jobs, cp->state_.jobs);
      !unlike.empty())
    spdlog::warn(
        "{}: its [[jobs]] differ from the state file's ({}), whose jobs are in force: change jobs with "
        "psgatectl (or, to start from the config's, stop psgate, remove the state file and start it again)",
        config.source, unlike);
  if (!from_file.empty()) {
    std::string keys;
    for (const std::string& k : from_file) keys += (keys.empty() ? "" : ", ") + k;
    spdlog::info("{} changed {} since the state file was written: the file's values are in force there", config.source,
                 keys);
  }
  return cp;
}

void ControlPlane::set_io_for_testing(StateWriter writer, SnapshotBuilder builder) {
  if (writer) write_state_ = std::move(writer);
  if (builder) build_snapshot_ = std::move(builder);
}

void ControlPlane::follow_cluster(ClusterLink* link, const ClusterSpec& spec) {
  cluster_ = link;
  cluster_keys_ = ClusterKeys{spec.prefix};
  // Says that a store write sent from a client's request has ended
  // (handle_line_deferred). Without it those writes block the control
  // thread as handle_line's do: slower to others, never wrong.
  if (store_writes_.done_fd < 0) store_writes_.done_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (store_writes_.done_fd < 0)
    spdlog::warn("cluster: eventfd: {}; a change sent to the store holds the control socket until it is in force",
                 std::strerror(errno));
}

// The first commit: publishes the initial state and writes the state file.
// In cluster mode that is the state this gateway applied last (its state
// file), so it forwards on it while the store is away; the store's view
// replaces it as soon as one has been read.
Result<bool> ControlPlane::start(std::function<bool()> stop_asked) {
  // No state file, yet rules files: a state file deleted or lost, or a
  // backup restored rules directory first. They are the only record of
  // those jobs' rules, so they are moved aside, not removed, and before
  // this start writes its own (whose names could be theirs).
  // Temporaries a crash left between a write and its rename: never named by
  // anything, they only hold disk space (and end up in backups of
  // state.json*). Only with the state file's lock held: without it another
  // gateway's write may own one.
  if (!config_.control.state.empty() && state_unlocked_.empty()) remove_state_temporaries(config_.control.state);
  if (!state_was_read_ && !config_.control.state.empty()) {
    const std::string dir = rules_dir_path(config_.control.state), aside = "unnamed-" + utc_stamp();
    // This start's own rules files take names after theirs, never over
    // them (next_rules_serial_in reads the set-aside directories too).
    rules_serial_ = std::max(rules_serial_, next_rules_serial_in(dir));
    const RulesSetAside set = set_aside_unnamed_rules_files(dir, state_.jobs, aside);
    if (set.moved)
      spdlog::warn(
          "state file {} does not exist, but {} rules files are in {}/: moved to {}/ (no state names them; was "
          "the state file deleted, or a backup restored without it?)",
          config_.control.state, set.moved, dir, set.directory);
    if (!set.error.empty())
      spdlog::error(
          "state file {} does not exist, and rules files no state names in {}/ could not be set aside ({}); copy "
          "them away now: a later start removes them",
          config_.control.state, dir, set.error);
  }
  // A state file that cannot be written now (disk full at boot) leaves the
  // gateway forwarding on what it read, degraded, retrying every second.
  // A stop asked meanwhile ends the rules' compile at its next partition
  // (100,000 rules take seconds): nothing published, nothing written.
  start_stop_asked_ = std::move(stop_asked);
  last_compile_ = CompileReport{};
  auto started = commit(state_, monotonic_ns(), IfUnsaved::kPublishStateInForce);
  start_stop_asked_ = nullptr;
  // How long the start's compile took, and its longest partition: what a
  // stop during it waits for at most (one build per worker).
  if (const CompileReport& c = last_compile_; started && c.partitions_built > 0)
    spdlog::info("rules: {} in {} partition{} compiled in {} ms (the longest partition: {} rules in {} ms)",
                 c.rules_built, c.partitions_built, c.partitions_built == 1 ? "" : "s", c.build_ns / 1'000'000,
                 c.longest_rules, c.longest_ns / 1'000'000);
  // Rules files a crash left behind (written, never named by a state file),
  // before the store's view changes the jobs: only while the file on disk
  // is the one this state was read from or written as (one that could not
  // be written still names its jobs' files).
  if (started && state_was_read_ && !config_.control.state.empty() && state_unsaved_.empty())
    remove_unnamed_rules_files(rules_dir_path(config_.control.state), state_.jobs);
  // Its own write (not a client's change written after a start that could
  // not write): what withdraw_unserved_state may take back.
  start_wrote_state_ = started && !config_.control.state.empty() && state_unsaved_.empty() && state_writes_ == 1;
  if (started && cluster_) follow_step(monotonic_ns());
  return started;
}

void ControlPlane::withdraw_unserved_state() {
  const std::string& path = config_.control.state;
  if (path.empty() || state_was_read_ || cluster_ || !start_wrote_state_ || state_writes_ != 1) return;
  const std::string dir = rules_dir_path(path);
  for (const JobRecord* j : state_.jobs.in_age_order())
    if (!j->rules_file.empty()) ::unlink((dir + "/" + j->rules_file).c_str());
  if (::unlink(path.c_str()) == 0)
    spdlog::info("state file {} removed: this start failed before it served; the next one starts from the config",
                 path);
  ::rmdir(dir.c_str());  // only when empty: files set aside or not ours stay
}

std::unordered_map<uint32_t, JobRanks> ControlPlane::effective_ranks(const ControlState& state,
                                                                     PolicyState& policy_state, uint64_t now_ns) const {
  std::unordered_map<uint32_t, JobRanks> ranks;
  const std::vector<const JobRecord*> ordered = state.jobs.in_rank_order();
  // Cluster mode: the cluster's leader evaluates the policy once for every
  // gateway (static: the store's order, apply_view); a job its ranks do not
  // cover yet (just added) goes below them.
  if (cluster_ && state.cluster_ranks) {
    // Saturating: a ranks document written by hand may hold UINT32_MAX,
    // which must not wrap a new job to the top.
    auto after = [](uint32_t rank) { return rank == UINT32_MAX ? rank : rank + 1; };
    uint32_t below = 0;
    for (const auto& [id, r] : *state.cluster_ranks) below = std::max({below, after(r.pull_rank), after(r.push_rank)});
    for (const JobRecord* j : ordered) {
      auto it = state.cluster_ranks->find(j->spec.id);
      ranks[j->spec.id] = it != state.cluster_ranks->end() ? it->second : JobRanks{j->spec.id, below, below};
      if (it == state.cluster_ranks->end()) below = after(below);
    }
    return ranks;
  }
  if (state.policy.kind == PolicyKind::kStatic || cluster_) {
    for (const JobRecord* j : ordered) ranks[j->spec.id] = JobRanks{j->spec.id, j->spec.rank, j->spec.rank};
    return ranks;
  }
  std::vector<PolicyJob> input;
  for (const JobRecord* j : ordered) {
    PolicyJob pj;
    pj.id = j->spec.id;
    pj.reported = j->progress;
    const JobTelemetry t = own_telemetry(*j);
    pj.iterations_seen = t.bursts;
    pj.bytes_per_iteration = t.last_burst_bytes;
    pj.bytes_this_iteration = t.current_burst_bytes;
    input.push_back(pj);
  }
  for (const JobRanks& r : evaluate_policy(state.policy, policy_state, input, now_ns)) ranks[r.id] = r;
  return ranks;
}

JobTelemetry ControlPlane::own_telemetry(const JobRecord& job) const {
  // A job not in the running snapshot yet (being added, maybe into a removed
  // job's slot) has no traffic of its own. (None before the first publish:
  // nothing has run.)
  const Snapshot* running = dataplane_.publisher().current();
  const bool running_here =
      running && job.slot < running->slots.size() && running->slots[job.slot].owner == job.sequence + 1;
  return running_here ? dataplane_.job_telemetry(job.slot) : JobTelemetry{};
}

namespace {

// Whether two registries compile to the same snapshot given the same ranks:
// the same jobs in the same slots with the same specs (progress aside).
bool same_jobs_for_snapshot(const JobRegistry& a, const JobRegistry& b) {
  if (a.size() != b.size()) return false;
  for (const JobRecord* j : a.in_rank_order()) {
    const JobRecord* k = b.find(j->spec.id);
    if (!k || k->slot != j->slot || k->sequence != j->sequence || !(k->spec == j->spec)) return false;
  }
  return true;
}

// Whether two sets of effective ranks put every job in the same classes. A
// re-rank among ranks that share a class (every rank past the last job class
// is that class: 40 jobs in 6 job classes) changes nothing the data plane
// runs: it is not published, which under shortest-first (re-evaluated every
// tick) was a snapshot and an RCU grace period every 100 ms.
bool same_classes(const ConfigSpec& config, const std::unordered_map<uint32_t, JobRanks>& a,
                  const std::unordered_map<uint32_t, JobRanks>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [id, r] : a) {
    const auto it = b.find(id);
    if (it == b.end() || class_for_rank(config, r.pull_rank) != class_for_rank(config, it->second.pull_rank) ||
        class_for_rank(config, r.push_rank) != class_for_rank(config, it->second.push_rank))
      return false;
  }
  return true;
}

// Whether the rules file `job` names is gone from `dir` (removed under a
// running gateway): written again then.
bool rules_file_missing(const std::string& dir, const JobRecord& job) {
  return !job.rules_file.empty() && ::access((dir + "/" + job.rules_file).c_str(), F_OK) != 0;
}

// Calls `fn` with each rules file a job of `a` names that `b` does not (the
// job gone from `b`, or its rules file another there).
template <typename Fn>
void for_each_rules_file_only_in(const JobRegistry& a, const JobRegistry& b, Fn&& fn) {
  for (const JobRecord* j : a.in_age_order()) {
    const JobRecord* other = b.find(j->spec.id);
    if (!j->rules_file.empty() && (!other || other->rules_file != j->rules_file)) fn(j->rules_file);
  }
}

}  // namespace

Result<bool> ControlPlane::persist(ControlState& next, std::string& text, uint64_t& rules_serial) {
  const std::string& path = config_.control.state;
  const std::string dir = rules_dir_path(path);
  // The rules directory removed (an operator's rm -rf of the state
  // directory) or replaced, or rules files in it deleted, while psgate ran:
  // the state file written next named rules files that were gone, and the
  // next start refused it, every job lost. The missing rules files are
  // written again instead (only those: a retry after a state write that
  // failed finds the ones it wrote). Any change to the directory since the
  // last write (its mtime) has the files looked for.
  const std::optional<DirectoryId> dir_now = directory_id(dir);
  if (rules_dir_id_ && dir_now != rules_dir_id_) {
    size_t missing = 0;
    for (const JobRecord* j : next.jobs.in_age_order()) {
      if (!rules_file_missing(dir, *j)) continue;
      next.jobs.set_rules_file(j->spec.id, "");
      ++missing;
    }
    if (missing && (!dir_now || !dir_now->same_directory(*rules_dir_id_))) {
      spdlog::warn(
          "state file {}: its rules directory {} was removed or replaced while psgate ran: {} rules files are "
          "written again (the state file's lock went with it if it was there: restart psgate to take it again)",
          path, dir, missing);
    } else if (missing) {
      spdlog::warn("state file {}: {} rules files under {} were removed while psgate ran: written again", path, missing,
                   dir);
    }
  }
  std::vector<std::pair<std::string, std::string>> rules_files;  // name, text
  std::vector<uint32_t> rules_of;                                // their jobs
  for (const JobRecord* j : next.jobs.in_age_order()) {
    if (!j->rules_file.empty()) continue;
    rules_files.emplace_back(rules_file_name(j->spec.id, rules_serial++), rules_file_text(*j));
    rules_of.push_back(j->spec.id);
  }
  if (auto written = write_rules_files(dir, rules_files); !written) return written;
  for (size_t i = 0; i < rules_files.size(); ++i) next.jobs.set_rules_file(rules_of[i], rules_files[i].first);
  if (!rules_files.empty()) {
    if (auto synced = sync_directory(dir); !synced)
      return Result<bool>::failure("state file " + path + ": " + synced.error());
  }
  // The file's own settings as this state's baseline: a start compares the
  // file with them (apply_file_changes).
  // None while the file has another classes.count than what runs (a reload
  // read it; a restart applies it): its classes cannot be compared.
  const bool comparable = next.config_file && next.config_file->class_count == config_.class_count;
  if (comparable && file_settings_of_ != next.config_file) {
    file_settings_ = FileSettings{next.config_file->policy, compile_ports(*next.config_file)};
    file_settings_of_ = next.config_file;  // held: a later file cannot take its address
  }
  // Round-robin's position, on the wall clock (a restart resumes it), where
  // it is kept (persists_position: at most one write a second).
  std::optional<PolicyPosition> position;
  if (!config_.cluster && next.policy.kind == PolicyKind::kRoundRobin && next.policy_state.top_known &&
      persists_position(next.policy))
    position =
        PolicyPosition{next.policy_state.top_id, next.policy_state.last_rotation_ns + (started_unix_ns_ - started_ns_)};
  text = state_text_.render(next.jobs, next.policy, next.live, rules_serial, comparable ? &file_settings_ : nullptr,
                            next.cluster_ranks ? &*next.cluster_ranks : nullptr, position ? &*position : nullptr);
  if (text != persisted_text_) {
    if (auto written = write_state_(path, text); !written) return written;
  }
  rules_dir_id_ = directory_id(dir);
  return true;
}

Result<bool> ControlPlane::commit(ControlState next, uint64_t now_ns, IfUnsaved if_unsaved) {
  // 0. What no single setting's check sees: a port's floors together
  // against its shaper (class.set, shaper.set and reload all end here).
  for (unsigned p = 0; p < kPortCount; ++p) {
    if (next.live[p] == state_.live[p] && published_) continue;
    if (auto problem = floors_problem(next.live[p]))
      return Result<bool>::failure(std::string(kPortNames[p]) + ": " + *problem);
  }
  // 1. Compile (nothing visible changes; this may fail).
  auto ranks = effective_ranks(next, next.policy_state, now_ns);
  std::unique_ptr<Snapshot> snap;
  const bool republish = !published_ || !same_classes(config_, ranks, applied_ranks_) || !(next.live == state_.live) ||
                         fresh_merge_ != nullptr || !same_jobs_for_snapshot(next.jobs, state_.jobs);
  if (republish) {
    std::vector<RankedJob> ranked;
    for (const JobRecord* j : next.jobs.in_rank_order()) ranked.push_back(RankedJob{j, ranks[j->spec.id]});
    // Only this thread publishes, so the current snapshot (none before the
    // first publish) cannot go away here.
    auto built = build_snapshot_(config_, ranked, next.live, generation_ + 1, dataplane_.publisher().current());
    if (!built) {
      // Given up for the stop (stop_background_work): refused, as said.
      if (stopping_.load(std::memory_order_relaxed) && built.error().rfind(kCompileStopped, 0) == 0)
        return Result<bool>::failure(built.error() + ": psgate is stopping; the change is not applied");
      return Result<bool>::failure(built.error());
    }
    snap = std::move(*built);
    // A merge that finished meanwhile, if it still covers its partitions'
    // jobs (else it is dropped: the next tick starts another).
    if (fresh_merge_) use_merged(*snap, fresh_merge_);
  }
  // 2. Persist, durably, before anything is published: a change the data
  // plane runs is on disk. A job added writes its rules file first (once:
  // a job's rules never change); then the state file, which names the rules
  // files, is replaced: that is the commit point (state_file.h). Unchanged
  // text (a policy re-rank, but for round-robin's rotation, which moves its
  // position; a no-op) is not rewritten.
  // In cluster mode the store holds jobs, order and policy, and the file is
  // this host's copy of them for a start without the store: a file that
  // cannot be written (disk full, read-only) must not stop the gateway from
  // following the cluster. What the store holds is published all the same
  // (if_unsaved), the gateway says it is degraded, and the tick writes the
  // file again until it succeeds. A local setting (class.set, shaper.set,
  // reload) has no other record: refused, as in single-host mode.
  const std::string& path = config_.control.state;
  std::string text;
  uint64_t rules_serial = rules_serial_;
  Result<bool> persisted = true;
  if (!path.empty()) {
    persisted = persist(next, text, rules_serial);
    const bool recorded_elsewhere = (cluster_ && if_unsaved == IfUnsaved::kPublishWhatTheStoreHolds) ||
                                    if_unsaved == IfUnsaved::kPublishStateInForce;
    if (!persisted && !recorded_elsewhere) {
      // Refused: the rules files this change wrote are named by no state
      // file, now or ever (the old one is in force), so they go now. Their
      // names may be used again (the serial stays, as the state file in
      // force has it): nothing is left under them.
      const std::string dir = rules_dir_path(path);
      for_each_rules_file_only_in(next.jobs, state_.jobs,
                                  [&](const std::string& name) { ::unlink((dir + "/" + name).c_str()); });
      if (state_refused_.empty())
        spdlog::error(
            "state file {} not written, change refused (health degraded until a write succeeds, "
            "tried every second): {}",
            path, persisted.error());
      state_refused_ = persisted.error();
      refused_retry_ns_ = now_ns + 1'000'000'000;
      return persisted;
    }
  }
  // 3. Nothing can fail from here: publish, then make `next` the state in force.
  if (snap) {
    // A reused slot carries its previous job's counts: a new job starts
    // from them. Summing every lcore's counters costs ~0.15 ms with 4,096
    // slots, so only when some job is new to its slot (not for a re-rank).
    // A removed job added again while its slot drained takes the slot back
    // with the packets queued there, which are its own: its counts go on
    // from where they were, so that what it sends of them stays within what
    // it was counted as admitting.
    std::vector<uint32_t> fresh_slots;
    for (const JobRecord* j : next.jobs.in_age_order()) {
      const JobRecord* had = state_.jobs.find(j->spec.id);
      const bool taken_back = !had && state_.jobs.drains_for(j->slot, j->spec.id);
      if ((!had || had->slot != j->slot) && !taken_back && j->slot < baselines_.size()) fresh_slots.push_back(j->slot);
    }
    if (!fresh_slots.empty()) {
      std::lock_guard<std::mutex> lock(baselines_mutex_);
      const Totals now = dataplane_.read_totals(false);
      for (uint32_t slot : fresh_slots) baselines_[slot] = now.jobs[slot];
      ++baseline_epoch_;  // odd: new baselines, their snapshot not yet published
    }
    const Snapshot* before = dataplane_.publisher().current();
    if (!before || before->rules_generation != snap->rules_generation) rules_changed_ns_ = now_ns;
    dataplane_.publisher().publish(std::move(snap));
    if (!fresh_slots.empty()) {
      std::lock_guard<std::mutex> lock(baselines_mutex_);
      ++baseline_epoch_;  // even: the snapshot that goes with them is in force
    }
    fresh_merge_.reset();
    ++generation_;
    // A removed job's slot: once every lcore has taken this snapshot (or a
    // later one), nothing more is admitted to it (release_drained_slots).
    // A slot its job took back (added again) drains no more; removed again
    // later, its grace period begins then.
    const std::vector<uint32_t> draining = next.jobs.draining_slots();
    std::erase_if(slot_grace_, [&](const auto& entry) {
      return std::find(draining.begin(), draining.end(), entry.first) == draining.end();
    });
    for (uint32_t slot : draining)
      if (!slot_grace_.contains(slot)) slot_grace_[slot] = dataplane_.publisher().begin_grace();
    applied_ranks_ = std::move(ranks);
    published_ = true;
  }
  rules_serial_ = rules_serial;  // names once used are not used again, written or not
  bool wrote_file = false;       // persist() writes the file only when its text changes
  if (!path.empty() && persisted) {
    // Rules files of removed jobs: no state file names them any more. They
    // are removed a while later (tick), not now: a backup that copies the
    // state file and then the rules directory (operations.md) must find
    // every file the copied state names, even when a job was removed in
    // between. (After a failed write the old file may still name them:
    // those stay, and the next start removes them as unnamed.)
    for_each_rules_file_only_in(state_.jobs, next.jobs, [&](const std::string& name) {
      unnamed_rules_files_.push_back({name, now_ns + kUnnamedRulesFileLifeNs});
    });
    wrote_file = text != persisted_text_;
    persisted_text_ = std::move(text);
    ++state_writes_;
  }
  // A refused change's write (state_refused_) is cleared by a write that
  // happened: a commit that changes nothing on disk (a policy re-rank, a
  // rule merge, a no-op) says nothing of whether the next change can be.
  if (wrote_file && !state_refused_.empty()) {
    if (state_unsaved_.empty()) spdlog::info("state file {}: written again", path);
    state_refused_.clear();
  }
  if (!path.empty() && persisted.ok() != state_unsaved_.empty()) {
    if (persisted) {
      spdlog::info("state file {}: written again", path);
      state_unsaved_.clear();
    } else {
      spdlog::error("state file {} not written, {} without it (retried every second): {}", path,
                    cluster_ ? "following the cluster" : "forwarding on the state in force", persisted.error());
    }
  }
  if (!persisted) {
    // Retried once a second: a write that failed in between (a rotation's)
    // does not put the retry off.
    if (state_unsaved_.empty() || now_ns >= state_retry_ns_) state_retry_ns_ = now_ns + 1'000'000'000;
    state_unsaved_ = persisted.error();
  }
  // Not published, the ranks are in force all the same (metrics, the
  // cluster report, the policy's next evaluation compare with them).
  if (!republish) applied_ranks_ = std::move(ranks);
  state_ = std::move(next);
  publish_status();
  return true;
}

void ControlPlane::release_drained_slots() {
  // Admissions to the slot stop with the grace period; after it, what was
  // admitted only falls (sent, dropped) and reaching 0 means no packet of
  // the removed job is left to charge to, or move with, the slot's next job.
  for (auto it = slot_grace_.begin(); it != slot_grace_.end();) {
    if (dataplane_.publisher().grace_over(it->second) && dataplane_.job_in_flight(it->first) <= 0) {
      state_.jobs.release_slot(it->first);
      it = slot_grace_.erase(it);
    } else {
      ++it;
    }
  }
}

void ControlPlane::tick(uint64_t now_ns) {
  if (!cluster_) release_drained_slots();  // cluster mode: follow_step does, before it applies a view
  tick_policy(now_ns);
  publish_status();  // after every tick: the policy's errors and the cluster link move without a commit
}

// A change was refused because the state file could not be written; the
// state in force is on disk (persisted_text_). Writing that file again
// (atomically, as every write) is the test of whether the next change can
// be: a disk that has room, or is writable, again.
void ControlPlane::retry_refused_write(uint64_t now_ns) {
  const std::string& path = config_.control.state;
  if (auto written = write_state_(path, persisted_text_); !written) {
    state_refused_ = written.error();
    refused_retry_ns_ = now_ns + 1'000'000'000;
    return;
  }
  spdlog::info("state file {}: written again", path);
  state_refused_.clear();
}

// A state file or rules files removed from under a running gateway (an
// operator's clean-up, a mistaken rm): nothing noticed until the next
// change, and a restart before it started from the config's jobs, or
// refused a state file naming rules files that were gone. Once a second,
// what is gone is written again from the state in force.
void ControlPlane::watch_state_on_disk(uint64_t now_ns) {
  const std::string& path = config_.control.state;
  if (path.empty() || persisted_text_.empty() || !state_unsaved_.empty() || !state_refused_.empty()) return;
  if (now_ns < state_watch_ns_) return;
  state_watch_ns_ = now_ns + 1'000'000'000;
  const std::string dir = rules_dir_path(path);
  const std::optional<DirectoryId> dir_now = directory_id(dir);
  // An mtime under 2 s old may not show a file deleted since (git's "racy"
  // timestamps): filesystems stamp from a coarse clock (a few ms on Linux
  // before 6.13, seconds on some), so a deletion in the tick of psgate's
  // own last write leaves it as it was. Looked at until it is older.
  timespec wall{};
  clock_gettime(CLOCK_REALTIME, &wall);
  const uint64_t wall_ns = static_cast<uint64_t>(wall.tv_sec) * 1'000'000'000ull + wall.tv_nsec;
  const bool racy = dir_now && wall_ns < dir_now->mtime_ns + 2'000'000'000ull;
  if (dir_now != rules_dir_id_ || racy) {
    const auto jobs = state_.jobs.in_age_order();
    const bool missing =
        std::any_of(jobs.begin(), jobs.end(), [&](const JobRecord* j) { return rules_file_missing(dir, *j); });
    if (missing) {
      // persist() finds them, writes them again and the state file naming
      // them; a failure is the commit's, retried as any unwritten state.
      (void)commit(state_, now_ns, cluster_ ? IfUnsaved::kPublishWhatTheStoreHolds : IfUnsaved::kPublishStateInForce);
      return;
    }
    rules_dir_id_ = dir_now;  // changed by something else (psgate's own clean-up of old rules files)
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 || errno != ENOENT) return;
  spdlog::warn("state file {} was removed while psgate ran: written again", path);
  if (auto written = write_state_(path, persisted_text_); !written) {
    state_refused_ = written.error();  // health degraded; retry_refused_write tries again each second
    refused_retry_ns_ = now_ns + 1'000'000'000;
  }
}

void ControlPlane::tick_policy(uint64_t now_ns) {
  dataplane_.poll_links();
  dataplane_.watch_lcores(now_ns);
  dataplane_.publisher().reclaim();  // snapshots retired by the last changes (snapshot.h)
  // Background merges of old rule partitions (rule_merger.h): publish a
  // finished one, or start one when enough partitions have settled.
  if (published_) {
    if (auto merged = merger_.take(now_ns)) {
      fresh_merge_ = std::move(merged);
      if (auto ok = commit(state_, now_ns, IfUnsaved::kPublishWhatTheStoreHolds); !ok)
        spdlog::warn("rule merge not published: {}", ok.error());
    } else if (const Snapshot* current = dataplane_.publisher().current()) {
      merger_.maybe_start(current->partitions, state_.jobs, current->merged, rules_changed_ns_, now_ns);
    }
  }
  // Rules files no state file names since a while (commit()), unless a job
  // in force names one again: never a live job's rules.
  while (!unnamed_rules_files_.empty() && unnamed_rules_files_.front().second <= now_ns) {
    const std::string& name = unnamed_rules_files_.front().first;
    const auto jobs = state_.jobs.in_age_order();
    if (std::none_of(jobs.begin(), jobs.end(), [&](const JobRecord* j) { return j->rules_file == name; }))
      ::unlink((rules_dir_path(config_.control.state) + "/" + name).c_str());
    unnamed_rules_files_.pop_front();
  }
  // The state file that could not be written (commit()), again. Without the
  // cluster only the start's state and round-robin's rotation (its position)
  // can be unsaved: every other change that cannot be written is refused.
  if (!state_unsaved_.empty() && now_ns >= state_retry_ns_)
    (void)commit(state_, now_ns, cluster_ ? IfUnsaved::kPublishWhatTheStoreHolds : IfUnsaved::kPublishStateInForce);
  else if (!state_refused_.empty() && now_ns >= refused_retry_ns_) retry_refused_write(now_ns);
  watch_state_on_disk(now_ns);
  if (cluster_) {
    // The store decides jobs, order and policy; the leader evaluates the policy.
    follow_step(now_ns);
    report_to_cluster(now_ns);
    return;
  }
  if (state_.policy.kind == PolicyKind::kStatic) return;
  PolicyState trial = state_.policy_state;
  auto ranks = effective_ranks(state_, trial, now_ns);
  if (ranks == applied_ranks_) {
    // The policy's own clock moves on (it is neither published nor persisted).
    state_.policy_state = trial;
    return;
  }
  // The re-rank goes through commit like any change; evaluated again there on
  // the same inputs, it gives the same ranks. On a failure the previous order
  // stays in force and the next tick tries again. The state file records the
  // policy, not its momentary order, but for round-robin's position (the job
  // on top, so that a restart resumes its turn): a write that fails (a full
  // or read-only disk) must not hold the rotation back. It is published, and
  // the file is retried each second with health degraded, as after a start
  // that could not write it.
  if (auto ok = commit(state_, now_ns, IfUnsaved::kPublishStateInForce); !ok) {
    ++policy_errors_;
    spdlog::error("policy {}: re-rank not applied, the previous order stays: {}", policy_name(state_.policy.kind),
                  ok.error());
  }
}

// The dispatch: the command table's parser (through parse_control_line, the
// path the fuzzer exercises) picks the request type, std::visit picks the
// handler, apply() for that type; a command without one does not compile.
// A handler's candidate state takes effect through commit() only.
json ControlPlane::handle_line(std::string_view line, bool reply_wanted, const CommandSpec** ran) {
  Handled h = handle_request(line, reply_wanted, ran, false);
  if (h.for_store) h.reply = forward_to_cluster(*h.for_store);
  return reply_object(h);
}

ControlPlane::Handled ControlPlane::handle_request(std::string_view line, bool reply_wanted, const CommandSpec** ran,
                                                   bool queue_changes) {
  Handled h;
  auto parsed = parse_control_line(line, config_.class_count, &h.echo_id, &h.deprecation);
  release_drained_slots();  // a jobs.add must not find a drained slot still held
  if (ran != nullptr) *ran = nullptr;
  // The command table's i-th command parses to ControlRequest's i-th alternative.
  const CommandSpec* command = parsed ? &control_commands()[parsed->index()] : nullptr;
  if (!reply_wanted && command != nullptr && command->reads_only) {
    h.unseen = true;
    return h;
  }
  // Class and shaper settings (and a reload, which changes only those in
  // cluster mode) are this gateway's own; in cluster mode every
  // other change goes to the store, and is applied from there.
  const bool local =
      parsed && (std::holds_alternative<ClassSetRequest>(*parsed) ||
                 std::holds_alternative<ShaperSetRequest>(*parsed) || std::holds_alternative<ReloadRequest>(*parsed));
  if (queue_changes && command != nullptr && !command->reads_only && !local &&
      (store_writes_.in_flight || !store_writes_.waiting.empty())) {
    h.queued = true;
    return h;
  }
  if (ran != nullptr) *ran = command;
  if (!parsed) {
    h.reply = fail(parsed.error());
  } else if (auto outcome = std::visit([this](const auto& req) { return apply(req); }, *parsed); !outcome) {
    h.reply = fail(outcome.error());
  } else if (json* read = std::get_if<json>(&*outcome)) {
    h.reply = std::move(*read);
  } else {
    Candidate& change = std::get<Candidate>(*outcome);
    if (cluster_ && !local) h.for_store = std::move(change);
    else if (auto ok = commit(std::move(change.next), monotonic_ns()); !ok) h.reply = fail(ok.error());
    else h.reply = change.reply(*this);
  }
  return h;
}

json ControlPlane::reply_object(Handled& h) {
  if (h.unseen) return json();
  json reply;
  if (h.echo_id) reply["id"] = std::move(*h.echo_id);
  if (!h.deprecation.empty()) reply["deprecated"] = h.deprecation;
  if (h.reply) {
    reply["ok"] = true;
    reply["result"] = std::move(*h.reply);
  } else {
    reply["ok"] = false;
    reply["error"] = h.reply.error();
  }
  return reply;
}

json ControlPlane::handle(const json& request) { return handle_line(request.dump()); }
Totals ControlPlane::adjusted(Totals t) const {
  for (size_t slot = 0; slot < t.jobs.size() && slot < baselines_.size(); ++slot)
    subtract_baseline(t.jobs[slot], baselines_[slot]);
  return t;
}
Totals ControlPlane::totals_locked(bool with_histograms) {
  std::lock_guard<std::mutex> lock(baselines_mutex_);
  return adjusted(dataplane_.read_totals(with_histograms));
}

void ControlPlane::with_snapshot(const std::function<void(const Snapshot&)>& fn) { dataplane_.publisher().read(fn); }

Totals ControlPlane::totals_and_snapshot(bool with_histograms,
                                         const std::function<void(const Totals&, const Snapshot&)>& fn) {
  Totals t;
  for (int tries = 0; tries < 8; ++tries) {
    uint64_t epoch = 0;
    {
      std::lock_guard<std::mutex> lock(baselines_mutex_);
      epoch = baseline_epoch_;
      t = adjusted(dataplane_.read_totals(with_histograms));
    }
    // The snapshot outside the lock: its callback takes none, and a commit
    // is never held up by a reader beyond one copy of the counters.
    with_snapshot([&](const Snapshot& snap) { fn(t, snap); });
    std::lock_guard<std::mutex> lock(baselines_mutex_);
    if (epoch == baseline_epoch_ && epoch % 2 == 0) break;
    std::this_thread::yield();  // a commit gave slots to new jobs meanwhile: read both again
  }
  return t;
}

void ControlPlane::publish_status() {
  Status s;
  s.policy = policy_name(state_.policy.kind);
  s.generation = generation_;
  s.policy_errors = policy_errors_;
  s.ranks = applied_ranks_;
  if (cluster_) {
    const json c = cluster_status();
    MetricsCluster m;
    m.connected = c.value("connected", false);
    m.is_leader = c.value("is_leader", false);
    m.store_revision = c.value("store_revision", int64_t{0});
    m.applied_revision = applied_revision_;
    m.apply_errors = cluster_apply_errors_;
    m.write_errors = c.value("write_errors", uint64_t{0});
    m.watch_restarts = c.value("watch_restarts", uint64_t{0});
    s.cluster = m;
  }
  std::lock_guard<std::mutex> lock(status_mutex_);
  status_ = std::move(s);
}

MetricsView ControlPlane::metrics_view() {
  MetricsView v;
  // The counters and the jobs on one side of any commit that gave a slot to
  // a new job (totals_and_snapshot).
  std::vector<JobEntry> jobs;
  std::vector<SlotInfo> slots;
  std::vector<JobTelemetry> telemetry;  // read with the jobs: a slot reused in between must not mix them
  v.totals = totals_and_snapshot(true, [&](const Totals&, const Snapshot& snap) {
    jobs = snap.jobs;
    slots.clear();
    telemetry.clear();
    for (const JobEntry& j : snap.jobs) {
      slots.push_back(snap.slots[j.slot]);
      // The lcore's telemetry counters are relaxed atomics: readable from here.
      telemetry.push_back(dataplane_.job_telemetry(j.slot));
    }
  });
  Status status;
  {
    std::lock_guard<std::mutex> lock(status_mutex_);
    status = status_;
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobEntry& e = jobs[i];
    MetricsJob j;
    j.id = e.id;
    j.name = e.name;
    j.rank = e.rank;
    j.position = static_cast<uint32_t>(i);
    for (unsigned d = 0; d < 2; ++d) j.cls[d] = slots[i].cls[d];
    j.eff_rank = {e.rank, e.rank};
    if (auto it = status.ranks.find(e.id); it != status.ranks.end())
      j.eff_rank = {it->second.push_rank, it->second.pull_rank};
    if (e.slot < v.totals.jobs.size()) j.counters = v.totals.jobs[e.slot];
    j.telemetry = telemetry[i];
    v.jobs.push_back(std::move(j));
  }
  v.version = PSGATE_VERSION;
  v.policy = status.policy;
  v.generation = status.generation;
  v.policy_errors = status.policy_errors;
  v.cluster = status.cluster;
  v.uptime_s = static_cast<double>(monotonic_ns() - started_ns_) / 1e9;
  v.start_time_unix_s = static_cast<double>(started_unix_ns_) / 1e9;
  return v;
}

}  // namespace psgate
