// SPDX-License-Identifier: BSD-3-Clause
#include "control/state_lock.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "control/state_file.h"  // make_directories_durably

namespace psgate {

namespace {

// Errors after which psgate runs without the lock, saying so: where the lock
// file cannot be made or locked, the state file's own checks refuse what
// they must (a read-only or full disk is a degraded start, not a failed one).
bool lock_unavailable(int err) {
  return err == ENOENT || err == EACCES || err == EROFS || err == EPERM || err == ENOSPC || err == EDQUOT ||
         err == ENOLCK || err == EOPNOTSUPP || err == EBADF;
}

// The pid the holder wrote, if that process still lives (a pid left by a
// holder that could not rewrite the file would name a dead one).
std::string live_holder(int fd) {
  char buf[32] = {};
  if (::pread(fd, buf, sizeof buf - 1, 0) <= 0) return "";
  char* end = nullptr;
  const long pid = std::strtol(buf, &end, 10);
  if (pid <= 0 || end == buf) return "";
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return "";
  return std::to_string(pid);
}

}  // namespace

Result<StateLock> StateLock::acquire(const std::string& state_path) {
  using R = Result<StateLock>;
  if (state_path.empty()) return StateLock{};
  const std::string path = state_path + ".lock";
  auto unlocked = [&](int err) {
    StateLock s;
    s.warning_ = "cannot lock " + path + " (" + std::strerror(err) +
                 "): a second psgate on this state file would not be noticed";
    return s;
  };
  // The state's directory is made at its first write; the lock is taken
  // before that, so the directory is made here, durably (as the write would).
  make_directories_durably(std::filesystem::path(path).parent_path().string());
  // Held read-only: flock needs no write access, so a lock file another user
  // made (a psgate run as root before) still locks, and a file held open for
  // writing would keep its filesystem from being remounted read-only. Opened
  // without O_CREAT first: with it, fs.protected_regular refuses another
  // user's file in a sticky directory.
  constexpr int kFlags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;
  int fd = ::open(path.c_str(), O_RDONLY | kFlags);
  if (fd < 0 && errno == ENOENT) fd = ::open(path.c_str(), O_RDONLY | O_CREAT | kFlags, 0640);
  if (fd < 0) {
    const int err = errno;
    if (lock_unavailable(err)) return unlocked(err);
    if (err == ELOOP || err == EISDIR || err == ENXIO)
      return R::failure("state file " + state_path + ": its lock file " + path +
                        " is not a regular file (remove what is there)");
    return R::failure("state file " + state_path + ": cannot open its lock file " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return R::failure("state file " + state_path + ": its lock file " + path +
                      " is not a regular file (remove what is there)");
  }
  int locked = ::flock(fd, LOCK_EX | LOCK_NB);
  if (locked != 0 && (errno == EBADF || errno == ENOLCK || errno == EOPNOTSUPP)) {
    // NFS emulates flock with POSIX locks, whose exclusive kind needs a
    // descriptor open for writing.
    if (const int rw = ::open(path.c_str(), O_RDWR | kFlags); rw >= 0) {
      ::close(fd);
      fd = rw;
      locked = ::flock(fd, LOCK_EX | LOCK_NB);
    }
  }
  if (locked != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? live_holder(fd) : "";
    ::close(fd);
    if (err == EWOULDBLOCK)
      return R::failure("state file " + state_path + " is in use by another psgate" +
                        (holder.empty() ? std::string() : " (pid " + holder + ")") + " (" + path +
                        " is locked): one psgate per state file");
    if (lock_unavailable(err)) return unlocked(err);
    return R::failure("state file " + state_path + ": cannot lock " + path + ": " + std::strerror(err));
  }
  // Who holds it, for the next one's message, through a descriptor of its
  // own that is closed at once; the lock, not the text, decides.
  if (const int out = ::open(path.c_str(), O_WRONLY | O_TRUNC | kFlags); out >= 0) {
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::write(out, pid.data(), pid.size()) < 0) {
      // Only the message's pid is lost (live_holder checks it anyway).
    }
    ::close(out);
  }
  return StateLock(fd);
}

StateLock& StateLock::operator=(StateLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    warning_ = std::move(other.warning_);
    other.fd_ = -1;
  }
  return *this;
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace psgate
