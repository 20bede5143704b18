// SPDX-License-Identifier: BSD-3-Clause
// What psgate checks of a loaded config before DPDK starts (and all that
// `psgate --check` does): what the parser alone cannot know, such as lcores
// this machine has, the state file's and control socket's paths, TLS files,
// and for --check the state file a start would read.
#pragma once

#include <optional>
#include <string>

#include "psgate/config.h"

namespace psgate {

// Returns the exit status when the process ends here (2 and why on
// stderr for a config a start would refuse; for --check, 0 and "valid"
// when it holds), or nothing when the start goes on. Warnings about what
// may be meant (a relative path, an empty rule) go to stderr either way.
std::optional<int> check_before_start(const ConfigSpec& config, const std::string& config_path, bool check_only);

}  // namespace psgate
