// SPDX-License-Identifier: BSD-3-Clause
#include "report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string_view>

#include "psgate/text.h"

namespace psgate::gen {
namespace {

constexpr double kL1Overhead = 24;  // FCS 4 + preamble 8 + inter-frame gap 12, bytes

double per_s(double v, double s) { return s > 0 ? v / s : 0; }

// The table's name column: at most `width` characters (code points), padded
// to that many. printf's %-14.14s counts bytes: it cut a character of a
// name in two (bytes that are not UTF-8 in the table) and padded names of
// multi-byte characters short, out of line with the columns.
std::string name_column(std::string_view name, size_t width) {
  std::string out;
  size_t chars = 0;
  for (size_t at = 0; at < name.size() && chars < width; ++chars) {
    const auto cp = decode_utf8(name.substr(at));
    const size_t len = cp ? cp->length : 1;  // the profile takes only UTF-8 names
    out.append(name.substr(at, len));
    at += len;
  }
  out.append(width - chars, ' ');
  return out;
}

nlohmann::json latency_json(const LatencyHistogram& h) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const auto& [upper, count] : h.nonempty_buckets()) buckets.push_back({upper, count});
  return {{"count", h.count()},
          {"min_ns", h.min()},
          {"p50_ns", h.percentile(0.5)},
          {"p99_ns", h.percentile(0.99)},
          {"p999_ns", h.percentile(0.999)},
          {"max_ns", h.max()},
          {"buckets", std::move(buckets)}};
}

nlohmann::json stream_json(const StreamResult& s, double tx_s) {
  const uint64_t lost = s.lost();
  return {{"tx_packets", s.tx_packets},
          {"tx_bytes", s.tx_bytes},
          {"tx_dropped", s.tx_dropped},
          {"alloc_failed", s.alloc_failed},
          {"tx_pps", per_s(s.tx_packets, tx_s)},
          {"tx_bps", per_s(8.0 * s.tx_bytes, tx_s)},
          {"tx_l1_bps", per_s(8.0 * (s.tx_bytes + kL1Overhead * s.tx_packets), tx_s)},
          {"rx_packets", s.rx_packets},
          {"rx_bytes", s.rx_bytes},
          {"rx_unique", s.rx_unique},
          {"rx_excess", s.rx_excess},
          {"rx_seconds", s.rx_seconds},
          {"rx_pps", per_s(s.rx_packets, s.rx_seconds)},
          {"rx_bps", per_s(8.0 * s.rx_bytes, s.rx_seconds)},
          {"rx_l1_bps", per_s(8.0 * (s.rx_bytes + kL1Overhead * s.rx_packets), s.rx_seconds)},
          {"lost", lost},
          {"loss_ratio", s.tx_packets ? static_cast<double>(lost) / static_cast<double>(s.tx_packets) : 0.0},
          {"reordered", s.reordered},
          {"duplicates", s.duplicates},
          {"late", s.late},
          {"wrong_port", s.wrong_port},
          {"flows", s.flows},
          {"flows_seen", s.flows_seen},
          {"flows_with_loss", s.flows_with_loss},
          {"flows_reordered", s.flows_reordered},
          {"flows_with_duplicates", s.flows_with_duplicates},
          {"flows_with_late", s.flows_with_late},
          {"max_flow_loss", s.max_flow_loss},
          {"latency_invalid", s.latency_invalid},
          {"rx_stale", s.rx_stale},
          {"latency", latency_json(s.latency)}};
}

const char* rate_mode_name(RateMode m) {
  switch (m) {
    case RateMode::kPps:
      return "pps";
    case RateMode::kBps:
      return "bit/s";
    case RateMode::kMax:
      break;
  }
  return "max";
}

const char* size_name(const JobProfile& j, char* buf, size_t n) {
  if (j.size_model == SizeModel::kImix) return "imix";
  if (j.size_model == SizeModel::kPsLike) return "ps";
  std::snprintf(buf, n, "%uB", j.size);
  return buf;
}

}  // namespace

