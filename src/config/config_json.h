// SPDX-License-Identifier: BSD-3-Clause
// The configuration in force as JSON (config_json.cc), for the control
// `config` command.
#pragma once

#include <nlohmann/json.hpp>

#include "psgate/config.h"

namespace psgate {

// The configuration as JSON, in the TOML's structure (units in text form).
nlohmann::json config_to_json(const ConfigSpec& config);

}  // namespace psgate
