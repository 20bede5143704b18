// SPDX-License-Identifier: BSD-3-Clause
// (b) Tables and confirmations from sample replies: the content is there and
// columns line up (a right-aligned column ends at one offset on every line, a
// left-aligned one starts at one offset).
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "config/config_json.h"
#include "format.h"
#include "psgate/config.h"

namespace psgatectl {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// Character (not byte) offset of `token` in `line`, or npos.
size_t col(const std::string& line, const std::string& token) {
  const size_t at = line.find(token);
  return at == std::string::npos ? at : display_width(line.substr(0, at));
}

// The first line of `text` containing `needle`.
std::string line_with(const std::string& text, const std::string& needle) {
  for (const auto& l : lines_of(text)) {
    if (l.find(needle) != std::string::npos) return l;
  }
  ADD_FAILURE() << "no line with '" << needle << "' in:\n" << text;
  return "";
}

const char* kJobsReply = R"({"jobs": [
  {"id": 1, "name": "resnet32-a", "rank": 0, "class": 1, "pull_class": 1, "push_class": 1,
   "match": ["dst=10.0.0.5/32,dport=2222,proto=tcp"], "police": "300Mbit/s",
   "progress": {"fraction": 0.25, "iteration": 120, "batch": null}},
  {"id": 1234, "name": "vgg", "rank": 12, "class": 6, "pull_class": 5, "push_class": 6,
   "match": ["src=fd00::5/128", "sport=2222-2230,proto=udp"], "police": null,
   "progress": {"fraction": null, "iteration": null, "batch": null}}
]})";

TEST(PsgatectlFormat, JobsTableIsAligned) {
  const std::string out = format_jobs(ojson::parse(kJobsReply));
  const auto lines = lines_of(out);
  ASSERT_EQ(lines.size(), 4u) << out;  // header, job 1, job 1234, job 1234's second rule
  const std::string& h = lines[0];
  for (const char* c : {"ID", "NAME", "RANK", "CLASS", "PULL CL", "PUSH CL", "POLICE", "PROGRESS", "MATCH"}) {
    EXPECT_NE(h.find(c), std::string::npos) << c;
  }
  // Left-aligned columns start where their header starts.
  EXPECT_EQ(col(lines[1], "resnet32-a"), col(h, "NAME"));
  EXPECT_EQ(col(lines[2], "vgg"), col(h, "NAME"));
  EXPECT_EQ(col(lines[1], "dst=10.0.0.5/32,dport=2222,proto=tcp"), col(h, "MATCH"));
  EXPECT_EQ(col(lines[2], "src=fd00::5/128"), col(h, "MATCH"));
  EXPECT_EQ(col(lines[3], "sport=2222-2230,proto=udp"), col(h, "MATCH"));
  EXPECT_EQ(col(lines[1], "300Mbit/s"), col(h, "POLICE"));
  EXPECT_EQ(col(lines[2], "none"), col(h, "POLICE"));
  EXPECT_EQ(col(lines[1], "25.0% iter 120"), col(h, "PROGRESS"));
  // Right-aligned ids end where the widest one ends.
  EXPECT_EQ(col(lines[1], "1 "), col(lines[2], "1234") + 3);
  // Distinct pull and push classes are both shown.
  EXPECT_NE(lines[2].find(" 5 "), std::string::npos);
  EXPECT_NE(lines[2].find(" 6 "), std::string::npos);
  for (const auto& l : lines) EXPECT_NE(l.back(), ' ') << "trailing blank: '" << l << "'";
}

// A job whose rule is the empty one takes every IP packet: said so, not a
// blank cell that reads as a job without rules.
TEST(PsgatectlFormat, TheEmptyRuleIsShownAsEveryIpPacket) {
  const std::string out = format_jobs(ojson::parse(R"({"jobs": [{"id": 3, "name": "all", "rank": 0, "class": 1,
    "pull_class": 1, "push_class": 1, "match": [""], "police": null, "progress": null}]})"));
  EXPECT_NE(line_with(out, "all").find("\"\" (every IP packet)"), std::string::npos) << out;
}

TEST(PsgatectlFormat, EmptyJobList) {
  const std::string out = format_jobs(ojson::parse(R"({"jobs": []})"));
  EXPECT_NE(out.find("ID"), std::string::npos);
  EXPECT_NE(out.find("(no jobs)"), std::string::npos);
}