void StreamResult::merge(const StreamResult& o) {
  tx_packets += o.tx_packets;
  tx_bytes += o.tx_bytes;
  tx_dropped += o.tx_dropped;
  alloc_failed += o.alloc_failed;
  rx_packets += o.rx_packets;
  rx_bytes += o.rx_bytes;
  rx_unique += o.rx_unique;
  rx_excess += o.rx_excess;
  reordered += o.reordered;
  duplicates += o.duplicates;
  late += o.late;
  wrong_port += o.wrong_port;
  flows += o.flows;
  flows_seen += o.flows_seen;
  flows_with_loss += o.flows_with_loss;
  flows_reordered += o.flows_reordered;
  flows_with_duplicates += o.flows_with_duplicates;
  flows_with_late += o.flows_with_late;
  max_flow_loss = std::max(max_flow_loss, o.max_flow_loss);
  rx_seconds = std::max(rx_seconds, o.rx_seconds);
  latency.merge(o.latency);
  latency_invalid += o.latency_invalid;
  rx_stale += o.rx_stale;
}

std::string si(double v, const char* unit) {
  static constexpr const char* kPrefix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) {
    v /= 1000;
    ++i;
  }
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%.2f %s%s", v, kPrefix[i], unit);
  return buf;
}

std::vector<std::string> other_run_warnings(const RunResult& r) {
  std::vector<std::string> out;
  for (const PortResult& p : r.ports) {
    if (p.rx_other_run == 0) continue;
    char line[512];
    std::snprintf(line, sizeof(line),
                  "warning: %" PRIu64
                  " frames from another generator run arrived on %s port %u (%s): two generators wired "
                  "together? They carry another run tag than this run's 0x%04x and count in no flow (rx_other_run)",
                  p.rx_other_run, p.role.c_str(), p.port_id, p.name.c_str(), r.run_tag);
    out.emplace_back(line);
  }
  return out;
}

GeneratorSide generator_side(const RunResult& r) {
  GeneratorSide g;
  for (const PortResult& p : r.ports) {
    g.rx_backlog_rounds += p.rx_backlog;
    g.rx_imissed += p.nic_imissed;
    g.rx_nombuf += p.nic_rx_nombuf;
    g.alloc_failed += p.alloc_failed;
    g.link_down_events += p.link_down_events;
  }
  for (const JobResult& jr : r.jobs) {
    for (unsigned d = 0; d < 2; ++d) {
      if (!jr.has[d]) continue;
      g.tx_dropped += jr.dir[d].tx_dropped;
      g.lost += jr.dir[d].lost();
    }
  }
  return g;
}

nlohmann::json to_json(const RunResult& r) {
  nlohmann::json out;
  const GeneratorSide g = generator_side(r);
  out["generator"] = {{"lcores", r.lcore_mode},
                      {"tsc_hz", r.tsc_hz},
                      {"tx_seconds", r.tx_seconds},
                      {"drain_seconds", r.drain_seconds},
                      {"interrupted", r.interrupted},
                      {"links_up", r.links_up},
                      {"rx_foreign", r.rx_foreign},
                      {"rx_other_run", r.rx_other_run},
                      {"run_tag", r.run_tag},
                      {"rx_bursts_per_round", r.rx_bursts_per_round},
                      {"units", "bytes: frames without FCS; *_l1_bps: +24 B per frame; latency in ns"}};
  out["generator_side"] = {{"loss_may_be_own", g.loss_may_be_own()},
                           {"rx_backlog_rounds", g.rx_backlog_rounds},
                           {"rx_imissed", g.rx_imissed},
                           {"rx_nombuf", g.rx_nombuf},
                           {"tx_dropped", g.tx_dropped},
                           {"alloc_failed", g.alloc_failed},
                           {"link_down_events", g.link_down_events}};
  out["ports"] = nlohmann::json::array();
  for (const PortResult& p : r.ports) {
    out["ports"].push_back({{"role", p.role},
                            {"device", p.name},
                            {"port_id", p.port_id},
                            {"rx_foreign", p.rx_foreign},
                            {"rx_other_run", p.rx_other_run},
                            {"alloc_failed", p.alloc_failed},
                            {"rx_backlog_rounds", p.rx_backlog},
                            {"link_down_events", p.link_down_events},
                            {"link_up_at_end", p.link_up_at_end},
                            {"nic",
                             {{"ipackets", p.nic_ipackets},
                              {"opackets", p.nic_opackets},
                              {"imissed", p.nic_imissed},
                              {"oerrors", p.nic_oerrors},
                              {"rx_nombuf", p.nic_rx_nombuf}}}});
  }
  out["jobs"] = nlohmann::json::array();
  StreamResult grand;
  for (const JobResult& jr : r.jobs) {
    const JobProfile& j = *jr.job;
    char buf[16];
    nlohmann::json jj = {{"id", j.id},
                         {"name", j.name},
                         {"ps", (j.ps_addr.v6 ? "[" + format_addr(j.ps_addr) + "]" : format_addr(j.ps_addr)) + ":" +
                                    std::to_string(j.ps_port)},  // as in the profile
                         {"proto", j.proto == Proto::kTcp ? "tcp" : "udp"},
                         {"workers", j.workers},
                         {"flows", j.flows},
                         {"size", size_name(j, buf, sizeof(buf))},
                         {"rate_mode", rate_mode_name(j.rate_mode)},
                         {"rate", j.rate},
                         {"pattern", j.pattern == Pattern::kIteration ? "iteration" : "constant"},
                         {"iterations", jr.iterations}};
    StreamResult total;
    for (unsigned d = 0; d < 2; ++d) {
      if (!jr.has[d]) continue;
      jj[kDirNames[d]] = stream_json(jr.dir[d], r.tx_seconds);
      total.merge(jr.dir[d]);
    }
    jj["total"] = stream_json(total, r.tx_seconds);
    grand.merge(total);
    out["jobs"].push_back(std::move(jj));
  }
  out["totals"] = stream_json(grand, r.tx_seconds);
  return out;
}

