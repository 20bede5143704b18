// SPDX-License-Identifier: BSD-3-Clause
// `psgatectl jobs load FILE`: the file's jobs, checked here with the daemon's
// own parser, and split into jobs.load requests that each fit the protocol's
// line limit (kMaxRequestBytes). Each request is all-or-nothing on the
// daemon; the file as a whole is not (see docs/control-protocol.md).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/result.h"

namespace psgatectl {

// FILE holds a JSON list of jobs, or an object whose "jobs" is that list; each
// job an object with jobs.add's arguments ({"job": 3, "match": [...], ...}).
// Every job is checked as the daemon checks a jobs.add (unknown arguments,
// rules, rates, names); ids repeated in the file are refused. The error names
// the file and the job's position.
// At most kMaxJobsFileBytes are read (/dev/zero is refused, not read until
// memory runs out); a directory is refused; a FIFO is read once a writer
// comes, and refused when none comes within 10 s.
inline constexpr size_t kMaxJobsFileBytes = 64u << 20;
psgate::Result<nlohmann::json> read_jobs_file(const std::string& path);

// Jobs per jobs.load request. In cluster mode a request is one etcd
// transaction: a new job is one put (its document) and one compare (that
// its id is new), and etcd refuses a transaction with more than 128 of
// either (--max-txn-ops' default); 100 leaves room for the order's put and
// its fence.
inline constexpr size_t kMaxJobsPerLoadRequest = 100;

// The jobs split, in order, into groups of at most `max_jobs` whose jobs.load
// request line {"cmd":"jobs.load","jobs":[...]} is at most `max_line` bytes.
// A job too large for a request of its own is an error.
psgate::Result<std::vector<nlohmann::json>> split_jobs(const nlohmann::json& jobs, size_t max_line,
                                                       size_t max_jobs = kMaxJobsPerLoadRequest);

}  // namespace psgatectl
