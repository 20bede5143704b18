#include "psgate/stats_json.h"

#include <ctime>

#include <fmt/format.h>

namespace psgate {

namespace {

nlohmann::json histogram_json(const LatencyHistogram& h) {
  return {{"count", h.count()},          {"min_ns", h.min()},
          {"p50_ns", h.percentile(0.5)}, {"p99_ns", h.percentile(0.99)},
          {"p999_ns", h.percentile(0.999)}, {"max_ns", h.max()}};
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
                      {"detail", link.detail}};  // always present: psgatectl's port table takes its keys from one port
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
    nlohmann::json drops;
    for (unsigned r = 0; r < kDropReasonCount; ++r) drops[kDropReasonNames[r]] = pt.drops[r];
    out["ports"][kPortNames[p]] = {
        {"rx_packets", pt.rx_packets},
        {"rx_bytes", pt.rx_bytes},
        {"rx_malformed", pt.rx_malformed},
        {"rx_network_control", pt.rx_network_control},
        {"rx_unclassified", pt.rx_unclassified},
        {"tx_packets", pt.tx_packets},
        {"tx_bytes", pt.tx_bytes},
        {"drops", drops},  // by reason, for packets that were to leave by this port
        {"rerank_migrations", pt.rerank_migrations},
        {"rerank_deferred", pt.rerank_deferred},
        {"link", link_json(pt.link)},
        {"nic", {{"imissed", pt.nic_imissed}, {"ierrors", pt.nic_ierrors}, {"rx_nombuf", pt.nic_rx_nombuf},
                 {"oerrors", pt.nic_oerrors}}},
    };
  }
  out["classes"] = nlohmann::json::array();
  for (unsigned p = 0; p < kPortCount; ++p) {
    for (unsigned c = 0; c < t.class_count; ++c) {
      const ClassTotals& ct = t.cls(p, c);
      out["classes"].push_back({{"port", kPortNames[p]},
                                {"class", c},
                                {"enqueued_packets", ct.enqueued_packets},
                                {"enqueued_bytes", ct.enqueued_bytes},
                                {"dequeued_packets", ct.dequeued_packets},
                                {"dequeued_bytes", ct.dequeued_bytes},
                                {"depth", ct.depth()},
                                {"drop_queue_full", ct.drop_queue_full},
                                {"drop_ring_full", ct.drop_ring_full},
                                {"ecn_marked", ct.ecn_marked},
                                {"dscp_remarked", ct.dscp_remarked},
                                {"migrated_in", ct.migrated_in},
                                {"migrated_out", ct.migrated_out},
                                {"sojourn", histogram_json(ct.sojourn)}});
    }
  }
  out["jobs"] = nlohmann::json::array();
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& jt = t.jobs[job.slot];
    nlohmann::json j = {{"id", job.id},
                        {"name", job.name},
                        {"rank", job.rank},
                        {"class", snap.slots[job.slot].cls[kPull]},
                        {"pull_class", snap.slots[job.slot].cls[kPull]},
                        {"push_class", snap.slots[job.slot].cls[kPush]},
                        {"policed", jt.policed},
                        {"drops", jt.drops}};
    for (unsigned dir = 0; dir < 2; ++dir) {
      j[kDirectionNames[dir]] = {{"admitted_packets", jt.admitted_packets[dir]},
                                 {"admitted_bytes", jt.admitted_bytes[dir]},
                                 {"sent_packets", jt.sent_packets[dir]},
                                 {"sent_bytes", jt.sent_bytes[dir]}};
    }
    out["jobs"].push_back(j);
  }
  out["flow_cache"] = {{"hits", t.flow_cache.hits},
                       {"misses", t.flow_cache.misses},
                       {"evictions", t.flow_cache.evictions}};
  out["totals"] = {{"received", t.rx_total()},
                   {"transmitted", t.tx_total()},
                   {"dropped", t.drop_total()},
                   {"conserved", t.rx_total() == t.tx_total() + t.drop_total()}};
  return out;
}

}  // namespace psgate
