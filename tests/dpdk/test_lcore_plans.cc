// SPDX-License-Identifier: BSD-3-Clause
// How the data lcores split the work (src/dataplane/dataplane.cc): what
// health names each one doing, and that two lcores a direction each carry
// both directions, every packet out of the other port.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "lcore_modes.h"
#include "packet_builder.h"
#include "pipeline_harness.h"

namespace psgate::testing {
namespace {

constexpr unsigned kWire = 0, kHost = 1;

std::string body(const std::string& data) {
  return "[lcores]\nmain = 0\ndata = " + data +
         "\n[classes]\ncount = 8\ndepth = 64\n[dataplane]\nmbufs = 8191\n[stats]\ninterval = \"0s\"\n"
         "[[jobs]]\nid = 1\nrank = 0\n"
         "match = [\"src=10.0.0.5/32,sport=2222,proto=tcp\", \"dst=10.0.0.5/32,dport=2222,proto=tcp\"]\n";
}

TEST(LcorePlans, HealthNamesWhatEachDataLcoreDoes) {
  const std::pair<std::string, std::string> cases[] = {
      {"[1]", "lcore 1: run-to-completion (RX wire+host, schedule+TX wire+host)"},
      {"[1, 2]",
       "lcore 1: run-to-completion (RX wire, schedule+TX host), lcore 2: run-to-completion (RX host, schedule+TX "
       "wire)"},
      {pipelined("[1, 2]"), "lcore 1: RX queue 0 of wire+host, lcore 2: schedule+TX wire host"},
      {"[1, 2, 3]", "lcore 1: RX queue 0 of wire+host, lcore 2: schedule+TX wire, lcore 3: schedule+TX host"},
  };
  for (const auto& [data, want] : cases) {
    PipelineHarness h(body(data), /*start_lcores=*/false);
    ASSERT_TRUE(h.ok()) << data << ": " << h.error();
    EXPECT_EQ(h.dataplane().describe_lcores(), want) << data;
  }
}

// Traffic both ways at once through two lcores a direction each: every
// packet leaves by the other port, in order, none lost; the PS's replies
// (from port 2222, in on the host port) leave on the wire, the workers'
// pushes (to it, in on the wire port) on the host side.
TEST(LcorePlans, TwoLcoresADirectionEachCarryBothWays) {
  PipelineHarness h(body("[1, 2]"), /*start_lcores=*/false);
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr unsigned kEach = 40;
  for (unsigned i = 0; i < kEach; ++i) {
    rte_mbuf* pull = h.mbuf_of(pkt::build_packet(pkt::from_ps(2222, static_cast<uint16_t>(i), 200)));
    rte_mbuf* push = h.mbuf_of(pkt::build_packet(pkt::to_ps(2222, static_cast<uint16_t>(1000 + i), 200)));
    ASSERT_TRUE(pull && push);
    ASSERT_EQ(h.inject(kHost, &pull, 1), 1u);
    ASSERT_EQ(h.inject(kWire, &push, 1), 1u);
  }
  for (int pass = 0; pass < 8; ++pass) ASSERT_TRUE(h.dataplane().run_once());
  for (unsigned port : {kWire, kHost}) {
    rte_mbuf* out[2 * kEach];
    const unsigned n = h.collect(port, out, 2 * kEach);
    EXPECT_EQ(n, kEach) << "port " << port;
    for (unsigned i = 0; i < n; ++i) {
      // IPv4 identification: pulls 0.., pushes 1000..: each port sends only
      // the other's arrivals, in the order they came.
      const uint8_t* ip = rte_pktmbuf_mtod_offset(out[i], const uint8_t*, 14);
      const unsigned id = static_cast<unsigned>(ip[4] << 8 | ip[5]);
      EXPECT_EQ(id, (port == kWire ? 0u : 1000u) + i) << "port " << port << " packet " << i;
      rte_pktmbuf_free(out[i]);
    }
  }
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kWire].rx_packets, kEach);
  EXPECT_EQ(t.ports[kHost].rx_packets, kEach);
  EXPECT_EQ(t.tx_total(), 2 * kEach);
  EXPECT_EQ(t.drop_total(), 0u);
}

}  // namespace
}  // namespace psgate::testing
