// SPDX-License-Identifier: BSD-3-Clause
// The control operations: every change an operator or a scheduler can make.
// The commands come from one table (control_commands.h: name, arguments,
// help, parser); each parsed request type has its handler here, apply().
// See docs/control-protocol.md. Defined in src/control/: control_plane.cc
// (the dispatch, commit, the tick), control_apply.cc (the handlers) and
// control_cluster.cc (cluster mode).
//
// All or nothing: a handler is const. It reads the state in force and returns
// either a read's reply or a Candidate, a whole new ControlState; only
// commit() makes a candidate current, in this order: compile its snapshot
// (may fail) -> write the state file durably (may fail) -> publish the
// snapshot -> make it the state in force. A failure before the publish leaves
// memory, the data plane and the disk as they were, and the command is
// refused; so an acknowledged change is on disk, and a refused one changed
// nothing. Policy re-ranks (tick) go through commit() too.
//
// Threading: handle() and tick() run on the control thread only. The other
// non-lcore readers (stats printing, DPDK telemetry) use totals_locked() and
// with_snapshot(). Neither lock they take is held while anything waits: the
// snapshot's is private to SnapshotPublisher, which releases it before
// waiting for the lcores (snapshot.h); the baselines' guards a copy only.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/cluster_link.h"
#include "psgate/config.h"
#include "psgate/control_commands.h"  // CommandSpec: which command a line ran
#include "psgate/control_request.h"   // the typed requests
#include "psgate/dataplane.h"
#include "psgate/job_registry.h"
#include "psgate/policy.h"
#include "psgate/prometheus.h"
#include "psgate/result.h"
#include "psgate/retry_backoff.h"
#include "psgate/snapshot.h"

#include "config/compile.h"  // CompileReport
#include "control/rule_merger.h"
#include "control/state_file.h"  // StateTextRenderer

namespace psgate {

// Everything a change can change. A handler builds a new one from a copy;
// commit() makes it the one in force.
// A directory's identity (device, inode) and when its entries last changed.
struct DirectoryId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  uint64_t mtime_ns = 0;
  bool operator==(const DirectoryId&) const = default;
  bool same_directory(const DirectoryId& o) const { return dev == o.dev && ino == o.ino; }
};

struct ControlState {
  JobRegistry jobs;
  PolicyParams policy;
  PolicyState policy_state;
  // Shaper and class parameters in force, per port: compiled from the config
  // at start (or restored from the state file), then changed by `class` and
  // `shaper` (in bytes/s, as the snapshot carries them, so a change keeps
  // every value it does not name).
  std::array<PortLive, kPortCount> live;
  // Cluster mode with a non-static policy: the ranks the cluster's policy
  // leader computed (by job id), in force instead of a local evaluation
  // (static: the store's order as positions, apply_view). Kept in the state
  // file, so that a restart while the store is unreachable ranks on them.
  std::optional<std::unordered_map<uint32_t, JobRanks>> cluster_ranks;
  // The config file as last read, at start or by `reload`, which applies what
  // changed in the file since (config/reload.h). Never null.
  std::shared_ptr<const ConfigSpec> config_file;
};

class ControlPlane {
 public:
  // Loads the state file if `config.control.state` names one that exists
  // (jobs, order and policy come from it then); otherwise starts from the
  // config's [[jobs]]. A corrupt state file is an error: nothing is loaded.
  static Result<std::unique_ptr<ControlPlane>> create(Dataplane& dataplane, const ConfigSpec& config);

  // Cluster mode (docs/cluster.md): follow the store through `link` (set
  // before start(); it outlives this). Jobs, order, policy and progress then
  // come from the store, and the socket's commands that change them write to
  // the store instead; class and shaper settings stay per gateway.
  void follow_cluster(ClusterLink* link, const ClusterSpec& spec);
  // The state file runs without its lock (StateLock's warning): health and
  // the cluster report say degraded, naming it as the state file's error.
  void note_state_unlocked(const std::string& why) {
    state_unlocked_ = "state file " + config_.control.state + ": " + why + " (restart psgate once it can be locked)";
  }

