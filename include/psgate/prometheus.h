// SPDX-License-Identifier: BSD-3-Clause
// psgate's counters in the Prometheus text exposition format (version 0.0.4),
// served on GET /metrics when [metrics] listen is set (docs/metrics.md).
//
// Pure: the renderer takes a MetricsView (a copy of everything it shows,
// taken by ControlPlane::metrics_view) and returns the page. The counter
// families come from the field tables in psgate/counters.h and totals.h, one
// family per table line, so a counter added there is exported with no code
// here. Names: "psgate_" + group + field, "_" + unit unless the field already
// ends in it, "_total" for counters (rx_packets -> psgate_rx_packets_total,
// a class's drop_queue_full -> psgate_class_drop_queue_full_packets_total).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psgate/job_telemetry.h"
#include "psgate/policy.h"
#include "psgate/totals.h"

namespace psgate {

// One job as the snapshot in force and the control thread see it.
struct MetricsJob {
  uint32_t id = 0;
  std::string name;
  uint32_t rank = 0;                   // the operator's rank
  uint32_t position = 0;               // 0-based place in the order in force (0 = first served)
  std::array<uint32_t, 2> cls{};       // class by Direction
  std::array<uint32_t, 2> eff_rank{};  // the policy's rank by Direction (= rank under static)
  JobTotals counters;
  JobTelemetry telemetry;
};

// Cluster mode only: the link to the store, as `psgatectl cluster` shows it.
struct MetricsCluster {
  bool connected = false;
  bool is_leader = false;
  int64_t store_revision = 0;
  int64_t applied_revision = 0;
  uint64_t apply_errors = 0;
  uint64_t write_errors = 0;
  uint64_t watch_restarts = 0;
};

struct MetricsView {
  Totals totals;  // with histograms
  std::vector<MetricsJob> jobs;
  std::string version;
  std::string policy;  // policy_name()
  uint64_t generation = 0;
  uint64_t policy_errors = 0;
  double uptime_s = 0;
  double start_time_unix_s = 0;
  std::optional<MetricsCluster> cluster;
};

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// The upper bounds (le) of the sojourn histogram's buckets, in nanoseconds:
// 2^k - 1 for k = 8..30 (about 0.26 us .. 1.07 s). Each is the last
// nanosecond of one of LatencyHistogram's own buckets, so the cumulative
// counts are exact, not interpolated.
std::vector<uint64_t> prometheus_sojourn_bounds_ns();

// A label value escaped as the format wants it: \ -> \\, " -> \", newline -> \n.
std::string prometheus_escape(std::string_view value);

std::string render_prometheus(const MetricsView& view);

}  // namespace psgate
