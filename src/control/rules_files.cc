// SPDX-License-Identifier: BSD-3-Clause
// The per-job rules files: their directory, names, serials and text
// (state_file.h).
#include "control/state_file.h"

#include <algorithm>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace psgate {

using json = nlohmann::json;

namespace {

json rules_json(const JobRecord& j) {
  json rules = json::array();
  for (const MatchRule& r : j.spec.match) rules.push_back(to_string(r));
  return rules;
}

}  // namespace

std::string rules_dir_path(const std::string& state_path) { return state_path + ".rules"; }

std::string rules_file_name(uint32_t job_id, uint64_t serial) {
  return "job-" + std::to_string(job_id) + "." + std::to_string(serial) + ".json";
}

std::optional<uint64_t> rules_file_serial(const std::string& name) {
  // job-<id>.<serial>.json
  const size_t dot = name.find('.');
  if (name.rfind("job-", 0) != 0 || dot == std::string::npos || !name.ends_with(".json")) return std::nullopt;
  const std::string digits = name.substr(dot + 1, name.size() - 5 - (dot + 1));
  if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const uint64_t serial = std::stoull(digits);
  if (serial >= kRulesSerialLimit) return std::nullopt;
  return serial;
}

std::string rules_file_text(const JobRecord& job) {
  return json{{"job", job.spec.id}, {"match", rules_json(job)}}.dump() + "\n";
}

uint64_t next_rules_serial_in(const std::string& dir) {
  uint64_t next = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (auto serial = rules_file_serial(name)) next = std::max(next, *serial + 1);
    // Files set aside (set_aside_unnamed_rules_files) count too: moved back
    // by hand (operations.md), none may have a live file's name.
    if (name.rfind("unnamed-", 0) == 0 && entry.is_directory(ec)) {
      std::error_code sub_ec;
      for (const auto& aside : std::filesystem::directory_iterator(entry.path(), sub_ec))
        if (auto serial = rules_file_serial(aside.path().filename().string())) next = std::max(next, *serial + 1);
    }
  }
  return next;
}

}  // namespace psgate
