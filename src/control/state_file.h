// SPDX-License-Identifier: BSD-3-Clause
// The state file ([control] state): every change accepted over the socket,
// i.e. the jobs (rules, ranks, progress), the policy and the live class and
// shaper settings, so that a restart resumes where the operator left off.
// The control plane writes it before it publishes a change (control_plane.h)
// and reads it once at start-up.
//
// Rules live apart from the rest, so that no change rewrites 100,000
// rules: each job's match rules are in a file of their own under
// <state>.rules/, written once when the job is added and never changed (a job
// is immutable once added); the state file names that file and holds
// everything else: ids, names, ranks, progress, policers, the policy and the
// class and shaper settings. Every change rewrites the state file (a few tens
// of kilobytes with a thousand jobs); an added job also writes its rules file
// first. The state file's atomic replacement is the commit point: a rules
// file no state file names (a crash between the two, or a removed job) is
// never read, and is removed at the next start or change.
//
// State file, version 3 (1 and 2, with every job's rules inline as "match",
// are still read; 1 also without "ports": its classes and shapers are the
// config's):
//   {"version": 3, "rules_serial": N,
//    "jobs": [{"id", "name", "rank", "rules": "job-<id>.<serial>.json",
//              "police_bps"?, "police_burst_bytes"?,            bit/s, bytes
//              "progress_fraction"?, "progress_iteration"?, "progress_batch"?}, ...],
//    "policy": {"name", "interval_ns", "rotate_on": "time" | "iteration"},
//    "ports": {"wire"|"host": {"shaper_bytes_per_sec", "shaper_burst_bytes",
//              "classes": [{"cap_bytes_per_sec", "cap_burst_bytes", "floor_bytes_per_sec",
//                           "floor_burst_bytes", "ecn_threshold", "dscp"}, ...]}},
//    "file": {"policy": {...}, "ports": {...}}?,
//    "cluster_ranks": [[id, pull_rank, push_rank], ...]?,
//    "policy_position": {"top": id, "since_unix_ns": N}?}
// "file" is what the configuration file itself said of those settings when
// the state was written (as "policy" and "ports"; absent in files written
// before psgate recorded it): a start takes what the file changed since
// (apply_file_changes, config/reload.h), so an edit followed by a restart
// is not silently overridden by the saved values.
// "cluster_ranks" (cluster mode; absent in files written before psgate kept
// them, and where none were in force) are the ranks the cluster applied, by
// job id (ControlState::cluster_ranks): a gateway restarted while the store
// is unreachable forwards on them, as the other gateways keep doing, not on
// a ranking of its own (the plain order, under a policy that is not static).
// "policy_position" (round-robin, single-host; absent in files written before
// psgate kept it) is the job round-robin put on top and when its turn began
// (wall clock): a restart goes on with that job's turn, rather than with the
// first job's and a new interval, which a gateway restarted more often than
// the interval would otherwise give the first job for good.
// (0 = none; dscp -1 = keep.) A rules file: {"job": id, "match": ["rule", ...]}.
// "rules_serial" numbers the next rules file, so a name is never reused
// while a state file may name it. Jobs are listed in the order they were
// added; reading them back adds them in that order, so rule precedence
// (older jobs' rules first) and rank ties (older first) hold across a restart.
//
// Defined one part a file: state_read.cc (read_state_file: every version's
// JSON and the rules files it names; resume_policy_state), state_render.cc
// (state_file_text, StateTextRenderer), state_checks.cc (check_saved_state,
// take_file_changes, config_jobs_unlike_state), state_path.cc
// (check_state_path and its halves), rules_files.cc (the rules files'
// directory, names, serials and text), state_housekeeping.cc (temporaries
// and rules files no job names, removed or set aside), durable_write.cc
// (write_state_text, write_rules_file(s), sync_directory,
// make_directories_durably).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "config/reload.h"    // FileSettings
#include "psgate/counters.h"  // kPortCount
#include "psgate/job_registry.h"
#include "psgate/policy.h"
#include "psgate/port_live.h"
#include "psgate/result.h"

