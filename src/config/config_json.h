// SPDX-License-Identifier: BSD-3-Clause
// The configuration in force as JSON in the config file's structure
// (config_json.cc), for the control `config` command.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "psgate/config.h"

namespace psgate {

// The configuration as JSON with the TOML's tables and keys
// (docs/configuration.md) and its units in text: written out as TOML
// (psgatectl config --toml), the loader reads back this same `config`.
nlohmann::json config_to_json(const ConfigSpec& config);

// Exact text forms the loader parses back to the same number: the largest
// unit that divides the value ("100Mbit/s", "12500kbit/s", "64KiB", "1500B",
// "500ms", "20s").
std::string rate_text_exact(uint64_t bits_per_second);
std::string size_text_exact(uint64_t bytes);
std::string duration_text_exact(uint64_t ns);

}  // namespace psgate
