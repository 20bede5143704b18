// Text reports of the counters (control path).
#include "psgate/stats_report.h"

#include "psgate/stats_json.h"

#include <fmt/format.h>

namespace psgate {

namespace {

double mbit(uint64_t bytes, double seconds) { return seconds > 0 ? bytes * 8.0 / seconds / 1e6 : 0.0; }
double per_sec(uint64_t n, double seconds) { return seconds > 0 ? n / seconds : 0.0; }

std::string job_label(const JobEntry& job) { return fmt::format("{} {}", job.id, job.name); }

}  // namespace

bool conservation_holds(const Totals& t) { return t.rx_total() == t.tx_total() + t.drop_total(); }

std::string format_summary_line(const Totals& prev, const Totals& cur, double s) {
  const uint64_t rx = cur.rx_total() - prev.rx_total();
  const uint64_t tx = cur.tx_total() - prev.tx_total();
  const uint64_t rx_bytes = cur.ports[0].rx_bytes + cur.ports[1].rx_bytes - prev.ports[0].rx_bytes - prev.ports[1].rx_bytes;
  const uint64_t tx_bytes = cur.ports[0].tx_bytes + cur.ports[1].tx_bytes - prev.ports[0].tx_bytes - prev.ports[1].tx_bytes;
  std::string drops;
  for (unsigned r = 0; r < kDropReasonCount; ++r) {
    const uint64_t d = cur.ports[0].drops[r] + cur.ports[1].drops[r] - prev.ports[0].drops[r] - prev.ports[1].drops[r];
    if (d) drops += fmt::format(" {}={:.0f}/s", kDropReasonNames[r], per_sec(d, s));
  }
  return fmt::format("rx {:.3f} Mpps {:.1f} Mbit/s | tx {:.3f} Mpps {:.1f} Mbit/s (wire {:.1f}, host {:.1f}) | drops{}",
                     per_sec(rx, s) / 1e6, mbit(rx_bytes, s), per_sec(tx, s) / 1e6, mbit(tx_bytes, s),
                     mbit(cur.ports[0].tx_bytes - prev.ports[0].tx_bytes, s),
                     mbit(cur.ports[1].tx_bytes - prev.ports[1].tx_bytes, s), drops.empty() ? " none" : drops);
}

std::string format_job_rates(const Totals& prev, const Totals& cur, double s, const Snapshot& snap, double uptime) {
  // "demand" is what the job offered after its ingress policer; "sent" what
  // left psgate. Pull (PS -> workers) is the direction that contends at the PS host.
  std::string out = fmt::format("{:>7}  {:<22} {:>5} {:>13} {:>13} {:>13} {:>13} {:>10} {:>10}\n",
                                fmt::format("{:.1f}s", uptime), "job", "class", "pull demand", "pull sent",
                                "push demand", "push sent", "policed/s", "drops/s");
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& a = prev.jobs[job.slot];
    const JobTotals& b = cur.jobs[job.slot];
    out += fmt::format("{:>7}  {:<22} {:>5} {:>8.1f} Mb/s {:>8.1f} Mb/s {:>8.1f} Mb/s {:>8.1f} Mb/s {:>10.0f} {:>10.0f}\n", "",
                       job_label(job), snap.slots[job.slot].cls[kPull],
                       mbit(b.admitted_bytes[kPull] - a.admitted_bytes[kPull], s),
                       mbit(b.sent_bytes[kPull] - a.sent_bytes[kPull], s),
                       mbit(b.admitted_bytes[kPush] - a.admitted_bytes[kPush], s),
                       mbit(b.sent_bytes[kPush] - a.sent_bytes[kPush], s), per_sec(b.policed - a.policed, s),
                       per_sec(b.drops - a.drops, s));
  }
  return out;
}

