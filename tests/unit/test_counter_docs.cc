// SPDX-License-Identifier: BSD-3-Clause
// docs/counters.md is generated from the counter field tables, so it cannot
// miss a counter or describe one differently from the code. When a table
// changes, regenerate it:
//   PSGATE_UPDATE_DOCS=1 PSGATE_SOURCE_ROOT=$PWD build/tests/unit_tests --gtest_filter='CounterDocs.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "psgate/totals.h"

namespace psgate {
namespace {

std::string row(const CounterInfo& c) {
  return std::string("| `") + c.name + "` | " + unit_name(c.unit) + " | " + (c.kind == CounterKind::drop ? "yes" : "") +
         " | " + c.help + " |\n";
}

template <typename Fields>
std::string table(const Fields& fields) {
  std::string out = "| name | unit | drop | meaning |\n|---|---|---|---|\n";
  for (const auto& f : fields) out += row(f.info);
  return out;
}

std::string counters_markdown() {
  std::string out =
      "# Counters\n\n"
      "<!-- Generated from the field tables in include/psgate/counters.h and\n"
      "     include/psgate/totals.h by tests/unit/test_counter_docs.cc; do not edit.\n"
      "     Regenerate: PSGATE_UPDATE_DOCS=1 PSGATE_SOURCE_ROOT=$PWD\n"
      "     build/tests/unit_tests --gtest_filter='CounterDocs.*' -->\n\n"
      "Every counter counts up from start and is never reset; rates are differences of\n"
      "two reads. `psgate --stats-json`, the control socket's `stats` (`psgatectl stats --json`)\n"
      "and the final report carry them at the JSON paths below. DPDK telemetry\n"
      "(`/psgate/port,wire`, `/psgate/class,wire,1`, `/psgate/job,<id>`) flattens the same\n"
      "objects, nested keys joined by `_` (`drops_ring_full`, `nic_imissed`, `pull_sent_bytes`).\n"
      "\"drop\" marks counters of packets that did not leave psgate.\n\n";
  out +=
      "## Drop reasons: `ports.<port>.drops.<reason>`\n\n"
      "Every received packet is transmitted or counted under exactly one reason, on the\n"
      "port it was to leave by (`totals.received` = `totals.transmitted` + `totals.dropped`).\n\n"
      "| reason | meaning |\n|---|---|\n";
  for (const CounterInfo& r : kDropReasonInfo) out += std::string("| `") + r.name + "` | " + r.help + " |\n";
  out += "\n## Ports: `ports.<port>.<name>` (`wire`, `host`)\n\n" + table(kPortFields);
  out += "\n## NIC: `ports.<port>.nic.<name>`\n\nRead from the driver (`rte_eth_stats`), not counted by psgate.\n\n" +
         table(kNicFields);
  out +=
      "\n## Egress classes: `classes[].<name>`\n\n"
      "One entry per egress port and class (`port`, `class`), with `depth` (queued now) and\n"
      "`sojourn` (ns from RX to TX: `count`, `min_ns`, `p50_ns`, `p99_ns`, `p999_ns`, `max_ns`).\n\n" +
      table(kClassFields);
  out +=
      "\n## Jobs: `jobs[].<name>`, and `jobs[].push.<name>`, `jobs[].pull.<name>`\n\n"
      "Push is towards the PS (arrived on wire, leaves by host), pull from it.\n\n" +
      table(kJobFields) + "\nBy direction:\n\n" + table(kJobDirectionFields);
  out += "\n## Flow cache: `flow_cache.<name>` (all RX lcores)\n\n" + table(kFlowCacheFields);
  return out;
}

TEST(CounterDocs, DocsCountersMdIsGeneratedFromTheTables) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  ASSERT_NE(root, nullptr) << "run through meson test (it sets PSGATE_SOURCE_ROOT)";
  const std::string path = std::string(root) + "/docs/counters.md";
  const std::string expected = counters_markdown();
  if (std::getenv("PSGATE_UPDATE_DOCS")) {
    std::ofstream(path) << expected;
    GTEST_SKIP() << "wrote " << path;
  }
  std::ifstream in(path);
  std::stringstream actual;
  actual << in.rdbuf();
  EXPECT_EQ(actual.str(), expected) << path << " is out of date with the counter tables; regenerate it with\n"
                                    << "  PSGATE_UPDATE_DOCS=1 PSGATE_SOURCE_ROOT=" << root
                                    << " build/tests/unit_tests --gtest_filter='CounterDocs.*'";
}

// Every table line names its counter uniquely within its JSON object, and
// apart from the keys totals_to_json and the stats reply add beside them.
TEST(CounterDocs, NamesAreUniqueWithinTheirJsonObject) {
  auto unique = [](const auto& fields, std::vector<std::string> names) {
    for (const auto& f : fields) {
      if (std::find(names.begin(), names.end(), f.info.name) != names.end()) return false;
      names.push_back(f.info.name);
    }
    return true;
  };
  EXPECT_TRUE(unique(kPortFields, {"drops", "link", "nic"}));
  EXPECT_TRUE(unique(kNicFields, {}));
  EXPECT_TRUE(unique(kClassFields, {"port", "class", "depth", "sojourn"}));
  EXPECT_TRUE(
      unique(kJobFields, {"id", "name", "rank", "class", "pull_class", "push_class", "push", "pull", "telemetry"}));
  EXPECT_TRUE(unique(kJobDirectionFields, {}));
  EXPECT_TRUE(unique(kFlowCacheFields, {}));
  for (unsigned a = 0; a < kDropReasonCount; ++a)
    for (unsigned b = a + 1; b < kDropReasonCount; ++b) EXPECT_STRNE(kDropReasonNames[a], kDropReasonNames[b]);
}

}  // namespace
}  // namespace psgate