const char* kStatsReply = R"({
  "ports": {
    "wire": {"rx_packets": 1000, "rx_bytes": 1500000, "rx_malformed": 2, "rx_network_control": 3,
             "rx_unclassified": 4, "tx_packets": 900, "tx_bytes": 1350000,
             "drops": {"ring_full": 0, "queue_full": 70, "policed": 5, "tx_failed": 0, "shutdown_flush": 1},
             "nic": {"imissed": 11, "ierrors": 0, "rx_nombuf": 0, "oerrors": 0}},
    "host": {"rx_packets": 123456789, "rx_bytes": 185185183500, "rx_malformed": 0, "rx_network_control": 0,
             "rx_unclassified": 0, "tx_packets": 924, "tx_bytes": 1386000,
             "drops": {"ring_full": 9, "queue_full": 0, "policed": 0, "tx_failed": 0, "shutdown_flush": 0},
             "nic": {"imissed": 0, "ierrors": 0, "rx_nombuf": 0, "oerrors": 0}}
  },
  "classes": [
    {"port": "wire", "class": 0, "enqueued_packets": 0, "enqueued_bytes": 0, "dequeued_packets": 0,
     "dequeued_bytes": 0, "depth": 0, "drop_queue_full": 0, "drop_ring_full": 0, "ecn_marked": 0,
     "dscp_remarked": 0, "sojourn": {"count": 0, "min_ns": 0, "p50_ns": 0, "p99_ns": 0, "p999_ns": 0, "max_ns": 0}},
    {"port": "wire", "class": 1, "enqueued_packets": 830, "enqueued_bytes": 1245000, "dequeued_packets": 830,
     "dequeued_bytes": 1245000, "depth": 0, "drop_queue_full": 70, "drop_ring_full": 0, "ecn_marked": 12,
     "dscp_remarked": 830,
     "sojourn": {"count": 830, "min_ns": 900, "p50_ns": 12345, "p99_ns": 250000, "p999_ns": 1999949, "max_ns": 3000000}},
    {"port": "host", "class": 7, "enqueued_packets": 0, "enqueued_bytes": 0, "dequeued_packets": 0,
     "dequeued_bytes": 0, "depth": 0, "drop_queue_full": 0, "drop_ring_full": 9, "ecn_marked": 0,
     "dscp_remarked": 0, "sojourn": {"count": 0, "min_ns": 0, "p50_ns": 0, "p99_ns": 0, "p999_ns": 0, "max_ns": 0}}
  ],
  "jobs": [
    {"id": 1, "name": "resnet32-a", "rank": 0, "class": 1, "policed": 5, "drops": 70,
     "push": {"admitted_packets": 10, "admitted_bytes": 640, "sent_packets": 10, "sent_bytes": 640},
     "pull": {"admitted_packets": 900, "admitted_bytes": 1350000, "sent_packets": 830, "sent_bytes": 1245000},
     "telemetry": {"iterations": 42, "bytes_per_iteration": 1572864, "iteration_period_ms": 250.25,
                   "last_burst_ms": 80, "straggler_wait_ms": null}},
    {"id": 22, "name": "bert-c", "rank": 1, "class": 2, "policed": 0, "drops": 0,
     "push": {"admitted_packets": 0, "admitted_bytes": 0, "sent_packets": 0, "sent_bytes": 0},
     "pull": {"admitted_packets": 0, "admitted_bytes": 0, "sent_packets": 0, "sent_bytes": 0},
     "telemetry": {"iterations": 0, "bytes_per_iteration": null, "iteration_period_ms": null,
                   "last_burst_ms": null, "straggler_wait_ms": null}}
  ],
  "totals": {"received": 123457789, "transmitted": 1824, "dropped": 85, "conserved": false, "in_flight": 123455880}
})";

