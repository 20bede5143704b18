// SPDX-License-Identifier: BSD-3-Clause
// A stop asked while psgate starts: SIGINT and SIGTERM stay blocked from
// the first line of main (psgate/signals.h), and the start's long steps
// (reading the config, EAL, the mbuf pool, each port, the rules compile)
// ask between them whether one waits, and end the start there.
#pragma once

#include <string>

namespace psgate {

// Whether a SIGINT or SIGTERM waits, blocked and not taken yet: a stop asked
// while the start is under way, which it asks between its long steps.
bool stop_signal_pending();

// Takes the pending SIGINT or SIGTERM (a SIGHUP stays: a reload is no stop)
// and returns its name.
std::string take_stop_signal();

}  // namespace psgate
