// SPDX-License-Identifier: BSD-3-Clause
// Ingress policing through the real daemon on net_pcap, with one data lcore
// and with two: a job whose policer admits a known number of packets, next
// to a job that overflows its class queue behind a shaper, unclassified
// traffic, and traffic the other way. Every packet a port receives must leave
// by the other port or be counted there under exactly one drop reason, and
// the port's `policed` drops must be the policed job's own count.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "daemon_runner.h"
#include "lcore_modes.h"
#include "packet_builder.h"
#include "psgate/packet_parser.h"

namespace psgate::testing {
namespace {

using Frames = std::vector<std::vector<uint8_t>>;

// The policed job's bucket holds 16 KiB and refills at 1 byte/s, so of its
// 1054-byte frames exactly floor(16384 / 1054) = 15 conform (574 bytes are
// left, and a run of seconds refills a few bytes): the rest are policed.
constexpr unsigned kPolicedSent = 300, kPolicedAdmitted = 15;
constexpr unsigned kQueuedSent = 200, kUnclassifiedSent = 20, kPushSent = 50;

std::string config(const std::string& data_lcores) {
  static int counter = 0;
  const std::string prefix = "psgate-police-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  return R"([eal]
args = ["--no-huge", "-m", "256", "--no-pci", "--file-prefix=)" +
         prefix + R"(", "--log-level=3"]
[ports.wire]
device = "net_pcap0,rx_pcap=wire-in.pcap,tx_pcap=wire-out.pcap"
[ports.host]
device = "net_pcap1,rx_pcap=host-in.pcap,tx_pcap=host-out.pcap"
[lcores]
main = 0
data = )" +
         data_lcores + R"(
[shaper.wire]
rate = "2Mbit/s"
burst = "2000B"
[dataplane]
drain_timeout = "2s"
mbufs = 8191
[stats]
interval = "0s"
[control]
socket = "ctl.sock"
[classes]
count = 8
default = 7
depth = 1024
[classes.6]
depth = 16
[[jobs]]
id = 1
name = "policed"
rank = 0
police = "8bit/s"
police_burst = "16KiB"
match = ["src=10.0.0.5/32,sport=2222,proto=tcp"]
[[jobs]]
id = 2
name = "queued"
rank = 5
match = ["src=10.0.0.5/32,sport=2223,proto=tcp"]
)";
}

// From the PS (host -> wire, "pull"): 1054-byte frames.
std::vector<uint8_t> from_ps(uint16_t sport, uint16_t ip_id) {
  return pkt::build_packet(pkt::from_ps(sport, ip_id, 1000));
}

// To the PS (wire -> host), of no job: the default class, 1024 deep.
std::vector<uint8_t> to_ps(uint16_t dport, uint16_t ip_id) { return pkt::build_packet(pkt::to_ps(dport, ip_id, 200)); }

uint64_t stat(const nlohmann::json& j, const std::string& pointer) {
  return j.at(nlohmann::json::json_pointer(pointer)).get<uint64_t>();
}

class PolicingTest : public ::testing::TestWithParam<std::string> {
 protected:
  DaemonFixture fx;
};

TEST_P(PolicingTest, PolicedDropsAreCountedOnTheEgressPortAndTheJobAndConserved) {
  Frames host_in;
  for (unsigned i = 0; i < kPolicedSent; ++i) {
    host_in.push_back(from_ps(2222, static_cast<uint16_t>(i)));
    if (i < kQueuedSent) host_in.push_back(from_ps(2223, static_cast<uint16_t>(i)));
    if (i < kUnclassifiedSent) host_in.push_back(from_ps(9999, static_cast<uint16_t>(i)));
  }
  Frames wire_in;
  for (unsigned i = 0; i < kPushSent; ++i) wire_in.push_back(to_ps(9999, static_cast<uint16_t>(i)));
  pkt::PacketSpec arp;
  arp.l3 = pkt::L3::kArp;
  wire_in.push_back(pkt::build_packet(arp));
  fx.write_pcap("host-in.pcap", host_in);
  fx.write_pcap("wire-in.pcap", wire_in);
  fx.write_file("psgate.toml", config(GetParam()));

  DaemonRun run = fx.run("psgate.toml", {"--duration", "1"});
  EXPECT_EQ(run.exit_status, 0) << run.output;
  const auto& s = run.stats;
  ASSERT_TRUE(s.is_object()) << run.output;

  // host -> wire: received on host = transmitted on wire + wire's drops, by reason.
  const Frames wire_out = fx.read_pcap("wire-out.pcap");
  EXPECT_EQ(stat(s, "/ports/host/rx_packets"), host_in.size());
  EXPECT_EQ(stat(s, "/ports/wire/tx_packets"), wire_out.size());
  uint64_t wire_drops = 0;
  for (const auto& [reason, count] : s["ports"]["wire"]["drops"].items()) {
    wire_drops += count.get<uint64_t>();
    if (reason != "policed" && reason != "queue_full" && reason != "ring_full") {
      EXPECT_EQ(count.get<uint64_t>(), 0u) << "wire drops " << reason;
    }
  }
  EXPECT_EQ(stat(s, "/ports/host/rx_packets"), stat(s, "/ports/wire/tx_packets") + wire_drops)
      << "host -> wire does not add up: " << s["ports"]["wire"]["drops"].dump();

  // The policed job: the port's policed drops are its own, and all it sent
  // beyond its bucket.
  const auto& policed_job = s["jobs"][0];
  ASSERT_EQ(policed_job["id"].get<uint32_t>(), 1u);
  EXPECT_EQ(stat(s, "/ports/wire/drops/policed"), stat(s, "/jobs/0/policed"));
  EXPECT_EQ(stat(s, "/jobs/0/policed"), kPolicedSent - kPolicedAdmitted);
  EXPECT_EQ(stat(s, "/jobs/0/pull/admitted_packets"), kPolicedAdmitted);
  EXPECT_EQ(stat(s, "/jobs/0/pull/sent_packets"), kPolicedAdmitted);
  EXPECT_EQ(stat(s, "/jobs/0/drops"), 0u) << "admitted packets have room in class 1";
  // On the wire: the first 15 of the job's frames, in order, and no other.
  unsigned policed_out = 0, queued_out = 0, unclassified_out = 0;
  for (const auto& frame : wire_out) {
    ParsedPacket p;
    parse_packet(frame.data(), static_cast<uint32_t>(frame.size()), p);
    const uint8_t* ip = frame.data() + p.l3_offset;
    const uint16_t ip_id = static_cast<uint16_t>(ip[4] << 8 | ip[5]);
    if (p.sport == 2222) {
      EXPECT_EQ(ip_id, policed_out) << "policed job's output";
      ++policed_out;
    } else if (p.sport == 2223) {
      ++queued_out;
    } else if (p.sport == 9999) {
      ++unclassified_out;
    } else {
      ADD_FAILURE() << "unexpected frame on the wire, sport " << p.sport;
    }
  }
  EXPECT_EQ(policed_out, kPolicedAdmitted);
  EXPECT_EQ(unclassified_out, kUnclassifiedSent);

  // The other job overflowed its 16-packet queue behind the 2 Mbit/s shaper.
  const auto& queued_job = s["jobs"][1];
  ASSERT_EQ(queued_job["id"].get<uint32_t>(), 2u);
  EXPECT_GT(stat(s, "/ports/wire/drops/queue_full"), 0u);
  EXPECT_EQ(stat(s, "/jobs/1/policed"), 0u);
  EXPECT_EQ(stat(s, "/jobs/1/drops"), stat(s, "/ports/wire/drops/queue_full") + stat(s, "/ports/wire/drops/ring_full"));
  EXPECT_EQ(stat(s, "/jobs/1/pull/sent_packets"), queued_out);
  EXPECT_EQ(queued_out + stat(s, "/jobs/1/drops"), kQueuedSent);

  // wire -> host: nothing policed, queued or dropped.
  const Frames host_out = fx.read_pcap("host-out.pcap");
  EXPECT_EQ(stat(s, "/ports/wire/rx_packets"), wire_in.size());
  EXPECT_EQ(stat(s, "/ports/host/tx_packets"), wire_in.size());
  EXPECT_EQ(host_out.size(), wire_in.size());
  for (const auto& [reason, count] : s["ports"]["host"]["drops"].items()) {
    EXPECT_EQ(count.get<uint64_t>(), 0u) << "host drops " << reason;
  }
  EXPECT_EQ(stat(s, "/ports/wire/rx_unclassified"), kPushSent);

  EXPECT_TRUE(s["totals"]["conserved"].get<bool>());
}

INSTANTIATE_TEST_SUITE_P(Lcores, PolicingTest, ::testing::Values("[1]", "[0, 1]", pipelined("[0, 1]")),
                         [](const auto& info) { return lcore_mode_name(info.param); });

}  // namespace
}  // namespace psgate::testing
