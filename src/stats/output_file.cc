// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace psgate {

namespace fs = std::filesystem;

namespace {

// Something at `path` (followed through links) that is neither a regular
// file nor a directory: written in place.
bool special_file(const std::string& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  return !ec && fs::exists(st) && !fs::is_regular_file(st) && !fs::is_directory(st);
}

// Where the temporary goes and what it is renamed over: a link's target.
std::string rename_target(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return path;
  const fs::path target = fs::weakly_canonical(path, ec);
  return ec ? path : target.string();
}

}  // namespace

std::string output_file_problem(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(fs::status(path, ec))) return "is a directory";
  if (special_file(path)) {
    // Not blocking on a FIFO with no reader yet (ENXIO): one may come.
    const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno != ENXIO) return std::strerror(errno);
    if (fd >= 0) ::close(fd);
    return "";
  }
  const std::string tmp = rename_target(path) + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return std::string("cannot create ") + tmp + ": " + std::strerror(errno);
  ::close(fd);
  ::unlink(tmp.c_str());
  return "";
}

bool same_output_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (fs::equivalent(a, b, ec)) return true;
  const fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) return a == b;
  const fs::path cb = fs::weakly_canonical(b, ec);
  return ec ? a == b : ca == cb;
}

std::string write_output_file(const std::string& path, const std::function<bool(std::FILE*)>& write) {
  auto failed = [](const std::string& what) { return what + ": " + std::strerror(errno ? errno : EIO); };
  if (special_file(path)) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return failed("cannot open " + path);
    errno = 0;
    const bool ok = write(f);
    if (std::fclose(f) != 0 || !ok) return failed("cannot write " + path);
    return "";
  }
  const std::string target = rename_target(path);
  const std::string tmp = target + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return failed("cannot create " + tmp);
  errno = 0;
  const bool ok = write(f);
  if (std::fclose(f) != 0 || !ok) {
    std::string error = failed("cannot write " + tmp);
    std::remove(tmp.c_str());
    return error;
  }
  if (std::rename(tmp.c_str(), target.c_str()) != 0) {
    std::string error = failed("cannot rename " + tmp + " to " + target);
    std::remove(tmp.c_str());
    return error;
  }
  return "";
}

}  // namespace psgate
