// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/lcore_check.h"

#include <sched.h>

#include <algorithm>

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

Result<bool> check_lcores_exist(const ConfigSpec& config, const std::vector<unsigned>& cpus,
                                const std::string& source) {
  auto missing = [&](const std::string& key, unsigned id) {
    return Result<bool>::failure(source + ": " + key + ": lcore " + std::to_string(id) +
                                 " does not exist (this machine has CPUs " + cpu_list_text(cpus) + ")");
  };
  auto exists = [&](unsigned id) { return std::find(cpus.begin(), cpus.end(), id) != cpus.end(); };
  if (!exists(config.main_lcore)) return missing("lcores.main", config.main_lcore);
  for (size_t i = 0; i < config.data_lcores.size(); ++i) {
    if (!exists(config.data_lcores[i])) return missing("lcores.data[" + std::to_string(i) + "]", config.data_lcores[i]);
  }
  return true;
}

}  // namespace psgate
