// SPDX-License-Identifier: BSD-3-Clause
// Human-readable reports of the data plane's counters: the periodic per-job
// rate table and the full table printed at exit.
#pragma once

#include <string>

#include "psgate/dataplane.h"
#include "psgate/snapshot.h"

namespace psgate {

// Rates between two reads `seconds` apart: one summary line.
std::string format_summary_line(const Totals& prev, const Totals& cur, double seconds);
// Per-job offered/sent rates between two reads, as an aligned table.
std::string format_job_rates(const Totals& prev, const Totals& cur, double seconds, const Snapshot& snap,
                             double uptime_seconds);
// Everything: ports, drops by reason, classes with sojourn percentiles, jobs,
// and the conservation check (received = transmitted + dropped).
std::string format_final_report(const Totals& totals, const Snapshot& snap, const ConfigSpec& config);

// received == transmitted + every named drop (after a drained shutdown).
bool conservation_holds(const Totals& totals);

}  // namespace psgate
