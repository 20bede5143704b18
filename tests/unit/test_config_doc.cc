// SPDX-License-Identifier: BSD-3-Clause
// docs/configuration.md cannot drift from the schema: the parser itself is
// asked which keys each table takes (the "allowed here" list it prints for an
// unknown key, tests/common/config_schema.cc), and the set of documented keys
// must be exactly that set.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <regex>
#include <set>
#include <string>

#include "config_schema.h"
#include "psgate/config.h"

namespace psgate {
namespace {

using test::allowed_config_keys_at;

TEST(ConfigDoc, TemplateIsValid) {
  auto r = parse_config(test::config_probe_template(), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
}

TEST(ConfigDoc, EveryKeyIsDocumentedAndEveryDocumentedKeyExists) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";

  // The tables: every root key must be one of them, so a new table cannot be missed.
  const std::set<std::string> tables = {"eal",   "ports", "lcores",  "shaper",  "classes", "jobs",   "dataplane",
                                        "stats", "log",   "control", "metrics", "policy",  "cluster"};
  EXPECT_EQ(allowed_config_keys_at("ROOT"), tables);
  EXPECT_EQ(allowed_config_keys_at("PORTS"), (std::set<std::string>{"wire", "host"}));
  EXPECT_EQ(allowed_config_keys_at("SHAPER"), (std::set<std::string>{"wire", "host"}));
  EXPECT_EQ(allowed_config_keys_at("WIRE"), allowed_config_keys_at("HOST"));

  const std::set<std::string> schema = test::config_schema_keys();

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
