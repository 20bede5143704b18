// SPDX-License-Identifier: BSD-3-Clause
// Report: the JSON carries the derived figures (loss, rates, percentiles)
// computed from the raw counts; the table names every job and direction.
#include <gtest/gtest.h>

#include <regex>

#include "psgate/text.h"
#include "report.h"

namespace psgate::gen {
namespace {

TEST(Report, JsonAndTable) {
  JobProfile a;
  a.id = 3;
  a.name = "resnet";
  a.ps_addr = Addr{false, 0, 0x0a000005};
  a.ps_port = 2222;
  a.size_model = SizeModel::kImix;
  JobProfile b = a;
  b.id = 4;
  b.name = "bert";
  b.dirs = 1u << kPull;
  b.size_model = SizeModel::kFixed;
  b.size = 128;
  b.ps_addr = Addr{true, 0xfd00ull << 48, 5};  // fd00::5

  RunResult r;
  r.lcore_mode = "single";
  r.tx_seconds = 2.0;
  r.ports.push_back(PortResult{.role = "host-side", .name = "net_null0", .rx_foreign = 2});
  JobResult ja{.job = &a, .iterations = 0, .has = {true, true}};
  ja.dir[kPush].tx_packets = 1000;
  ja.dir[kPush].tx_bytes = 60'000;
  ja.dir[kPush].rx_packets = 998;
  ja.dir[kPush].rx_unique = 990;
  ja.dir[kPush].rx_bytes = 59'880;
  ja.dir[kPush].duplicates = 8;
  ja.dir[kPush].alloc_failed = 6;
  ja.dir[kPush].rx_seconds = 1.0;
  for (uint64_t ns : {1000, 2000, 3000, 100'000}) ja.dir[kPush].latency.record(ns);
  ja.dir[kPull].tx_packets = 500;
  ja.dir[kPull].rx_unique = 500;
  ja.dir[kPull].rx_packets = 500;
  JobResult jb{.job = &b, .iterations = 0, .has = {false, true}};
  jb.dir[kPull].tx_packets = 10;
  jb.dir[kPull].rx_unique = 10;
  jb.dir[kPull].rx_packets = 10;
  r.jobs = {ja, jb};
  r.rx_foreign = 2;

  const nlohmann::json j = to_json(r);
  ASSERT_EQ(j["jobs"].size(), 2u);
  const auto& push = j["jobs"][0]["push"];
  EXPECT_EQ(push["lost"], 10);
  EXPECT_DOUBLE_EQ(push["loss_ratio"].get<double>(), 0.01);
  EXPECT_DOUBLE_EQ(push["tx_pps"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(push["tx_bps"].get<double>(), 240'000.0);
  EXPECT_DOUBLE_EQ(push["tx_l1_bps"].get<double>(), 8.0 * (60'000 + 24 * 1000) / 2);
  EXPECT_DOUBLE_EQ(push["rx_pps"].get<double>(), 998.0);
  EXPECT_EQ(push["duplicates"], 8);
  EXPECT_EQ(push["alloc_failed"], 6);
  EXPECT_EQ(j["jobs"][0]["pull"]["alloc_failed"], 0);
  EXPECT_EQ(j["totals"]["alloc_failed"], 6);
  EXPECT_EQ(push["latency"]["count"], 4);
  EXPECT_EQ(push["latency"]["min_ns"], 1000);
  EXPECT_EQ(push["latency"]["max_ns"], 100'000);
  // Nearest rank of 4 samples: p50 is the 2nd (2000 ns), reported as the
  // upper bound of its bucket, 2047 (2^10..2^11 is cut in 16 buckets of 64 ns);
  // p99 and p99.9 are the 4th, whose bucket bound 102399 is clamped to the max.
  EXPECT_EQ(push["latency"]["p50_ns"], 2047);
  EXPECT_EQ(push["latency"]["p99_ns"], 100'000);
  EXPECT_EQ(push["latency"]["p999_ns"], 100'000);
  // The CDF's buckets, [upper bound, count]: 1000 in 992..1023, 2000 in
  // 1984..2047, 3000 in 2944..3071, 100000 in 98304..102399.
  EXPECT_EQ(push["latency"]["buckets"], nlohmann::json::parse("[[1023, 1], [2047, 1], [3071, 1], [102399, 1]]"));
  EXPECT_EQ(j["jobs"][0]["pull"]["latency"]["buckets"], nlohmann::json::array());
  // The job's total and the grand total merge the histograms.
  EXPECT_EQ(j["jobs"][0]["total"]["latency"]["buckets"], push["latency"]["buckets"]);
  EXPECT_EQ(j["totals"]["latency"]["buckets"], push["latency"]["buckets"]);
  EXPECT_EQ(j["jobs"][0]["size"], "imix");
  EXPECT_EQ(j["jobs"][0]["ps"], "10.0.0.5:2222");
  EXPECT_EQ(j["jobs"][0]["total"]["tx_packets"], 1500);
  EXPECT_FALSE(j["jobs"][1].contains("push"));
  EXPECT_EQ(j["jobs"][1]["size"], "128B");
  EXPECT_EQ(j["jobs"][1]["ps"], "[fd00::5]:2222");  // as a profile writes it
  EXPECT_EQ(j["totals"]["tx_packets"], 1510);
  EXPECT_EQ(j["totals"]["lost"], 10);
  EXPECT_EQ(j["generator"]["rx_foreign"], 2);

  const std::string t = format_table(r);
  for (const char* s : {"resnet", "bert", "push", "pull", "all", "without a psgate-gen stamp received: 2", "no_mbuf"}) {
    EXPECT_NE(t.find(s), std::string::npos) << s << "\n" << t;
  }
}

// A peer that went away mid-run (psgate killed) made TX refuse frames,
// said as "refused by full TX rings", and lost what it held, with nothing
// in the report about the link. Each port's link-down events and its state
// at the end are given, summed in generator_side, and said in the table.
TEST(Report, LinkDownDuringTheRun) {
  JobProfile a;
  a.name = "a";
  RunResult r;
  r.ports.push_back(PortResult{.role = "host-side", .name = "net_memif0", .port_id = 0});
  r.ports.push_back(PortResult{.role = "wire-side", .name = "net_memif1", .port_id = 1});
  JobResult ja{.job = &a, .iterations = 0, .has = {true, false}};
  ja.dir[kPush].tx_packets = 100;
  ja.dir[kPush].rx_unique = 100;
  ja.dir[kPush].tx_dropped = 5;
  r.jobs = {ja};
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["generator_side"]["link_down_events"], 0);
  EXPECT_EQ(j["ports"][0]["link_up_at_end"], true);
  EXPECT_EQ(format_table(r).find("link down"), std::string::npos) << format_table(r);
  EXPECT_NE(format_table(r).find("refused by full TX rings,"), std::string::npos) << format_table(r);

  r.ports[1].link_down_events = 2;
  r.ports[1].link_up_at_end = false;
  j = to_json(r);
  EXPECT_EQ(j["generator_side"]["link_down_events"], 2);
  EXPECT_EQ(j["ports"][1]["link_down_events"], 2);
  EXPECT_EQ(j["ports"][1]["link_up_at_end"], false);
  EXPECT_EQ(j["ports"][0]["link_down_events"], 0);
  const std::string t = format_table(r);
  EXPECT_NE(t.find("link down during the run: wire-side port 1 (net_memif1) went down 2 time(s), still down at the "
                   "end"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("host-side port 0 (net_memif0) went down"), std::string::npos) << t;
  EXPECT_NE(t.find("refused by full TX rings or a link down"), std::string::npos) << t;
}

// The name column counted bytes (%-14.14s): a name of two-byte characters
// was cut inside one, leaving a byte that is not UTF-8 in the table, and
// short multi-byte names were padded short, out of line.
TEST(Report, TableNamesAreCutAndPaddedByCharacter) {
  JobProfile a, b;
  a.id = 1;
  a.name = "a\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9";  // 15 characters
  b.id = 2;
  b.name = "\u00e9";
  RunResult r;
  r.jobs = {JobResult{.job = &a, .iterations = 0, .has = {true, false}},
            JobResult{.job = &b, .iterations = 0, .has = {true, false}}};
  const std::string t = format_table(r);
  for (size_t at = 0; at < t.size();) {
    const auto cp = psgate::decode_utf8(std::string_view(t).substr(at));
    ASSERT_TRUE(cp.has_value()) << "not UTF-8 at byte " << at << ":\n" << t;
    at += cp->length;
  }
  EXPECT_NE(t.find("1      a\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9 push"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("2      \u00e9              push"), std::string::npos) << t;  // 1 + 13 spaces
}

// Whether the generator itself may have caused loss (RX behind, frames
// dropped at its ports) is shown apart from the network's loss.
TEST(Report, GeneratorSideTrouble) {
  JobProfile a;
  a.name = "a";
  RunResult r;
  r.rx_bursts_per_round = 4;
  r.ports.push_back(PortResult{.role = "host-side"});
  r.ports.push_back(PortResult{.role = "wire-side"});
  JobResult ja{.job = &a, .iterations = 0, .has = {true, false}};
  ja.dir[kPush].tx_packets = 100;
  ja.dir[kPush].rx_unique = 100;
  r.jobs = {ja};

  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["generator_side"]["loss_may_be_own"], false);
  EXPECT_EQ(j["generator_side"]["rx_backlog_rounds"], 0);
  EXPECT_EQ(j["generator"]["rx_bursts_per_round"], 4);
  EXPECT_NE(format_table(r).find("RX kept up"), std::string::npos) << format_table(r);

  // Behind, but nothing lost: said, without blaming loss on it.
  r.ports[1].rx_backlog = 7;
  r.ports[1].alloc_failed = 5;
  r.jobs[0].dir[kPush].tx_dropped = 11;
  j = to_json(r);
  EXPECT_EQ(j["generator_side"]["loss_may_be_own"], false);
  EXPECT_EQ(j["generator_side"]["rx_backlog_rounds"], 7);
  EXPECT_EQ(j["generator_side"]["tx_dropped"], 11);
  EXPECT_EQ(j["generator_side"]["alloc_failed"], 5);
  EXPECT_EQ(j["ports"][1]["rx_backlog_rounds"], 7);
  std::string t = format_table(r);
  EXPECT_NE(t.find("behind in 7 rounds"), std::string::npos) << t;
  EXPECT_EQ(t.find("some loss may be"), std::string::npos) << t;
  EXPECT_EQ(t.find("kept up"), std::string::npos) << t;
  EXPECT_NE(t.find("11 frames refused"), std::string::npos) << t;

  // Loss while RX was behind or its port dropped frames: flagged.
  r.jobs[0].dir[kPush].rx_unique = 90;
  r.ports[0].nic_rx_nombuf = 3;
  j = to_json(r);
  EXPECT_EQ(j["generator_side"]["loss_may_be_own"], true);
  EXPECT_EQ(j["generator_side"]["rx_nombuf"], 3);
  t = format_table(r);
  EXPECT_NE(t.find("some loss may be"), std::string::npos) << t;
  EXPECT_NE(t.find("rx_nombuf 3"), std::string::npos) << t;
}

// The progress line keeps the shape perf/bench/benchlib.py parses (its
// regex, verbatim), and carries the allocation failures.
TEST(Report, ProgressLineParsesAsTheBenchmarkSuiteExpects) {
  const std::regex bench(R"(^\s*([\d.]+)s\s+tx\s+([\d.]+)\s+(\w*pps)\s+.*?rx\s+([\d.]+)\s+(\w*pps))");
  LiveTotals prev{.tx_packets = 1000, .tx_bytes = 60'000, .rx_packets = 900};
  LiveTotals cur{.tx_packets = 1000 + 2'500'000,
                 .tx_bytes = 60'000 + 150'000'000,
                 .tx_dropped = 4,
                 .rx_packets = 900 + 1'230'000,
                 .rx_unique = 1'000'000,
                 .rx_foreign = 2,
                 .alloc_failed = 17,
                 .rx_other_run = 5};
  const std::string line = format_progress(prev, cur, 2.0, 12.0);
  ASSERT_EQ(line.back(), '\n');
  std::smatch m;
  ASSERT_TRUE(std::regex_search(line, m, bench)) << line;
  EXPECT_EQ(m[1], "12.0");
  EXPECT_EQ(m[2], "1.25");
  EXPECT_EQ(m[3], "Mpps");
  EXPECT_EQ(m[4], "615.00");
  EXPECT_EQ(m[5], "kpps");
  EXPECT_NE(line.find("600.00 Mbit/s"), std::string::npos) << line;
  EXPECT_NE(line.find("tx_dropped 4 "), std::string::npos) << line;
  EXPECT_NE(line.find("lost-so-far 1501000 "), std::string::npos) << line;
  EXPECT_NE(line.find("alloc_failed 17 "), std::string::npos) << line;
  EXPECT_NE(line.find("other_run 5\n"), std::string::npos) << line;
}

// Frames of another generator run (stamp.h) are counted per port, given in
// the JSON with this run's tag and in the table, and each port that got any
// has its warning (main prints them on stderr).
TEST(Report, FramesOfAnotherRunAreCountedPerPortAndWarnedOf) {
  JobProfile a;
  a.name = "a";
  RunResult r;
  r.run_tag = 0xbeef;
  r.ports.push_back(PortResult{.role = "host-side", .name = "net_memif0", .port_id = 0});
  r.ports.push_back(PortResult{.role = "wire-side", .name = "net_memif1", .port_id = 1});
  JobResult ja{.job = &a, .iterations = 0, .has = {true, false}};
  ja.dir[kPush].tx_packets = 100;
  r.jobs = {ja};
  EXPECT_TRUE(other_run_warnings(r).empty());
  EXPECT_EQ(format_table(r).find("another generator run"), std::string::npos) << format_table(r);
  EXPECT_EQ(format_table(r).find("rx_other_run"), std::string::npos) << format_table(r);
  EXPECT_EQ(format_table(r).find("sent before this run began"), std::string::npos) << format_table(r);

  r.ports[1].rx_other_run = 6804;
  r.rx_other_run = 6804;
  r.jobs[0].dir[kPush].rx_stale = 3;
  const nlohmann::json j = to_json(r);
  EXPECT_EQ(j["generator"]["rx_other_run"], 6804);
  EXPECT_EQ(j["generator"]["run_tag"], 0xbeef);
  EXPECT_EQ(j["ports"][0]["rx_other_run"], 0);
  EXPECT_EQ(j["ports"][1]["rx_other_run"], 6804);
  EXPECT_EQ(j["jobs"][0]["push"]["lost"], 100);
  EXPECT_EQ(j["jobs"][0]["push"]["rx_stale"], 3);
  const std::vector<std::string> w = other_run_warnings(r);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0],
            "warning: 6804 frames from another generator run arrived on wire-side port 1 (net_memif1): two generators "
            "wired together? They carry another run tag than this run's 0xbeef and count in no flow (rx_other_run)");
  const std::string t = format_table(r);
  EXPECT_NE(t.find("frames of another generator run received (rx_other_run, in no flow): 6804 on wire-side port "
                   "1\n"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("frames sent before this run began received: 3"), std::string::npos) << t;
}

TEST(Report, SiPrefixes) {
  EXPECT_EQ(si(0, "pps"), "0.00 pps");
  EXPECT_EQ(si(1500, "pps"), "1.50 kpps");
  EXPECT_EQ(si(14'880'952, "pps"), "14.88 Mpps");
  EXPECT_EQ(si(9.5e9, "bit/s"), "9.50 Gbit/s");
}

}  // namespace
}  // namespace psgate::gen
