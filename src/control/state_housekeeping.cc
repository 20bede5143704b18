// SPDX-License-Identifier: BSD-3-Clause
// What a crash or a change leaves beside the state file: its temporaries,
// and the rules files no job names, removed or set aside (state_file.h).
#include "control/state_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace psgate {

namespace {

// The rules files directly in `dir` that no job of `jobs` names.
std::vector<std::filesystem::path> unnamed_rules_files(const std::string& dir, const JobRegistry& jobs) {
  std::set<std::string> named;
  for (const JobRecord* j : jobs.in_age_order()) named.insert(j->rules_file);
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) == 0 && !named.count(name) && entry.is_regular_file(ec)) out.push_back(entry.path());
  }
  return out;
}

}  // namespace

void remove_state_temporaries(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp.";
  std::error_code ec;
  // The one fixed name earlier versions wrote through.
  if (std::filesystem::is_regular_file(std::filesystem::symlink_status(path + ".tmp", ec)))
    std::filesystem::remove(path + ".tmp", ec);
  const std::filesystem::path dir = p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == prefix.size() + 6 && name.starts_with(prefix) && entry.is_regular_file(ec))
      std::filesystem::remove(entry.path(), ec);
  }
}

void remove_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs) {
  std::error_code ec;
  for (const auto& path : unnamed_rules_files(dir, jobs)) std::filesystem::remove(path, ec);
}

RulesSetAside set_aside_unnamed_rules_files(const std::string& dir, const JobRegistry& jobs, const std::string& aside) {
  RulesSetAside out;
  const auto files = unnamed_rules_files(dir, jobs);
  if (files.empty()) return out;
  // A directory of its own, never an existing one (two starts in the same
  // second): the files of the first must not be replaced by the second's.
  std::string to = (std::filesystem::path(dir) / aside).string();
  for (unsigned n = 2; ::mkdir(to.c_str(), 0750) != 0; ++n) {
    if (errno != EEXIST || n > 100) {
      out.error = "cannot make " + to + ": " + std::strerror(errno);
      return out;
    }
    to = (std::filesystem::path(dir) / (aside + "-" + std::to_string(n))).string();
  }
  out.directory = to;
  for (const auto& path : files) {
    std::error_code ec;
    std::filesystem::rename(path, std::filesystem::path(to) / path.filename(), ec);
    if (ec) out.error = "cannot move " + path.string() + ": " + ec.message();
    else ++out.moved;
  }
  // Durable: the files' new names first, then the directory's own.
  (void)sync_directory(to);
  (void)sync_directory(dir);
  return out;
}

}  // namespace psgate
