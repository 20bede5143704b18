// SPDX-License-Identifier: BSD-3-Clause
// The ways data lcores split the work, as tests write them: the text after
// "data = " under [lcores], with a mode line where the count alone does not
// say it. Suites parameterised on it run each mode they name.
#pragma once

#include <algorithm>
#include <string>

namespace psgate::testing {

// Two data lcores pipelined: an RX lcore feeding a scheduler lcore through
// rings (two lcores run a direction each otherwise).
inline std::string pipelined(const std::string& two_lcores) { return two_lcores + "\nmode = \"pipelined\""; }
// The same for lcores 1 and 2, where a suite's parameter is a C string.
inline constexpr const char* kOneTwoPipelined = "[1, 2]\nmode = \"pipelined\"";

// Whether packets cross from an RX lcore to a scheduler lcore through rings.
inline bool is_pipelined(const std::string& data) {
  return data.find("pipelined") != std::string::npos || std::count(data.begin(), data.end(), ',') >= 2;
}

// A test-name suffix: RunToCompletion, ByDirection, Pipelined, TwoRxLcores.
inline std::string lcore_mode_name(const std::string& data) {
  const auto commas = std::count(data.begin(), data.end(), ',');
  if (data.find("pipelined") != std::string::npos) return "Pipelined";
  if (commas == 0) return "RunToCompletion";
  if (commas == 1) return "ByDirection";
  return commas == 3 ? "TwoRxLcores" : "Lcores" + std::to_string(commas + 1);
}

}  // namespace psgate::testing
