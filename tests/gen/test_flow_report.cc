// SPDX-License-Identifier: BSD-3-Clause
// Per-flow results: the stream summary computed from per-flow state, and the
// per-flow CSV records (5-tuple orientation, counts, latency summary).
#include <gtest/gtest.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "flow_map.h"
#include "flow_report.h"

namespace psgate::gen {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.emplace_back();
  return out;
}

std::string csv_of(const JobProfile& job, Dir dir, const std::vector<FlowRx>& flows,
                   const std::vector<uint64_t>& sent) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = open_memstream(&buf, &len);
  EXPECT_TRUE(write_flows_csv(f, job, dir, flows.data(), sent.data(), flows.size()));
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

TEST(FlowReport, LatencySummarySaturatesOnlyMinAndMax) {
  FlowRx f;
  record_flow_latency(f, 5000);
  record_flow_latency(f, 8'000'000'000ull);  // 8 s: above what 32 bits of ns hold
  EXPECT_EQ(f.lat_min_ns, 5000u);
  EXPECT_EQ(f.lat_max_ns, UINT32_MAX);
  EXPECT_EQ(f.lat_sum_ns, 8'000'005'000ull);
}

TEST(FlowReport, SummaryCountsFlowsByWhatHappenedToThem) {
  std::vector<FlowRx> flows(5);
  // 0: clean; 1: one lost; 2: reordered; 3: a duplicate and a late arrival; 4: never seen
  for (uint32_t s : {0, 1, 2, 3}) record_arrival(flows[0], s);
  for (uint32_t s : {0, 2, 3}) record_arrival(flows[1], s);
  for (uint32_t s : {1, 0, 2, 3}) record_arrival(flows[2], s);
  for (uint32_t s = 0; s < 100; ++s) record_arrival(flows[3], s);
  record_arrival(flows[3], 99);
  record_arrival(flows[3], 3);
  const std::vector<uint64_t> sent{4, 4, 4, 100, 6};
  StreamResult s;
  summarize_flows(flows.data(), sent.data(), flows.size(), s);
  EXPECT_EQ(s.flows_seen, 4u);
  EXPECT_EQ(s.flows_with_loss, 2u);  // flow 1 and the unseen flow 4
  EXPECT_EQ(s.max_flow_loss, 6u);
  EXPECT_EQ(s.flows_reordered, 1u);
  EXPECT_EQ(s.flows_with_duplicates, 1u);
  EXPECT_EQ(s.flows_with_late, 1u);
  EXPECT_EQ(s.rx_unique, 4u + 3 + 4 + 100);
  EXPECT_EQ(s.rx_excess, 0u);

  // A flow that received sequence numbers never sent: excess, not more received.
  StreamResult t;
  const std::vector<uint64_t> fewer{4, 4, 4, 90, 6};
  summarize_flows(flows.data(), fewer.data(), flows.size(), t);
  EXPECT_EQ(t.rx_unique, 4u + 3 + 4 + 90);
  EXPECT_EQ(t.rx_excess, 10u);
}

TEST(FlowReport, CsvRecordPerFlow) {
  JobProfile job;
  job.id = 7;
  job.ps_addr = Addr{false, 0, 0x0a000005};
  job.ps_port = 2222;
  job.workers = 2;
  job.worker_addr = Addr{false, 0, 0x0a010001};
  job.worker_port = 40000;
  job.flows = 3;
  job.proto = Proto::kTcp;
  std::vector<FlowRx> flows(3);
  // flow 0: 0,1,1(dup),3 with latencies 1000, 2000, 4000 ns, 200 bytes in all
  for (uint32_t s : {0, 1, 1, 3}) {
    if (record_arrival(flows[0], s) != Arrival::kDuplicate) record_flow_latency(flows[0], 1000u << (s == 3 ? 2 : s));
    flows[0].bytes += 50;
  }
  // flow 1: one arrival; flow 2: none
  record_arrival(flows[1], 0);
  record_flow_latency(flows[1], 999);
  flows[1].bytes += 60;
  const std::vector<uint64_t> sent{5, 1, 2};

  for (Dir dir : {kPush, kPull}) {
    SCOPED_TRACE(kDirNames[dir]);
    const std::vector<std::string> lines = split(csv_of(job, dir, flows, sent), '\n');
    ASSERT_EQ(lines.size(), 4u);  // three records and the empty rest after the last newline
    EXPECT_EQ(lines.back(), "");
    const size_t columns = split(kFlowsCsvHeader, ',').size();
    const FlowMap map(job);
    for (uint64_t f = 0; f < 3; ++f) {
      const std::vector<std::string> c = split(lines[f], ',');
      ASSERT_EQ(c.size(), columns) << lines[f];
      EXPECT_EQ(c[0], "7");
      EXPECT_EQ(c[1], kDirNames[dir]);
      EXPECT_EQ(c[2], std::to_string(f));
      const WorkerEnd w = map.at(f);
      const std::string worker = format_addr(w.addr), wport = std::to_string(w.port);
      EXPECT_EQ(c[3], dir == kPush ? worker : "10.0.0.5");
      EXPECT_EQ(c[4], dir == kPush ? wport : "2222");
      EXPECT_EQ(c[5], dir == kPush ? "10.0.0.5" : worker);
      EXPECT_EQ(c[6], dir == kPush ? "2222" : wport);
      EXPECT_EQ(c[7], "tcp");
      EXPECT_EQ(c[8], std::to_string(sent[f]));
    }
    // tx, rx packets, bytes, unique, lost, reordered, duplicates, late, samples, min, mean, max
    const std::vector<std::string> f0 = split(lines[0], ',');
    EXPECT_EQ(std::vector<std::string>(f0.begin() + 8, f0.end()),
              (std::vector<std::string>{"5", "4", "200", "3", "2", "0", "1", "0", "3", "1000", "2333", "4000"}));
    const std::vector<std::string> f2 = split(lines[2], ',');
    EXPECT_EQ(std::vector<std::string>(f2.begin() + 8, f2.end()),
              (std::vector<std::string>{"2", "0", "0", "0", "2", "0", "0", "0", "0", "", "", ""}));
  }
  // Distinct flows, distinct worker ends.
  const std::vector<std::string> lines = split(csv_of(job, kPush, flows, sent), '\n');
  EXPECT_NE(split(lines[0], ',')[4] + split(lines[0], ',')[3], split(lines[2], ',')[4] + split(lines[2], ',')[3]);
}

}  // namespace
}  // namespace psgate::gen