namespace psgate {

// Round-robin's position as the state file keeps it (PolicyState holds it
// on the control thread's monotonic clock, which a restart does not carry).
struct PolicyPosition {
  uint32_t top_id = 0;
  uint64_t since_unix_ns = 0;  // when the top job's turn began
  bool operator==(const PolicyPosition&) const = default;
};

// Whether the state file keeps round-robin's position under `policy`:
// rotation on time with an interval of 1 s or more. A shorter turn is over
// before a restart is (and would be a write of the file per rotation, up to
// a thousand a second); a turn on iterations ends at the first iteration the
// restarted data plane counts.
inline bool persists_position(const PolicyParams& policy) {
  return policy.kind == PolicyKind::kRoundRobin && policy.rotate_on == RotateOn::kTime &&
         policy.interval_ns >= 1'000'000'000;
}

// The PolicyState a start resumes `position` with at `now_ns` (the control
// thread's clock), the wall clock then being `now_unix_ns`: that job on top
// (re-anchored by the policy's first evaluation, or the next one still there
// if it left), its turn begun as long ago as the file says, at most one
// interval (a gateway down for longer rotates once, at its first
// evaluation) and never in the future (a wall clock set back).
PolicyState resume_policy_state(const PolicyPosition& position, uint64_t interval_ns, uint64_t now_ns,
                                uint64_t now_unix_ns);

struct SavedState {
  JobRegistry jobs;
  PolicyParams policy;
  std::optional<std::array<PortLive, kPortCount>> live;                 // absent in a version 1 file
  uint64_t rules_serial = 0;                                            // the next rules file's number
  std::string text;                                                     // the file as read
  std::optional<FileSettings> file;                                     // the config file's settings when written
  std::optional<std::unordered_map<uint32_t, JobRanks>> cluster_ranks;  // the cluster's ranks in force when written
  std::optional<PolicyPosition> position;                               // round-robin's, when written
};

// The directory of the rules files of the state file at `state_path`.
std::string rules_dir_path(const std::string& state_path);
// A job's rules file: its name (job-<id>.<serial>.json) and its text.
std::string rules_file_name(uint32_t job_id, uint64_t serial);
// Rules files are numbered below this (10^18: more changes than a gateway
// makes). A state file that would count on from here is refused: counting
// on would wrap and reuse a name, and a removed job's file, deleted a minute
// later, would take a live job's rules with it.
inline constexpr uint64_t kRulesSerialLimit = 1'000'000'000'000'000'000;
// The serial of a name rules_file_name wrote (below kRulesSerialLimit); none
// for any other name.
std::optional<uint64_t> rules_file_serial(const std::string& name);
// One past the largest serial of the rules files directly in `dir` (0: none).
uint64_t next_rules_serial_in(const std::string& dir);

// Removes the temporaries of the state file at `path` (PATH.tmp.XXXXXX) a
// crash left between a write and its rename. Only with the file's lock held.
void remove_state_temporaries(const std::string& path);
std::string rules_file_text(const JobRecord& job);

// Why read_state_file failed: the file or one of its rules files could not
// be had (permissions, I/O: it may be a sound copy, to be kept where it is),
// or it was read and does not load (cut short, hand-edited, too large, more
// jobs than max_jobs, a rules file missing, too large or wrong): a copy no
// restart will load.
enum class StateReadFailure { kCannotRead, kDoesNotLoad };

// std::nullopt when no file exists at `path` (start from the config's jobs).
// A file that exists but cannot be read, or any problem in it (including
// class settings for another classes.count than `class_count`), is an error
// and nothing of it is loaded; `failure`, when given, says which of the two.
Result<std::optional<SavedState>> read_state_file(const std::string& path, uint32_t max_jobs, unsigned class_count,
                                                  StateReadFailure* failure = nullptr);

// A start's view of a saved state read with the config file's record
// (saved.file): what the file changed since is the file's
// (apply_file_changes); then a class the merge leaves failing the loader's
// checks because of the file (a saved floor above the file's new cap, a
// saved ECN threshold at or above the file's new depth) is taken from the
// file whole, and so is a port whose floors no longer fit the shaper the
// file changed: the file alone passed them. A saved class or port that
// fails by itself (a hand edit) is left as it is, for check_saved_state to
// refuse.
// `now`: the config file's settings (compiled). Returns the keys taken from
// the file; nothing without a record.
std::vector<std::string> take_file_changes(SavedState& saved, const FileSettings& now, const ConfigSpec& config);

// How the config's [[jobs]] differ from a state file's jobs, which a start
// uses instead ("" when they agree): an edit of [[jobs]] a start would not
// apply, said at start and by --check. Ranks are left out: the socket's
// `order` changes them, and the state's are the ones meant.
std::string config_jobs_unlike_state(const std::vector<JobSpec>& config_jobs, const JobRegistry& state_jobs);

// What a state file restores must pass the loader's own checks (check_class,
// check_shaper, check_job in config.h) against `config` (the class depths):
// a hand-edited file is no way around them. The error names the file, the
// value and the problem; the daemon refuses to start (and --check fails).
Result<bool> check_saved_state(const SavedState& saved, const ConfigSpec& config);

// Whether `path` can serve as the state file: empty (no persistence), or a
// regular file or nothing in a directory this process can write. A directory,
// or a directory this process may not write, is an error naming the path.
// The two halves: what is at the path (check_state_file_kind: a directory, a
// symbolic link, anything but a regular file is refused) and whether this
// process may write its directory (check_state_dir_writable). A state file
// on a filesystem mounted read-only is no error but a value of false: a disk
// condition, as a full one is, not a configuration's; the gateway forwards on
// the state it reads, refuses changes and retries the write (health
// degraded) until the filesystem is writable again. A read-only directory
// without a state file is refused like any unwritable one.
Result<bool> check_state_path(const std::string& path);
Result<bool> check_state_file_kind(const std::string& path);
Result<bool> check_state_dir_writable(const std::string& path);

// The state file's text for this state (version 3). Every job must have its
// rules file (JobRecord::rules_file).
std::string state_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t rules_serial,
                            const FileSettings* file = nullptr,
                            const std::unordered_map<uint32_t, JobRanks>* cluster_ranks = nullptr,
                            const PolicyPosition* position = nullptr);