  // Publishes the initial job set (the state file's, if any). `stop_asked`
  // (may be empty) is asked between the rule partitions it compiles: a stop
  // during the compile of 100,000 rules (seconds) ends it there, with an
  // error that starts with kCompileStopped; nothing is published or written
  // then. The compile's figures are logged.
  Result<bool> start(std::function<bool()> stop_asked = {});
  // The gateway stops: no background rule merge starts from now on, and
  // one that runs (which the stop must wait for) is no longer run at the
  // lowest CPU priority (RuleMerger::stop); a change whose rules are being
  // compiled on the control thread (a jobs.load of thousands of rules) gives
  // up at its next rule partition and is refused (kCompileStopped), and so
  // is every later one that needs a partition built. Any thread, before the
  // control server stops.
  void stop_background_work() {
    stopping_.store(true, std::memory_order_relaxed);
    merger_.stop();
  }
  // A start that fails after start() (the control socket or the metrics
  // port taken): a state file start() wrote first, from the config, with no
  // change since, records a state that never served, and would make the
  // next start ignore the config's [[jobs]], edited meanwhile or not. It
  // goes, with the rules files it names. Single-host mode only: a cluster
  // gateway's file is its copy of the store's view.
  void withdraw_unserved_state();

  // One request line -> one reply object ({"ok": ...}): the control
  // server's entry point. `reply_wanted` false: nobody can read the reply (a
  // client that hung up): a change is still made, but a request that only
  // reads (health, jobs.list, stats, config, cluster) is not run at all, and
  // null is returned: a script that floods such requests and closes would
  // otherwise hold the control thread for each of them, for nobody.
  // `ran`, when given, is set to the command whose handler ran (nullptr for
  // a line that did not parse, or a read nobody could see), so a caller
  // learns what was asked without parsing the line again.
  nlohmann::json handle_line(std::string_view line, bool reply_wanted = true, const CommandSpec** ran = nullptr);
  // The same for a request built in-process (tests): serialised and handled
  // as the line a client would send.
  nlohmann::json handle(const nlohmann::json& request);
  // The control server's entry point, as handle_line, except that a change
  // forwarded to the cluster store does not hold the control thread while
  // the store takes it (up to about a second per member tried) and it comes
  // back to this gateway (up to 2 s more): every other client, the tick and
  // the service watchdog waited meanwhile. Returns the reply, or nothing:
  // the reply is deferred, and take_deferred_replies() hands it out under
  // `token` (the caller's name for the client). Changes go to the store one
  // at a time, in the order asked: while one is out, a change another
  // client asks for waits (its line is handled once that one is answered,
  // on the state it left); reads are answered at once. The caller reads
  // nothing more from that client until it has the reply, so that the
  // client's own requests stay in order.
  std::optional<nlohmann::json> handle_line_deferred(std::string_view line, uint64_t token, bool reply_wanted = true,
                                                     const CommandSpec** ran = nullptr);
  struct DeferredReply {
    uint64_t token = 0;
    nlohmann::json reply;  // null: a reply nobody can read (reply_wanted false)
  };
  // The deferred replies now ready: their writes ended and, written, are
  // in force here (or were not within 2 s: said so). Control thread; cheap
  // when none is pending. Never throws: a failure is that request's error
  // reply, so no client waits for ever.
  std::vector<DeferredReply> take_deferred_replies(uint64_t now_ns);
  // Readable when a deferred write has ended (an eventfd, -1 outside
  // cluster mode): the control server waits on it with the rest, and
  // drains it whenever it is reported.
  int deferred_fd() const { return store_writes_.done_fd; }
  // The control server stops: the replies still owed, each once. A write
  // out is waited for up to `wait_ns` (its outcome, written or not, is the
  // reply), then cancelled (the reply says it may or may not have been
  // written); changes waiting behind it were never sent. Nothing is left
  // running: a later stop of the link cannot pull it from under a write.
  std::vector<DeferredReply> end_store_writes(uint64_t wait_ns);
  // As end_store_writes(0), for a plane whose server never ended them.
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;
  // Periodic work on the control thread: policy evaluation; in cluster mode,
  // applying what the store says and reporting this gateway to it.
  void tick(uint64_t now_ns);
  // Cluster mode: the store has news (ClusterLink::wake_fd() was readable):
  // apply it now rather than on the next tick.
  void wake(uint64_t now_ns) {
    if (!cluster_) return;
    follow_step(now_ns);
  }
  // Cluster mode: the store revision whose jobs, order and policy are in force.
  int64_t applied_revision() const { return applied_revision_; }

