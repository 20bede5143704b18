// SPDX-License-Identifier: BSD-3-Clause
// One parser per control command (control_request.cc), named by the command
// table (control_commands.cc). Each checks one request object whose "cmd" is
// its command; callers go through parse_control_line / parse_control_request.
#pragma once

#include <nlohmann/json.hpp>

#include "psgate/control_request.h"

namespace psgate::parsers {

using Parsed = Result<ControlRequest>;
using nlohmann::json;

// Every parser has this signature (the command table stores pointers to them).
using Parser = Parsed(const json& request, unsigned class_count);
// One per command, declared through the alias so the signature is written once.
Parser health, jobs_list, jobs_add, jobs_load, jobs_remove, order, rank, class_set, shaper_set, progress, policy, stats,
    config, cluster, reload;

}  // namespace psgate::parsers
