// SPDX-License-Identifier: BSD-3-Clause
// psgate's DPDK EAL start, and what its failures mean to an operator: a
// config error (exit 2: a restart repeats it) or the machine's (exit 1).
#pragma once

#include "psgate/config.h"

namespace psgate {

// Initialises EAL with the arguments config's [eal] and ports give
// (dataplane/eal_args.h). Returns 0 when EAL runs; else the exit status,
// with why said in the log: 2 for arguments EAL refuses, a device string
// it cannot parse or words of eal.args it does not take, 1 for the rest
// (no hugepages, another process's --file-prefix).
int start_eal(const ConfigSpec& config);

}  // namespace psgate