  size_t job_count() const { return state_.jobs.size(); }
  // Policy re-ranks that could not be applied (their snapshot failed to
  // compile or the state file could not be written): the previous order stays.
  uint64_t policy_errors() const { return policy_errors_; }

  // Test seams: how the state file is written and how a snapshot is compiled,
  // so tests can make either fail on demand. Defaults: write_state_text and
  // compile_snapshot.
  using StateWriter = std::function<Result<bool>(const std::string& path, const std::string& text)>;
  using SnapshotBuilder = std::function<Result<std::unique_ptr<Snapshot>>(
      const ConfigSpec&, const std::vector<RankedJob>&, const std::array<PortLive, kPortCount>&, uint32_t,
      const Snapshot*)>;
  void set_io_for_testing(StateWriter writer, SnapshotBuilder builder);

  // Counters with per-job baselines applied (a reused job slot starts from zero).
  Totals totals_locked(bool with_histograms);
  // The counters and fn(snapshot) from one side of any commit that gave a
  // slot to a new job: read from threads other than the control thread, the
  // two could otherwise straddle it, and a new job in a reused slot would be
  // shown its predecessor's counts (and go backwards at the next read). fn
  // (counters, snapshot) may be called more than once: the last call is of
  // the pair that match (after a few tries, of the last read as it is).
  // fn must not take other locks, as with_snapshot's. Returns the counters.
  Totals totals_and_snapshot(bool with_histograms, const std::function<void(const Totals&, const Snapshot&)>& fn);
  // Calls fn(snapshot) with the snapshot pinned. fn must not call
  // with_snapshot again (SnapshotPublisher::read is not recursive).
  void with_snapshot(const std::function<void(const Snapshot&)>& fn);
  // Everything GET /metrics shows, from any thread (the metrics server's):
  // the counters as totals_locked() reads them, the jobs from the snapshot in
  // force, and what only the control thread knows (policy, effective ranks,
  // cluster link) from the copy it leaves after each change and tick.
  MetricsView metrics_view();

 private:
  ControlPlane(Dataplane& dataplane, const ConfigSpec& config, ControlState initial);

  // A change a handler proposes: the whole state it wants in force, and its
  // reply, built once that state is in force (commit() succeeded).
  struct Candidate {
    ControlState next;
    std::function<nlohmann::json(const ControlPlane&)> reply;
    // Cluster mode: store writes made with the change's own (the removal of
    // a job document that never parsed, which no state change can name).
    StoreWrite store_extra = {};
    // Cluster mode: the command named the policy, written to P/policy even
    // where this gateway runs it already (store_write's policy_named).
    bool names_policy = false;
  };
  // A read's reply, or a candidate for commit().
  using Outcome = std::variant<nlohmann::json, Candidate>;

  // The operations, one per command, on requests parse_control_request has
  // already checked; they check only what needs the current state. Const:
  // a handler cannot change anything; commit() applies what it returns.
  Result<Outcome> apply(const HealthRequest&) const;
  Result<Outcome> apply(const JobsListRequest&) const;
  Result<Outcome> apply(const JobsAddRequest&) const;
  Result<Outcome> apply(const JobsLoadRequest&) const;
  Result<Outcome> apply(const JobsRemoveRequest&) const;
  Result<Outcome> apply(const OrderRequest&) const;
  Result<Outcome> apply(const RankRequest&) const;
  Result<Outcome> apply(const ClassSetRequest&) const;
  Result<Outcome> apply(const ShaperSetRequest&) const;
  Result<Outcome> apply(const ProgressRequest&) const;
  Result<Outcome> apply(const PolicyRequest&) const;
  Result<Outcome> apply(const StatsRequest&) const;
  Result<Outcome> apply(const ConfigRequest&) const;
  Result<Outcome> apply(const ClusterRequest&) const;
  Result<Outcome> apply(const ReloadRequest&) const;

