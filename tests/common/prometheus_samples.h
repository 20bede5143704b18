// SPDX-License-Identifier: BSD-3-Clause
// A Prometheus text page as the tests read it: `name{labels}` -> value, for
// every sample line (comments and blank lines skipped). The format itself is
// checked by promtool (tests/integration/test_metrics.cc).
#pragma once

#include <map>
#include <sstream>
#include <string>

namespace psgate::testing {

inline std::map<std::string, std::string> prometheus_samples(const std::string& page) {
  std::map<std::string, std::string> out;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = line.substr(sp + 1);
  }
  return out;
}

}  // namespace psgate::testing
