// SPDX-License-Identifier: BSD-3-Clause
// The state file ([control] state): every change accepted over the socket,
// i.e. the jobs (rules, ranks, progress), the policy and the live class and
// shaper settings, so that a restart resumes where the operator left off.
// The control plane writes it before it publishes a change (control_plane.h)
// and reads it once at start-up.
//
// Two files, so that a re-rank does not rewrite 100,000 rules: the state
// file itself, rewritten when jobs are added or removed, and beside it the
// ranks file (<state>.ranks), rewritten by every other change: ranks,
// progress, policy, classes and shapers, all of them, for one "revision" of
// the state file. Each file is replaced atomically; a ranks file whose "base"
// is not the state file's revision predates the last state file and is
// ignored (a crash between the two writes leaves exactly that).
//
// State file, version 3 (1 and 2, without "revision", are still read; 1 also
// without "ports": its classes and shapers are the config's):
//   {"version": 3, "revision": N,
//    "jobs": [{"id", "name", "rank", "match": ["rule", ...],
//              "police_bps"?, "police_burst_bytes"?,            bit/s, bytes
//              "progress_fraction"?, "progress_iteration"?, "progress_batch"?}, ...],
//    "policy": {"name", "interval_ns", "rotate_on": "time" | "iteration"},
//    "ports": {"wire"|"host": {"shaper_bytes_per_sec", "shaper_burst_bytes",
//              "classes": [{"cap_bytes_per_sec", "cap_burst_bytes", "floor_bytes_per_sec",
//                           "floor_burst_bytes", "ecn_threshold", "dscp"}, ...]}}}
// (0 = none; dscp -1 = keep.) Jobs are listed in the order they were added;
// reading them back adds them in that order, so rule precedence (older jobs'
// rules first) and rank ties (older first) hold across a restart.
//
// Ranks file, version 1:
//   {"version": 1, "base": N,
//    "jobs": [{"id", "rank", "progress_fraction"?, "progress_iteration"?, "progress_batch"?}, ...],
//    "policy": {...}, "ports": {...}}            as in the state file
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "psgate/counters.h"  // kPortCount
#include "psgate/job_registry.h"
#include "psgate/policy.h"
#include "psgate/port_live.h"
#include "psgate/result.h"

namespace psgate {

struct SavedState {
  JobRegistry jobs;
  PolicyParams policy;
  std::optional<std::array<PortLive, kPortCount>> live;  // absent in a version 1 file
  uint64_t revision = 0;                                 // the state file's (0 before version 3)
  bool ranks_applied = false;                            // a ranks file of this revision was read
};

// Where the ranks file of the state file at `state_path` is.
std::string ranks_file_path(const std::string& state_path);

// std::nullopt when no file exists at `path` (start from the config's jobs).
// A file that exists but cannot be read, or any problem in it (including
// class settings for another classes.count than `class_count`), is an error
// and nothing of it is loaded.
Result<std::optional<SavedState>> read_state_file(const std::string& path, uint32_t max_jobs, unsigned class_count);

// Whether `path` can serve as the state file: empty (no persistence), or a
// regular file or nothing in a directory this process can write. A directory,
// or a read-only directory, is an error naming the path.
Result<bool> check_state_path(const std::string& path);

// The state file's text for this state (version 3), as revision `revision`.
std::string state_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t revision);
// The ranks file's text for this state, over the state file of `revision`.
std::string ranks_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live, uint64_t revision);

// Replaces the file at `path` with `text` atomically and durably: write a
// temporary, fsync it, rename it over the file, fsync the directory. A crash
// leaves the old file or the new one, never half of one; on an error the old
// file is intact (the temporary is removed). Past the rename the new file is
// the one a restart reads, so a failing directory sync does not undo the
// change: it is reported in `warning`, if given, and the write succeeds.
Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning = nullptr);

}  // namespace psgate