  // One request line handled up to the store: the reply's envelope, and
  // the reply, or the change to write to the store (cluster mode).
  struct Handled {
    std::optional<nlohmann::json> echo_id;
    std::string deprecation;
    Result<nlohmann::json> reply = Result<nlohmann::json>::failure("");
    std::optional<Candidate> for_store;
    bool unseen = false;  // a read nobody can see: not run, no reply (null)
    bool queued = false;  // a change while a store write is out: not run yet
  };
  // `queue_changes`: a change (not a read) while a store write is out or
  // others wait is not run but marked `queued`.
  Handled handle_request(std::string_view line, bool reply_wanted, const CommandSpec** ran, bool queue_changes);
  // The reply object: {"ok", "result" | "error", "id", "deprecated"}.
  static nlohmann::json reply_object(Handled& h);

  // Cluster mode. A change a handler proposed, written to the store; the
  // reply once this gateway has applied it (or says it has not yet).
  // Blocks the calling thread (handle_line's way; the control server's
  // clients go through handle_line_deferred).
  Result<nlohmann::json> forward_to_cluster(Candidate& change);
  // What a change writes to the store (empty: nothing), or why nothing can
  // be written (the store unreachable).
  Result<StoreWrite> store_write_of(const Candidate& change) const;
  // Where a write stood against what this gateway applied when it was sent.
  struct WriteStart {
    int64_t applied_revision = 0;
    uint64_t applied_epoch = 0;
  };
  WriteStart write_start() const { return WriteStart{applied_revision_, applied_epoch_}; }
  // How long a written change's reply waits for it to be in force here.
  static constexpr uint64_t kWrittenReplyWaitNs = 2'000'000'000;
  // Whether the store's `revision`, written after `at`, is in force here.
  bool in_force(const WriteStart& at, int64_t revision) const;
  // A written change's reply: the change's own once in force here.
  nlohmann::json written_reply(Candidate& change, int64_t revision, bool in_force);
  // handle_line_deferred's store writes: the one out (on its own thread),
  // the lines waiting for it, the replies ready (control_store_writes.cc).
  struct StoreWrites {
    int done_fd = -1;  // the write's thread makes it readable as it ends
    struct InFlight {
      uint64_t token = 0;
      Handled handled;
      WriteStart at;
      // The write's thread: sets `revision`, then makes done_fd readable
      // (in that order: the control thread woken by it finds the result).
      std::thread thread;
      std::future<Result<int64_t>> revision;
      std::optional<int64_t> written;  // the write's revision, once taken
      uint64_t until_ns = 0;           // written: replied to by then, in force or not
    };
    std::optional<InFlight> in_flight;
    struct Waiting {
      uint64_t token;
      std::string line;
      bool reply_wanted;
    };
    std::deque<Waiting> waiting;
    std::vector<DeferredReply> ready;
  };
  // A handled line's change sent to the store on a thread of its own, or
  // its reply made ready at once (nothing to write, the store unreachable).
  void send_store_write(uint64_t token, Handled handled);
  // One step of take_deferred_replies: false when nothing more can move now.
  bool advance_store_writes(uint64_t now_ns);
  // The write's result taken (ready) and its thread joined.
  Result<int64_t> collect_store_write(StoreWrites::InFlight& out);
  StoreWrites store_writes_;
  // Takes the store's newest view, if any, and applies it: false if none.
  bool follow_step(uint64_t now_ns);
  Result<bool> apply_view(const ClusterView& view, uint64_t now_ns);
  // After a view applied: whether it emptied this gateway (store_emptied_).
  void note_store_emptied(const ClusterView& view, size_t jobs_before);
  void report_to_cluster(uint64_t now_ns);
  void tick_policy(uint64_t now_ns);
  // Frees the slots of removed jobs (JobRegistry::draining_slots) whose
  // grace period is over and whose packets have all left or been dropped.
  void release_drained_slots();
  nlohmann::json cluster_status() const;
  // Why this gateway does not follow the store as it should, or "": the
  // store unreachable, its view not applied, a document held, no
  // registration. Health is degraded meanwhile.
  std::string cluster_trouble() const;
  // The same, given cluster_->status() (which the caller read already).
  std::string cluster_trouble(const nlohmann::json& store_status) const;
  // Why the store's document for job `id` never parsed, where one blocks
  // that id (cluster mode: ClusterView::refused_jobs); null otherwise.
  const std::string* refused_job_document(uint32_t id) const;

