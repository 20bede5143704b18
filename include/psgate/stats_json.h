// Counters as JSON: the one machine-readable form, shared by `psgate
// --stats-json`, the control socket and the tests.
#pragma once

#include <nlohmann/json.hpp>

#include "psgate/dataplane.h"
#include "psgate/snapshot.h"

namespace psgate {

// {"ports": {"wire": {...}, "host": {...}}, "classes": [...], "jobs": [...],
//  "totals": {"received", "transmitted", "dropped", "conserved"}}
nlohmann::json totals_to_json(const Totals& totals, const Snapshot& snap);
nlohmann::json telemetry_json(const JobTelemetry& t);

}  // namespace psgate
