// SPDX-License-Identifier: BSD-3-Clause
// The control socket's path: its checks before DPDK starts, the lock and the
// replacement of a stale socket at start (control_socket_path.h).
#include "control/control_socket_path.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <utility>

#include <spdlog/spdlog.h>

#include "control/control_server.h"

namespace psgate {

namespace {

std::string errno_text() { return std::strerror(errno); }

}  // namespace

bool socket_in_use(const std::string& path) {
  // Non-blocking: a live server whose backlog is full (its control thread
  // busy) would hold a blocking connect for as long; EAGAIN is a live one.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || errno == EAGAIN;
  close(fd);
  return live;
}

// Read-only and without O_CREAT first, as StateLock does: a lock file
// another user made still locks, and fs.protected_regular refuses O_CREAT on
// one in a sticky directory.
int lock_socket_path(const std::string& path) {
  const std::string lock = path + ".lock";
  int fd = open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) fd = open(lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    spdlog::warn("control socket {}: cannot open {}: {}; two starts on a stale socket could both take it", path, lock,
                 errno_text());
    return -1;
  }
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const bool held = errno == EWOULDBLOCK;
    if (!held) spdlog::warn("control socket {}: cannot lock {}: {}", path, lock, errno_text());
    close(fd);
    return held ? -2 : -1;
  }
  return fd;
}

bool ControlServer::in_use(const std::string& path) { return socket_in_use(path); }

Result<bool> ControlServer::check_path(const std::string& path) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    return Result<bool>::failure("control socket path must be 1.." + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                 " bytes");
  // A path that ends in "/" (or ".", "..") names a directory, which psgate
  // would create and then find is no socket.
  if (const std::string name = std::filesystem::path(path).filename().string();
      name.empty() || name == "." || name == "..")
    return Result<bool>::failure("control socket " + path + ": must name a socket file, not a directory");
  struct stat st {};
  // The nearest ancestor that exists must be a directory (the rest is
  // created at start): one that is a file makes every path under it fail,
  // however deep (stat says ENOTDIR, not "missing", below it).
  for (std::filesystem::path dir = std::filesystem::path(path).parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Result<bool>::failure("control socket " + path + ": " + dir.string() + " is not a directory");
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) break;  // not ours to judge here (EACCES: checked as another user)
  }
  // A path that names anything but a socket (a mistyped state file, say)
  // is the operator's to fix, not to delete.
  if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
    return Result<bool>::failure("control socket " + path +
                                 ": exists and is not a socket; [control] socket must name a path psgate may create");
  return true;
}

Result<bool> ControlServer::check_writable(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  while (::stat(dir.c_str(), &st) != 0 && dir.has_parent_path() && dir.parent_path() != dir) dir = dir.parent_path();
  if (::stat(dir.c_str(), &st) != 0) dir = ".";  // a relative path's first part: made in the working directory
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return Result<bool>::failure("control socket " + path + ": " + dir.string() +
                                 " is not writable: " + std::strerror(err) +
                                 (err == EROFS ? " (a read-only filesystem: name a path under /run)" : ""));
  }
  return true;
}

Result<int> claim_socket_path(const std::string& path) {
  using R = Result<int>;
  if (auto usable = ControlServer::check_path(path); !usable) return R::failure(usable.error());
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return R::failure("control socket " + path + ": cannot create " + dir.string() + ": " + ec.message());
  }
  // Another start between its stale check and its bind holds the lock:
  // without it, both could find the socket stale, and the later unlink
  // would remove the socket the earlier one just bound and serves.
  const int lock_fd = lock_socket_path(path);
  if (lock_fd == -2) return R::failure("control socket " + path + " is in use by another process");
  struct FdGuard {  // until the server owns it
    int fd;
    ~FdGuard() {
      if (fd >= 0) close(fd);
    }
  } lock_guard{lock_fd};
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    // check_path found a socket there, unless it changed since.
    if (!S_ISSOCK(st.st_mode)) return R::failure("control socket " + path + ": exists and is not a socket");
    if (socket_in_use(path)) return R::failure("control socket " + path + " is in use by another process");
    unlink(path.c_str());  // stale, from a process that died
    // Said: the only trace of a gateway that did not stop cleanly (SIGKILL,
    // a crash, the OOM killer), for an operator wondering why it restarted.
    spdlog::warn(
        "control socket {}: replaced a stale socket (the psgate that made it did not stop cleanly: killed "
        "or crashed)",
        path);
  }
  return std::exchange(lock_guard.fd, -1);
}

}  // namespace psgate