  // The one way a state becomes the state in force (see the top of this file).
  // Whether a state file that cannot be written refuses the change. Always,
  // but in cluster mode for what the store holds (its view, the retry, a
  // rule merge): the store is the record of those; and for the state in
  // force while its file is unwritten: the start's, read from the state
  // file or the config, which are its record (a full disk at boot must not
  // keep the wire down), its retry, and the policy's re-ranks of it, which
  // change nothing the file holds. Local settings (class.set, shaper.set,
  // reload) have only the file, in either mode.
  enum class IfUnsaved { kRefuse, kPublishWhatTheStoreHolds, kPublishStateInForce };
  Result<bool> commit(ControlState next, uint64_t now_ns, IfUnsaved if_unsaved = IfUnsaved::kRefuse);
  // commit()'s step 2: the rules files of `next`'s new jobs and the state
  // file (its `text`), numbering rules files from `rules_serial` on.
  Result<bool> persist(ControlState& next, std::string& text, uint64_t& rules_serial);
  // Effective ranks of `state`'s jobs under its policy, by job id; advances
  // `policy_state` as the policy's evaluation does.
  std::unordered_map<uint32_t, JobRanks> effective_ranks(const ControlState& state, PolicyState& policy_state,
                                                         uint64_t now_ns) const;
  // The job's own telemetry: none while the running snapshot has another
  // job in its slot (a slot reused: the previous job's until the scheduler
  // takes the snapshot that names this one and resets it).
  JobTelemetry own_telemetry(const JobRecord& job) const;
  nlohmann::json job_json(const JobRecord& job, const Snapshot& snap) const;
  nlohmann::json job_json(uint32_t id) const;
  nlohmann::json policy_json() const;
  nlohmann::json rules_json() const;
  Totals adjusted(Totals totals) const;

