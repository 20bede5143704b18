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

// Three data lcores hybrid: lcores 1 and 2 run a direction each on RX queue
// 0 and also take the rings of lcore 3, which receives queue 1 of both ports.
inline constexpr const char* kOneTwoThreeHybrid = "[1, 2, 3]\nmode = \"hybrid\"";

inline bool is_hybrid(const std::string& data) { return data.find("hybrid") != std::string::npos; }

// Whether packets cross from an RX lcore to a scheduler lcore through rings
// (in the hybrid mode, those received on RX queues 1 and up).
inline bool is_pipelined(const std::string& data) {
  return data.find("pipelined") != std::string::npos || std::count(data.begin(), data.end(), ',') >= 2;
}

// RX queues per port the data lcores ask for: N-1 hybrid, N-2 pipelined
// from 3, else 1.
inline unsigned rx_queues_for(const std::string& data) {
  const auto n = static_cast<unsigned>(std::count(data.begin(), data.end(), ',')) + 1;
  if (is_hybrid(data)) return n - 1;
  return n >= 3 ? n - 2 : 1;
}

// A test-name suffix: RunToCompletion, ByDirection, Pipelined, TwoRxLcores,
// Hybrid (3 lcores; HybridN for N).
inline std::string lcore_mode_name(const std::string& data) {
  const auto commas = std::count(data.begin(), data.end(), ',');
  if (data.find("pipelined") != std::string::npos) return "Pipelined";
  if (is_hybrid(data)) return commas == 2 ? "Hybrid" : "Hybrid" + std::to_string(commas + 1);
  if (commas == 0) return "RunToCompletion";
  if (commas == 1) return "ByDirection";
  return commas == 3 ? "TwoRxLcores" : "Lcores" + std::to_string(commas + 1);
}

}  // namespace psgate::testing
