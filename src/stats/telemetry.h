// SPDX-License-Identifier: BSD-3-Clause
// psgate's counters over DPDK telemetry (/var/run/dpdk/<prefix>/dpdk_telemetry.v2),
// readable with dpdk-telemetry.py:
//   /psgate/totals              received, transmitted, dropped
//   /psgate/port,wire|host      the port's counters and drops by reason
//   /psgate/class,PORT,N        one egress class
//   /psgate/jobs                job ids
//   /psgate/job,ID              one job's counters
#pragma once

#include "psgate/control_plane.h"

namespace psgate {

void register_telemetry(ControlPlane& control);
// DPDK cannot unregister commands; after this they answer with an error.
void unregister_telemetry();

}  // namespace psgate
