// SPDX-License-Identifier: BSD-3-Clause
// How the data lcores split the work (src/dataplane/dataplane.cc): what
// health names each one doing, and that two lcores a direction each carry
// both directions, every packet out of the other port.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
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
      {kOneTwoThreeHybrid,
       "lcore 1: hybrid (RX wire queue 0, schedule+TX host with the RX lcores' rings), lcore 2: hybrid (RX host "
       "queue 0, schedule+TX wire with the RX lcores' rings), lcore 3: RX queue 1 of wire+host"},
      {"[1, 2, 3, 4]\nmode = \"hybrid\"",
       "lcore 1: hybrid (RX wire queue 0, schedule+TX host with the RX lcores' rings), lcore 2: hybrid (RX host "
       "queue 0, schedule+TX wire with the RX lcores' rings), lcore 3: RX queue 1 of wire+host, lcore 4: RX queue 2 "
       "of wire+host"},
  };
  for (const auto& [data, want] : cases) {
    PipelineHarness h(body(data), /*start_lcores=*/false, "", rx_queues_for(data));
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

// Frames of `count` to the PS (in on the wire port) or from it (in on the
// host port), IPv4 identification `first_id` on, one flow per RX queue.
std::vector<rte_mbuf*> frames(PipelineHarness& h, unsigned in_port, unsigned queue, unsigned first_id, unsigned count) {
  std::vector<rte_mbuf*> out;
  for (unsigned i = 0; i < count; ++i) {
    const auto id = static_cast<uint16_t>(first_id + i);
    pkt::PacketSpec s = in_port == kWire ? pkt::to_ps(2222, id, 200) : pkt::from_ps(2222, id, 200);
    (in_port == kWire ? s.sport : s.dport) = static_cast<uint16_t>(40000 + queue);  // the worker's end
    out.push_back(h.mbuf_of(pkt::build_packet(s)));
  }
  return out;
}

// Hybrid, 4 data lcores: lcores 1 and 2 receive RX queue 0 of the wire and
// the host port to completion, lcores 3 and 4 queues 1 and 2 of both, through
// rings to lcore 2 (wire egress) and lcore 1 (host egress). Every packet of
// every queue leaves by the other port, each queue's in its order, none
// lost: the hybrid lcores send what their own RX takes and what the RX
// lcores' rings bring. (A hybrid lcore that ignored its rings lost queues 1
// and 2; one that ignored its own RX, queue 0.)
TEST(LcorePlans, HybridLcoresSendTheirOwnQueueAndTheRxLcoresRings) {
  const std::string data = "[1, 2, 3, 4]\nmode = \"hybrid\"";
  PipelineHarness h(body(data), /*start_lcores=*/false, "", rx_queues_for(data));
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_EQ(h.rx_queues(), 3u);
  constexpr unsigned kEach = 20;  // per port and queue
  for (unsigned round = 0; round < 2; ++round) {
    for (unsigned port : {kWire, kHost}) {
      for (unsigned q = 0; q < 3; ++q) {
        std::vector<rte_mbuf*> in = frames(h, port, q, 1000 * q + round * kEach / 2, kEach / 2);
        for (rte_mbuf* m : in) ASSERT_NE(m, nullptr);
        ASSERT_EQ(h.inject(port, in.data(), static_cast<unsigned>(in.size()), q), in.size());
      }
    }
    ASSERT_TRUE(h.dataplane().run_once());
  }
  for (int pass = 0; pass < 8; ++pass) ASSERT_TRUE(h.dataplane().run_once());
  for (unsigned port : {kWire, kHost}) {
    rte_mbuf* out[8 * kEach];
    const unsigned n = h.collect(port, out, 8 * kEach);
    EXPECT_EQ(n, 3 * kEach) << "port " << port;
    unsigned next[3] = {0, 1000, 2000};
    for (unsigned i = 0; i < n; ++i) {
      const uint8_t* ip = rte_pktmbuf_mtod_offset(out[i], const uint8_t*, 14);
      const unsigned id = static_cast<unsigned>(ip[4] << 8 | ip[5]);
      const unsigned q = id / 1000;
      ASSERT_LT(q, 3u);
      EXPECT_EQ(id, next[q]) << "port " << port << ": queue " << q << " out of order";
      next[q] = id + 1;
      rte_pktmbuf_free(out[i]);
    }
    for (unsigned q = 0; q < 3; ++q) EXPECT_EQ(next[q], 1000 * q + kEach) << "port " << port << " queue " << q;
  }
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kWire].rx_packets, 3 * kEach);
  EXPECT_EQ(t.ports[kHost].rx_packets, 3 * kEach);
  EXPECT_EQ(t.tx_total(), 6 * kEach);
  EXPECT_EQ(t.drop_total(), 0u);
}

// The lcores running, stopped with packets still queued behind the wire
// port's shaper: each hybrid lcore drains its own RX's packets and the
// rings' (until the RX lcore has stopped), and what the drain cannot send
// by the drain timeout is counted: received = sent + dropped.
TEST(LcorePlans, HybridLcoresDrainTheirRingsAtStop) {
  const std::string data = "[1, 2, 3]\nmode = \"hybrid\"";
  std::string config = body(data) + "[shaper.wire]\nrate = \"1Mbit/s\"\nburst = \"2KiB\"\n";
  config.replace(config.find("mbufs = 8191"), 12, "mbufs = 8191\ndrain_timeout = \"20ms\"");
  PipelineHarness h(config, true, "", rx_queues_for(data));
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr unsigned kEach = 200;
  unsigned injected = 0;
  for (unsigned port : {kWire, kHost}) {
    for (unsigned q = 0; q < 2; ++q) {
      for (unsigned done = 0; done < kEach; done += 25) {
        std::vector<rte_mbuf*> in = frames(h, port, q, 1000 * q + done, 25);
        for (rte_mbuf* m : in) ASSERT_NE(m, nullptr);
        injected += h.inject(port, in.data(), static_cast<unsigned>(in.size()), q);
      }
    }
  }
  ASSERT_EQ(injected, 4 * kEach);
  // Every packet received before the stop (the shaper keeps the wire port's
  // queued).
  for (int i = 0; i < 2000; ++i) {
    if (h.dataplane().read_totals(false).rx_total() == injected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_TRUE(h.stop());
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.rx_total(), injected);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
  EXPECT_EQ(t.ports[kHost].tx_packets, 2 * kEach) << "the host port is not shaped: everything leaves";
  EXPECT_GT(t.ports[kWire].drops[kDropShutdown], 0u) << "the shaper let everything out: the drain tested nothing";
}

}  // namespace
}  // namespace psgate::testing