std::string format_progress(const LiveTotals& prev, const LiveTotals& cur, double secs, double t) {
  char line[512];
  std::snprintf(line, sizeof(line),
                "%7.1fs  tx %s %s  rx %s  tx_dropped %" PRIu64 "  lost-so-far %" PRId64 "  foreign %" PRIu64
                "  alloc_failed %" PRIu64 "  other_run %" PRIu64 "\n",
                t, si(per_s(static_cast<double>(cur.tx_packets - prev.tx_packets), secs), "pps").c_str(),
                si(per_s(8.0 * static_cast<double>(cur.tx_bytes - prev.tx_bytes), secs), "bit/s").c_str(),
                si(per_s(static_cast<double>(cur.rx_packets - prev.rx_packets), secs), "pps").c_str(), cur.tx_dropped,
                static_cast<int64_t>(cur.tx_packets - cur.rx_unique), cur.rx_foreign, cur.alloc_failed,
                cur.rx_other_run);
  return line;
}

std::string format_table(const RunResult& r) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof(line), "psgate-gen: %.3f s of TX (%s lcore mode), drain %.3f s%s\n", r.tx_seconds,
                r.lcore_mode.c_str(), r.drain_seconds,
                !r.links_up     ? ", interrupted while waiting for the links"
                : r.interrupted ? ", interrupted"
                                : "");
  out += line;
  std::snprintf(line, sizeof(line),
                "%-6s %-14s %-4s %12s %12s %10s %12s %12s %10s %8s %8s %8s %10s %10s %10s %10s %10s\n", "job", "name",
                "dir", "tx pkts", "tx rate", "tx Mbit/s", "rx pkts", "rx rate", "lost", "reord", "dup", "late",
                "tx_drop", "no_mbuf", "lat p50", "lat p99", "lat max");
  out += line;
  StreamResult grand;
  auto row = [&](const char* id, const char* name, const char* dir, const StreamResult& s) {
    std::snprintf(line, sizeof(line),
                  "%-6s %s %-4s %12" PRIu64 " %12s %10.1f %12" PRIu64 " %12s %10" PRIu64 " %8" PRIu64 " %8" PRIu64
                  " %8" PRIu64 " %10" PRIu64 " %10" PRIu64 " %8.1fus %8.1fus %8.1fus\n",
                  id, name_column(name, 14).c_str(), dir, s.tx_packets,
                  si(per_s(s.tx_packets, r.tx_seconds), "pps").c_str(), per_s(8e-6 * s.tx_bytes, r.tx_seconds),
                  s.rx_packets, si(per_s(s.rx_packets, s.rx_seconds), "pps").c_str(), s.lost(), s.reordered,
                  s.duplicates, s.late, s.tx_dropped, s.alloc_failed, s.latency.percentile(0.5) / 1e3,
                  s.latency.percentile(0.99) / 1e3, s.latency.max() / 1e3);
    out += line;
  };
  for (const JobResult& jr : r.jobs) {
    const std::string id = std::to_string(jr.job->id);
    for (unsigned d = 0; d < 2; ++d) {
      if (!jr.has[d]) continue;
      row(id.c_str(), jr.job->name.c_str(), kDirNames[d], jr.dir[d]);
      grand.merge(jr.dir[d]);
    }
  }
  row("all", "", "", grand);
  std::snprintf(line, sizeof(line),
                "flows: %" PRIu64 " of %" PRIu64 " seen; with loss %" PRIu64 " (worst %" PRIu64
                " lost), reordered %" PRIu64 ", with duplicates %" PRIu64 ", with late arrivals %" PRIu64 "\n",
                grand.flows_seen, grand.flows, grand.flows_with_loss, grand.max_flow_loss, grand.flows_reordered,
                grand.flows_with_duplicates, grand.flows_with_late);
  out += line;
  const GeneratorSide g = generator_side(r);
  if (g.rx_imissed + g.rx_nombuf) {
    std::snprintf(line, sizeof(line),
                  "generator's own RX drops: imissed %" PRIu64 ", rx_nombuf %" PRIu64
                  " (in lost, but not the network's)\n",
                  g.rx_imissed, g.rx_nombuf);
    out += line;
  }
  if (g.rx_backlog_rounds) {
    std::snprintf(
        line, sizeof(line),
        "generator RX was behind in %" PRIu64 " rounds (stopped at %u bursts per port with frames waiting)%s\n",
        g.rx_backlog_rounds, r.rx_bursts_per_round,
        g.lost ? ": some loss may be the peer's, behind the generator's full RX ring (psgate: queue_full)" : "");
    out += line;
  }
  if (!g.rx_backlog_rounds && !g.rx_imissed && !g.rx_nombuf) {
    out += "generator RX kept up: never behind, no frames dropped at its ports\n";
  }
  for (const PortResult& p : r.ports) {
    if (p.link_down_events == 0) continue;
    std::snprintf(line, sizeof(line),
                  "link down during the run: %s port %u (%s) went down %" PRIu64
                  " time(s)%s: its peer (or the wire) went away; frames it held are in lost, those TX offered "
                  "meanwhile in tx_drop\n",
                  p.role.c_str(), p.port_id, p.name.c_str(), p.link_down_events,
                  p.link_up_at_end ? ", up again at the end" : ", still down at the end");
    out += line;
  }
  if (g.tx_dropped + g.alloc_failed) {
    std::snprintf(line, sizeof(line),
                  "generator TX fell short: %" PRIu64 " frames refused by full TX rings%s, %" PRIu64
                  " not built for want of mbufs (never sent, not in lost)\n",
                  g.tx_dropped, g.link_down_events ? " or a link down" : "", g.alloc_failed);
    out += line;
  }
  if (r.rx_foreign) {
    std::snprintf(line, sizeof(line), "frames without a psgate-gen stamp received: %" PRIu64 "\n", r.rx_foreign);
    out += line;
  }
  if (grand.rx_stale) {
    std::snprintf(line, sizeof(line),
                  "frames sent before this run began received: %" PRIu64
                  " (an earlier run's a peer still held, or a generator on another host; rx_stale, in no flow)\n",
                  grand.rx_stale);
    out += line;
  }
  if (r.rx_other_run) {
    // The figures; the warning itself goes to stderr (main), once.
    out += "frames of another generator run received (rx_other_run, in no flow):";
    const char* sep = " ";
    for (const PortResult& p : r.ports) {
      if (p.rx_other_run == 0) continue;
      std::snprintf(line, sizeof(line), "%s%" PRIu64 " on %s port %u", sep, p.rx_other_run, p.role.c_str(), p.port_id);
      out += line;
      sep = ", ";
    }
    out += "\n";
  }
  return out;
}

}  // namespace psgate::gen
