// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/lcore_check.h"

#include <sched.h>

#include <algorithm>
#include <fstream>

namespace psgate {

std::vector<unsigned> affinity_cpus() {
  std::vector<unsigned> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

const std::vector<unsigned>& start_affinity_cpus() {
  static const std::vector<unsigned> at_start = affinity_cpus();
  return at_start;
}

std::vector<unsigned> online_cpus() {
  std::ifstream in("/sys/devices/system/cpu/online");
  std::string text;
  std::getline(in, text);
  return parse_cpu_list(text);
}

std::vector<unsigned> parse_cpu_list(const std::string& text) {
  std::vector<unsigned> cpus;
  size_t i = 0;
  // One number, at most 5 digits (CPU_SETSIZE is 1024), at i; advances i.
  auto number = [&](unsigned& out) {
    const size_t start = i;
    out = 0;
    while (i < text.size() && i - start < 5 && text[i] >= '0' && text[i] <= '9') out = out * 10 + (text[i++] - '0');
    return i > start;
  };
  while (i < text.size() && text[i] != '\n') {
    unsigned lo = 0, hi = 0;
    if (!number(lo)) return {};
    hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      if (!number(hi) || hi < lo) return {};
    }
    for (unsigned c = lo; c <= hi; ++c) cpus.push_back(c);
    if (i < text.size() && text[i] == ',') {
      ++i;
    } else if (i < text.size() && text[i] != '\n') {
      return {};
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string cpu_list_text(const std::vector<unsigned>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

Result<bool> check_lcores_exist(const ConfigSpec& config, const std::vector<unsigned>& cpus, const std::string& source,
                                const std::vector<unsigned>& online) {
  auto missing = [&](const std::string& key, unsigned id) {
    const std::string head = source + ": " + key + ": lcore " + std::to_string(id);
    if (std::find(online.begin(), online.end(), id) != online.end())
      return Result<bool>::failure(head + " is outside psgate's CPU affinity (it may use CPUs " + cpu_list_text(cpus) +
                                   "; a cpuset, taskset, systemd's CPUAffinity= or isolcpus leaves out the others)");
    if (!online.empty() && online != cpus)
      return Result<bool>::failure(head + " does not exist (this machine has CPUs " + cpu_list_text(online) +
                                   ", of which psgate may use " + cpu_list_text(cpus) + ")");
    return Result<bool>::failure(head + " does not exist (this machine has CPUs " + cpu_list_text(cpus) + ")");
  };
  auto exists = [&](unsigned id) { return std::find(cpus.begin(), cpus.end(), id) != cpus.end(); };
  if (!exists(config.main_lcore)) return missing("lcores.main", config.main_lcore);
  for (size_t i = 0; i < config.data_lcores.size(); ++i) {
    if (!exists(config.data_lcores[i])) return missing("lcores.data[" + std::to_string(i) + "]", config.data_lcores[i]);
  }
  return true;
}

}  // namespace psgate
