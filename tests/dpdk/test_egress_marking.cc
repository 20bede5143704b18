// SPDX-License-Identifier: BSD-3-Clause
// What a packet carries when it leaves: the ECN CE mark decided on the depth
// it found on arrival, and the DSCP of the class it actually leaves from, even
// when a re-rank was deferred or moved it after RX chose its class. Through
// the real RX and scheduler stages (one data lcore driven by run_once on the
// test's thread), so every packet's depth and class are known exactly, with no
// timing involved: a shaper of 1 byte/s holds everything in its queues until
// the test opens it.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "lcore_modes.h"
#include "packet_builder.h"
#include "pipeline_harness.h"
#include "psgate/header_rewrite.h"
#include "psgate/packet_parser.h"

namespace psgate::testing {
namespace {

constexpr unsigned kWire = 0, kHost = 1;
constexpr uint8_t kEct0 = 0x02, kEct1 = 0x01, kCe = 0x03, kNotEct = 0x00;

// A pull packet from the PS (host -> wire) of the job that owns `sport`.
std::vector<uint8_t> pull_frame(uint16_t sport, uint16_t ip_id, uint8_t tos) {
  pkt::PacketSpec s = pkt::from_ps(sport, ip_id, 200);
  s.tos = tos;
  return pkt::build_packet(s);
}

// A job-less packet (default class), used to empty the shaper's bucket.
constexpr uint16_t kUnclassifiedPort = 9999;

struct Seen {
  uint16_t sport = 0;
  uint16_t ip_id = 0;
  uint8_t tos = 0;
  bool checksum_ok = false;
};

Seen inspect(rte_mbuf* m) {
  EXPECT_EQ(m->nb_segs, 1);
  const auto* frame = rte_pktmbuf_mtod(m, const uint8_t*);
  ParsedPacket p;
  parse_packet(frame, m->data_len, p);
  Seen s;
  if (p.l3 != L3Kind::kIpv4 || p.malformed) return s;
  const uint8_t* ip = frame + p.l3_offset;
  const unsigned ihl = (ip[0] & 0x0f) * 4u;
  s.sport = p.sport;
  s.ip_id = static_cast<uint16_t>(ip[4] << 8 | ip[5]);
  s.tos = ip[1];
  std::vector<uint8_t> header(ip, ip + ihl);
  const uint16_t stored = static_cast<uint16_t>(header[10] << 8 | header[11]);
  header[10] = header[11] = 0;
  s.checksum_ok = ipv4_header_checksum(header.data(), ihl) == stored;
  return s;
}

// The data plane on ring ports, never started: the test runs it one pass at a time.
class Gate {
 public:
  // `feed_queue`: the host port's RX queue feed() injects on.
  explicit Gate(const std::string& body, unsigned rx_queues = 1, unsigned feed_queue = 0)
      : h_(body, /*start_lcores=*/false, "", rx_queues),
        burst_(h_.ok() ? h_.dataplane().config().burst : 0),
        feed_queue_(feed_queue) {}
  bool ok() const { return h_.ok(); }
  const std::string& error() const { return h_.error(); }
  PipelineHarness& harness() { return h_; }

  // Injects the frames on the host port, at most one RX burst per pass, so
  // every frame is received (and classified, policed, queued) by the pass
  // that follows its injection, in order.
  void feed(const std::vector<std::vector<uint8_t>>& frames) {
    for (size_t done = 0; done < frames.size();) {
      std::vector<rte_mbuf*> chunk;
      for (; done < frames.size() && chunk.size() < burst_; ++done) {
        rte_mbuf* m = h_.mbuf_of(frames[done]);
        ASSERT_NE(m, nullptr);
        chunk.push_back(m);
      }
      ASSERT_EQ(h_.inject(kHost, chunk.data(), static_cast<unsigned>(chunk.size()), feed_queue_), chunk.size());
      ASSERT_TRUE(h_.dataplane().run_once());
    }
  }
  void pass() { ASSERT_TRUE(h_.dataplane().run_once()); }
  // One burst on each of the host port's RX queues (frames[q] for queue q),
  // then one pass.
  void feed_queues(const std::vector<std::vector<std::vector<uint8_t>>>& frames) {
    for (unsigned q = 0; q < frames.size(); ++q) {
      ASSERT_LE(frames[q].size(), burst_);
      std::vector<rte_mbuf*> chunk;
      for (const auto& f : frames[q]) {
        rte_mbuf* m = h_.mbuf_of(f);
        ASSERT_NE(m, nullptr);
        chunk.push_back(m);
      }
      ASSERT_EQ(h_.inject(kHost, chunk.data(), static_cast<unsigned>(chunk.size()), q), chunk.size());
    }
    pass();
  }

  // What the wire port transmitted since the last call, in order.
  std::vector<Seen> sent() {
    std::vector<Seen> out;
    rte_mbuf* pkts[64];
    for (unsigned n; (n = h_.collect(kWire, pkts, 64)) != 0;) {
      for (unsigned i = 0; i < n; ++i) {
        out.push_back(inspect(pkts[i]));
        rte_pktmbuf_free(pkts[i]);
      }
    }
    return out;
  }

  nlohmann::json control(const nlohmann::json& request) { return h_.control().handle(request); }
  Totals totals(bool histograms = false) { return h_.dataplane().read_totals(histograms); }

  // The configured shaper (1 byte/s, 64-byte bucket) starts with a full
  // bucket: one job-less frame of 254 bytes (278 charged with the framing
  // overhead) spends it and leaves a debt that takes 278 s to repay back to
  // 64 bytes, so from then on nothing leaves until the test opens the shaper.
  void close_shaper() {
    feed({pull_frame(kUnclassifiedPort, 0, 0)});
    const auto primer = sent();
    ASSERT_EQ(primer.size(), 1u);
    ASSERT_EQ(primer[0].sport, kUnclassifiedPort);
  }
  void open_shaper() {
    const auto reply = control({{"cmd", "shaper.set"}, {"port", "wire"}, {"rate", nullptr}});
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  }
  void set_shaper_closed_again() {
    const auto reply = control({{"cmd", "shaper.set"}, {"port", "wire"}, {"rate", "8bit/s"}, {"burst", "64B"}});
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
    close_shaper();
  }

