// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/prometheus.h"

#include <charconv>
#include <initializer_list>
#include <utility>

namespace psgate {

namespace {

using Labels = std::initializer_list<std::pair<std::string_view, std::string>>;

std::string number(uint64_t v) { return std::to_string(v); }
std::string number(int64_t v) { return std::to_string(v); }
std::string number(double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);  // shortest text that reads back exactly
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

// HELP text: only \ and newline need escaping there.
std::string escape_help(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

class Page {
 public:
  void family(const std::string& name, const char* type, std::string_view help) {
    out_ += "# HELP " + name + " " + escape_help(help) + "\n# TYPE " + name + " " + type + "\n";
  }
  void sample(const std::string& name, const std::vector<std::pair<std::string_view, std::string>>& labels,
              const std::string& value) {
    out_ += name;
    if (!labels.empty()) {
      out_ += '{';
      bool first = true;
      for (const auto& [k, v] : labels) {
        if (!first) out_ += ',';
        first = false;
        out_ += k;
        out_ += "=\"";
        out_ += prometheus_escape(v);
        out_ += '"';
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value;
    out_ += '\n';
  }
  void sample(const std::string& name, Labels labels, const std::string& value) {
    sample(name, std::vector<std::pair<std::string_view, std::string>>(labels), value);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// psgate_<group><field>[_<unit>]_total: the one naming rule for the tables' counters.
std::string counter_name(std::string_view group, const CounterInfo& info) {
  std::string name = "psgate_" + std::string(group) + info.name;
  if (!ends_with(info.name, unit_name(info.unit))) name += std::string("_") + unit_name(info.unit);
  return name + "_total";
}

std::vector<std::pair<std::string_view, std::string>> job_labels(const MetricsJob& j) {
  // Not "job": Prometheus gives every scraped series a `job` label of its own
  // (the scrape job), and would rename ours to exported_job.
  return {{"job_id", std::to_string(j.id)}, {"job_name", j.name}};
}

std::vector<std::pair<std::string_view, std::string>> with(std::vector<std::pair<std::string_view, std::string>> l,
                                                           std::string_view key, std::string value) {
  l.emplace_back(key, std::move(value));
  return l;
}

// The lower bound of the LatencyHistogram bucket whose upper bound is `upper`
// (latency_histogram.cc: below 16 exact, else 2^(msb-4) wide).
uint64_t bucket_lower(uint64_t upper) {
  if (upper < LatencyHistogram::kSubBuckets) return upper;
  const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(upper));
  return upper - ((uint64_t{1} << (msb - LatencyHistogram::kSubBucketBits)) - 1);
}

void sojourn_histogram(Page& page, const Totals& t) {
  const std::string name = "psgate_class_sojourn_seconds";
  page.family(name, "histogram",
              "Time a packet spent in psgate, RX to TX, by egress port and class. _sum is estimated from the "
              "histogram's own buckets (each at most 1/16 of its value wide), taking each at its middle");
  const std::vector<uint64_t> bounds = prometheus_sojourn_bounds_ns();
  for (unsigned p = 0; p < kPortCount; ++p) {
    for (unsigned c = 0; c < t.class_count; ++c) {
      const LatencyHistogram& h = t.cls(p, c).sojourn;
      const auto buckets = h.nonempty_buckets();  // ascending
      const std::string port = kPortNames[p], cls = std::to_string(c);
      uint64_t cumulative = 0;
      size_t next = 0;
      for (uint64_t le : bounds) {
        while (next < buckets.size() && buckets[next].first <= le) cumulative += buckets[next++].second;
        page.sample(name + "_bucket", {{"port", port}, {"class", cls}, {"le", number(static_cast<double>(le) / 1e9)}},
                    number(cumulative));
      }
      double sum_ns = 0;
      uint64_t count = 0;
      for (const auto& [upper, n] : buckets) {
        sum_ns += static_cast<double>(n) * (static_cast<double>(bucket_lower(upper)) + static_cast<double>(upper)) / 2;
        count += n;
      }
      // count, not h.count(): the two agree, and +Inf must equal _count
      // exactly whatever a concurrent reader's copy held.
      page.sample(name + "_bucket", {{"port", port}, {"class", cls}, {"le", "+Inf"}}, number(count));
      page.sample(name + "_sum", {{"port", port}, {"class", cls}}, number(sum_ns / 1e9));
      page.sample(name + "_count", {{"port", port}, {"class", cls}}, number(count));
    }
  }
}

}  // namespace

std::vector<uint64_t> prometheus_sojourn_bounds_ns() {
  std::vector<uint64_t> out;
  for (unsigned k = 8; k <= 30; ++k) out.push_back((uint64_t{1} << k) - 1);
  return out;
}

std::string prometheus_escape(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string render_prometheus(const MetricsView& v) {
  Page page;
  const Totals& t = v.totals;

  page.family("psgate_build_info", "gauge", "Always 1; the version psgate was built as");
  page.sample("psgate_build_info", {{"version", v.version}}, "1");
  page.family("psgate_start_time_seconds", "gauge", "When psgate started, seconds since the Unix epoch");
  page.sample("psgate_start_time_seconds", {}, number(v.start_time_unix_s));
  page.family("psgate_uptime_seconds", "gauge", "Seconds since psgate started");
  page.sample("psgate_uptime_seconds", {}, number(v.uptime_s));

  // Ports: one family per line of PSGATE_PORT_COUNTERS and PSGATE_NIC_COUNTERS.
  for (const auto& f : kPortFields) {
    const std::string name = counter_name("", f.info);
    page.family(name, "counter", f.info.help);
    for (unsigned p = 0; p < kPortCount; ++p) page.sample(name, {{"port", kPortNames[p]}}, number(t.ports[p].*f.total));
  }
  page.family("psgate_dropped_packets_total", "counter",
              "Packets received that did not leave, by reason, charged to the port they were to leave by "
              "(docs/operations.md says what to do about each reason)");
  for (unsigned p = 0; p < kPortCount; ++p)
    for (unsigned r = 0; r < kDropReasonCount; ++r)
      page.sample("psgate_dropped_packets_total", {{"port", kPortNames[p]}, {"reason", kDropReasonNames[r]}},
                  number(t.ports[p].drops[r]));
  for (const auto& f : kNicFields) {
    const std::string name = counter_name("nic_", f.info);
    page.family(name, "counter", f.info.help);
    for (unsigned p = 0; p < kPortCount; ++p)
      page.sample(name, {{"port", kPortNames[p]}}, number(t.ports[p].nic.*f.total));
  }
  page.family("psgate_link_up", "gauge", "1 while the port's link is up, 0 while down (its traffic is dropped)");
  for (unsigned p = 0; p < kPortCount; ++p)
    page.sample("psgate_link_up", {{"port", kPortNames[p]}}, t.ports[p].link.up ? "1" : "0");
  page.family("psgate_link_changes_total", "counter", "Link up/down transitions since start");
  for (unsigned p = 0; p < kPortCount; ++p)
    page.sample("psgate_link_changes_total", {{"port", kPortNames[p]}}, number(t.ports[p].link.changes));
  page.family("psgate_link_last_change_timestamp_seconds", "gauge",
              "When the link last changed (or psgate started), seconds since the Unix epoch");
  for (unsigned p = 0; p < kPortCount; ++p)
    page.sample("psgate_link_last_change_timestamp_seconds", {{"port", kPortNames[p]}},
                number(static_cast<double>(t.ports[p].link.since_unix_ns) / 1e9));

  // Classes, by egress port and class.
  for (const auto& f : kClassFields) {
    const std::string name = counter_name("class_", f.info);
    page.family(name, "counter", f.info.help);
    for (unsigned p = 0; p < kPortCount; ++p)
      for (unsigned c = 0; c < t.class_count; ++c)
        page.sample(name, {{"port", kPortNames[p]}, {"class", std::to_string(c)}}, number(t.cls(p, c).*f.total));
  }
  page.family("psgate_class_depth_packets", "gauge", "Packets queued in the class FIFO now");
  for (unsigned p = 0; p < kPortCount; ++p)
    for (unsigned c = 0; c < t.class_count; ++c)
      page.sample("psgate_class_depth_packets", {{"port", kPortNames[p]}, {"class", std::to_string(c)}},
                  number(t.cls(p, c).depth()));
  sojourn_histogram(page, t);

  page.family("psgate_mbufs", "gauge", "Buffers in the mbuf pool (dataplane.mbufs)");
  page.sample("psgate_mbufs", {}, number(t.mbufs));
  page.family("psgate_mbufs_in_use", "gauge",
              "Buffers out of the pool now: received and not yet sent or freed (a rise the queues do not explain "
              "is a leak)");
  page.sample("psgate_mbufs_in_use", {}, number(t.mbufs_in_use));

  // Flow caches, all RX lcores.
  for (const auto& f : kFlowCacheFields) {
    const std::string name = counter_name("flow_cache_", f.info);
    page.family(name, "counter", f.info.help);
    page.sample(name, {}, number(t.flow_cache.*f.total));
  }

  // Jobs: counters since the job was added, its place in the order, telemetry.
  page.family("psgate_jobs", "gauge", "Jobs known");
  page.sample("psgate_jobs", {}, number(static_cast<uint64_t>(v.jobs.size())));
  for (const auto& f : kJobDirectionFields) {
    const std::string name = counter_name("job_", f.info);
    page.family(name, "counter", f.info.help);
    for (const MetricsJob& j : v.jobs)
      for (unsigned d = 0; d < 2; ++d)
        page.sample(name, with(job_labels(j), "direction", kDirectionNames[d]), number((j.counters.*f.total)[d]));
  }
  for (const auto& f : kJobFields) {
    const std::string name = counter_name("job_", f.info);
    page.family(name, "counter", f.info.help);
    for (const MetricsJob& j : v.jobs) page.sample(name, job_labels(j), number(j.counters.*f.total));
  }
  page.family("psgate_job_rank", "gauge", "The operator's rank of the job (lower is served first)");
  for (const MetricsJob& j : v.jobs) page.sample("psgate_job_rank", job_labels(j), number(uint64_t{j.rank}));
  page.family("psgate_job_effective_rank", "gauge",
              "The rank the policy gives the job, by direction (the operator's rank under the static policy)");
  for (const MetricsJob& j : v.jobs)
    for (unsigned d = 0; d < 2; ++d)
      page.sample("psgate_job_effective_rank", with(job_labels(j), "direction", kDirectionNames[d]),
                  number(uint64_t{j.eff_rank[d]}));
  page.family("psgate_job_position", "gauge", "The job's place in the order in force, 0 = served first");
  for (const MetricsJob& j : v.jobs) page.sample("psgate_job_position", job_labels(j), number(uint64_t{j.position}));
  page.family("psgate_job_class", "gauge", "The egress class the job's packets go to, by direction");
  for (const MetricsJob& j : v.jobs)
    for (unsigned d = 0; d < 2; ++d)
      page.sample("psgate_job_class", with(job_labels(j), "direction", kDirectionNames[d]), number(uint64_t{j.cls[d]}));
  page.family("psgate_job_iterations_total", "counter",
              "Training iterations seen: the job's pull bursts (docs/architecture.md, job telemetry)");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_iterations_total", job_labels(j), number(j.telemetry.bursts));
  page.family("psgate_job_iteration_bytes", "gauge", "Bytes the job pulled in its last complete iteration");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_iteration_bytes", job_labels(j), number(j.telemetry.last_burst_bytes));
  page.family("psgate_job_current_iteration_bytes", "gauge",
              "Bytes of the iteration in progress (0 when the job is quiet)");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_current_iteration_bytes", job_labels(j), number(j.telemetry.current_burst_bytes));
  page.family("psgate_job_iteration_period_seconds", "gauge", "Start to start of the job's last two iterations");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_iteration_period_seconds", job_labels(j), number(j.telemetry.iteration_period_ms / 1e3));
  page.family("psgate_job_burst_duration_seconds", "gauge", "How long the job's last complete pull burst lasted");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_burst_duration_seconds", job_labels(j), number(j.telemetry.last_burst_ms / 1e3));
  page.family("psgate_job_straggler_wait_seconds", "gauge",
              "Last complete burst: the last worker's copy finished this long after the first's");
  for (const MetricsJob& j : v.jobs)
    page.sample("psgate_job_straggler_wait_seconds", job_labels(j), number(j.telemetry.straggler_wait_ms / 1e3));

  // Policy and control.
  page.family("psgate_policy_info", "gauge", "Always 1; the policy in force");
  page.sample("psgate_policy_info", {{"policy", v.policy}}, "1");
  page.family("psgate_policy_errors_total", "counter",
              "Policy re-ranks that could not be applied (the previous order stayed)");
  page.sample("psgate_policy_errors_total", {}, number(v.policy_errors));
  page.family("psgate_snapshot_generation", "gauge", "Snapshots published since start (each change of order or jobs)");
  page.sample("psgate_snapshot_generation", {}, number(v.generation));

  if (v.cluster) {
    const MetricsCluster& c = *v.cluster;
    auto gauge = [&](const char* name, const char* help, std::string value) {
      page.family(name, "gauge", help);
      page.sample(name, {}, std::move(value));
    };
    auto counter = [&](const char* name, const char* help, uint64_t value) {
      page.family(name, "counter", help);
      page.sample(name, {}, number(value));
    };
    gauge("psgate_cluster_connected", "1 while the cluster store answers, 0 while not (fail static)",
          c.connected ? "1" : "0");
    gauge("psgate_cluster_leader", "1 while this gateway is the cluster's policy leader", c.is_leader ? "1" : "0");
    gauge("psgate_cluster_store_revision", "The newest store revision this gateway has read", number(c.store_revision));
    gauge("psgate_cluster_applied_revision", "The store revision whose jobs, order and policy are in force here",
          number(c.applied_revision));
    counter("psgate_cluster_apply_errors_total", "Store views this gateway failed to apply", c.apply_errors);
    counter("psgate_cluster_write_errors_total", "Writes to the store that failed", c.write_errors);
    counter("psgate_cluster_watch_restarts_total", "Times the store's watch had to be restarted", c.watch_restarts);
  }
  return page.take();
}

}  // namespace psgate
