// SPDX-License-Identifier: BSD-3-Clause
// Durable writes: a file replaced atomically through a temporary, the state
// file, rules files one or many at a time, directories made and synced
// (state_file.h).
#include "control/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace psgate {

namespace {

// `kind`: "state file" or "rules file", as the operator looks for it.
std::string io_error(const char* kind, const std::string& path, const char* what) {
  return std::string(kind) + " " + path + ": " + what + ": " + std::strerror(errno);
}

// Writes `text` to a temporary beside `path`, fsyncs it and renames it over
// `path`: a crash leaves the old file or the new one, never half of one.
// `sync`: the data made durable before the rename; write_rules_files
// passes false and syncs the filesystem once for many files.
Result<bool> replace_file(const char* kind, const std::string& path, const std::string& text, bool sync = true) {
  // A new file of a name of its own (mkostemp: O_EXCL, no link followed): a
  // symbolic link planted at a fixed name (a state directory others can
  // write) had root write the state over its target and the rename make the
  // link the state file; and two writers (a gateway run without its lock)
  // shared one temporary, one renaming the other's half-written file.
  std::string tmp = path + ".tmp.XXXXXX";
  auto fail_io = [&](const char* what) {
    Result<bool> r = Result<bool>::failure(io_error(kind, path, what));
    ::unlink(tmp.c_str());  // never leave a partial temporary behind (it may fill a small disk)
    return r;
  };
  make_directories_durably(std::filesystem::path(path).parent_path().string());
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return Result<bool>::failure(io_error(kind, path, "cannot create"));
  if (::fchmod(fd, 0640) != 0) {
    ::close(fd);
    return fail_io("cannot set the mode of");
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      return fail_io("cannot write");
    }
    done += static_cast<size_t>(n);
  }
  if (sync && ::fsync(fd) != 0) {
    ::close(fd);
    return fail_io("cannot sync");
  }
  if (::close(fd) != 0) return fail_io("cannot close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail_io("cannot rename");
  return true;
}

}  // namespace

void make_directories_durably(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || std::filesystem::exists(dir, ec)) return;
  // A directory made here is durable once its parent is synced: without it
  // a power loss could take the directory, and every file acknowledged in
  // it, with it. Best effort: the files' own directory syncs follow.
  std::vector<std::filesystem::path> made;
  for (auto p = std::filesystem::path(dir); !p.empty() && !std::filesystem::exists(p, ec); p = p.parent_path())
    made.push_back(p);
  std::filesystem::create_directories(dir, ec);
  for (const auto& m : made) (void)sync_directory(m.parent_path().string());
}

Result<bool> sync_directory(const std::string& dir) {
  const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool ok = dfd >= 0 && ::fsync(dfd) == 0;
  if (dfd >= 0) ::close(dfd);
  if (!ok) return Result<bool>::failure("directory " + dir + ": cannot sync: " + std::strerror(errno));
  return true;
}

Result<bool> write_state_text(const std::string& path, const std::string& text, std::string* warning) {
  if (auto replaced = replace_file("state file", path, text); !replaced) return replaced;
  // The rename is durable once the directory is synced. Past the rename the
  // new file is the one every reader (and a restart) sees, so the change is
  // made: a failing directory sync cannot undo it and is only reported.
  if (auto synced = sync_directory(std::filesystem::path(path).parent_path().string()); !synced && warning)
    *warning = "state file " + path + ": " + synced.error();
  return true;
}

Result<bool> write_rules_file(const std::string& dir, const std::string& name, const std::string& text) {
  return replace_file("rules file", dir + "/" + name, text);
}

Result<bool> write_rules_files(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  // Many files are made durable by one syncfs, not a sync each: 4 ms apiece
  // held the control thread 16 s for 4,000 jobs a scheduler wrote to the
  // cluster store at once, every gateway's control socket and stop signals
  // waiting. A few are synced each: syncfs waits for every process's dirty
  // data on the filesystem. Until this returns no state file names them
  // (a crash leaves them unnamed, set aside at the next start).
  constexpr size_t kOneSyncFrom = 64;
  const bool one_sync = files.size() >= kOneSyncFrom;
  // A failure takes back what was written: no state file will name them,
  // and a refused change must leave nothing behind (commit() removes only
  // the files its jobs name).
  std::vector<std::string> written;
  int dfd = -1;
  auto undo = [&](Result<bool> failed) {
    if (dfd >= 0) ::close(dfd);
    for (const std::string& path : written) ::unlink(path.c_str());
    return failed;
  };
  if (one_sync) {
    // Opened before the writes: syncfs reports the write-back errors met
    // since (Linux 5.8 and later, as Debian 12's 6.1).
    make_directories_durably(dir);
    dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
      return undo(Result<bool>::failure("rules directory " + dir + ": cannot open: " + std::strerror(errno)));
  }
  written.reserve(files.size());
  for (const auto& [name, text] : files) {
    if (auto w = replace_file("rules file", dir + "/" + name, text, !one_sync); !w) return undo(w);
    written.push_back(dir + "/" + name);
  }
  if (one_sync && ::syncfs(dfd) != 0)
    return undo(Result<bool>::failure("rules directory " + dir + ": cannot sync: " + std::strerror(errno)));
  if (dfd >= 0) ::close(dfd);
  return true;
}

}  // namespace psgate
