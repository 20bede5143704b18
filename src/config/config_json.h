// SPDX-License-Identifier: BSD-3-Clause
// The configuration in force as JSON in the config file's structure
// (config_json.cc), for the control `config` command.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "psgate/config.h"
#include "psgate/units.h"  // rate_text_exact, size_text_exact, duration_text_exact

namespace psgate {

// The configuration as JSON with the TOML's tables and keys
// (docs/configuration.md) and its units in text: written out as TOML
// (psgatectl config --toml), the loader reads back this same `config`.
nlohmann::json config_to_json(const ConfigSpec& config);

}  // namespace psgate
