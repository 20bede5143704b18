// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

namespace psgate {

namespace fs = std::filesystem;

namespace {

// Written where it is, never renamed over: anything that is neither a
// regular file nor a directory (a device, a FIFO), and any path under /dev
// or /proc (/dev/stdout names whatever standard output is, a log file
// included, which a rename would replace).
bool written_in_place(const std::string& path) {
  if (path.rfind("/dev/", 0) == 0 || path.rfind("/proc/", 0) == 0) return true;
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// What the temporary is renamed over: a link's target (its chain followed,
// whether the last target exists yet or not), else the path itself.
fs::path rename_target(const std::string& path) {
  fs::path at = path;
  std::error_code ec;
  for (int hops = 0; hops < 40 && fs::is_symlink(fs::symlink_status(at, ec)); ++hops) {
    const fs::path to = fs::read_symlink(at, ec);
    if (ec) break;
    at = to.is_absolute() ? to : at.parent_path() / to;
  }
  return at;
}

std::string system_error(const std::string& what) { return what + ": " + std::strerror(errno ? errno : EIO); }

// Removes TARGET.tmp.<pid> files whose writer is dead.
void remove_dead_temporaries(const fs::path& target) {
  const std::string prefix = target.filename().string() + ".tmp.";
  std::error_code ec;
  const fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || name.size() == prefix.size()) continue;
    const std::string pid_text = name.substr(prefix.size());
    if (pid_text.size() > 9 || pid_text.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(pid_text));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

}  // namespace

std::string output_file_problem(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(fs::status(path, ec))) return "is a directory";
  if (written_in_place(path)) {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return std::strerror(errno);
    // A FIFO with no reader yet (ENXIO): one may come by the end of the run.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && !(errno == ENXIO && S_ISFIFO(st.st_mode))) return std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return "";
  }
  // A new file goes into the target's directory: it must be there, and
  // writable (nothing is created to find out).
  fs::path dir = rename_target(path).parent_path();
  if (dir.empty()) dir = ".";
  if (!fs::is_directory(fs::status(dir, ec))) return "no directory " + dir.string();
  if (::access(dir.c_str(), W_OK | X_OK) != 0) return system_error("cannot write in " + dir.string());
  return "";
}

bool same_output_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  auto canonical = [](const std::string& p) {
    std::error_code e;
    const fs::path abs = fs::absolute(rename_target(p), e);
    return e ? fs::path(p) : fs::weakly_canonical(abs, e).lexically_normal();
  };
  return canonical(a) == canonical(b);
}

std::string write_output_file(const std::string& path, const std::function<bool(std::FILE*)>& write) {
  if (written_in_place(path)) {
    // Appended (standard output may be a log file); not blocking on a FIFO
    // that has no reader.
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO) {
      // strerror's "No such device or address" says nothing of the cause.
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode))
        return "cannot write " + path + ": a FIFO nobody has open for reading (start its reader before the run ends)";
    }
    if (fd < 0) return system_error("cannot open " + path);
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    std::FILE* f = ::fdopen(fd, "a");
    if (!f) {
      ::close(fd);
      return system_error("cannot open " + path);
    }
    errno = 0;
    const bool ok = write(f);
    if (std::fclose(f) != 0 || !ok) return system_error("cannot write " + path);
    return "";
  }
  const fs::path target = rename_target(path);
  // A name of this process's own, created new: an existing file or link at
  // a fixed PATH.tmp is neither truncated nor followed.
  const std::string tmp = target.string() + ".tmp." + std::to_string(::getpid());
  // Temporaries of writers that died between create and rename (SIGKILL):
  // one of this pid (a container's psgate is often pid 1 every run) made
  // every later write fail at its O_EXCL; others of dead pids only held
  // space. A live process's is left alone.
  remove_dead_temporaries(target);
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return system_error("cannot create " + tmp);
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return system_error("cannot create " + tmp);
  }
  errno = 0;
  const bool ok = write(f);
  if (std::fclose(f) != 0 || !ok) {
    std::string error = system_error("cannot write " + tmp);
    ::unlink(tmp.c_str());
    return error;
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string error = system_error("cannot rename " + tmp + " to " + target.string());
    ::unlink(tmp.c_str());
    return error;
  }
  return "";
}

void open_closed_standard_fds(bool output_fails) {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    // The lowest free number: `fd` itself, those below it being open.
    const int opened = ::open("/dev/null", fd == 0 || output_fails ? O_RDONLY : O_WRONLY);
    if (opened >= 0 && opened != fd) {
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

}  // namespace psgate