  Dataplane& dataplane_;
  ConfigSpec config_;   // as loaded; live class and shaper changes are in state_.live
  ControlState state_;  // in force: changed by commit() only (and tick()'s policy clock)
  std::unordered_map<uint32_t, JobRanks> applied_ranks_;
  bool published_ = false;      // start() has published this control plane's first snapshot
  std::string persisted_text_;  // the state file's content as last written ("" before the first write)
  // The rules directory as last read or written: another one there, or
  // none, or a change to it (its mtime: a file deleted), and persist()
  // writes the rules files that are missing again (watch_state_on_disk
  // looks each second).
  std::optional<DirectoryId> rules_dir_id_;
  uint64_t state_watch_ns_ = 0;  // watch_state_on_disk's next look
  // The state file's record of the config file's settings, compiled once
  // per file read (persist() renders it at every commit, re-ranks included).
  std::shared_ptr<const ConfigSpec> file_settings_of_;
  FileSettings file_settings_;
  StateTextRenderer state_text_;    // renders it, re-rendering only the jobs that changed
  uint64_t rules_serial_ = 0;       // the next job rules file's number (state_file.h)
  bool state_was_read_ = false;     // the start's state came from the state file (else the config's)
  uint64_t state_writes_ = 0;       // commits whose state file was written (or found unchanged)
  bool start_wrote_state_ = false;  // start() wrote the state file (the first write)
  uint64_t policy_errors_ = 0;
  StateWriter write_state_;
  SnapshotBuilder build_snapshot_;
  // stop_background_work() was called (any thread), and start()'s own
  // stop (the pending stop signal, asked from the compile's TBB workers):
  // the default snapshot builder's compile gives up when either says so.
  // Relaxed: a flag that hands over no other data; a compile that misses it
  // by a moment stops at its next partition.
  std::atomic<bool> stopping_{false};
  std::function<bool()> start_stop_asked_;
  CompileReport last_compile_;        // the default builder's last compile (the control thread's)
  std::vector<JobTotals> baselines_;  // by slot: counters when the slot was assigned
  // Old rule partitions merged in the background; a finished merge waits in
  // fresh_merge_ for the next snapshot (tick() publishes one for it).
  RuleMerger merger_;
  uint64_t rules_changed_ns_ = 0;  // when a published snapshot last changed the rules
  std::shared_ptr<const MergedRules> fresh_merge_;
  ClusterLink* cluster_ = nullptr;
  std::optional<ClusterKeys> cluster_keys_;
  std::shared_ptr<const ClusterView> cluster_view_;  // the newest view taken
  int64_t applied_revision_ = 0;
  uint64_t applied_epoch_ = 0;                      // the store epoch of applied_revision_ (ClusterView::store_epoch)
  std::pair<int64_t, size_t> applied_part_{-1, 0};  // the view part (cluster_layout.h) last applied
  // A view that failed to apply is tried again after 1 s doubling to 60 s
  // while its jobs (store epoch, jobs part) stay the same, and never within
  // a second of a failure.
  struct ViewContent {
    uint64_t epoch;
    std::pair<int64_t, size_t> part;
    bool operator==(const ViewContent&) const = default;
  };
  RetryBackoff<ViewContent> apply_retry_{1'000'000'000, 60'000'000'000};
  // The view in force left jobs out for want of a slot while some drain: it
  // is applied again at each step until they are in or none drains.
  bool refused_while_draining_ = false;
  uint64_t reapply_ns_ = 0;  // not applied again before this
  uint64_t cluster_apply_errors_ = 0;
  std::string cluster_apply_error_;
  // The store went empty under this gateway: a view with no job, order,
  // policy, progress or ranks key removed every job it had (a prefix wiped
  // by `etcdctl del --prefix`, a store started anew). Followed (the store is
  // the authority), but said: health degraded with this, until the store
  // holds such a key again. "": it did not.
  std::string store_emptied_;
  // Cluster mode: why the state file could not be written ("": it was), and
  // when the tick writes it again.
  std::string state_unsaved_;
  uint64_t state_retry_ns_ = 0;
  // Why the state file could not be written for the last change, which was
  // refused ("": written since). The state in force is on disk, but the
  // next change would be refused too, so health says degraded until the
  // tick has written the state in force's file again (retry_refused_write).
  std::string state_refused_;
  // The state file's lock could not be taken at start (no space or inodes
  // for the lock file, a read-only directory): a second psgate on the same
  // file would not be noticed, so health says degraded until a restart.
  std::string state_unlocked_;
  uint64_t refused_retry_ns_ = 0;
  // What health and the cluster report call state_file_error: the state in
  // force unwritten, else the refused change's write.
  const std::string& state_file_error() const {
    return !state_unsaved_.empty() ? state_unsaved_ : !state_refused_.empty() ? state_refused_ : state_unlocked_;
  }
  void retry_refused_write(uint64_t now_ns);
  void watch_state_on_disk(uint64_t now_ns);
  // Rules files of removed jobs, and when to remove them (oldest first).
  static constexpr uint64_t kUnnamedRulesFileLifeNs = 60'000'000'000;
  std::deque<std::pair<std::string, uint64_t>> unnamed_rules_files_;
  uint64_t reported_ns_ = 0;
  // Draining slots (state_.jobs.draining_slots()) -> the grace period begun
  // when the snapshot without their job was published (begin_grace).
  std::unordered_map<uint32_t, uint64_t> slot_grace_;
  uint32_t generation_ = 1;
  uint64_t started_ns_ = 0;
  // baselines_ is written on the control thread and read by totals_locked()
  // from the others; held only while copying, never across a publish.
  std::mutex baselines_mutex_;
  // Under baselines_mutex_: raised when slots' baselines are reset for new
  // jobs (odd) and again once the snapshot naming those jobs is published
  // (even), so that a reader on another thread can tell its counters and its
  // snapshot apart by a commit (totals_and_snapshot).
  uint64_t baseline_epoch_ = 0;
  // What metrics_view() needs of the control thread's state, copied by
  // publish_status() after each commit and tick. status_mutex_ is held only
  // to copy it, in or out.
  struct Status {
    std::string policy;
    uint64_t generation = 0;
    uint64_t policy_errors = 0;
    std::unordered_map<uint32_t, JobRanks> ranks;
    std::optional<MetricsCluster> cluster;
  };
  void publish_status();
  std::mutex status_mutex_;
  Status status_;
  uint64_t started_unix_ns_ = 0;
};

uint64_t monotonic_ns();

}  // namespace psgate