TEST(PsgatectlFormat, StatsTablesHoldEverySection) {
  const std::string out = format_stats(ojson::parse(kStatsReply));
  // Ports: one row per counter, wire and host columns, right-aligned.
  const std::string header = line_with(out, "Ports");
  const std::string rx = line_with(out, "rx_packets");
  EXPECT_NE(rx.find("1000"), std::string::npos);
  EXPECT_NE(rx.find("123456789"), std::string::npos);
  EXPECT_EQ(col(rx, "123456789") + 9, col(header, "host") + 4);  // both end at the column's edge
  EXPECT_EQ(col(line_with(out, "tx_packets"), "924") + 3, col(header, "host") + 4);
  EXPECT_NE(line_with(out, "nic.imissed").find("11"), std::string::npos);
  // Drops by reason, with a total per port.
  const std::string dh = line_with(out, "Drops by reason");
  const std::string qf = line_with(out, "  queue_full");
  EXPECT_EQ(col(qf, "70") + 2, col(dh, "wire") + 4);
  const std::string total = line_with(out, "  total");
  EXPECT_NE(total.find("76"), std::string::npos);  // 70 + 5 + 1 on wire
  EXPECT_EQ(col(total, "9") + 1, col(dh, "host") + 4);
  // Only classes that saw traffic; sojourn in µs.
  EXPECT_NE(out.find("Classes with traffic"), std::string::npos);
  const std::string ch = line_with(out, "P99.9 µs");
  const std::string c1 = line_with(out, "  wire      1");
  EXPECT_NE(c1.find("12.3"), std::string::npos);
  EXPECT_NE(c1.find("250.0"), std::string::npos);
  EXPECT_NE(c1.find("1999.9"), std::string::npos);
  EXPECT_EQ(col(c1, "1999.9") + 6, col(ch, "P99.9 µs") + 8);  // µ counts as one character
  EXPECT_EQ(col(c1, "3000.0") + 6, col(ch, "MAX µs") + 6);
  const std::string c7 = line_with(out, "  host      7");  // ring-full drops only: shown, no sojourn
  EXPECT_NE(c7.find("-"), std::string::npos);
  EXPECT_EQ(out.find("  wire      0"), std::string::npos) << "an idle class is listed";
  // Jobs with telemetry.
  const std::string jh = line_with(out, "STRAGGLER ms");
  const std::string j1 = line_with(out, "resnet32-a");
  EXPECT_EQ(col(j1, "resnet32-a"), col(jh, "NAME"));
  EXPECT_NE(j1.find("1245000"), std::string::npos);
  EXPECT_NE(j1.find("1.5 MiB"), std::string::npos);
  EXPECT_NE(j1.find("250.2"), std::string::npos);  // 250.25 ms to 0.1 ms
  EXPECT_EQ(col(j1, "1.5 MiB") + 7, col(jh, "BYTES/ITER") + 10);
  const std::string j22 = line_with(out, "bert-c");
  EXPECT_EQ(col(j22, "bert-c"), col(jh, "NAME"));
  EXPECT_EQ(j22.back(), '-');  // no straggler estimate yet
  EXPECT_NE(out.find("Totals: received 123457789, transmitted 1824, dropped 85, conserved no (in flight 123455880)\n"),
            std::string::npos)
      << out;
}

TEST(PsgatectlFormat, StatsWithoutTrafficOrJobs) {
  const std::string out = format_stats(ojson::parse(R"({"ports": {}, "classes": [], "jobs": [], "totals": {}})"));
  EXPECT_NE(out.find("(none)"), std::string::npos);
  EXPECT_NE(out.find("(no jobs)"), std::string::npos);
  EXPECT_NE(out.find("Totals: received -"), std::string::npos);
}

TEST(PsgatectlFormat, HealthAndPolicyAreAlignedKeyValues) {
  const std::string h = format_health(ojson::parse(
      R"({"status": "ok", "version": "0.1.0", "uptime_s": 93784, "generation": 7, "lcores": "rx:1 sched:2",
          "policy": {"name": "round-robin", "interval": "20s", "rotate_on": "time"}})"));
  const auto lines = lines_of(h);
  ASSERT_EQ(lines.size(), 6u) << h;
  EXPECT_EQ(lines[0], "status      ok");  // keys in the daemon's order, values in one column
  EXPECT_EQ(lines[1], "version     0.1.0");
  EXPECT_EQ(lines[2], "uptime_s    93784 (1d 2h 3m 4s)");
  EXPECT_EQ(lines[5], "policy      name=round-robin interval=20s rotate_on=time");

  const std::string p =
      format_policy(ojson::parse(R"({"policy": {"name": "progress", "interval": "1s", "rotate_on": null}})"));
  EXPECT_EQ(p, "name       progress\ninterval   1s\nrotate_on  -\n");
}

