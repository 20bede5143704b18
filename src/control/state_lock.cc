// SPDX-License-Identifier: BSD-3-Clause
#include "control/state_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace psgate {

Result<StateLock> StateLock::acquire(const std::string& state_path) {
  if (state_path.empty()) return StateLock{};
  const std::string path = state_path + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return StateLock{};  // read-only or missing directory: the state file's checks say so
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
      return Result<StateLock>::failure("state file " + state_path + " is in use by another psgate" +
                                        (holder.empty() ? std::string() : " (pid " + holder + ")") + " (" + path +
                                        " is locked): one psgate per state file");
    return Result<StateLock>::failure("state file " + state_path + ": cannot lock " + path + ": " + std::strerror(err));
  }
  // Who holds it, for the next one's message; the lock, not the text, decides.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // Only the message's pid is lost.
  }
  return StateLock(fd);
}

StateLock& StateLock::operator=(StateLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

StateLock::~StateLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace psgate
