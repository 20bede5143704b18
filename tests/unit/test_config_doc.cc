// SPDX-License-Identifier: BSD-3-Clause
// docs/configuration.md cannot drift from the schema: the parser itself is
// asked which keys each table takes (the "allowed here" list it prints for an
// unknown key), and the set of documented keys must be exactly that set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "psgate/config.h"

namespace psgate {
namespace {

// A valid config; "@ROOT@", "@WIRE@", ... mark where a probe key may go.
const std::string kTemplate = R"(@ROOT@
[eal]
args = ["--no-huge"]
@EAL@
[ports]
@PORTS@
[ports.wire]
device = "net_null0"
@WIRE@
[ports.host]
device = "net_null1"
@HOST@
[lcores]
data = [1]
@LCORES@
[shaper]
@SHAPER@
[shaper.wire]
rate = "1Gbit/s"
burst = "64KiB"
@SHAPER_WIRE@
[classes]
@CLASSES@
[classes.1]
@CLASS@
[classes.1.wire]
@CLASS_PORT@
[[jobs]]
id = 1
match = ["dst=10.0.0.1/32"]
@JOBS@
[dataplane]
@DATAPLANE@
[stats]
@STATS@
[log]
@LOG@
[control]
@CONTROL@
[metrics]
@METRICS@
[policy]
name = "static"
@POLICY@
[cluster]
endpoints = ["http://127.0.0.1:2379"]
name = "gw-a"
prefix = "/psgate/test"
@CLUSTER@
)";

const std::vector<std::string> kMarks = {
    "ROOT",       "EAL",  "PORTS",     "WIRE",  "HOST", "LCORES",  "SHAPER",  "SHAPER_WIRE", "CLASSES", "CLASS",
    "CLASS_PORT", "JOBS", "DATAPLANE", "STATS", "LOG",  "CONTROL", "METRICS", "POLICY",      "CLUSTER"};

// The config with an unknown key at `mark`, and every other mark removed.
std::string probe_at(const std::string& mark) {
  std::string text = kTemplate;
  for (const std::string& m : kMarks) {
    const std::string tag = "@" + m + "@";
    text.replace(text.find(tag), tag.size(), m == mark ? "zz_probe = 1" : "");
  }
  return text;
}

// The keys the parser allows where `mark` is (class-number placeholders dropped).
std::set<std::string> allowed_at(const std::string& mark) {
  auto r = parse_config(probe_at(mark), "t.toml");
  EXPECT_FALSE(r.ok()) << mark << ": the probe key was accepted";
  if (r.ok()) return {};
  const std::string& err = r.error();
  EXPECT_NE(err.find("zz_probe"), std::string::npos) << mark << ": " << err;
  const std::string tag = "allowed here: ";
  const size_t at = err.find(tag);
  EXPECT_NE(at, std::string::npos) << mark << ": " << err;
  if (at == std::string::npos) return {};
  std::set<std::string> keys;
  std::stringstream list(err.substr(at + tag.size()));
  for (std::string k; std::getline(list, k, ',');) {
    while (!k.empty() && k.front() == ' ') k.erase(0, 1);
    if (k.rfind("a class number", 0) == 0) continue;
    keys.insert(k);
  }
  return keys;
}

TEST(ConfigDoc, TemplateIsValid) {
  auto r = parse_config(probe_at(""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
}

TEST(ConfigDoc, EveryKeyIsDocumentedAndEveryDocumentedKeyExists) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";

  // The tables: every root key must be one of them, so a new table cannot be missed.
  const std::set<std::string> tables = {"eal",   "ports", "lcores",  "shaper",  "classes", "jobs",   "dataplane",
                                        "stats", "log",   "control", "metrics", "policy",  "cluster"};
  EXPECT_EQ(allowed_at("ROOT"), tables);
  EXPECT_EQ(allowed_at("PORTS"), (std::set<std::string>{"wire", "host"}));
  EXPECT_EQ(allowed_at("SHAPER"), (std::set<std::string>{"wire", "host"}));
  EXPECT_EQ(allowed_at("WIRE"), allowed_at("HOST"));

  // Table (as the probe finds it) -> how the reference writes its keys.
  const std::vector<std::pair<std::string, std::string>> leaf_tables = {
      {"EAL", "eal."},         {"WIRE", "ports.<p>."},    {"LCORES", "lcores."},   {"SHAPER_WIRE", "shaper.<p>."},
      {"CLASSES", "classes."}, {"CLASS", "classes.<N>."}, {"JOBS", "jobs[]."},     {"DATAPLANE", "dataplane."},
      {"STATS", "stats."},     {"LOG", "log."},           {"CONTROL", "control."}, {"CLASS_PORT", "classes.<N>.<p>."},
      {"POLICY", "policy."},   {"CLUSTER", "cluster."},   {"METRICS", "metrics."}};
  std::set<std::string> schema;
  for (const auto& [mark, prefix] : leaf_tables) {
    for (const std::string& k : allowed_at(mark)) schema.insert(prefix + k);
  }
  // [classes.N.wire] and [classes.N.host] are tables (CLASS_PORT), not keys.
  EXPECT_EQ(schema.erase("classes.<N>.wire") + schema.erase("classes.<N>.host"), 2u);

  std::ifstream in(std::string(root) + "/docs/configuration.md");
  ASSERT_TRUE(in) << "docs/configuration.md not found";
  std::set<std::string> documented;
  const std::regex row(R"(^\| `([^`]+)` \|)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.insert(m[1]);
  }
  for (const std::string& k : schema) EXPECT_TRUE(documented.count(k)) << k << " is not in docs/configuration.md";
  for (const std::string& k : documented)
    EXPECT_TRUE(schema.count(k)) << k << " is documented but the parser rejects it";
}

}  // namespace
}  // namespace psgate