// The links (an object per port) ran together on one line, and an empty list
// or text left a blank: "links  host=changes=0 detail= ... wire=changes=0 ...".
TEST(PsgatectlFormat, HealthGivesEachLinkARowAndNamesWhatIsEmpty) {
  const std::string h = format_health(ojson::parse(
      R"({"status": "ok", "ports_down": [], "lcores_stuck": [1, 2],
          "links": {"wire": {"state": "up", "changes": 0, "detail": "", "short_mtu": null},
                    "host": {"state": "down", "changes": 3, "detail": "no memif peer", "short_mtu": 1000}},
          "state_file_error": ""})"));
  const auto lines = lines_of(h);
  ASSERT_EQ(lines.size(), 6u) << h;
  EXPECT_EQ(lines[1], "ports_down        none");
  EXPECT_EQ(lines[2], "lcores_stuck      1, 2");
  EXPECT_EQ(lines[3], "links.wire        state=up changes=0 detail=- short_mtu=-");
  EXPECT_EQ(lines[4], "links.host        state=down changes=3 detail=\"no memif peer\" short_mtu=1000");
  EXPECT_EQ(lines[5], "state_file_error  -");
}

TEST(PsgatectlFormat, StatsPortsShowAnEmptyDetailAsADash) {
  const std::string out = format_stats(ojson::parse(
      R"({"ports": {"wire": {"link": {"state": "up", "detail": ""}}, "host": {"link": {"state": "down",
          "detail": "no memif peer"}}}, "classes": [], "jobs": [], "totals": {}})"));
  bool seen = false;
  for (const std::string& line : lines_of(out)) {
    if (line.find("link.detail") == std::string::npos) continue;
    seen = true;
    // Columns in the reply's order: wire's "-", then host's detail.
    EXPECT_TRUE(std::regex_match(line, std::regex(R"(\s*link\.detail\s+-\s+no memif peer)"))) << line;
  }
  EXPECT_TRUE(seen) << out;
}

TEST(PsgatectlFormat, ConfigIsFlattenedWithAlignedEquals) {
  const std::string out = format_config(ojson::parse(
      R"({"ports": {"wire": {"device": "net_pcap0,rx_pcap=a.pcap", "rx_desc": 1024}},
          "shaper": {"host": {"rate": null}},
          "eal": {"args": ["--no-huge", "-m", "512"]},
          "jobs": [{"id": 1, "match": ["dst=10.0.0.5/32", "proto=tcp"]}, {"id": 2, "match": []}],
          "control": {}, "flag": true})"));
  EXPECT_EQ(out,
            "ports.wire.device  = \"net_pcap0,rx_pcap=a.pcap\"\n"
            "ports.wire.rx_desc = 1024\n"
            "shaper.host.rate   = none\n"
            "eal.args           = [\"--no-huge\", \"-m\", \"512\"]\n"
            "jobs[0].id         = 1\n"
            "jobs[0].match      = [\"dst=10.0.0.5/32\", \"proto=tcp\"]\n"
            "jobs[1].id         = 2\n"
            "jobs[1].match      = []\n"
            "control            = {}\n"
            "flag               = true\n");
}

