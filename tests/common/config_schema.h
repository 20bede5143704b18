// SPDX-License-Identifier: BSD-3-Clause
// The configuration keys the parser accepts, asked of the parser itself: a
// valid config gets an unknown key at one table, and the error's "allowed
// here" list names that table's keys. docs/configuration.md
// (tests/unit/test_config_doc.cc) and psgate.toml(5) (tests/man) are checked
// against this one list, so neither can miss a key the parser learns.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

namespace psgate::test {

// The keys the parser allows at a mark of the probe config ("ROOT", "EAL",
// "WIRE", "CLASS", ...), class-number placeholders dropped. Records a gtest
// failure when the probe is not refused as expected.
std::set<std::string> allowed_config_keys_at(const std::string& mark);

// A mark of the probe config -> how the reference writes its keys
// ("WIRE" -> "ports.<p>.").
const std::vector<std::pair<std::string, std::string>>& config_leaf_tables();

// Every leaf key the parser accepts, as the reference writes it:
// "eal.args", "ports.<p>.mtu", "classes.<N>.<p>.cap", "jobs[].id", ...
std::set<std::string> config_schema_keys();

// The probe config with nothing added (it must parse).
std::string config_probe_template();

}  // namespace psgate::test
