// SPDX-License-Identifier: BSD-3-Clause
// The state file ([control] state): every change accepted over the socket,
// i.e. the jobs (rules, ranks, progress), the policy and the live class and
// shaper settings, so that a restart resumes where the operator left off.
// The control plane writes it before it publishes a change (control_plane.h)
// and reads it once at start-up.
//
// Format, version 2 (version 1, without "ports", is still read: its classes
// and shapers are the config's):
//   {"version": 2,
//    "jobs": [{"id", "name", "rank", "match": ["rule", ...],
//              "police_bps"?, "police_burst_bytes"?,            bit/s, bytes
//              "progress_fraction"?, "progress_iteration"?, "progress_batch"?}, ...],
//    "policy": {"name", "interval_ns", "rotate_on": "time" | "iteration"},
//    "ports": {"wire"|"host": {"shaper_bytes_per_sec", "shaper_burst_bytes",
//              "classes": [{"cap_bytes_per_sec", "cap_burst_bytes", "floor_bytes_per_sec",
//                           "floor_burst_bytes", "ecn_threshold", "dscp"}, ...]}}}
// (0 = none; dscp -1 = keep.) Jobs are listed in rank order; reading them back
// adds them in that order, so rank ties keep their order across a restart.
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
};

// std::nullopt when no file exists at `path` (start from the config's jobs).
// A file that exists but cannot be read, or any problem in it (including
// class settings for another classes.count than `class_count`), is an error
// and nothing of it is loaded.
Result<std::optional<SavedState>> read_state_file(const std::string& path, uint32_t max_jobs, unsigned class_count);

// Whether `path` can serve as the state file: empty (no persistence), or a
// regular file or nothing in a directory this process can write. A directory,
// or a read-only directory, is an error naming the path.
Result<bool> check_state_path(const std::string& path);

// The file's text for this state (version 2).
std::string state_file_text(const JobRegistry& jobs, const PolicyParams& policy,
                            const std::array<PortLive, kPortCount>& live);

// Replaces the file at `path` with `text` atomically and durably: write a
// temporary, fsync it, rename it over the file, fsync the directory. A crash
// leaves the old file or the new one, never half of one; on an error the old
// file is intact (the temporary is removed). Past the rename the new file is
// the one a restart reads, so a failing directory sync does not undo the
// change: it is reported in `warning`, if given, and the write succeeds.
Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning = nullptr);

}  // namespace psgate