TEST(PsgatectlFormat, WriteConfirmations) {
  using nlohmann::json;
  struct Case {
    Kind kind;
    const char* request;
    const char* result;
    const char* line;
  };
  const char* job = R"({"job": {"id": 3, "name": "bert-c", "rank": 2, "class": 3, "pull_class": 3,
      "push_class": 3, "match": ["proto=tcp", "proto=udp"], "police": null,
      "progress": {"fraction": 0.5, "iteration": 12, "batch": null}}})";
  const Case cases[] = {
      {Kind::kJobsAdd, R"({"cmd":"jobs.add"})", job, "added job 3 (bert-c): rank 2, class 3, 2 rules\n"},
      {Kind::kJobsRemove, R"({"cmd":"jobs.remove","job":3})", R"({"removed": 3})", "removed job 3\n"},
      {Kind::kJobsRemove, R"({"cmd":"jobs.remove","job":4})", R"({})", "removed job 4\n"},
      {Kind::kOrder, R"({"cmd":"order"})", R"({"jobs": [{"id": 3}, {"id": 1}, {"id": 2}]})",
       "order set, highest priority first: 3 1 2\n"},
      {Kind::kRank, R"({"cmd":"rank"})", job, "job 3: rank 2, class 3\n"},
      {Kind::kProgress, R"({"cmd":"progress"})", job, "job 3: rank 2, class 3, progress 50.0% iter 12\n"},
      {Kind::kClassSet, R"({"cmd":"class.set"})",
       R"({"port": "wire", "class": 2, "cap": "300Mbit/s", "floor": null, "ecn_threshold": 0, "dscp": null})",
       "wire class 2: cap 300Mbit/s, floor none, ecn_threshold 0, dscp keep\n"},
      {Kind::kClassSet, R"({"cmd":"class.set"})",
       R"({"port": "host", "class": 1, "cap": null, "floor": "1Gbit/s", "ecn_threshold": 20, "dscp": 46})",
       "host class 1: cap none, floor 1Gbit/s, ecn_threshold 20, dscp 46\n"},
      {Kind::kShaperSet, R"({"cmd":"shaper.set"})", R"({"port": "wire", "rate": "1Gbit/s", "burst": "64KiB"})",
       "wire shaper: rate 1Gbit/s, burst 64KiB\n"},
      {Kind::kShaperSet, R"({"cmd":"shaper.set"})", R"({"port": "host", "rate": null, "burst": null})",
       "host shaper: none (unshaped)\n"},
      {Kind::kPolicySet, R"({"cmd":"policy"})",
       R"({"policy": {"name": "round-robin", "interval": "20s", "rotate_on": "iteration"}})",
       "policy round-robin, interval 20s, rotate on iteration\n"},
      {Kind::kPolicySet, R"({"cmd":"policy"})", R"({"policy": {"name": "fifo", "interval": "1s", "rotate_on": null}})",
       "policy fifo, interval 1s\n"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    EXPECT_EQ(format_confirmation(c.kind, json::parse(c.request), ojson::parse(c.result)), c.line);
    EXPECT_EQ(format_result(c.kind, json::parse(c.request), ojson::parse(c.result)), c.line);
  }
}

// A removal's note can carry a store document's text (a job document that
// did not parse): printed escaped like every other string of a reply, so
// that it cannot drive the terminal.
TEST(PsgatectlFormat, ARemovalsNoteIsPrintedEscaped) {
  const std::string line = format_result(Kind::kJobsRemove, nlohmann::json::parse(R"({"cmd":"jobs.remove","job":3})"),
                                         ojson::parse(R"({"removed": 3, "note": "bad \u001b]0;x\u0007 rule"})"));
  EXPECT_EQ(line.find('\x1b'), std::string::npos) << line;
  EXPECT_EQ(line.find('\x07'), std::string::npos) << line;
  EXPECT_NE(line.find("removed job 3: bad "), std::string::npos) << line;
}

// A stats reply whose ports are not objects (a daemon of another version,
// or not psgate): walking one threw, and psgatectl aborted.
TEST(PsgatectlFormat, StatsWithPortsThatAreNotObjectsDoNotThrow) {
  EXPECT_NO_THROW(
      format_stats(ojson::parse(R"({"ports": {"wire": 1, "host": [1]}, "classes": [], "jobs": [], "totals": {}})")));
}

