// SPDX-License-Identifier: BSD-3-Clause
// One psgate per state file. A second psgate started on the same
// [control] state (another --file-prefix, devices that open twice) would
// otherwise write its own view over the live daemon's file and delete the
// rules files only the live one names, before its control socket is found
// taken: an acknowledged change would then be lost at the next restart.
// The lock is an exclusive flock(2) on <state>.lock, held for the process's
// life (the kernel drops it when the process exits, however it exits).
#pragma once

#include <string>

#include "psgate/result.h"

namespace psgate {

class StateLock {
 public:
  // Takes the lock for `state_path` (empty: none needed). Fails, naming the
  // holder's pid where it wrote one, when another process holds it. A lock
  // file that cannot be created (a read-only or missing directory) is not
  // this check's to judge: the state file's own checks report those, and
  // the lock is then skipped.
  static Result<StateLock> acquire(const std::string& state_path);

  StateLock() = default;
  StateLock(StateLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  StateLock& operator=(StateLock&& other) noexcept;
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;
  ~StateLock();

  bool held() const { return fd_ >= 0; }

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace psgate
