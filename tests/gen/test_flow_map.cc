// SPDX-License-Identifier: BSD-3-Clause
// Flow id -> 5-tuple: deterministic, distinct, inside the address range the
// profile checked.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "flow_map.h"

namespace psgate::gen {
namespace {

JobProfile job(uint32_t workers, uint16_t worker_port, uint64_t flows, bool v6 = false) {
  JobProfile j;
  j.workers = workers;
  j.worker_port = worker_port;
  j.flows = flows;
  j.worker_addr = v6 ? Addr{true, 0xfd01ull << 48, 1} : Addr{false, 0, 0x0a010001};
  return j;
}

TEST(FlowMap, SmallTable) {
  const FlowMap m(job(3, 40000, 9));
  struct Row {
    uint64_t flow;
    uint64_t addr_offset;
    uint16_t port;
  } rows[] = {{0, 0, 40000}, {1, 1, 40000}, {2, 2, 40000}, {3, 0, 40001}, {4, 1, 40001}, {8, 2, 40002}};
  for (const Row& r : rows) {
    const WorkerEnd e = m.at(r.flow);
    EXPECT_EQ(e.addr.lo, 0x0a010001u + r.addr_offset) << r.flow;
    EXPECT_EQ(e.port, r.port) << r.flow;
  }
}

TEST(FlowMap, PortExhaustionMovesToFurtherAddresses) {
  // span = 65536 - 65534 = 2 ports per address.
  const FlowMap m(job(2, 65534, 10));
  struct Row {
    uint64_t flow;
    uint64_t addr_offset;
    uint16_t port;
  } rows[] = {{0, 0, 65534}, {1, 1, 65534}, {2, 0, 65535}, {3, 1, 65535},
              {4, 2, 65534}, {5, 3, 65534}, {6, 2, 65535}, {9, 5, 65534}};
  for (const Row& r : rows) {
    const WorkerEnd e = m.at(r.flow);
    EXPECT_EQ(e.addr.lo - 0x0a010001u, r.addr_offset) << r.flow;
    EXPECT_EQ(e.port, r.port) << r.flow;
  }
}

// Distinct tuples and worker_hosts_needed() == the largest address used + 1,
// on random shapes including several rounds of port exhaustion.
TEST(FlowMap, DistinctAndHostCountMatchesBruteForce) {
  std::mt19937_64 rng(42);
  for (int round = 0; round < 200; ++round) {
    const uint32_t workers = 1 + rng() % 7;
    const uint16_t port = static_cast<uint16_t>(65536 - (1 + rng() % 5));  // 1..5 ports per address
    const uint64_t flows = workers + rng() % 300;
    const bool v6 = rng() % 2;
    const JobProfile j = job(workers, port, flows, v6);
    const FlowMap m(j);
    std::set<std::tuple<uint64_t, uint64_t, uint16_t>> seen;
    uint64_t max_host = 0;
    for (uint64_t f = 0; f < flows; ++f) {
      const WorkerEnd e = m.at(f);
      EXPECT_EQ(e.addr.v6, v6);
      EXPECT_GE(e.port, port);
      EXPECT_TRUE(seen.insert({e.addr.hi, e.addr.lo, e.port}).second) << "flow " << f << " repeats a tuple";
      max_host = std::max(max_host, e.addr.lo - j.worker_addr.lo);
      // Deterministic: same answer twice, and from a fresh map.
      const WorkerEnd again = FlowMap(j).at(f);
      EXPECT_EQ(again.addr, e.addr);
      EXPECT_EQ(again.port, e.port);
    }
    EXPECT_EQ(worker_hosts_needed(workers, port, flows), max_host + 1)
        << "workers " << workers << " port " << port << " flows " << flows;
  }
}

TEST(FlowMap, MillionFlowsDistinct) {
  const JobProfile j = job(16, 1024, 1'000'000);
  const FlowMap m(j);
  std::vector<uint64_t> keys;
  keys.reserve(j.flows);
  for (uint64_t f = 0; f < j.flows; ++f) {
    const WorkerEnd e = m.at(f);
    keys.push_back((e.addr.lo - j.worker_addr.lo) << 16 | e.port);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
  EXPECT_EQ(worker_hosts_needed(16, 1024, 1'000'000), (keys.back() >> 16) + 1);
}

}  // namespace
}  // namespace psgate::gen