 private:
  PipelineHarness h_;
  unsigned burst_;
  unsigned feed_queue_;
};

const char* kShaper = R"(
[shaper.wire]
rate = "8bit/s"
burst = "64B"
headroom = "0B"
)";

// --- ECN: the threshold boundary --------------------------------------------

struct EcnCase {
  const char* name;
  unsigned threshold;
  unsigned burst;    // dataplane.burst: packets per RX pass
  unsigned packets;  // all queued before any leaves
  // "[1, 2]" pipelined: the scheduler's pass-through (or FIFOs behind the
  // shaper); "[1, 2]" alone: one direction each, as one lcore does it.
  const char* lcores = "[1]";
};

void PrintTo(const EcnCase& c, std::ostream* os) {
  *os << "threshold " << c.threshold << ", burst " << c.burst << ", " << c.packets << " packets";
}

class EcnBoundaryTest : public ::testing::TestWithParam<EcnCase> {};

// With threshold T, packet i of a run that arrives at an empty class finds i
// packets queued: packets 0..T-1 (the last of them at depth T-1) leave as
// they came, packets T.. (the first at depth exactly T) leave CE. Within one
// RX burst, and across bursts whose packets wait behind the closed shaper.
TEST_P(EcnBoundaryTest, DepthTMarksAndDepthTMinusOneDoesNot) {
  const EcnCase& c = GetParam();
  const bool across_bursts = c.packets > c.burst;
  std::string body = std::string("[lcores]\nmain = 0\ndata = ") + c.lcores + "\n";
  if (across_bursts) body += kShaper;
  body += "[classes]\ncount = 8\ndepth = 64\n[classes.1]\necn_threshold = " + std::to_string(c.threshold) +
          "\n[dataplane]\nburst = " + std::to_string(c.burst) +
          "\nmbufs = 8191\nmax_jobs = 16\n[stats]\ninterval = \"0s\"\n"
          "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n";
  Gate g(body);
  ASSERT_TRUE(g.ok()) << g.error();
  if (across_bursts) g.close_shaper();

  // ECT(0) and ECT(1) alternate; the last packet is Not-ECT where it lies
  // past the boundary (a queue that deep must still leave it alone).
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint8_t> tos;
  for (unsigned i = 0; i < c.packets; ++i) {
    tos.push_back(i + 1 == c.packets && i > c.threshold ? kNotEct : i % 2 ? kEct1 : kEct0);
    frames.push_back(pull_frame(2222, static_cast<uint16_t>(i), tos.back()));
  }
  g.feed(frames);
  if (across_bursts) {
    ASSERT_TRUE(g.sent().empty()) << "the closed shaper let packets out: depths are not what the test assumes";
    EXPECT_EQ(g.totals().cls(kWire, 1).depth(), c.packets);
    g.open_shaper();
    for (unsigned i = 0; i <= c.packets / c.burst; ++i) g.pass();
  }

  const std::vector<Seen> out = g.sent();
  ASSERT_EQ(out.size(), c.packets);
  uint64_t expect_marked = 0;
  for (unsigned i = 0; i < out.size(); ++i) {
    ASSERT_EQ(out[i].ip_id, i) << "the class is a FIFO";
    EXPECT_TRUE(out[i].checksum_ok) << "packet " << i;
    EXPECT_EQ(out[i].tos >> 2, 0) << "no DSCP configured: packet " << i;
    const bool ce = i >= c.threshold && tos[i] != kNotEct;
    expect_marked += ce;
    EXPECT_EQ(out[i].tos & 3, ce ? kCe : tos[i])
        << "packet " << i << " found depth " << i << " on arrival, threshold " << c.threshold;
  }
  const Totals t = g.totals();
  const ClassTotals& cls = t.cls(kWire, 1);
  EXPECT_EQ(cls.ecn_marked, expect_marked);
  EXPECT_EQ(cls.dequeued_packets, c.packets);
}

INSTANTIATE_TEST_SUITE_P(Thresholds, EcnBoundaryTest,
                         ::testing::Values(EcnCase{"T1", 1, 32, 32}, EcnCase{"T8", 8, 32, 32},
                                           EcnCase{"T31LastOfBurst", 31, 32, 32}, EcnCase{"T10AcrossBursts", 10, 4, 16},
                                           EcnCase{"T8Pipelined", 8, 32, 32, kOneTwoPipelined},
                                           EcnCase{"T10AcrossBurstsPipelined", 10, 4, 16, kOneTwoPipelined},
                                           EcnCase{"T8ByDirection", 8, 32, 32, "[1, 2]"},
                                           EcnCase{"T10AcrossBurstsByDirection", 10, 4, 16, "[1, 2]"}),
                         [](const auto& info) { return std::string(info.param.name); });

// --- DSCP and CE follow the class a packet leaves from ------------------------

// Job "moving" (sport 2222) starts at rank 2 (class 3, DSCP 30, no ECN);
// job "filler" (sport 2223) at rank 0 (class 1, DSCP 10, ECN threshold 1,
// room for 8 packets).
const char* kMovingJobs = R"(
[lcores]
main = 0
data = [1]
[classes]
count = 8
depth = 64
[classes.1]
depth = 8
dscp = 10
ecn_threshold = 1
[classes.3]
dscp = 30
[dataplane]
burst = 8
mbufs = 8191
max_jobs = 16
[stats]
interval = "0s"
[[jobs]]
id = 1
name = "moving"
rank = 2
match = ["src=10.0.0.5/32,sport=2222,proto=tcp"]
[[jobs]]
id = 2
name = "filler"
rank = 0
match = ["src=10.0.0.5/32,sport=2223,proto=tcp"]
)";

constexpr uint16_t kMoving = 2222, kFiller = 2223;

