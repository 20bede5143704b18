// SPDX-License-Identifier: BSD-3-Clause
#include "control/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

namespace psgate {

Result<StateLock> StateLock::acquire(const std::string& state_path) {
  using R = Result<StateLock>;
  if (state_path.empty()) return StateLock{};
  const std::string path = state_path + ".lock";
  // The state's directory is made at its first write; the lock is taken
  // before that, so it is made here (a second psgate started before the
  // first wrote anything would otherwise find no lock to wait on).
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  // Held read-only: flock needs no write access, so a lock file another
  // user made (a psgate run as root before) still locks, and a file held
  // open for writing would keep its filesystem from being remounted
  // read-only (the state file's own handling of a read-only disk).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int err = errno;
    // No lock file and none can be made (a read-only filesystem, a directory
    // this user may not write): the state file's own checks refuse what they
    // must; a second psgate would not be noticed, which is said.
    if (err == ENOENT || err == EACCES || err == EROFS || err == EPERM) {
      StateLock unlocked;
      unlocked.warning_ = "cannot create " + path + " (" + std::strerror(err) +
                          "): a second psgate on this state file would not be noticed";
      return unlocked;
    }
    return R::failure("state file " + state_path + ": cannot use its lock file " + path + ": " + std::strerror(err) +
                      " (it must be a regular file: remove what is there)");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return R::failure("state file " + state_path + ": its lock file " + path +
                      " is not a regular file (remove what is there)");
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    char buf[32] = {};
    if (::pread(fd, buf, sizeof buf - 1, 0) > 0) {
      holder = buf;
      holder.erase(holder.find_last_not_of(" \n") + 1);
    }
    ::close(fd);
    if (err == EWOULDBLOCK)
      return R::failure("state file " + state_path + " is in use by another psgate" +
                        (holder.empty() ? std::string() : " (pid " + holder + ")") + " (" + path +
                        " is locked): one psgate per state file");
    return R::failure("state file " + state_path + ": cannot lock " + path + ": " + std::strerror(err));
  }
  // Who holds it, for the next one's message, through a descriptor of its
  // own that is closed at once; the lock, not the text, decides.
  if (const int out = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); out >= 0) {
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::write(out, pid.data(), pid.size()) < 0) {
      // Only the message's pid is lost.
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
