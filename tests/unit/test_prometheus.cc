// SPDX-License-Identifier: BSD-3-Clause
// The Prometheus page: every family has HELP and TYPE, every counter of the
// field tables is there, label values are escaped, and the sojourn histogram
// is cumulative with +Inf == _count. (The integration test runs promtool on a
// real scrape.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "prometheus_samples.h"
#include "psgate/prometheus.h"

namespace psgate {
namespace {

using testing::prometheus_samples;

MetricsView sample_view() {
  MetricsView v;
  v.version = "1.2.3";
  v.policy = "static";
  v.generation = 4;
  v.uptime_s = 12.5;
  v.start_time_unix_s = 1.7e9;
  v.totals.class_count = 2;
  v.totals.classes.resize(kPortCount * 2);
  v.totals.ports[0].rx_packets = 10;
  v.totals.ports[1].tx_bytes = 6400;
  v.totals.ports[0].drops[kDropQueueFull] = 3;
  v.totals.ports[1].link.up = false;
  ClassTotals& c = v.totals.classes[1];  // wire, class 1
  c.enqueued_packets = 7;
  c.dequeued_packets = 5;
  c.sojourn.record(100);               // 100 ns
  c.sojourn.record(3'000, 2);          // 3 us
  c.sojourn.record(2'000'000);         // 2 ms
  c.sojourn.record(5'000'000'000ull);  // 5 s: above every finite bound
  MetricsJob j;
  j.id = 7;
  j.name = "a\"b\\c\nd";
  j.rank = 2;
  j.counters.sent_bytes[kPull] = 1500;
  v.jobs.push_back(j);
  return v;
}

TEST(Prometheus, EveryFamilyHasHelpAndTypeAndEverySampleAFamily) {
  const std::string page = render_prometheus(sample_view());
  std::set<std::string> help, type;
  std::istringstream in(page);
  const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? \S+$)");
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) {
      help.insert(line.substr(7, line.find(' ', 7) - 7));
    } else if (line.rfind("# TYPE ", 0) == 0) {
      type.insert(line.substr(7, line.find(' ', 7) - 7));
    } else {
      ASSERT_TRUE(std::regex_match(line, m, sample_re)) << line;
      std::string family = m[1];
      for (const char* suffix : {"_bucket", "_sum", "_count"}) {
        const std::string s = suffix;
        if (family.size() > s.size() && family.ends_with(s) && type.count(family.substr(0, family.size() - s.size())))
          family = family.substr(0, family.size() - s.size());
      }
      EXPECT_TRUE(type.count(family)) << "sample before its TYPE: " << line;
    }
  }
  EXPECT_EQ(help, type);
  EXPECT_GT(type.size(), 30u);
}

TEST(Prometheus, EveryTableCounterIsExported) {
  const std::string page = render_prometheus(sample_view());
  auto has = [&](const std::string& family) {
    return page.find("# TYPE " + family + " counter\n") != std::string::npos;
  };
  EXPECT_TRUE(has("psgate_rx_packets_total"));
  EXPECT_TRUE(has("psgate_tx_bytes_total"));
  EXPECT_TRUE(has("psgate_rx_malformed_packets_total"));
  EXPECT_TRUE(has("psgate_class_drop_queue_full_packets_total"));
  EXPECT_TRUE(has("psgate_job_sent_bytes_total"));
  EXPECT_TRUE(has("psgate_job_policed_packets_total"));
  EXPECT_TRUE(has("psgate_flow_cache_hits_lookups_total"));
  EXPECT_TRUE(has("psgate_nic_imissed_packets_total"));
  // Every line of every table, by the naming rule, so a new one cannot be missed.
  size_t n = 0;
  for (const auto& f : kPortFields)
    n += has(
        "psgate_" + std::string(f.info.name) +
        (std::string(f.info.name).ends_with(unit_name(f.info.unit)) ? "" : std::string("_") + unit_name(f.info.unit)) +
        "_total");
  EXPECT_EQ(n, std::size(kPortFields));
  for (const auto& f : kClassFields)
    EXPECT_NE(page.find("psgate_class_" + std::string(f.info.name)), std::string::npos) << f.info.name;
  for (const auto& f : kJobDirectionFields)
    EXPECT_NE(page.find("psgate_job_" + std::string(f.info.name)), std::string::npos) << f.info.name;
  for (const auto& f : kJobFields)
    EXPECT_NE(page.find("psgate_job_" + std::string(f.info.name)), std::string::npos) << f.info.name;
  for (unsigned r = 0; r < kDropReasonCount; ++r)
    EXPECT_NE(page.find("reason=\"" + std::string(kDropReasonNames[r]) + "\""), std::string::npos);
}

TEST(Prometheus, ValuesAndLabels) {
  const auto s = prometheus_samples(render_prometheus(sample_view()));
  EXPECT_EQ(s.at("psgate_rx_packets_total{port=\"wire\"}"), "10");
  EXPECT_EQ(s.at("psgate_tx_bytes_total{port=\"host\"}"), "6400");
  EXPECT_EQ(s.at("psgate_dropped_packets_total{port=\"wire\",reason=\"queue_full\"}"), "3");
  EXPECT_EQ(s.at("psgate_link_up{port=\"host\"}"), "0");
  EXPECT_EQ(s.at("psgate_link_up{port=\"wire\"}"), "1");
  EXPECT_EQ(s.at("psgate_class_depth_packets{port=\"wire\",class=\"1\"}"), "2");
  EXPECT_EQ(s.at("psgate_build_info{version=\"1.2.3\"}"), "1");
  EXPECT_EQ(s.at("psgate_uptime_seconds"), "12.5");
  EXPECT_EQ(s.count("psgate_cluster_connected"), 0u);  // single-host: no cluster families
}

// Counters read one after another while the lcore counts on: a read may see
// a cut-through burst's dequeue but not its enqueue. The depth is 0 then, not
// 2^64 - 1.
TEST(Prometheus, ADepthReadMidBurstIsNeverNegative) {
  MetricsView v = sample_view();
  v.totals.classes[1].enqueued_packets = 5;
  v.totals.classes[1].dequeued_packets = 6;
  EXPECT_EQ(prometheus_samples(render_prometheus(v)).at("psgate_class_depth_packets{port=\"wire\",class=\"1\"}"), "0");
}

TEST(Prometheus, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_escape("plain"), "plain");
  EXPECT_EQ(prometheus_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  const auto s = prometheus_samples(render_prometheus(sample_view()));
  EXPECT_EQ(s.at("psgate_job_sent_bytes_total{job_id=\"7\",job_name=\"a\\\"b\\\\c\\nd\",direction=\"pull\"}"), "1500");
  EXPECT_EQ(s.at("psgate_job_rank{job_id=\"7\",job_name=\"a\\\"b\\\\c\\nd\"}"), "2");
}

TEST(Prometheus, SojournHistogramIsCumulativeInSeconds) {
  const auto s = prometheus_samples(render_prometheus(sample_view()));
  const std::string lab = "port=\"wire\",class=\"1\"";
  auto bucket = [&](const std::string& le) {
    return std::stoull(s.at("psgate_class_sojourn_seconds_bucket{" + lab + ",le=\"" + le + "\"}"));
  };
  // Bounds are 2^k - 1 ns: 255 ns holds the 100 ns sample, 4095 ns the 3 us pair.
  EXPECT_EQ(bucket("2.55e-07"), 1u);
  EXPECT_EQ(bucket("2.047e-06"), 1u);
  EXPECT_EQ(bucket("4.095e-06"), 3u);
  EXPECT_EQ(bucket("0.002097151"), 4u);
  EXPECT_EQ(bucket("1.073741823"), 4u);  // the largest finite bound: the 5 s sample is above it
  EXPECT_EQ(bucket("+Inf"), 5u);
  EXPECT_EQ(s.at("psgate_class_sojourn_seconds_count{" + lab + "}"), "5");
  std::vector<uint64_t> seen;
  for (const auto& [k, v] : s)
    if (k.rfind("psgate_class_sojourn_seconds_bucket{" + lab, 0) == 0) seen.push_back(std::stoull(v));
  EXPECT_EQ(seen.size(), prometheus_sojourn_bounds_ns().size() + 1);
  // _sum: 100 ns + 2 * 3 us + 2 ms + 5 s, within the buckets' 1/16.
  const double sum = std::stod(s.at("psgate_class_sojourn_seconds_sum{" + lab + "}"));
  const double want = 100e-9 + 6e-6 + 2e-3 + 5.0;
  EXPECT_NEAR(sum, want, want / 16);
  // An empty class: all zero, +Inf too.
  EXPECT_EQ(s.at("psgate_class_sojourn_seconds_bucket{port=\"host\",class=\"0\",le=\"+Inf\"}"), "0");
  EXPECT_EQ(s.at("psgate_class_sojourn_seconds_count{port=\"host\",class=\"0\"}"), "0");
}

TEST(Prometheus, BucketsAreMonotoneInPageOrder) {
  const std::string page = render_prometheus(sample_view());
  std::istringstream in(page);
  std::string series;
  uint64_t prev = 0;
  int checked = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("psgate_class_sojourn_seconds_bucket{", 0) != 0) continue;
    const std::string key = line.substr(0, line.find(",le="));
    const uint64_t n = std::stoull(line.substr(line.rfind(' ') + 1));
    if (key == series) {
      EXPECT_GE(n, prev) << line;
      ++checked;
    }
    series = key;
    prev = n;
  }
  EXPECT_GT(checked, 50);
}

TEST(Prometheus, ClusterFamiliesInClusterMode) {
  MetricsView v = sample_view();
  v.cluster = MetricsCluster{};
  v.cluster->connected = true;
  v.cluster->applied_revision = 42;
  const auto s = prometheus_samples(render_prometheus(v));
  EXPECT_EQ(s.at("psgate_cluster_connected"), "1");
  EXPECT_EQ(s.at("psgate_cluster_applied_revision"), "42");
}

// docs/metrics.md lists every family: a counter added to a table must be
// documented there too (its meaning is in counters.md, generated).
TEST(Prometheus, DocsListEveryFamily) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";
  std::ifstream in(std::string(root) + "/docs/metrics.md");
  ASSERT_TRUE(in) << "docs/metrics.md not found";
  std::stringstream doc;
  doc << in.rdbuf();
  MetricsView v = sample_view();
  v.cluster = MetricsCluster{};
  std::istringstream page(render_prometheus(v));
  int families = 0;
  for (std::string line; std::getline(page, line);) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    EXPECT_NE(doc.str().find("`" + name + "`"), std::string::npos) << name << " is not listed in docs/metrics.md";
    ++families;
  }
  EXPECT_GT(families, 40);
}

}  // namespace
}  // namespace psgate
