// SPDX-License-Identifier: BSD-3-Clause
// Rules shaped like the ones jobs carry, in any number: for the classifier's
// scale test (tests/dpdk/test_classifier.cc) and its micro-benchmark
// (perf/micro/classify_bench.cc), which must measure the same rule set.
#pragma once

#include <cstdint>
#include <vector>

#include "psgate/match_rule.h"

namespace psgate::pkt {

// `n` rules from a fixed seed (the same rules on every call): host or subnet
// prefixes (a tenth /24 or /120), a third of them IPv6, as source or
// destination; a destination port range, a source port, or none; mostly TCP
// or UDP.
std::vector<MatchRule> job_like_rules(uint32_t n);

}  // namespace psgate::pkt