// A re-rank whose migration would fill the new class exactly leaves no
// room for the packet that brought it: the job stays where it is (deferred)
// rather than move and drop that packet as queue_full.
TEST(ClassActionsTest, AMigrationThatWouldFillTheNewClassExactlyIsDeferredNotADrop) {
  std::string body = kMovingJobs;
  body += kShaper;
  Gate g(body);
  ASSERT_TRUE(g.ok()) << g.error();
  g.close_shaper();
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t i = 0; i < 3; ++i) frames.push_back(pull_frame(kMoving, i, 0));
  for (uint16_t i = 0; i < 5; ++i) frames.push_back(pull_frame(kFiller, i, 0));
  g.feed(frames);
  ASSERT_EQ(g.totals().cls(kWire, 1).depth(), 5u);
  ASSERT_EQ(g.totals().cls(kWire, 3).depth(), 3u);
  // Class 1 (depth 8) holds 5: room for the 3 queued, none for a fourth.
  auto reply = g.control({{"cmd", "rank"}, {"job", 1}, {"rank", 0}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed({pull_frame(kMoving, 3, 0)});
  const Totals t = g.totals();
  EXPECT_EQ(t.ports[kWire].drop_total(), 0u) << "the packet that brought the re-rank was dropped";
  EXPECT_EQ(t.ports[kWire].rerank_deferred, 1u);
  EXPECT_EQ(t.cls(kWire, 1).depth(), 5u);
  EXPECT_EQ(t.cls(kWire, 3).depth(), 4u);
}

// Each transmitted packet carries the DSCP of the class it was dequeued from
// and CE only if the class it was queued in on arrival had reached its
// threshold, whichever class RX assigned it:
//  1. a deferred migration: "moving" is re-ranked into class 1 while class 1
//     is full, so its next packets stay behind its old ones in class 3 and
//     must leave with class 3's DSCP and no CE (class 3 marks nothing);
//  2. a migration that succeeds: "moving" is re-ranked back to class 3 while
//     packets it queued in class 1 wait; they move to class 3 and must leave
//     with class 3's DSCP (CE as decided when they arrived in class 1).
TEST(ClassActionsTest, DscpAndCeComeFromTheClassAPacketLeavesAfterDeferredAndDoneMigrations) {
  std::string body = kMovingJobs;
  body += kShaper;
  Gate g(body);
  ASSERT_TRUE(g.ok()) << g.error();
  g.close_shaper();

  // moving 0..2 -> class 3; filler 0..7 fill class 1 (filler 0 finds it empty).
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t i = 0; i < 3; ++i) frames.push_back(pull_frame(kMoving, i, kEct0));
  for (uint16_t i = 0; i < 8; ++i) frames.push_back(pull_frame(kFiller, i, kEct0));
  g.feed(frames);
  ASSERT_TRUE(g.sent().empty());
  {
    const Totals t = g.totals();
    ASSERT_EQ(t.cls(kWire, 1).depth(), 8u);
    ASSERT_EQ(t.cls(kWire, 3).depth(), 3u);
  }

  // Re-rank "moving" to class 1, which has no room for its 3 queued packets:
  // the migration is deferred and moving 3..4, which RX assigns to class 1,
  // queue in class 3 behind moving 0..2.
  auto reply = g.control({{"cmd", "rank"}, {"job", 1}, {"rank", 0}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  ASSERT_EQ(reply["result"]["job"]["class"].get<unsigned>(), 1u) << reply.dump();
  g.feed({pull_frame(kMoving, 3, kEct0), pull_frame(kMoving, 4, kEct0)});
  ASSERT_TRUE(g.sent().empty());
  {
    const Totals t = g.totals();
    EXPECT_GT(t.ports[kWire].rerank_deferred, 0u);
    EXPECT_EQ(t.ports[kWire].rerank_migrations, 0u);
    ASSERT_EQ(t.cls(kWire, 1).depth(), 8u) << "moving 3..4 must not have entered class 1";
    ASSERT_EQ(t.cls(kWire, 3).depth(), 5u);
    EXPECT_EQ(t.ports[kWire].drop_total(), 0u);
  }

  // Open: strict priority sends class 1 (filler 0..7), then class 3 (moving 0..4).
  g.open_shaper();
  g.pass();
  g.pass();
  {
    const std::vector<Seen> out = g.sent();
    ASSERT_EQ(out.size(), 13u);
    for (unsigned i = 0; i < 8; ++i) {
      SCOPED_TRACE("filler " + std::to_string(i) + ", left class 1");
      EXPECT_EQ(out[i].sport, kFiller);
      EXPECT_EQ(out[i].ip_id, i);
      EXPECT_EQ(out[i].tos >> 2, 10);
      EXPECT_EQ(out[i].tos & 3, i >= 1 ? kCe : kEct0) << "found depth " << i << ", threshold 1";
      EXPECT_TRUE(out[i].checksum_ok);
    }
    for (unsigned i = 0; i < 5; ++i) {
      SCOPED_TRACE("moving " + std::to_string(i) + ", left class 3" + (i >= 3 ? " (RX said class 1)" : ""));
      EXPECT_EQ(out[8 + i].sport, kMoving);
      EXPECT_EQ(out[8 + i].ip_id, i);
      EXPECT_EQ(out[8 + i].tos >> 2, 30);
      EXPECT_EQ(out[8 + i].tos & 3, kEct0) << "class 3 has no ECN threshold";
      EXPECT_TRUE(out[8 + i].checksum_ok);
    }
    const Totals t = g.totals();
    EXPECT_EQ(t.cls(kWire, 1).dequeued_packets, 8u);
    EXPECT_EQ(t.cls(kWire, 1).dscp_remarked, 8u);
    EXPECT_EQ(t.cls(kWire, 1).ecn_marked, 7u);
    EXPECT_EQ(t.cls(kWire, 3).dequeued_packets, 5u);
    EXPECT_EQ(t.cls(kWire, 3).dscp_remarked, 5u);
    EXPECT_EQ(t.cls(kWire, 3).ecn_marked, 0u);
  }

  // "moving" now queues in class 1 (moving 5..7 find depths 0, 1, 2: 6 and 7
  // are to be marked). Re-ranked back to class 3, its next packet (moving 8)
  // takes them along: the migration succeeds, and they leave from class 3.
  g.set_shaper_closed_again();
  g.feed({pull_frame(kMoving, 5, kEct0), pull_frame(kMoving, 6, kEct0), pull_frame(kMoving, 7, kEct0)});
  ASSERT_TRUE(g.sent().empty());
  ASSERT_EQ(g.totals().cls(kWire, 1).depth(), 3u);
  reply = g.control({{"cmd", "rank"}, {"job", 1}, {"rank", 2}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed({pull_frame(kMoving, 8, kEct0)});
  ASSERT_TRUE(g.sent().empty());
  {
    const Totals t = g.totals();
    EXPECT_EQ(t.ports[kWire].rerank_migrations, 1u);
    EXPECT_EQ(t.cls(kWire, 1).migrated_out, 3u);
    EXPECT_EQ(t.cls(kWire, 3).migrated_in, 3u);
    ASSERT_EQ(t.cls(kWire, 1).depth(), 0u);
    ASSERT_EQ(t.cls(kWire, 3).depth(), 4u);
  }
  g.open_shaper();
  g.pass();
  {
    const std::vector<Seen> out = g.sent();
    ASSERT_EQ(out.size(), 4u);
    for (unsigned i = 0; i < 4; ++i) {
      SCOPED_TRACE("moving " + std::to_string(5 + i) + ", left class 3" + (i < 3 ? " (queued in class 1)" : ""));
      EXPECT_EQ(out[i].sport, kMoving);
      EXPECT_EQ(out[i].ip_id, 5 + i);
      EXPECT_EQ(out[i].tos >> 2, 30);
      // CE is decided on arrival: 6 and 7 found class 1 at or over its threshold.
      EXPECT_EQ(out[i].tos & 3, i == 1 || i == 2 ? kCe : kEct0);
      EXPECT_TRUE(out[i].checksum_ok);
    }
    const Totals t = g.totals();
    EXPECT_EQ(t.cls(kWire, 1).dequeued_packets, 8u) << "nothing more left from class 1";
    EXPECT_EQ(t.cls(kWire, 3).dequeued_packets, 9u);
    EXPECT_EQ(t.cls(kWire, 3).dscp_remarked, 9u);
    EXPECT_EQ(t.cls(kWire, 3).ecn_marked, 2u);
    EXPECT_EQ(t.ports[kWire].drop_total(), 0u);
  }
}

// --- One burst through a port whose queues are empty ---------------------------

// Run to completion sends a burst that finds the port's queues empty straight
// on (sched_cut_through) instead of through the class FIFOs; so does the
// pipelined scheduler with what it took from the rings (sched_accept_pulled).
// What leaves must be what the FIFOs would give: strict priority between
// classes, arrival order within each, each class's DSCP, and counters that
// balance (enqueued = dequeued, the sojourn histogram holding every packet).
// The same burst is then sent again behind a closed shaper, which forces the
// FIFO path, and must leave in the same order with the same marks.
class CutThroughTest : public ::testing::TestWithParam<const char*> {};

TEST_P(CutThroughTest, AMixedBurstLeavesInStrictPriorityOrderWithTheFifoPathsMarks) {
  // Three jobs in three classes (rank r -> class r + 1), a fourth port for
  // unclassified traffic (default class 7). DSCP differs per class.
  std::string body = std::string("[lcores]\nmain = 0\ndata = ") + GetParam() + "\n" +
                     "[classes]\ncount = 8\ndepth = 64\n"
                     "[classes.1]\ndscp = 10\n[classes.2]\ndscp = 20\n[classes.3]\ndscp = 30\n[classes.7]\ndscp = 46\n"
                     "[dataplane]\nburst = 32\nmbufs = 8191\nmax_jobs = 16\n[stats]\ninterval = \"0s\"\n";
  const uint16_t ports[] = {2222, 2223, 2224};
  for (unsigned j = 0; j < 3; ++j)
    body += "[[jobs]]\nid = " + std::to_string(j + 1) + "\nrank = " + std::to_string(j) +
            "\nmatch = [\"src=10.0.0.5/32,sport=" + std::to_string(ports[j]) + ",proto=tcp\"]\n";
  // Arrival order mixes the classes: job 3 (lowest), unclassified, job 1 (top), job 2, ...
  const uint16_t pattern[] = {2224, kUnclassifiedPort, 2222, 2223, 2222, 2224, kUnclassifiedPort, 2223};
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint16_t> sports;
  for (unsigned i = 0; i < 32; ++i) {
    sports.push_back(pattern[i % 8]);
    frames.push_back(pull_frame(sports.back(), static_cast<uint16_t>(i), kEct0));
  }
  auto dscp_of = [](uint16_t sport) { return sport == 2222 ? 10 : sport == 2223 ? 20 : sport == 2224 ? 30 : 46; };
  auto prio_of = [](uint16_t sport) { return sport == kUnclassifiedPort ? 7 : sport - 2222 + 1; };
  // What strict priority over FIFOs gives: a stable sort by class.
  std::vector<unsigned> expect(32);
  for (unsigned i = 0; i < 32; ++i) expect[i] = i;
  std::stable_sort(expect.begin(), expect.end(),
                   [&](unsigned a, unsigned b) { return prio_of(sports[a]) < prio_of(sports[b]); });

  for (const bool through_fifo : {false, true}) {
    SCOPED_TRACE(through_fifo ? "held behind the shaper (FIFO path)" : "queues empty (cut-through)");
    Gate g(through_fifo ? body + kShaper : body);
    ASSERT_TRUE(g.ok()) << g.error();
    ASSERT_TRUE(g.harness().scribble_on_tx(kWire));
    if (through_fifo) g.close_shaper();
    g.feed(frames);
    if (through_fifo) {
      ASSERT_TRUE(g.sent().empty());
      EXPECT_EQ(g.totals().cls(kWire, 1).depth(), 8u) << "the burst must wait in the FIFOs";
      g.open_shaper();
      g.pass();
    }
    const std::vector<Seen> out = g.sent();
    ASSERT_EQ(out.size(), 32u);
    for (unsigned k = 0; k < 32; ++k) {
      EXPECT_EQ(out[k].ip_id, expect[k]) << "position " << k;
      EXPECT_EQ(out[k].sport, sports[expect[k]]) << "position " << k;
      EXPECT_EQ(out[k].tos >> 2, dscp_of(out[k].sport)) << "position " << k;
      EXPECT_TRUE(out[k].checksum_ok) << "position " << k;
    }
    const Totals t = g.totals(/*histograms=*/true);
    uint64_t sojourn_samples = 0;
    for (unsigned c = 0; c < 8; ++c) {
      const ClassTotals& ct = t.cls(kWire, c);
      EXPECT_EQ(ct.depth(), 0u) << "class " << c;
      EXPECT_EQ(ct.dequeued_packets, c >= 1 && c <= 3 ? 8u : c == 7 ? 8u + through_fifo : 0u) << "class " << c;
      EXPECT_EQ(ct.dscp_remarked, ct.dequeued_packets) << "class " << c;
      sojourn_samples += ct.sojourn.count();
      EXPECT_LT(ct.sojourn.max(), 5'000'000'000u) << "class " << c << ": sojourn read after the packet was sent";
    }
    EXPECT_EQ(sojourn_samples, 32u + through_fifo) << "one sojourn sample per packet";
    // Each job's 8 packets admitted and sent, whichever stage counted their
    // admission (the cut-through counts it at TX, per run of the ordered
    // burst; the FIFO path at RX, per run of the interleaved one).
    unsigned jobs_counted = 0;
    for (size_t slot = 0; slot < t.jobs.size(); ++slot) {
      const JobTotals& jt = t.jobs[slot];
      if (jt.admitted_packets[kPull] == 0 && jt.sent_packets[kPull] == 0) continue;
      ++jobs_counted;
      EXPECT_EQ(jt.admitted_packets[kPull], 8u) << "slot " << slot;
      EXPECT_EQ(jt.sent_packets[kPull], 8u) << "slot " << slot;
      EXPECT_EQ(jt.admitted_bytes[kPull], jt.sent_bytes[kPull]) << "slot " << slot;
      EXPECT_GT(jt.admitted_bytes[kPull], 0u) << "slot " << slot;
      EXPECT_EQ(jt.admitted_packets[kPush], 0u) << "slot " << slot;
    }
    EXPECT_EQ(jobs_counted, 3u);
    EXPECT_EQ(t.rx_total(), 32u + through_fifo);
    EXPECT_EQ(t.tx_total(), t.rx_total()) << "every packet sent";
    EXPECT_EQ(t.drop_total(), 0u);
  }
}

// Two jobs for the pass-through tests: sport 2222 at rank 0 (class 1, DSCP
// 10), sport 2223 at rank 1 (class 2, DSCP 20).
std::string two_jobs_body(const char* lcores, unsigned burst) {
  return std::string("[lcores]\nmain = 0\ndata = ") + lcores + "\n" +
         "[classes]\ncount = 8\ndepth = 64\n[classes.1]\ndscp = 10\n[classes.2]\ndscp = 20\n"
         "[dataplane]\nburst = " +
         std::to_string(burst) +
         "\nmbufs = 8191\nmax_jobs = 16\n[stats]\ninterval = \"0s\"\n"
         "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n"
         "[[jobs]]\nid = 2\nrank = 1\nmatch = [\"src=10.0.0.5/32,sport=2223,proto=tcp\"]\n";
}

// After a pass in which the wire port had room for `room` packets: gives it
// room again, passes until the rest left, and checks that everything left in
// `order` (IP ids) with its class's DSCP, classes 1 and 2 counted through
// their FIFOs once a packet (enqueued = dequeued = rewritten = sojourn
// samples = in_class[c - 1]), every packet sent, none dropped.
void expect_rest_follows_in_order(Gate& g, unsigned room, const std::vector<unsigned>& order,
                                  const unsigned (&in_class)[2]) {
  EXPECT_EQ(g.totals().ports[kWire].tx_packets, room);
  g.harness().release_tx(kWire);
  for (int pass = 0; pass < 3; ++pass) g.pass();
  const std::vector<Seen> out = g.sent();
  ASSERT_EQ(out.size(), order.size());
  for (unsigned k = 0; k < out.size(); ++k) {
    EXPECT_EQ(out[k].ip_id, order[k]) << "position " << k;
    EXPECT_EQ(out[k].tos >> 2, out[k].sport == 2222 ? 10 : 20) << "position " << k;
  }
  const Totals t = g.totals(/*histograms=*/true);
  for (unsigned c : {1u, 2u}) {
    const ClassTotals& ct = t.cls(kWire, c);
    EXPECT_EQ(ct.enqueued_packets, in_class[c - 1]) << "class " << c;
    EXPECT_EQ(ct.dequeued_packets, in_class[c - 1]) << "class " << c;
    EXPECT_EQ(ct.dscp_remarked, in_class[c - 1]) << "class " << c << ": rewritten once each";
    EXPECT_EQ(ct.sojourn.count(), in_class[c - 1]) << "class " << c;
    // Sojourns of a few passes; seconds are read after sending (scribble_on_tx).
    EXPECT_LT(ct.sojourn.max(), 5'000'000'000u) << "class " << c << ": sojourn read after the packet was sent";
  }
  EXPECT_EQ(t.tx_total(), order.size());
  EXPECT_EQ(t.drop_total(), 0u);
}

// The pipelined scheduler's pass-through when the port takes only part of
// what it took from the rings: the rest waits pending, is sent before
// anything else once the port has room, and everything leaves in the order
// the FIFOs give, counted once (enqueued = dequeued = sent, one sojourn
// sample a packet), nothing dropped.
TEST(PassThroughTest, APortThatTakesPartOfABurstSendsTheRestNextInOrder) {
  std::vector<std::vector<uint8_t>> frames;
  std::vector<uint16_t> sports;
  for (unsigned i = 0; i < 32; ++i) {
    sports.push_back(i % 3 == 0 ? 2223 : 2222);  // class 2, then two of class 1, ...
    frames.push_back(pull_frame(sports.back(), static_cast<uint16_t>(i), kEct0));
  }
  std::vector<unsigned> expect(32);
  for (unsigned i = 0; i < 32; ++i) expect[i] = i;
  std::stable_sort(expect.begin(), expect.end(), [&](unsigned a, unsigned b) { return sports[a] < sports[b]; });

  Gate g(two_jobs_body(kOneTwoPipelined, 32));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_TRUE(g.harness().scribble_on_tx(kWire));
  ASSERT_TRUE(g.harness().hold_tx(kWire, 5));
  g.feed(frames);  // one RX pass, one scheduler pass: the port takes 5
  expect_rest_follows_in_order(g, 5, expect, {21, 11});
}

// Two RX lcores feeding the wire port's scheduler: one take holds both RX
// lcores' runs of two classes (16 packets, bursts of 8). The port takes 3 of
// the first burst: its rest waits pending, the burst not tried waits in its
// FIFO, and all leave in the order the FIFOs give (class 1 from RX lcore 0,
// then from RX lcore 1, then class 2 likewise), counted once, none dropped.
TEST(PassThroughTest, ATakeFromTwoRxLcoresLeavesInFifoOrderWhenThePortTakesPart) {
  Gate g(two_jobs_body("[1, 2, 3, 4]", 8), /*rx_queues=*/2);
  ASSERT_TRUE(g.ok()) << g.error();
  std::vector<std::vector<std::vector<uint8_t>>> frames(2);
  std::vector<unsigned> expect[2];  // ip ids by class, in the order they must leave
  for (unsigned q = 0; q < 2; ++q) {
    for (unsigned i = 0; i < 8; ++i) {
      const uint16_t id = static_cast<uint16_t>(100 * q + i);
      const uint16_t sport = i % 2 ? 2222 : 2223;
      frames[q].push_back(pull_frame(sport, id, kEct0));
      expect[sport - 2222].push_back(id);
    }
  }
  ASSERT_TRUE(g.harness().scribble_on_tx(kWire));
  ASSERT_TRUE(g.harness().hold_tx(kWire, 3));
  g.feed_queues(frames);
  std::vector<unsigned> order = expect[0];
  order.insert(order.end(), expect[1].begin(), expect[1].end());
  expect_rest_follows_in_order(g, 3, order, {8, 8});
}

// Pipelined: Gate's pass runs the RX lcore's iteration, then the
// scheduler's; by direction, each lcore's in turn.
INSTANTIATE_TEST_SUITE_P(Lcores, CutThroughTest, ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined),
                         [](const ::testing::TestParamInfo<const char*>& p) { return lcore_mode_name(p.param); });

// --- Policers: a slot's next job -------------------------------------------

// A job that takes the slot a removed job left starts with a full policer
// bucket of its own, not the removed job's debt (nor its credit), even with
// the same rate and burst. With `take_each` the RX lcore takes the removal's
// snapshot before the addition's, and so brings its policers up to date from
// the slots the addition changed alone (Snapshot::changed_slots); without, it
// skips one and looks at every slot.
void reused_slot_policer(bool take_each) {
  const std::string body =
      "[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 64\n"
      "[dataplane]\nmbufs = 8191\nmax_jobs = 1\n[stats]\ninterval = \"0s\"\n"
      "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n"
      "police = \"8bit/s\"\npolice_burst = \"2000B\"\n";
  Gate g(body);
  ASSERT_TRUE(g.ok()) << g.error();
  // 254-byte frames: 7 fit the 2000-byte bucket, which refills 1 byte/s.
  std::vector<std::vector<uint8_t>> frames;
  for (unsigned i = 0; i < 20; ++i) frames.push_back(pull_frame(2222, static_cast<uint16_t>(i), 0));
  g.feed(frames);
  ASSERT_EQ(g.sent().size(), 7u);
  auto reply = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  if (take_each) g.pass();
  reply = g.control({{"cmd", "jobs.add"},
                     {"job", 2},
                     {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}},
                     {"police", "8bit/s"},
                     {"police_burst", "2000B"}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed(frames);
  EXPECT_EQ(g.sent().size(), 7u) << "job 2 inherited job 1's empty bucket";
}

TEST(Policer, AJobInAReusedSlotStartsWithAFullBucket) { reused_slot_policer(false); }
TEST(Policer, AJobInAReusedSlotStartsWithAFullBucketWhenEachChangeIsTaken) { reused_slot_policer(true); }

// --- A slot's next job waits for the removed job's queued packets ------------

class ReusedSlotTest : public ::testing::TestWithParam<const char*> {
 protected:
  // One job slot, job 1's: 10 of its pull packets queued behind the closed
  // shaper, then job 1 removed (not yet taken by the lcores).
  static std::string one_slot_config() {
    return std::string("[lcores]\nmain = 0\ndata = ") + GetParam() + "\n" + kShaper +
           "[classes]\ncount = 8\ndepth = 64\n"
           "[dataplane]\nmbufs = 8191\nmax_jobs = 1\n[stats]\ninterval = \"0s\"\n"
           "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n";
  }
  static void queue_ten_then_remove_job_1(Gate& g) {
    ASSERT_TRUE(g.ok()) << g.error();
    g.close_shaper();
    std::vector<std::vector<uint8_t>> frames;
    for (uint16_t i = 0; i < 10; ++i) frames.push_back(pull_frame(2222, i, 0));
    g.feed(frames);
    ASSERT_TRUE(g.sent().empty());
    const auto reply = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  }
};

// A removed job's packets still queued (behind the closed shaper) keep its
// slot from the next job: in the slot, the new job would be charged with
// their sending and take them into its own class (a job's queued packets
// follow its class). With max_jobs = 1 the next job is refused until they
// have left, then it takes the slot with nothing of the old job's.
TEST_P(ReusedSlotTest, ARemovedJobsQueuedPacketsAreNeverTheNextJobs) {
  Gate g(one_slot_config());
  ASSERT_NO_FATAL_FAILURE(queue_ten_then_remove_job_1(g));
  nlohmann::json reply;
  g.pass();  // every lcore has taken the removal
  const nlohmann::json add2{{"cmd", "jobs.add"}, {"job", 2}, {"match", {"src=10.0.0.5/32,sport=3333,proto=tcp"}}};
  reply = g.control(add2);
  ASSERT_FALSE(reply["ok"].get<bool>()) << "job 2 took the slot of job 1's 10 queued packets: " << reply.dump();
  EXPECT_NE(reply["error"].get<std::string>().find("try again shortly"), std::string::npos) << reply.dump();
  EXPECT_EQ(g.control({{"cmd", "health"}})["result"]["job_slots_draining"], 1) << "while they are queued";
  g.open_shaper();
  g.pass();
  g.pass();
  const auto left = g.sent();
  ASSERT_EQ(left.size(), 10u);
  reply = g.control(add2);
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  EXPECT_EQ(g.control({{"cmd", "health"}})["result"]["job_slots_draining"], 0);
  const Totals t = g.totals();
  const uint32_t slot = 0;  // max_jobs = 1
  EXPECT_EQ(t.jobs[slot].sent_packets[kPull], 10u) << "the slot's counts, all of them job 1's";
  const auto stats = g.control({{"cmd", "stats"}});
  ASSERT_TRUE(stats["ok"].get<bool>()) << stats.dump();
  bool seen = false;
  for (const auto& job : stats["result"]["jobs"]) {
    if (job["id"] != 2) continue;
    seen = true;
    EXPECT_EQ(job["pull"]["sent_packets"], 0) << "job 2 was charged with job 1's packets: " << job.dump();
  }
  EXPECT_TRUE(seen) << stats.dump();
}

// A removed job added again while its queued packets still hold its slot
// takes the slot back with them: they are its own, and its counts go on
// from before the removal. (They started afresh, and the job was shown
// sending 10 packets it had never admitted.)
TEST_P(ReusedSlotTest, AJobAddedBackBeforeItsSlotDrainedKeepsItsCounts) {
  Gate g(one_slot_config());
  ASSERT_NO_FATAL_FAILURE(queue_ten_then_remove_job_1(g));
  nlohmann::json reply;
  g.pass();
  reply = g.control({{"cmd", "jobs.add"}, {"job", 1}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.open_shaper();
  g.pass();
  g.pass();
  ASSERT_EQ(g.sent().size(), 10u);
  const auto stats = g.control({{"cmd", "stats"}});
  ASSERT_TRUE(stats["ok"].get<bool>()) << stats.dump();
  ASSERT_EQ(stats["result"]["jobs"].size(), 1u) << stats.dump();
  const auto& pull = stats["result"]["jobs"][0]["pull"];
  EXPECT_EQ(pull["admitted_packets"], 10) << pull.dump();
  EXPECT_EQ(pull["sent_packets"], 10) << pull.dump();
}

// The other half of a slot's release: the grace period. A removed job's
// slot with nothing queued still waits until every reader has passed a
// quiescent state since the snapshot without the job, since an lcore still
// classifying with the older snapshot would admit the old job's packets to
// the slot under the next job. The run_once harness registers no reader,
// so the test holds one (RCU thread 0: online, not quiescent) until it lets
// the grace period end.
// RCU reader thread 0, online and reporting no quiescence until the test
// calls rte_rcu_qsbr_quiescent(qsbr, 0): a data lcore that holds on to an
// older snapshot. Offline and unregistered again at the end of the scope.
struct HeldRcuReader {
  explicit HeldRcuReader(rte_rcu_qsbr* q) : qsbr(q), registered(rte_rcu_qsbr_thread_register(q, 0) == 0) {
    if (registered) rte_rcu_qsbr_thread_online(qsbr, 0);
  }
  ~HeldRcuReader() {
    if (!registered) return;
    rte_rcu_qsbr_thread_offline(qsbr, 0);
    rte_rcu_qsbr_thread_unregister(qsbr, 0);
  }
  HeldRcuReader(const HeldRcuReader&) = delete;
  HeldRcuReader& operator=(const HeldRcuReader&) = delete;
  rte_rcu_qsbr* qsbr;
  bool registered;
};

TEST(ReusedSlotGrace, ASlotWaitsForEveryReaderEvenWithNothingQueued) {
  Gate g(
      std::string("[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 64\n"
                  "[dataplane]\nmbufs = 8191\nmax_jobs = 1\n[stats]\ninterval = \"0s\"\n"
                  "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n"));
  ASSERT_TRUE(g.ok()) << g.error();
  rte_rcu_qsbr* qsbr = g.harness().dataplane().publisher().qsbr();
  const HeldRcuReader reader(qsbr);
  ASSERT_TRUE(reader.registered);
  g.feed({pull_frame(2222, 0, 0)});
  ASSERT_EQ(g.sent().size(), 1u) << "nothing of job 1's stays queued";
  auto reply = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.pass();
  const nlohmann::json add2{{"cmd", "jobs.add"}, {"job", 2}, {"match", {"src=10.0.0.5/32,sport=3333,proto=tcp"}}};
  reply = g.control(add2);
  ASSERT_FALSE(reply["ok"].get<bool>()) << "job 2 took the slot while a reader may still admit job 1's packets";
  EXPECT_NE(reply["error"].get<std::string>().find("try again shortly"), std::string::npos) << reply.dump();
  EXPECT_EQ(g.control({{"cmd", "health"}})["result"]["job_slots_draining"], 1);
  rte_rcu_qsbr_quiescent(qsbr, 0);  // the reader has left the older snapshot
  reply = g.control(add2);
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  EXPECT_EQ(g.control({{"cmd", "health"}})["result"]["job_slots_draining"], 0);
}

// A data lcore stuck in a driver call passes no quiescent state, so the
// snapshots retired after it are never freed, and once kMaxRetired wait the
// control thread waits in its next publish for good. At stop the daemon
// lets it go (SnapshotPublisher::stop_waiting) before it joins that thread:
// the join used to hang, SIGTERM or not. Held reader as above; the
// publishes are class caps set back and forth.
TEST(SnapshotPublisherStop, AStopEndsAPublishWaitingForAStuckReader) {
  Gate g(
      std::string("[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 64\n"
                  "[dataplane]\nmbufs = 8191\n[stats]\ninterval = \"0s\"\n"));
  ASSERT_TRUE(g.ok()) << g.error();
  SnapshotPublisher& publisher = g.harness().dataplane().publisher();
  rte_rcu_qsbr* qsbr = publisher.qsbr();
  const HeldRcuReader reader(qsbr);
  ASSERT_TRUE(reader.registered);
  // Taken before the stopper starts: its 500 ms then end after `started`
  // however late this thread runs again (taken after, a loaded machine
  // could spend part of them before it, and the publishes seem not to wait).
  const auto started = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    publisher.stop_waiting();
  });
  unsigned applied = 0;
  for (unsigned i = 0; i < SnapshotPublisher::kMaxRetired + 8; ++i) {
    const auto reply =
        g.control({{"cmd", "class.set"}, {"port", "wire"}, {"class", 2}, {"cap", i % 2 ? "100Mbit/s" : "200Mbit/s"}});
    applied += reply["ok"].get<bool>();
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  stopper.join();
  EXPECT_EQ(applied, SnapshotPublisher::kMaxRetired + 8);
  EXPECT_GE(took, 0.4) << "the publishes past kMaxRetired did not wait for the reader at all";
  EXPECT_LT(took, 10.0) << "a publish went on waiting after stop_waiting";
}

INSTANTIATE_TEST_SUITE_P(Lcores, ReusedSlotTest, ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined),
                         [](const ::testing::TestParamInfo<const char*>& p) { return lcore_mode_name(p.param); });

// --- Telemetry: a slot's next job -----------------------------------------

// A job that takes a removed job's slot starts with no iterations of its
// own: shortest-first and round-robin on iterations rank it by its own
// traffic, and its first packet does not close the old job's burst as its
// own first iteration.
TEST(Telemetry, AJobInAReusedSlotStartsWithNoIterations) {
  const std::string body =
      "[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 64\n"
      "[dataplane]\nmbufs = 8191\nmax_jobs = 1\n[stats]\ninterval = \"0s\"\n"
      "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n";
  Gate g(body);
  ASSERT_TRUE(g.ok()) << g.error();
  auto burst = [&](uint16_t first_id) {
    g.feed({pull_frame(2222, first_id, 0), pull_frame(2222, first_id + 1, 0)});
    ASSERT_EQ(g.sent().size(), 2u);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // > the 5 ms gap that ends a burst
  };
  burst(0);
  burst(2);
  ASSERT_EQ(g.harness().dataplane().job_telemetry(0).bursts, 2u);
  auto reply = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  reply = g.control({{"cmd", "jobs.add"}, {"job", 2}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.pass();
  EXPECT_EQ(g.harness().dataplane().job_telemetry(0).bursts, 0u) << "job 2 inherited job 1's iterations";
  burst(4);
  EXPECT_EQ(g.harness().dataplane().job_telemetry(0).bursts, 1u);
}

// --- A job that takes over flows -------------------------------------------

class NewJobTest : public ::testing::TestWithParam<const char*> {};

// Hybrid fed on RX queue 0: the flow reaches the wire port's hybrid lcore
// through its own RX, not through the RX lcore's rings (queue 1, as
// kOneTwoThreeHybrid is fed); either way the hold is marked once the RX
// lcore's rings have caught up.
constexpr const char* kHybridOwnQueue = "[1, 2, 3]\nmode = \"hybrid\"  # fed on RX queue 0";

unsigned feed_queue_for(const std::string& lcores) {
  return is_hybrid(lcores) && lcores.find("queue 0") == std::string::npos ? 1 : 0;
}

// The closed shaper, one job that none of the test's flows match, and the
// takeover hold under test.
std::string new_job_body(const std::string& lcores, const std::string& hold) {
  return "[lcores]\nmain = 0\ndata = " + lcores + "\n" + kShaper +
         "[classes]\ncount = 8\ndepth = 256\n[dataplane]\nburst = 16\nmbufs = 8191\nmax_jobs = 16\n"
         "takeover_hold = \"" +
         hold +
         "\"\n[stats]\ninterval = \"0s\"\n"
         "[[jobs]]\nid = 9\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=7777,proto=tcp\"]\n";
}

// A flow runs unclassified (default class) and queues behind the closed
// shaper; then a job that matches it is added, in a higher class. The flow's
// next packets must not overtake its earlier, unclassified ones: they join
// them in the default class until those have left, and the flow leaves in
// the order it came. (Before, they went straight to the job's class and left
// first.)
TEST_P(NewJobTest, AFlowAJobTakesOverKeepsItsOrder) {
  Gate g(new_job_body(GetParam(), "1s"), rx_queues_for(GetParam()), feed_queue_for(GetParam()));
  ASSERT_TRUE(g.ok()) << g.error();
  g.close_shaper();
  std::vector<std::vector<uint8_t>> before, after;
  for (uint16_t i = 0; i < 40; ++i) before.push_back(pull_frame(2222, i, 0));
  for (uint16_t i = 40; i < 80; ++i) after.push_back(pull_frame(2222, i, 0));
  g.feed(before);
  ASSERT_TRUE(g.sent().empty());
  ASSERT_EQ(g.totals().cls(kWire, 7).depth(), 40u) << "the flow is not queued unclassified";
  const auto reply =
      g.control({{"cmd", "jobs.add"}, {"job", 1}, {"rank", 0}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed(after);
  g.open_shaper();
  std::vector<uint16_t> order;
  for (int pass = 0; pass < 40 && order.size() < 80; ++pass) {
    g.pass();
    for (const Seen& s : g.sent())
      if (s.sport == 2222) order.push_back(s.ip_id);
  }
  ASSERT_EQ(order.size(), 80u);
  for (size_t i = 0; i < order.size(); ++i) ASSERT_EQ(order[i], i) << "the flow left out of order at " << i;
  // Later packets of the job leave in its own class, ahead of the default.
  g.set_shaper_closed_again();
  g.feed({pull_frame(kUnclassifiedPort, 100, 0), pull_frame(2222, 80, 0)});
  g.open_shaper();
  std::vector<uint16_t> ports;
  for (int pass = 0; pass < 4 && ports.size() < 2; ++pass) {
    g.pass();
    for (const Seen& s : g.sent()) ports.push_back(s.sport);
  }
  EXPECT_EQ(ports, (std::vector<uint16_t>{2222, kUnclassifiedPort})) << "the job stayed in the default class";
}

// Behind the closed shaper, two packets of an unclassified flow wait in
// the default class; job 1 is added for the flow and its next packet is held
// there behind them (takeover_hold).
void hold_a_new_job(Gate& g) {
  g.close_shaper();
  g.feed({pull_frame(2222, 0, 0), pull_frame(2222, 1, 0)});
  const auto reply =
      g.control({{"cmd", "jobs.add"}, {"job", 1}, {"rank", 0}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed({pull_frame(2222, 2, 0)});
  ASSERT_EQ(g.totals().cls(kWire, 7).depth(), 3u) << "held in the default class";
}

// The wait is bounded (dataplane.takeover_hold): behind a default class that
// does not move, the new job goes to its own class once the hold is over.
TEST_P(NewJobTest, TheWaitInTheDefaultClassEndsAfterTheHold) {
  Gate g(new_job_body(GetParam(), "1ms"), rx_queues_for(GetParam()), feed_queue_for(GetParam()));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_NO_FATAL_FAILURE(hold_a_new_job(g));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  // The hold ends with no further packet of the job: the held one moves.
  g.pass();
  EXPECT_EQ(g.totals().cls(kWire, 1).depth(), 1u) << "the held packet did not move to the job's class";
  EXPECT_EQ(g.totals().cls(kWire, 7).depth(), 2u);
  g.feed({pull_frame(2222, 3, 0)});
  EXPECT_EQ(g.totals().cls(kWire, 1).depth(), 2u) << "the next packet is not in the job's class";
}

// A job re-ranked while it is held leaves the hold for its new class: the
// held packet carries the class the job has when the hold ends, not the one
// it was added with (no packet of the job came after the re-rank to say so).
TEST_P(NewJobTest, AJobReRankedWhileHeldLeavesTheHoldForItsNewClass) {
  Gate g(new_job_body(GetParam(), "1ms"), rx_queues_for(GetParam()), feed_queue_for(GetParam()));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_NO_FATAL_FAILURE(hold_a_new_job(g));
  const auto reply = g.control({{"cmd", "order"}, {"ids", {9, 1}}});  // job 1: class 1 -> 2
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  g.pass();
  EXPECT_EQ(g.totals().cls(kWire, 2).depth(), 1u) << "the held packet did not go to the job's new class";
  EXPECT_EQ(g.totals().cls(kWire, 1).depth(), 0u) << "the held packet went to the class the job was added with";
  EXPECT_EQ(g.totals().cls(kWire, 7).depth(), 2u);
}

// A job removed while it is held: its held packet leaves by the class it
// was held for, never by class 0 (network control), which is what an
// emptied slot's class reads as in the snapshot.
TEST_P(NewJobTest, AJobRemovedWhileHeldDoesNotSendItsPacketsToClassZero) {
  Gate g(new_job_body(GetParam(), "1ms"), rx_queues_for(GetParam()), feed_queue_for(GetParam()));
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_NO_FATAL_FAILURE(hold_a_new_job(g));
  const auto reply = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  g.pass();
  EXPECT_EQ(g.totals().cls(kWire, 0).depth(), 0u) << "a removed job's held packet went to network control";
  EXPECT_EQ(g.totals().cls(kWire, 1).depth() + g.totals().cls(kWire, 7).depth(), 3u);
}

// Run-to-completion: a new job with nothing of its flows queued before it
// goes to its class at once. Its own first packets were behind its hold's
// mark (taken after the iteration's accept), so behind the closed shaper
// they waited in the default class for the whole takeover_hold.
TEST(NewJobRunToCompletion, NothingQueuedBeforeItNothingHoldsIt) {
  Gate g(new_job_body("[1]", "1s"));
  ASSERT_TRUE(g.ok()) << g.error();
  g.close_shaper();
  ASSERT_EQ(g.totals().cls(kWire, 7).depth(), 0u);
  const auto reply =
      g.control({{"cmd", "jobs.add"}, {"job", 1}, {"rank", 0}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed({pull_frame(2222, 0, 0), pull_frame(2222, 1, 0)});
  g.pass();
  EXPECT_EQ(g.totals().cls(kWire, 1).depth(), 2u) << "the new job's packets are not in its class";
  EXPECT_EQ(g.totals().cls(kWire, 7).depth(), 0u);
}

// Hybrid: a job takes over a flow on the wire egress lcore's own RX queue
// (0) and one on the RX lcore's (1) at once, both queued unclassified behind
// the closed shaper. Their next packets, arriving by both paths in the same
// passes, wait in the default class behind each flow's earlier ones, and each
// flow leaves in the order it came.
TEST(NewJobHybrid, FlowsOnItsOwnQueueAndOnTheRingKeepTheirOrder) {
  Gate g(new_job_body(kOneTwoThreeHybrid, "1s"), /*rx_queues=*/2);
  ASSERT_TRUE(g.ok()) << g.error();
  g.close_shaper();
  // 8 packets of each flow: ip ids `from`.. on queue 0, 1000 + `from`.. on queue 1.
  auto batch = [](uint16_t from) {
    std::vector<std::vector<std::vector<uint8_t>>> frames(2);
    for (uint16_t i = from; i < from + 8; ++i) {
      frames[0].push_back(pull_frame(2222, i, 0));
      frames[1].push_back(pull_frame(2222, static_cast<uint16_t>(1000 + i), 0));
    }
    return frames;
  };
  g.feed_queues(batch(0));
  g.feed_queues(batch(8));
  ASSERT_TRUE(g.sent().empty());
  ASSERT_EQ(g.totals().cls(kWire, 7).depth(), 32u) << "the flows are not queued unclassified";
  const auto reply =
      g.control({{"cmd", "jobs.add"}, {"job", 1}, {"rank", 0}, {"match", {"src=10.0.0.5/32,sport=2222,proto=tcp"}}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  g.feed_queues(batch(16));
  g.feed_queues(batch(24));
  EXPECT_EQ(g.totals().cls(kWire, 7).depth(), 64u) << "the job's packets did not wait behind its flows' earlier ones";
  g.open_shaper();
  std::vector<uint16_t> order[2];
  for (int pass = 0; pass < 40 && order[0].size() + order[1].size() < 64; ++pass) {
    g.pass();
    for (const Seen& s : g.sent())
      if (s.sport == 2222) order[s.ip_id >= 1000].push_back(s.ip_id);
  }
  for (unsigned q = 0; q < 2; ++q) {
    ASSERT_EQ(order[q].size(), 32u) << "queue " << q;
    for (size_t i = 0; i < order[q].size(); ++i)
      ASSERT_EQ(order[q][i], 1000 * q + i) << "the flow on queue " << q << " left out of order at " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Lcores, NewJobTest,
                         ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined, "[1, 2, 3, 4]", kOneTwoThreeHybrid,
                                           kHybridOwnQueue),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return lcore_mode_name(p.param) + (feed_queue_for(p.param) == 0 && is_hybrid(p.param)
                                                                  ? std::string("OwnQueue")
                                                                  : std::string());
                         });

}  // namespace
}  // namespace psgate::testing