std::string format_final_report(const Totals& t, const Snapshot& snap, const ConfigSpec& config) {
  std::string out = "\n== ports ==\n";
  out += fmt::format("{:<6} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>12} {:>10} {:>10}\n", "port", "rx pkts",
                     "rx bytes", "tx pkts", "tx bytes", "malformed", "net-ctrl", "unclassified", "nic-missed",
                     "nic-nombuf");
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortTotals& pt = t.ports[p];
    out += fmt::format("{:<6} {:>12} {:>14} {:>12} {:>14} {:>10} {:>10} {:>12} {:>10} {:>10}\n", kPortNames[p],
                       pt.rx_packets, pt.rx_bytes, pt.tx_packets, pt.tx_bytes, pt.rx_malformed,
                       pt.rx_network_control, pt.rx_unclassified, pt.nic_imissed, pt.nic_rx_nombuf);
  }
  out += "\n== links ==\n";
  for (unsigned p = 0; p < kPortCount; ++p) out += fmt::format("{:<6} {}\n", kPortNames[p], link_text(t.ports[p].link));
  out += "\n== drops by reason (by egress port) ==\n";
  out += fmt::format("{:<16} {:>12} {:>12}\n", "reason", "wire", "host");
  for (unsigned r = 0; r < kDropReasonCount; ++r) {
    out += fmt::format("{:<16} {:>12} {:>12}\n", kDropReasonNames[r], t.ports[0].drops[r], t.ports[1].drops[r]);
  }
  out += "\n== classes (egress port / class) ==\n";
  out += fmt::format("{:<6} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10} {:>10}\n", "port", "class",
                     "enqueued", "sent", "q-full", "ring-full", "ecn-ce", "dscp", "p50 us", "p99 us", "p99.9 us");
  for (unsigned p = 0; p < kPortCount; ++p) {
    for (unsigned c = 0; c < t.class_count; ++c) {
      const ClassTotals& ct = t.cls(p, c);
      if (ct.enqueued_packets == 0 && ct.drop_queue_full == 0 && ct.drop_ring_full == 0) continue;
      out += fmt::format("{:<6} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>10.1f} {:>10.1f} {:>10.1f}\n",
                         kPortNames[p], c, ct.enqueued_packets, ct.dequeued_packets, ct.drop_queue_full,
                         ct.drop_ring_full, ct.ecn_marked, ct.dscp_remarked, ct.sojourn.percentile(0.5) / 1e3,
                         ct.sojourn.percentile(0.99) / 1e3, ct.sojourn.percentile(0.999) / 1e3);
    }
  }
  out += "\n== jobs ==\n";
  out += fmt::format("{:<22} {:>5} {:>5} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", "job", "rank", "class",
                     "pull admit", "pull sent", "push admit", "push sent", "policed", "drops");
  for (const JobEntry& job : snap.jobs) {
    const JobTotals& jt = t.jobs[job.slot];
    out += fmt::format("{:<22} {:>5} {:>5} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10}\n", job_label(job), job.rank,
                       snap.slots[job.slot].cls[kPull], jt.admitted_packets[kPull], jt.sent_packets[kPull],
                       jt.admitted_packets[kPush], jt.sent_packets[kPush], jt.policed, jt.drops);
  }
  (void)config;
  const FlowCacheTotals& fc = t.flow_cache;
  const uint64_t lookups = fc.hits + fc.misses;
  out += fmt::format("\nflow cache: {} hits, {} misses ({:.2f}% hit), {} evictions{}\n", fc.hits, fc.misses,
                     lookups ? 100.0 * static_cast<double>(fc.hits) / static_cast<double>(lookups) : 0.0,
                     fc.evictions, fc.evictions ? " (more flows than dataplane.flow_cache holds well)" : "");
  out += fmt::format("\nconservation: received {} = transmitted {} + dropped {} : {}\n", t.rx_total(), t.tx_total(),
                     t.drop_total(), conservation_holds(t) ? "OK" : "MISMATCH");
  return out;
}

}  // namespace psgate
