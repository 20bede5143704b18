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
  // Takes the lock for `state_path` (empty: none needed), making the
  // state's directory if it is missing. Fails, naming the holder's pid where
  // it wrote one, when another process holds it, and when something other
  // than a regular file stands at <state>.lock. A lock file that cannot be
  // created (a read-only filesystem, a directory this user may not write)
  // leaves it unlocked, with warning() saying so: the state file's own
  // checks refuse what they must. Removing <state>.lock while psgate runs
  // undoes the lock (the next one makes a new file): never do that.
  static Result<StateLock> acquire(const std::string& state_path);

  StateLock() = default;
  StateLock(StateLock&& other) noexcept : fd_(other.fd_), warning_(std::move(other.warning_)) { other.fd_ = -1; }
  StateLock& operator=(StateLock&& other) noexcept;
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;
  ~StateLock();

  bool held() const { return fd_ >= 0; }
  // Why it is not held although a state file is configured; "" otherwise.
  const std::string& warning() const { return warning_; }

 private:
  explicit StateLock(int fd) : fd_(fd) {}
  int fd_ = -1;
  std::string warning_;
};

}  // namespace psgate
