// SPDX-License-Identifier: BSD-3-Clause
// Whether a reply's result has the shape psgatectl's tables read: the members
// each command's formatter reads, with their JSON types. The formatters print
// a missing field as "-", so without this check a daemon of another version
// (or not psgate) that answers {"ok": true, "result": {}} to `jobs list`
// prints "(no jobs)" and exits 0: a skew that looks like an empty gateway.
// Every command's reply is checked, the confirmations of changes too (a
// `class` reply without its "cap" printed "cap none"). Only the members a
// table cannot do without are checked; of those that may be null by the
// protocol, the ones a confirmation prints (a class's cap) must be there,
// the others (a job's police, a progress never reported) are not checked.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "psgate/result.h"

namespace psgatectl {

// Ok, or what is wrong: `command` (as the user typed it: "jobs list"), the
// member and its expected type, and that the daemon may be of another
// version (psgatectl exits 3 on it, as on a reply that is not JSON).
psgate::Result<bool> check_reply_shape(Kind kind, const std::string& command, const nlohmann::ordered_json& result);

}  // namespace psgatectl