TEST(PsgatectlFormat, WatchRatesFromSuccessiveReplies) {
  const ojson prev = ojson::parse(R"({
    "ports": {"wire": {"tx_bytes": 1000}, "host": {"tx_bytes": 5000}},
    "jobs": [
      {"id": 1, "name": "a", "rank": 0, "class": 1, "policed": 10, "drops": 4,
       "pull": {"sent_bytes": 1000}, "push": {"sent_bytes": 0},
       "telemetry": {"iterations": 3, "bytes_per_iteration": 2048, "iteration_period_ms": 100,
                     "last_burst_ms": 20.5, "straggler_wait_ms": 1.25}},
      {"id": 2, "name": "b", "rank": 1, "class": 2, "policed": 0, "drops": 0,
       "pull": {"sent_bytes": 900000}, "push": {"sent_bytes": 0}, "telemetry": {}}]})");
  const ojson cur = ojson::parse(R"({
    "ports": {"wire": {"tx_bytes": 250001000}, "host": {"tx_bytes": 5000}},
    "jobs": [
      {"id": 1, "name": "a", "rank": 0, "class": 1, "policed": 2010, "drops": 10,
       "pull": {"sent_bytes": 250001000}, "push": {"sent_bytes": 12500000},
       "telemetry": {"iterations": 4, "bytes_per_iteration": 2048, "iteration_period_ms": 100,
                     "last_burst_ms": 20.5, "straggler_wait_ms": 1.25}},
      {"id": 2, "name": "b", "rank": 1, "class": 2, "policed": 0, "drops": 0,
       "pull": {"sent_bytes": 100}, "push": {"sent_bytes": 0}, "telemetry": {}},
      {"id": 3, "name": "new", "rank": 2, "class": 3, "policed": 0, "drops": 0,
       "pull": {"sent_bytes": 100}, "push": {"sent_bytes": 0}, "telemetry": {}}]})");

  const std::string out = format_watch(&prev, cur, 2.0);
  const std::string h = line_with(out, "PULL Mbit/s");
  const std::string a = line_with(out, "  a  ");
  // 250,000,000 bytes in 2 s = 1000 Mbit/s; 12.5 MB in 2 s = 50 Mbit/s.
  auto cell = [&](const std::string& line, const std::string& header) {
    return line.substr(col(h, header), header.size());  // right-aligned: as wide as its header here
  };
  EXPECT_EQ(cell(a, "PULL Mbit/s"), "     1000.0");
  EXPECT_EQ(cell(a, "PUSH Mbit/s"), "       50.0");
  EXPECT_EQ(cell(a, "POLICED/s"), "     1000");  // 2000 policed in 2 s
  EXPECT_EQ(cell(a, "DROPS/s"), "      3");      // 6 in 2 s
  EXPECT_NE(a.find("2.0 KiB"), std::string::npos);
  EXPECT_NE(a.find("20.5"), std::string::npos);
  // A counter that went down (daemon restarted) and a job new since the last
  // reply have no rate.
  const std::string b = line_with(out, "  b  ");
  EXPECT_EQ(cell(b, "PULL Mbit/s"), "          -");
  EXPECT_EQ(cell(b, "PUSH Mbit/s"), "        0.0");
  const std::string n = line_with(out, "new");
  EXPECT_EQ(cell(n, "PULL Mbit/s"), "          -");
  EXPECT_EQ(cell(n, "DROPS/s"), "      -");
  EXPECT_NE(out.find("ports: wire tx 1000.0 Mbit/s, host tx 0.0 Mbit/s"), std::string::npos);

  // The first frame has nothing to difference against.
  const std::string first = format_watch(nullptr, cur, 0);
  EXPECT_EQ(cell(line_with(first, "  a  "), "PULL Mbit/s"), "          -");
  EXPECT_NE(first.find("ports: wire tx - Mbit/s"), std::string::npos);
}

