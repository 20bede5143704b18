// SPDX-License-Identifier: BSD-3-Clause
// Counters as JSON: the one machine-readable form, shared by `psgate
// --stats-json`, the control socket and the tests.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "psgate/dataplane.h"
#include "psgate/snapshot.h"

namespace psgate {

// {"ports": {"wire": {...}, "host": {...}}, "classes": [...], "jobs": [...],
//  "totals": {"received", "transmitted", "dropped", "conserved", "in_flight"}}
nlohmann::json totals_to_json(const Totals& totals, const Snapshot& snap);
nlohmann::json telemetry_json(const JobTelemetry& t);
// {"state": "up"|"down", "since": "2026-01-02T03:04:05.678Z", "for_s": 12.3,
//  "changes": 4, "detail": "no memif peer", "short_mtu": null} (detail empty when
// up; short_mtu: a kernel interface's MTU while below ports.<p>.mtu)
nlohmann::json link_json(const PortLink& link);
// "up since 2026-01-02T03:04:05.678Z (12.3 s, 4 changes)" for the text reports.
std::string link_text(const PortLink& link);

}  // namespace psgate
