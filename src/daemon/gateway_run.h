// SPDX-License-Identifier: BSD-3-Clause
// The gateway's run, once its config is checked and its state file locked:
// EAL, the data plane, cluster link, control plane, control socket and
// metrics started in that order; then serving until a stop signal or
// --duration; then the drain, the final counters and the teardown.
#pragma once

#include <string>

#include "psgate/config.h"

namespace psgate {

// Returns the exit status (psgate --help says what each means).
// `unlocked`: why the state file's lock could not be taken ("": it is held).
// `stdout_held`: set when stdout took nothing of the final report for
// kFinalReportWait (nobody reads it): the exit must not flush it.
int run_gateway(const ConfigSpec& config, double duration_s, const std::string& stats_json_path,
                const std::string& unlocked, bool& stdout_held);

}  // namespace psgate
