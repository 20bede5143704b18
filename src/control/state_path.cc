// SPDX-License-Identifier: BSD-3-Clause
// Whether a path can serve as the state file: what is there, and whether
// this process may write its directory and rules directory (state_file.h).
#include "control/state_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace psgate {

Result<bool> check_state_file_kind(const std::string& path) {
  using R = Result<bool>;
  if (path.empty()) return true;
  struct stat st {};
  // A symbolic link is refused, dangling or not: the file is replaced by a
  // rename beside it, which would replace the link and leave its target
  // behind; a dangling one (a disk not mounted yet) would look like a first
  // start and hide the real state.
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return R::failure("state file " + path +
                      ": is a symbolic link; name the file itself in [control] state (it is replaced through a "
                      "temporary beside it)");
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    return R::failure("state file " + path + ": " + (S_ISDIR(st.st_mode) ? "is a directory" : "is not a regular file") +
                      "; [control] state must name a file");
  return true;
}

Result<bool> check_state_dir_writable(const std::string& path) {
  using R = Result<bool>;
  if (path.empty()) return true;
  // The file is replaced through a temporary beside it: its directory must be
  // writable. One that does not exist yet is created at the first write, so
  // then the nearest existing ancestor must be.
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir.parent_path() != dir)
    dir = dir.parent_path();
  // A relative path's first part that does not exist yet ("fresh" of
  // "fresh/state.json") is made in the working directory.
  if (!std::filesystem::exists(dir, ec) && !dir.has_parent_path()) dir = ".";
  // A regular file where a directory must be (state = "a.toml/state.json"):
  // said so, not "permission denied".
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    return R::failure("state file " + path + ": " + dir.string() + " is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    // A filesystem remounted read-only (after errors, at boot) under a
    // state file it holds is a disk condition: the file is read, and written
    // again once it can be. With no file there yet, nothing was ever written
    // there: a path in a read-only place (ProtectSystem= makes /etc and /usr
    // read-only for the service), refused as any unwritable directory is.
    struct stat st {};
    if (err == EROFS && ::stat(path.c_str(), &st) == 0) return false;
    return R::failure("state file " + path + ": its directory " + dir.string() +
                      " is not writable: " + std::strerror(err) +
                      (err == EROFS ? " (and holds no state file yet: name a writable directory)" : ""));
  }
  // Each added job's rules go to STATE.rules/: one this user may not write
  // (made by root, psgate now run as another user) refused every add while
  // --check and health said nothing. A read-only filesystem is the disk
  // condition above, not this.
  const std::string rules = rules_dir_path(path);
  if (std::filesystem::is_directory(rules, ec) && ::access(rules.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    if (err != EROFS)
      return R::failure("state file " + path + ": its rules directory " + rules +
                        " is not writable: " + std::strerror(err));
  }
  return true;
}

Result<bool> check_state_path(const std::string& path) {
  if (auto kind = check_state_file_kind(path); !kind) return kind;
  return check_state_dir_writable(path);
}

}  // namespace psgate
