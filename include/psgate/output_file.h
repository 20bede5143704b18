// SPDX-License-Identifier: BSD-3-Clause
// Report files written at the end of a run (psgate --stats-json, psgate-gen
// --json and --flows-csv): checked at the start, so that a run's figures are
// not lost at its end, and written so that a reader finds them complete or
// absent, without ever replacing what is not a regular file.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

namespace psgate {

// Opens /dev/null on each of the standard descriptors 0-2 that is closed at
// start: stdin for reading, stdout and stderr for writing, or, with
// `output_fails`, for reading only, so that printing fails and is reported.
// Otherwise the next file opened takes the number and what is printed lands
// in it: psgate started with `>&- 2>&-` wrote its log into DPDK's shared
// configuration and hung, psgatectl its output into the control socket.
// Call first in main().
void open_closed_standard_fds(bool output_fails = false);

// Why a report cannot be written to `path` at the end of the run, or "" when
// it can: a directory, a directory that is missing or may not be written, a
// device that may not be opened for writing. Creates nothing.
std::string output_file_problem(const std::string& path);

// Whether `a` and `b` name one file (the same path spelt two ways, "x" and
// "./x", or a link and its target), whether it exists yet or not.
bool same_output_file(const std::string& a, const std::string& b);

// Writes a report with `write` (false: it failed). A regular file, or a new
// one, is written as a temporary of this process's own (created new, never
// following a link) renamed into place: complete or absent; a symbolic
// link's target likewise, the link kept. Anything else at `path` (a device,
// a FIFO) and any path under /dev or /proc (/dev/stdout may be a log file)
// is appended to as it is, never replaced (as root, a rename over /dev/null
// would make it a regular file). Returns "" or what failed, with the
// system's reason.
std::string write_output_file(const std::string& path, const std::function<bool(std::FILE*)>& write);

}  // namespace psgate