// The cluster table says which policy each gateway runs (gateways of mixed
// [policy] without P/policy rank differently), "-" for an older gateway's
// registration, which names none (the daemon reports it as ""), as for a
// gateway without a top job, round-robin with its interval (and rotate_on
// "iteration"); registrations without a lease are named under the table,
// not as gateways.
TEST(PsgatectlFormat, ClusterTableShowsPoliciesAndUnleasedRegistrations) {
  const char* reply = R"({"mode": "cluster", "prefix": "/psgate/t", "store_revision": 42, "connected": true,
    "leader": "gw-a", "gateways": [
    {"name": "gw-a", "address": "10.0.1.1", "version": "0.1.0", "health": "degraded", "policy": "static",
     "applied_revision": 42, "lag": 0, "top_job": "3", "counters": {"rx_packets": 1, "tx_packets": 1, "dropped": 0}},
    {"name": "gw-b", "address": "10.0.1.2", "version": "0.1.0", "health": "degraded", "policy": "round-robin",
     "applied_revision": 41, "lag": 1, "top_job": "1", "counters": {"rx_packets": 2, "tx_packets": 2, "dropped": 0}},
    {"name": "old1", "address": "10.0.1.3", "version": "0.0.9", "health": "ok", "policy": "",
     "applied_revision": 42, "lag": 0, "top_job": "", "counters": {"rx_packets": 3, "tx_packets": 3, "dropped": 0}},
    {"name": "gw-c", "address": "10.0.1.4", "version": "0.1.0", "health": "degraded", "policy": "round-robin",
     "policy_params": {"interval": "500ms", "rotate_on": "time"},
     "applied_revision": 42, "lag": 0, "top_job": "1", "counters": {"rx_packets": 4, "tx_packets": 4, "dropped": 0}},
    {"name": "gw-d", "address": "10.0.1.5", "version": "0.1.0", "health": "degraded", "policy": "round-robin",
     "policy_params": {"interval": "20s", "rotate_on": "iteration"},
     "applied_revision": 42, "lag": 0, "top_job": "1", "counters": {"rx_packets": 5, "tx_packets": 5, "dropped": 0}}],
    "unleased_registrations": ["gw-gone", "gw-copy"]})";
  const std::string out = format_cluster(ojson::parse(reply));
  const std::string h = line_with(out, "GATEWAY");
  ASSERT_NE(h.find("POLICY"), std::string::npos) << out;
  EXPECT_EQ(col(line_with(out, "gw-a "), "static"), col(h, "POLICY"));
  EXPECT_EQ(col(line_with(out, "gw-b "), "round-robin"), col(h, "POLICY"));
  EXPECT_EQ(col(line_with(out, "old1"), "-"), col(h, "POLICY")) << out;
  // Round-robin's parameters, which change when the order rotates, as
  // health's trouble names them.
  EXPECT_EQ(col(line_with(out, "gw-c "), "round-robin(500ms)"), col(h, "POLICY")) << out;
  EXPECT_EQ(col(line_with(out, "gw-d "), "round-robin(iteration,20s)"), col(h, "POLICY")) << out;
  {
    // Every cell filled: GATEWAY ... POLICY (4) ... TOP JOB (7) ... DROPPED.
    std::istringstream row(line_with(out, "old1"));
    std::vector<std::string> cells;
    for (std::string cell; row >> cell;) cells.push_back(cell);
    ASSERT_EQ(cells.size(), 11u) << out;
    EXPECT_EQ(cells[4], "-") << out;
    EXPECT_EQ(cells[7], "-") << out;
  }
  EXPECT_NE(line_with(out, "without a lease").find("gw-gone, gw-copy"), std::string::npos) << out;
  // None: no such line.
  EXPECT_EQ(format_cluster(ojson::parse(R"({"mode": "cluster", "gateways": [], "unleased_registrations": []})"))
                .find("without a lease"),
            std::string::npos);
}

TEST(PsgatectlFormat, ValueText) {
  struct Case {
    const char* json;
    const char* text;
  };
  const Case cases[] = {
      {R"("300Mbit/s")", "300Mbit/s"},
      {"null", "-"},
      {"42", "42"},
      {"0.5", "0.5"},
      {"true", "yes"},
      {"false", "no"},
      {R"([1, "a"])", "1, a"},
      {R"({"a": 1, "b": null})", "a=1 b=-"},
  };
  for (const Case& c : cases) EXPECT_EQ(value_text(ojson::parse(c.json)), c.text) << c.json;
  EXPECT_EQ(value_text(ojson(nullptr), "none"), "none");
  EXPECT_EQ(display_width("P50 µs"), 6u);
  EXPECT_EQ(display_width(""), 0u);
}

TEST(PsgatectlFormat, TableRightAlignsAndTrims) {
  Table t({{"A", Table::kLeft}, {"NUMBER", Table::kRight}, {"Z", Table::kLeft}});
  t.add_row({"xyz", "5", ""});
  t.add_row({"q", "12345678"});
  EXPECT_EQ(t.render(">"),
            ">A      NUMBER  Z\n"
            ">xyz         5\n"
            ">q    12345678\n");
}

}  // namespace
}  // namespace psgatectl

