// SPDX-License-Identifier: BSD-3-Clause
// RX stage (rx_stage.cc): receive one burst from one ingress port, check,
// classify, police, and hand it to the scheduler stage: directly in
// run-to-completion, through the SPSC class rings when pipelined.
#pragma once

#include "dataplane/lcore_context.h"

namespace psgate {

// One burst from `in_port`. Returns the packets received. `now` is the TSC
// as the loop iteration read it (one read per iteration: a TSC read costs
// about 44 cycles on the development VM, more than a packet's admission): the
// burst's arrival time for sojourn and its policers' clock.
unsigned rx_poll(DataplaneShared& shared, RxContext& rx, const Snapshot& snap, unsigned in_port, uint64_t now);
// Brings the lcore's per-slot state in line with a new snapshot (control
// changes only): the policers, and the ring a job new to its slot starts on.
void rx_sync_slots(DataplaneShared& shared, RxContext& rx, const Snapshot& snap);

}  // namespace psgate
