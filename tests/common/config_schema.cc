// SPDX-License-Identifier: BSD-3-Clause
// See config_schema.h.
#include "config_schema.h"

#include <gtest/gtest.h>

#include <sstream>

#include "psgate/config.h"

namespace psgate::test {
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
[classes.wire]
@CLASSES_PORT@
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
    "CLASS_PORT", "JOBS", "DATAPLANE", "STATS", "LOG",  "CONTROL", "METRICS", "POLICY",      "CLUSTER", "CLASSES_PORT"};

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
}  // namespace

std::set<std::string> allowed_config_keys_at(const std::string& mark) {
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

const std::vector<std::pair<std::string, std::string>>& config_leaf_tables() {
  static const std::vector<std::pair<std::string, std::string>> tables = {
      {"EAL", "eal."},         {"WIRE", "ports.<p>."},    {"LCORES", "lcores."},   {"SHAPER_WIRE", "shaper.<p>."},
      {"CLASSES", "classes."}, {"CLASS", "classes.<N>."}, {"JOBS", "jobs[]."},     {"DATAPLANE", "dataplane."},
      {"STATS", "stats."},     {"LOG", "log."},           {"CONTROL", "control."}, {"CLASS_PORT", "classes.<N>.<p>."},
      {"POLICY", "policy."},   {"CLUSTER", "cluster."},   {"METRICS", "metrics."}, {"CLASSES_PORT", "classes.<p>."}};
  return tables;
}

std::set<std::string> config_schema_keys() {
  std::set<std::string> schema;
  for (const auto& [mark, prefix] : config_leaf_tables()) {
    for (const std::string& k : allowed_config_keys_at(mark)) schema.insert(prefix + k);
  }
  // [classes.N.wire] and [classes.N.host] are tables (CLASS_PORT), not keys;
  // so are [classes.wire] and [classes.host] (CLASSES_PORT).
  EXPECT_EQ(schema.erase("classes.<N>.wire") + schema.erase("classes.<N>.host"), 2u);
  EXPECT_EQ(schema.erase("classes.wire") + schema.erase("classes.host"), 2u);
  return schema;
}

std::string config_probe_template() { return probe_at(""); }

}  // namespace psgate::test
