// SPDX-License-Identifier: BSD-3-Clause
#include "stats/stats_json.h"

#include <ctime>

#include <fmt/format.h>

namespace psgate {

namespace {

nlohmann::json histogram_json(const LatencyHistogram& h) {
  return {{"count", h.count()},
          {"min_ns", h.min()},
          {"p50_ns", h.percentile(0.5)},
          {"p99_ns", h.percentile(0.99)},
          {"p999_ns", h.percentile(0.999)},
          {"max_ns", h.max()}};
}

uint64_t now_unix_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::string utc_text(uint64_t unix_ns) {
  const time_t secs = static_cast<time_t>(unix_ns / 1'000'000'000ull);
  tm t{};
  gmtime_r(&secs, &t);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &t);
  return fmt::format("{}.{:03}Z", buf, unix_ns / 1'000'000 % 1000);
}

// {name: value} for every field of one counter group (psgate/totals.h).
template <typename Fields, typename Sums>
nlohmann::json fields_json(const Fields& fields, const Sums& sums) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : fields) out[f.info.name] = sums.*f.total;
  return out;
}

double seconds_since(uint64_t unix_ns) {
  const uint64_t now = now_unix_ns();
  return now > unix_ns ? static_cast<double>(now - unix_ns) / 1e9 : 0.0;
}

}  // namespace

nlohmann::json link_json(const PortLink& link) {
  nlohmann::json j = {{"state", link.up ? "up" : "down"},
                      {"since", utc_text(link.since_unix_ns)},
                      {"for_s", seconds_since(link.since_unix_ns)},
                      {"changes", link.changes},
                      {"detail", link.detail},  // always present: psgatectl's port table takes its keys from one port
                      {"short_mtu", link.short_mtu ? nlohmann::json(link.short_mtu) : nlohmann::json()}};
  return j;
}

std::string link_text(const PortLink& link) {
  std::string out = fmt::format("{} since {} ({:.1f} s, {} changes)", link.up ? "up" : "down",
                                utc_text(link.since_unix_ns), seconds_since(link.since_unix_ns), link.changes);
  if (!link.up) out += ": " + link.detail;
  return out;
}

nlohmann::json telemetry_json(const JobTelemetry& t) {
  return {{"iterations", t.bursts},
          {"bytes_per_iteration", t.last_burst_bytes},
          {"bytes_this_iteration", t.current_burst_bytes},
          {"iteration_period_ms", t.iteration_period_ms},
          {"last_burst_ms", t.last_burst_ms},
          {"straggler_wait_ms", t.straggler_wait_ms}};
}

nlohmann::json totals_to_json(const Totals& t, const Snapshot& snap) {
  nlohmann::json out;
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortTotals& pt = t.ports[p];
    nlohmann::json port = fields_json(kPortFields, pt);
    nlohmann::json& drops = port["drops"];  // by reason, for packets that were to leave by this port
    for (unsigned r = 0; r < kDropReasonCount; ++r) drops[kDropReasonNames[r]] = pt.drops[r];
    port["link"] = link_json(pt.link);
    port["nic"] = fields_json(kNicFields, pt.nic);
    out["ports"][kPortNames[p]] = port;
  }
  out["classes"] = nlohmann::json::array();
  for (unsigned p = 0; p < kPortCount; ++p) {
    for (unsigned c = 0; c < t.class_count; ++c) {
      const ClassTotals& ct = t.cls(p, c);
      nlohmann::json cls = fields_json(kClassFields, ct);
      cls["port"] = kPortNames[p];
      cls["class"] = c;
      cls["depth"] = ct.depth();
      cls["sojourn"] = histogram_json(ct.sojourn);
      out["classes"].push_back(cls);
    }
  }
  out["jobs"] = nlohmann::json::array();
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& jt = t.jobs[job.slot];
    nlohmann::json j = fields_json(kJobFields, jt);
    j["id"] = job.id;
    j["name"] = job.name;
    j["rank"] = job.rank;
    j["class"] = snap.slots[job.slot].cls[kPull];
    j["pull_class"] = snap.slots[job.slot].cls[kPull];
    j["push_class"] = snap.slots[job.slot].cls[kPush];
    for (unsigned dir = 0; dir < 2; ++dir) {
      nlohmann::json& d = j[kDirectionNames[dir]];
      for (const auto& f : kJobDirectionFields) d[f.info.name] = (jt.*f.total)[dir];
    }
    out["jobs"].push_back(j);
  }
  out["flow_cache"] = fields_json(kFlowCacheFields, t.flow_cache);
  out["totals"] = {{"received", t.rx_total()},
                   {"transmitted", t.tx_total()},
                   {"dropped", t.drop_total()},
                   {"conserved", t.rx_total() == t.tx_total() + t.drop_total()},
                   // What is inside psgate at a live read (class queues, rings,
                   // pending bursts): conserved is false meanwhile. The
                   // counters are read one by one, received last, so on a
                   // busy gateway it may count a burst or so too many, never
                   // a negative number.
                   {"in_flight", static_cast<int64_t>(t.rx_total() - t.tx_total() - t.drop_total())},
                   {"mbufs", t.mbufs},
                   {"mbufs_in_use", t.mbufs_in_use}};
  return out;
}

}  // namespace psgate