// state_file_text's text, byte for byte, for one state after another: each
// job's line is kept from the previous render and rendered again only when
// a field it shows differs (compared by value, so no caller has to say what
// changed, and a render whose text is then not written leaves nothing
// stale). A re-rank re-renders one line, a policy's re-rank a few: with
// 1,000 jobs a full render with nlohmann took ~4.3 ms of a re-rank's
// ~5.5 ms (perf/control-scale, 2 vCPUs), this takes a fraction of one.
class StateTextRenderer {
 public:
  std::string render(const JobRegistry& jobs, const PolicyParams& policy, const std::array<PortLive, kPortCount>& live,
                     uint64_t rules_serial, const FileSettings* file = nullptr,
                     const std::unordered_map<uint32_t, JobRanks>* cluster_ranks = nullptr,
                     const PolicyPosition* position = nullptr);

 private:
  // The fields a job's line shows (its id is the key), and the line.
  struct JobLine {
    std::string name;
    std::string rules_file;
    std::optional<RateSpec> police;
    uint32_t rank = 0;
    JobProgress progress;
    std::string text;
    uint64_t render = 0;  // the last render that listed the job
    bool renders(const JobRecord& job) const;
  };
  std::unordered_map<uint32_t, JobLine> lines_;
  uint64_t renders_ = 0;
  size_t text_per_job_ = 128;  // bytes, from the last render: the text's size is reserved up front
  std::array<PortLive, kPortCount> ports_;
  std::optional<std::string> ports_text_;  // ports_ rendered
  std::optional<FileSettings> file_;
  std::string file_text_;  // file_ rendered (with its key), empty for none
  // The cluster's ranks rendered (with their key), empty for none: a
  // policy's re-rank changes only them and a few jobs' lines.
  std::optional<std::unordered_map<uint32_t, JobRanks>> cluster_ranks_;
  std::string cluster_ranks_text_;
};

// Replaces the file at `path` with `text` atomically and durably: write a
// temporary, fsync it, rename it over the file, fsync the directory. A crash
// leaves the old file or the new one, never half of one; on an error the old
// file is intact (the temporary is removed). Past the rename the new file is
// the one a restart reads, so a failing directory sync does not undo the
// change: it is reported in `warning`, if given, and the write succeeds.
Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning = nullptr);

// A rules file: written to a temporary, fsynced and renamed into `dir`
// (created if missing), without syncing the directory; sync_directory(dir)
// once after a batch of them, before the state file that names them.
Result<bool> write_rules_file(const std::string& dir, const std::string& name, const std::string& text);
// Many rules files (name, text) at once, made durable together (one
// syncfs, not a sync each); the directory is still to be synced.
Result<bool> write_rules_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files);
Result<bool> sync_directory(const std::string& dir);
// Makes `dir` and its missing parents, each synced into its parent (best
// effort: errors are left to the write that follows). Nothing if it exists.
void make_directories_durably(const std::string& dir);

// Removes the files in `dir` that no job of `jobs` names (best effort: a
// file left over is never read).
void remove_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs);
// For a start without a state file: the rules files in `dir` no job of
// `jobs` names may be all that is left of a state file lost or restored
// out of order, so they are moved into a new directory `dir`/`aside`
// rather than removed, durably; `aside` gets a suffix if it exists (the
// next start removes none of them: it removes only files directly in `dir`).
struct RulesSetAside {
  size_t moved = 0;       // files moved
  std::string directory;  // into this directory (empty: none was needed, or none could be made)
  std::string error;      // why some (or all) could not be moved; empty: none
};
RulesSetAside set_aside_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs, const std::string& aside);

}  // namespace psgate
