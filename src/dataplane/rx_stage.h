// SPDX-License-Identifier: BSD-3-Clause
// RX stage (rx_stage.cc): receive one burst from one ingress port, check,
// classify, police, and hand it to the scheduler stage: directly in
// run-to-completion, through the SPSC class rings when pipelined.
#pragma once

#include "dataplane/lcore_context.h"

namespace psgate {

// One burst from `in_port`. Returns the packets received.
unsigned rx_poll(DataplaneShared& shared, RxContext& rx, const Snapshot& snap, unsigned in_port);
// Brings the lcore's policers in line with a new snapshot (control changes only).
void rx_sync_policers(DataplaneShared& shared, RxContext& rx, const Snapshot& snap);

}  // namespace psgate
