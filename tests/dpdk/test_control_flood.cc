// SPDX-License-Identifier: BSD-3-Clause
// A flood of network control (class 0: here LLDP, as a looped switch port
// or a storm brings it) beside a job's traffic on a shaped egress port. Class
// 0 is served first by strict priority; without a limit of its own the flood
// takes the whole port and the job gets nothing. With the default limit
// (classes.control_rate, nothing set in the config) class 0 gets at most its
// burst plus its rate over the run, the rest is counted `control_policed`,
// and the job gets what the shaper has left. Through the real RX and
// scheduler stages on ring ports, run one pass at a time on the test's
// thread, with one data lcore, two, two pipelined and three hybrid.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "lcore_modes.h"
#include "packet_builder.h"
#include "pipeline_harness.h"
#include "psgate/config.h"
#include "psgate/packet_parser.h"
#include "psgate/totals.h"

namespace psgate::testing {
namespace {

constexpr unsigned kWire = 0, kHost = 1;
constexpr size_t kFrameBytes = 1014;  // both kinds: the flood takes the port by bytes, as the job would

std::vector<uint8_t> lldp_frame() {
  pkt::PacketSpec s;
  s.l3 = pkt::L3::kNone;
  s.ethertype = pkt::kEtherTypeLldp;
  s.payload_len = kFrameBytes - 14;
  return pkt::build_packet(s);
}

std::vector<uint8_t> job_frame(uint16_t ip_id) {
  auto f = pkt::build_packet(pkt::from_ps(2222, ip_id, 0));
  return pkt::build_packet(pkt::from_ps(2222, ip_id, kFrameBytes - f.size()));
}

class ControlFloodTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ControlFloodTest, AFloodOfNetworkControlDoesNotStarveTheJobs) {
  // 100 Mbit/s on the wire egress; nothing about class 0 is configured.
  // The shaper's burst is well above class 0's (128 KiB): the test thread,
  // here the data lcore, may be kept off its CPU for tens of milliseconds
  // on a loaded machine, and after such a gap both buckets are full. With
  // a shaper burst below class 0's, class 0 (first by strict priority)
  // would take everything the port may send after each gap, and the job's
  // share would depend on how long the gaps were, not on the limit.
  const std::string body = std::string("[lcores]\nmain = 0\ndata = ") + GetParam() +
                           "\n[shaper.wire]\nrate = \"100Mbit/s\"\nburst = \"1MiB\"\n"
                           "[classes]\ncount = 8\ndepth = 64\n"
                           "[dataplane]\nmbufs = 8191\nmax_jobs = 16\n[stats]\ninterval = \"0s\"\n"
                           "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n";
  PipelineHarness h(body, /*start_lcores=*/false, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  const std::vector<uint8_t> lldp = lldp_frame();
  {
    ParsedPacket p;
    parse_packet(lldp.data(), static_cast<uint32_t>(lldp.size()), p);
    ASSERT_TRUE(p.network_control);
  }

  // Each pass: 16 LLDP frames and 16 of the job's, far more than 100 Mbit/s
  // for as long as a pass takes under 2 ms. Run for 400 ms of the clock.
  uint64_t sent_control = 0, sent_job = 0, offered_control = 0, offered_job = 0;
  auto collect = [&] {
    rte_mbuf* pkts[64];
    for (unsigned n; (n = h.collect(kWire, pkts, 64)) != 0;) {
      for (unsigned i = 0; i < n; ++i) {
        ParsedPacket p;
        parse_packet(rte_pktmbuf_mtod(pkts[i], const uint8_t*), pkts[i]->data_len, p);
        (p.network_control ? sent_control : sent_job) += 1;
        rte_pktmbuf_free(pkts[i]);
      }
    }
  };
  const auto start = std::chrono::steady_clock::now();
  const auto run_for = std::chrono::milliseconds(400);
  uint16_t id = 0;
  while (std::chrono::steady_clock::now() - start < run_for) {
    rte_mbuf* burst[32];
    unsigned n = 0;
    for (unsigned i = 0; i < 16; ++i) {
      burst[n] = h.mbuf_of(lldp);
      ASSERT_NE(burst[n], nullptr);
      ++n;
      burst[n] = h.mbuf_of(job_frame(id++));
      ASSERT_NE(burst[n], nullptr);
      ++n;
    }
    // Hybrid: the RX queues in turn, so that class 0 reaches the wire
    // port's scheduler by its own RX and by the RX lcore's ring, both
    // policed by the one limit.
    ASSERT_EQ(h.inject(kHost, burst, n, static_cast<unsigned>(offered_job / 16) % h.rx_queues()), n);
    offered_control += 16;
    offered_job += 16;
    ASSERT_TRUE(h.dataplane().run_once());
    collect();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() + 0.05;  // and then some
  const Totals t = h.dataplane().read_totals(false);

  // Class 0 got no more than its default limit allows: the burst plus the
  // rate over the run, on the wire's bytes (frame + 24 B overhead).
  const double limit_bytes = kDefaultControlBurstBytes + seconds * kDefaultControlRateBps / 8.0;
  EXPECT_LE(static_cast<double>(sent_control), limit_bytes / (kFrameBytes + 24) + 1)
      << "network control took more than classes.control_rate over " << seconds << " s";
  // The job was not starved: it got more of the port than the flood.
  EXPECT_GT(sent_job, sent_control) << "the job got " << sent_job << " frames, the flood " << sent_control
                                    << " (offered " << offered_job << " and " << offered_control << ")";
  EXPECT_GT(t.ports[kWire].drops[kDropControlPoliced], 0u);
  EXPECT_EQ(t.ports[kHost].rx_network_control, offered_control);

  // Conservation: with the shaper opened, what is still queued leaves; what
  // came in was then sent or counted dropped.
  const auto reply = h.control().handle({{"cmd", "shaper.set"}, {"port", "wire"}, {"rate", nullptr}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  for (unsigned quiet = 0; quiet < 8;) {
    const uint64_t before = sent_control + sent_job;
    ASSERT_TRUE(h.dataplane().run_once());
    collect();
    quiet = sent_control + sent_job == before ? quiet + 1 : 0;
  }
  const Totals end = h.dataplane().read_totals(false);
  EXPECT_EQ(end.rx_total(), offered_control + offered_job);
  EXPECT_EQ(end.rx_total(), end.tx_total() + end.drop_total());
  EXPECT_EQ(end.ports[kWire].tx_packets, sent_control + sent_job);
  std::printf(
      "[ control-flood ] %s: %.2f s, offered %lu control + %lu job; sent %lu control + %lu job; "
      "control_policed %lu, queue_full %lu\n",
      GetParam(), seconds, static_cast<unsigned long>(offered_control), static_cast<unsigned long>(offered_job),
      static_cast<unsigned long>(sent_control), static_cast<unsigned long>(sent_job),
      static_cast<unsigned long>(end.ports[kWire].drops[kDropControlPoliced]),
      static_cast<unsigned long>(end.ports[kWire].drops[kDropQueueFull]));
}

INSTANTIATE_TEST_SUITE_P(Lcores, ControlFloodTest,
                         ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined, kOneTwoThreeHybrid),
                         [](const ::testing::TestParamInfo<const char*>& p) { return lcore_mode_name(p.param); });

}  // namespace
}  // namespace psgate::testing