namespace psgatectl {
namespace {

// config --toml: the daemon's `config` reply (config_to_json, the one the
// daemon sends) written as TOML must load back to the same configuration,
// every table and unit included, per-port class settings and policy too.
TEST(FormatConfigToml, RoundTripsThroughTheLoader) {
  const char* text = R"(
[eal]
args = ["--no-huge", "-m", "256"]
[ports.wire]
device = "net_null0"
rx_desc = 512
mtu = 9000
[ports.host]
device = "net_null1"
mtu = 9000
[lcores]
main = 0
data = [1, 2, 3]
mode = "hybrid"
[shaper.wire]
rate = "9.5Gbit/s"
burst = "1500B"
overhead = "20B"
headroom = "12.5%"
[shaper.host]
overhead = "4B"
headroom = "3200B"
[classes]
count = 6
default = 2
depth = 512
ecn_threshold = 100
control_rate = "2Mbit/s"
[classes.host]
control_rate = "off"
[classes.3]
depth = 64
cap = "100Mbit/s"
ecn_threshold = 0
[classes.3.wire]
floor = "12500kbit/s"
floor_burst = "2KB"
ecn_threshold = 32
dscp = 46
[classes.4]
dscp = 10
[[jobs]]
id = 7
name = "late"
rank = 2
match = ["dst=10.0.0.5/32,dport=2222,proto=tcp"]
police = "300Mbit/s"
police_burst = "128KiB"
[[jobs]]
id = 1
rank = 0
match = ["src=fd00::/64,sport=1-9,proto=udp", "proto=icmp"]
[dataplane]
burst = 16
flow_cache = 0
max_jobs = 8
drain_timeout = "1500ms"
[stats]
interval = "0s"
[log]
level = "debug"
[control]
socket = "ctl.sock"
state = "state.json"
[policy]
name = "round-robin"
interval = "2s"
rotate_on = "iteration"
)";
  auto loaded = psgate::parse_config(text, "a.toml");
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  const nlohmann::json reply = psgate::config_to_json(*loaded);
  EXPECT_EQ(reply["lcores"]["mode"], "hybrid");
  EXPECT_EQ(reply["shaper"]["wire"]["rate"], "9500Mbit/s");
  EXPECT_EQ(reply["shaper"]["wire"]["headroom"], "12.5%");
  EXPECT_FALSE(reply["shaper"]["host"].contains("rate"));
  EXPECT_EQ(reply["classes"]["3"]["wire"]["floor"], "12500kbit/s");
  EXPECT_EQ(reply["classes"]["wire"]["control_rate"], "2Mbit/s");
  EXPECT_EQ(reply["classes"]["wire"]["control_burst"], "128KiB");
  EXPECT_EQ(reply["classes"]["host"]["control_rate"], "off");
  EXPECT_EQ(reply["dataplane"]["drain_timeout"], "1500ms");
  EXPECT_EQ(reply["jobs"][0]["id"], 7) << "jobs stay in the order they were added: earlier rules win";
  auto toml_text = format_config_toml(ojson::parse(reply.dump()));
  ASSERT_TRUE(toml_text.ok()) << toml_text.error();
  EXPECT_EQ(toml_text->rfind("# ", 0), 0u) << "starts with a comment saying what it is";
  EXPECT_NE(toml_text->find("[[jobs]]"), std::string::npos) << *toml_text;
  auto again = psgate::parse_config(*toml_text, "b.toml");
  ASSERT_TRUE(again.ok()) << again.error() << "\n" << *toml_text;
  EXPECT_EQ(psgate::config_to_json(*again), reply) << *toml_text;
  for (unsigned p = 0; p < 2; ++p) EXPECT_EQ(psgate::port_classes(*again, p), psgate::port_classes(*loaded, p));
  EXPECT_EQ(again->jobs, loaded->jobs);
  EXPECT_EQ(again->policy.interval_ns, loaded->policy.interval_ns);
  EXPECT_EQ(again->wire.control, loaded->wire.control);
  EXPECT_FALSE(again->host.control);
}

TEST(FormatConfigToml, RefusesWhatTomlCannotHold) {
  EXPECT_FALSE(format_config_toml(ojson::parse(R"({"a": [[1], {"b": 1}]})")).ok());
  // Above INT64_MAX, in an array as outside one: it wrapped to a negative number.
  EXPECT_FALSE(format_config_toml(ojson::parse(R"({"a": 18446744073709551615})")).ok());
  EXPECT_FALSE(format_config_toml(ojson::parse(R"({"a": [1, 18446744073709551615]})")).ok());
  EXPECT_FALSE(format_config_toml(ojson::parse("[1]")).ok());
  auto nulls = format_config_toml(ojson::parse(R"({"t": {"x": null, "y": 1}})"));
  ASSERT_TRUE(nulls.ok());
  EXPECT_EQ(nulls->find("x ="), std::string::npos) << *nulls;
}

}  // namespace
}  // namespace psgatectl
