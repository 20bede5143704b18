// SPDX-License-Identifier: BSD-3-Clause
// A NIC that stops accepting: the host port's TX ring is never drained, so
// its tx_burst returns 0 once the ring is full. psgate retries a refused burst
// for a bounded time (kTxStallTimeoutNs), then counts it as tx_failed and
// keeps going; the wire port, served by the same lcore, keeps forwarding
// throughout, and every packet is accounted for.
#include <gtest/gtest.h>
#include <rte_launch.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

#include "dataplane/lcore_context.h"
#include "lcore_modes.h"
#include "packet_builder.h"
#include "pipeline_harness.h"

namespace psgate::testing {
namespace {

constexpr unsigned kWire = 0, kHost = 1;

std::string config_body(const std::string& lcores) {
  return "[lcores]\nmain = 0\ndata = " + lcores + R"(
[classes]
count = 8
depth = 256
[dataplane]
max_jobs = 64
mbufs = 16383
drain_timeout = "200ms"
[stats]
interval = "0s"
[[jobs]]
id = 1
rank = 0
match = ["dport=2222,proto=udp", "sport=2222,proto=udp"]
)";
}

// A UDP frame the job matches (dport 2222), from `sport`.
std::vector<uint8_t> job_frame(uint16_t sport) {
  pkt::PacketSpec s;
  s.proto = pkt::kUdp;
  s.dport = 2222;
  s.sport = sport;
  return pkt::build_packet(s);
}

unsigned inject(PipelineHarness& h, unsigned port, const std::vector<uint8_t>& frame, unsigned n, unsigned queue = 0) {
  rte_mbuf* pkts[32];
  unsigned done = 0;
  while (done < n) {
    const unsigned want = std::min(32u, n - done);
    unsigned got = 0;
    for (; got < want; ++got) {
      rte_mbuf* m = rte_pktmbuf_alloc(h.pool());
      if (!m) break;
      std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
      pkts[got] = m;
    }
    const unsigned in = h.inject(port, pkts, got, queue);
    for (unsigned i = in; i < got; ++i) rte_pktmbuf_free(pkts[i]);
    done += in;
    if (in < want) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done;
}

unsigned drain_tx(PipelineHarness& h, unsigned port) {
  rte_mbuf* pkts[64];
  unsigned total = 0;
  for (unsigned n; (n = h.collect(port, pkts, 64)) > 0;) {
    rte_pktmbuf_free_bulk(pkts, n);
    total += n;
  }
  return total;
}

// Runs data plane passes (run_once), 1 ms apart, until `present` has passed
// as sched_transmit counts the wait of a port that takes nothing: a gap of
// more than kLcoreAwayNs between two offers is the lcore being away, and
// counts only kLcoreAwayNs, so a test thread (here the lcore) that the
// kernel does not run for a while on a loaded machine counts as little
// here as there. The last pass starts after `present` has passed: the
// product sees the time only at a pass (a first pass followed by one gap of
// kLcoreAwayNs would otherwise end it without a pass that saw the wait).
// `each` runs after every pass; returns the passes run.
template <typename Each>
unsigned pass_for(PipelineHarness& h, std::chrono::nanoseconds present, Each each) {
  using clock = std::chrono::steady_clock;
  const auto away = std::chrono::nanoseconds(kLcoreAwayNs);
  std::chrono::nanoseconds counted{0};
  unsigned passes = 0;
  for (auto last = clock::now();;) {
    if (!h.dataplane().run_once()) {
      ADD_FAILURE() << "run_once refused";
      return passes;
    }
    ++passes;
    each(passes);
    if (counted >= present) return passes;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const auto t = clock::now();
    counted += std::min<std::chrono::nanoseconds>(t - last, away);
    last = t;
  }
}

class TxStallTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TxStallTest, RefusedBurstsBecomeTxFailedAndTheOtherPortKeepsForwarding) {
  PipelineHarness h(config_body(GetParam()), true, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  const std::vector<uint8_t> frame = job_frame(1000);

  // The host TX ring holds 4096 - 1 packets and nobody drains it: anything
  // beyond that can leave only as a counted drop.
  constexpr unsigned kToHost = 12000, kToWirePerRound = 500, kRounds = 8;
  unsigned to_host = 0, to_wire = 0, wire_out = 0;
  for (unsigned r = 0; r < kRounds; ++r) {
    // Hybrid: the rounds take the RX queues in turn, the hybrid lcores' own
    // and the RX lcore's.
    to_host += inject(h, kWire, frame, kToHost / kRounds, r % h.rx_queues());
    to_wire += inject(h, kHost, frame, kToWirePerRound, r % h.rx_queues());
    // Longer than the stall timeout, so that refused bursts are given up.
    std::this_thread::sleep_for(std::chrono::nanoseconds(kTxStallTimeoutNs) + std::chrono::milliseconds(50));
    wire_out += drain_tx(h, kWire);
  }
  // Until everything sent was received, the wire port forwarded its share
  // and the host port gave refused bursts up: waited for, as the lcores may
  // not run for seconds on a loaded machine (a fixed sleep was not enough
  // with its CPU taken 90% of the time). The deadline only bounds the wait
  // for what never comes.
  Totals live;
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    wire_out += drain_tx(h, kWire);
    live = h.dataplane().read_totals(false);
    if (wire_out >= to_wire && live.ports[kHost].drops[kDropTxFailed] > 0 && live.rx_total() == to_host + to_wire)
      break;
  }
  // The wire port forwarded everything while the host port was stuck.
  EXPECT_EQ(wire_out, to_wire);
  EXPECT_GT(live.ports[kHost].drops[kDropTxFailed], 0u) << "refused bursts were never given up";
  // Health says so: the host link is up, yet that direction carries nothing.
  // (It said ok.)
  nlohmann::json health = h.control().handle({{"cmd", "health"}})["result"];
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_EQ(health["ports_stalled"], nlohmann::json::array({"host"})) << health.dump();
  EXPECT_EQ(health["ports_down"], nlohmann::json::array()) << health.dump();
  // The ring drained, the port takes packets again: the stall is over.
  const unsigned freed = drain_tx(h, kHost);
  to_host += inject(h, kWire, frame, 10);
  // (Waited for as above: received, and all of it gone out or dropped.)
  for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(10))) {
    live = h.dataplane().read_totals(false);
    if (h.control().handle({{"cmd", "health"}})["result"]["status"] == "ok" && live.rx_total() == to_host + to_wire &&
        live.tx_total() + live.drop_total() == live.rx_total())
      break;
  }
  health = h.control().handle({{"cmd", "health"}})["result"];
  EXPECT_EQ(health["status"], "ok") << health.dump();
  EXPECT_EQ(health["ports_stalled"], nlohmann::json::array()) << health.dump();
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kWire].tx_packets, to_wire);
  EXPECT_EQ(freed, 4095u);                                           // what the ring took while stuck
  EXPECT_EQ(t.ports[kHost].tx_packets - drain_tx(h, kHost), freed);  // and the 10 after
  EXPECT_EQ(t.rx_total(), to_host + to_wire);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
  EXPECT_GT(t.ports[kHost].drops[kDropTxFailed], 0u);
  EXPECT_EQ(t.ports[kWire].drop_total(), 0u);
  std::printf("[ tx-stall ] %s: host tx %lu, tx_failed %lu, queue_full %lu, shutdown_flush %lu; wire tx %lu\n",
              GetParam().c_str(), static_cast<unsigned long>(t.ports[kHost].tx_packets),
              static_cast<unsigned long>(t.ports[kHost].drops[kDropTxFailed]),
              static_cast<unsigned long>(t.ports[kHost].drops[kDropQueueFull]),
              static_cast<unsigned long>(t.ports[kHost].drops[kDropShutdown]),
              static_cast<unsigned long>(t.ports[kWire].tx_packets));
}

// A driver that refuses one packet for good stops every burst, and every
// retry, at it. That packet alone is dropped (tx_failed), once the port has
// taken nothing for kTxProbeAfterNs and takes the packets behind it: not a
// stall of kTxStallTimeoutNs that drops the burst behind it too. The refused
// packet comes in the middle of a burst, last in one, and alone (the probe
// takes company for it from the class queue). Waited for, not timed: on a
// loaded machine the data lcores may not run for seconds (a fixed 300
// pauses of 3 ms once ended before the lcore had even received the last
// rounds); that the refused packets cost their port milliseconds, not the
// stall time, is ARefusedPacketCostsItsPortMillisecondsNotTheStallTime's.
TEST_P(TxStallTest, APacketThePortRefusesAloneIsDroppedAndThePortGoesOn) {
  PipelineHarness h(config_body(GetParam()), true, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr uint16_t kRefusedSport = 6666;
  ASSERT_TRUE(h.refuse_on_tx(kHost, kRefusedSport));
  const std::vector<uint8_t> good = job_frame(1000), refused = job_frame(kRefusedSport);

  constexpr unsigned kRounds = 20;
  unsigned n_good = 0, n_refused = 0, delivered = 0;
  auto send = [&](const std::vector<uint8_t>& frame, unsigned n) {
    (&frame == &good ? n_good : n_refused) += inject(h, kWire, frame, n);
  };
  auto pause = [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    delivered += drain_tx(h, kHost);
  };
  const auto t0 = std::chrono::steady_clock::now();
  for (unsigned r = 0; r < kRounds; ++r) {
    send(good, 3), send(refused, 1), send(good, 3);  // in the middle of a burst
    pause();
    send(good, 3), send(refused, 1);  // last in its burst
    pause();
    send(refused, 1);  // alone
    pause();
    send(good, 2);
    pause();
  }
  // Until everything sent was received and has left, the last refused
  // packets (with nothing behind them) given up after the stall time. A
  // packet lost shows as one that never leaves: the deadline only bounds
  // the wait for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  auto settled = [&] {
    const Totals live = h.dataplane().read_totals(false);
    return delivered == n_good && live.rx_total() == n_good + n_refused &&
           live.tx_total() + live.drop_total() == live.rx_total();
  };
  while (!settled() && std::chrono::steady_clock::now() < deadline) pause();
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(delivered, n_good) << "packets behind a refused one were lost";
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], n_refused) << "only the refused packets are tx_failed";
  EXPECT_EQ(t.ports[kHost].tx_packets, n_good);
  EXPECT_EQ(t.rx_total(), n_good + n_refused);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
  std::printf("[ tx-refused ] %s: %u good delivered, %u refused dropped, in %.2f s\n", GetParam().c_str(), delivered,
              n_refused, took_s);
}

// The test above's refused packets, one pass at a time (run_once: the test
// is the lcore, and counts only the time it was there, pass_for): each
// costs its port the probe's milliseconds, and goes as tx_failed once the
// port took others behind it twice, well within the stall time (a port
// that stalled for each, as before the probe, would take 100 ms a packet:
// the test above's 60 took 6 s). In the middle of a burst, last in one, and
// alone, each followed by more packets a few milliseconds apart.
TEST_P(TxStallTest, ARefusedPacketCostsItsPortMillisecondsNotTheStallTime) {
  PipelineHarness h(config_body(GetParam()), /*start_lcores=*/false, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr uint16_t kRefusedSport = 6666;
  ASSERT_TRUE(h.refuse_on_tx(kHost, kRefusedSport));
  unsigned sent_good = 0, delivered = 0;
  // One burst: `before` good frames, a refused one (`with_refused`), `after` good.
  auto burst = [&](unsigned before, bool with_refused, unsigned after) {
    rte_mbuf* pkts[32];
    unsigned n = 0;
    for (unsigned i = 0; i < before; ++i) pkts[n++] = h.mbuf_of(job_frame(1000));
    if (with_refused) pkts[n++] = h.mbuf_of(job_frame(kRefusedSport));
    for (unsigned i = 0; i < after; ++i) pkts[n++] = h.mbuf_of(job_frame(1000));
    for (unsigned i = 0; i < n; ++i) ASSERT_NE(pkts[i], nullptr);
    ASSERT_EQ(h.inject(kWire, pkts, n), n);
    sent_good += before + after;
  };
  auto passes = [&] { pass_for(h, std::chrono::milliseconds(5), [&](unsigned) { delivered += drain_tx(h, kHost); }); };
  auto given_up = [&] { return h.dataplane().read_totals(false).ports[kHost].drops[kDropTxFailed]; };
  // In the middle: taken behind it once at once, then company from the queue.
  ASSERT_NO_FATAL_FAILURE(burst(3, true, 3));
  passes();
  ASSERT_NO_FATAL_FAILURE(burst(2, false, 0));
  passes();
  EXPECT_EQ(given_up(), 1u) << "in the middle of a burst";
  // Last in its burst, then alone: company comes from the queue only.
  ASSERT_NO_FATAL_FAILURE(burst(3, true, 0));
  passes();
  for (unsigned k = 0; k < 2; ++k) {
    ASSERT_NO_FATAL_FAILURE(burst(1, false, 0));
    passes();
  }
  EXPECT_EQ(given_up(), 2u) << "last in its burst";
  ASSERT_NO_FATAL_FAILURE(burst(0, true, 0));
  passes();
  for (unsigned k = 0; k < 2; ++k) {
    ASSERT_NO_FATAL_FAILURE(burst(1, false, 0));
    passes();
  }
  EXPECT_EQ(given_up(), 3u) << "alone";
  EXPECT_EQ(delivered, sent_good);
  EXPECT_FALSE(h.dataplane().ports_stalled()[kHost]);
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], 3u);
  EXPECT_EQ(t.ports[kHost].tx_packets, sent_good);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

// A port that refuses one packet and then gets nothing else for the stall
// time is taken for stalled; a burst whose head it refuses again must not
// take the packets behind that head with it, as a dead NIC's would: the
// port takes them, and they end the stall. (This lost packets when the
// test above was held off its drain for 100 ms on a loaded machine.)
TEST_P(TxStallTest, APortStalledByOneRefusedPacketKeepsThePacketsBehindTheNext) {
  PipelineHarness h(config_body(GetParam()), true, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr uint16_t kRefusedSport = 6666;
  ASSERT_TRUE(h.refuse_on_tx(kHost, kRefusedSport));
  const std::vector<uint8_t> good = job_frame(1000), refused = job_frame(kRefusedSport);
  ASSERT_EQ(inject(h, kWire, refused, 1), 1u);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!h.dataplane().ports_stalled()[kHost] && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(h.dataplane().ports_stalled()[kHost]) << "a port refusing its only packet for 100 ms is stalled";
  // One burst, refused head first (one ring enqueue: the lcore takes it whole).
  constexpr unsigned kBehind = 5;
  rte_mbuf* burst[1 + kBehind];
  for (unsigned i = 0; i <= kBehind; ++i) {
    const std::vector<uint8_t>& frame = i == 0 ? refused : good;
    burst[i] = rte_pktmbuf_alloc(h.pool());
    ASSERT_NE(burst[i], nullptr);
    std::memcpy(rte_pktmbuf_append(burst[i], static_cast<uint16_t>(frame.size())), frame.data(), frame.size());
  }
  ASSERT_EQ(h.inject(kWire, burst, 1 + kBehind), 1 + kBehind);
  unsigned delivered = 0;
  for (int i = 0; i < 2000 && delivered < kBehind; ++i) {
    delivered += drain_tx(h, kHost);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(delivered, kBehind) << "packets behind a refused head dropped while the port was taken for stalled";
  // The second refused packet goes as the first went (alone at last, for the stall time).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (h.dataplane().read_totals(false).ports[kHost].drops[kDropTxFailed] < 2 &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], 2u) << "only the two refused packets are tx_failed";
  EXPECT_EQ(t.ports[kHost].tx_packets, kBehind);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

// A port that is only busy for longer than the probe's 1 ms (a PAUSE, a
// descheduled peer) and then frees room loses nothing: the probe finds
// the room, and the head it skipped is offered again and taken. (Dropping
// the head on the probe's first success lost packets here.) The room comes
// one packet at a time: the probe takes one, the head is refused once right
// after, and taken at the next pass. The port is busy on the transmitting
// lcore's clock (busy_tx), counted as psgate counts it: with the test thread
// holding and releasing a ring, a test thread kept off its CPU for over
// 100 ms held the port for the stall time, and psgate rightly dropped
// (3 of 6 runs failed under a SCHED_FIFO loop taking CPU0 150 ms in 350).
TEST_P(TxStallTest, ABusyPortThatFreesRoomAfterTheProbeTimeLosesNothing) {
  PipelineHarness h(config_body(GetParam()), true, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  PipelineHarness::TxBusy busy;
  ASSERT_TRUE(h.busy_tx(kHost, &busy));
  const std::vector<uint8_t> frame = job_frame(1000);
  constexpr unsigned kRounds = 10;
  unsigned sent = 0, delivered = 0;
  for (unsigned round = 0; round < kRounds; ++round) {
    // Longer than the probe time, far shorter than the stall time.
    busy.busy_ns.store((5 + round) * 1'000'000ull, std::memory_order_relaxed);
    busy.armed.fetch_add(1, std::memory_order_release);
    sent += inject(h, kWire, frame, 100);
    // Waited for, not timed: the lcores may not run for seconds on a loaded
    // machine. Until each packet is delivered or dropped; the deadline only
    // bounds the wait for what never comes.
    for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
         std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(1))) {
      delivered += drain_tx(h, kHost);
      if (delivered + h.dataplane().read_totals(false).ports[kHost].drops[kDropTxFailed] >= sent) break;
    }
    ASSERT_EQ(delivered, sent) << "round " << round;
  }
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], 0u) << "packets of a busy port dropped as refused";
  EXPECT_EQ(t.ports[kHost].tx_packets, sent);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
  // Each busy time ended as this test means it to: at a probe.
  EXPECT_EQ(busy.freed_at_probe.load(), kRounds);
}

// A data lcore that does not run for longer than the stall time (the kernel
// ran other work on its CPU, a hypervisor stole its vCPU) offered the port
// nothing meanwhile: back, it gives up nothing it did not offer and calls no
// port stalled. Here two packets the port refuses for good head what is
// pending, and the port takes those behind them. The old code, back after
// 150 ms, probed once (the port refused the second), found the 100 ms over
// and dropped all of them as tx_failed, the good ones too, and called the
// port stalled: the loaded machine's "134 of 220 delivered" in the test
// above, met again with a busy SCHED_FIFO loop taking its lcore's CPU for
// 150 ms at a time. One pass at a time (run_once): the test is the lcore.
TEST_P(TxStallTest, ALcoreAwayForTheStallTimeGivesUpNothingItDidNotOffer) {
  PipelineHarness h(config_body(GetParam()), /*start_lcores=*/false, "", rx_queues_for(GetParam()));
  ASSERT_TRUE(h.ok()) << h.error();
  constexpr uint16_t kRefusedSport = 6666;
  ASSERT_TRUE(h.refuse_on_tx(kHost, kRefusedSport));
  constexpr unsigned kGood = 6;
  rte_mbuf* burst[2 + kGood];
  for (unsigned i = 0; i < 2 + kGood; ++i)
    ASSERT_NE(burst[i] = h.mbuf_of(job_frame(i < 2 ? kRefusedSport : 1000)), nullptr);
  ASSERT_EQ(h.inject(kWire, burst, 2 + kGood), 2 + kGood);
  ASSERT_TRUE(h.dataplane().run_once());  // the port refuses the head: all of it pending
  ASSERT_EQ(h.dataplane().read_totals(false).rx_total(), 2 + kGood);
  ASSERT_EQ(drain_tx(h, kHost), 0u);
  // The lcore is away for longer than the stall time.
  std::this_thread::sleep_for(std::chrono::nanoseconds(kTxStallTimeoutNs) + std::chrono::milliseconds(50));
  // Back, and there: the probe finds the packets the port takes.
  unsigned delivered = 0;
  pass_for(h, std::chrono::milliseconds(20), [&](unsigned) { delivered += drain_tx(h, kHost); });
  EXPECT_EQ(delivered, kGood) << "packets never offered to the port given up after the lcore was away";
  Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], 0u) << "given up as tx_failed after the lcore was away";
  EXPECT_FALSE(h.dataplane().ports_stalled()[kHost]) << "a port that takes packets called stalled";
  // The two refused packets, with nothing behind them, go as such a packet
  // goes: after the stall time, of an lcore that is there.
  pass_for(h, std::chrono::nanoseconds(kTxStallTimeoutNs) + std::chrono::milliseconds(20), [](unsigned) {});
  h.stop();
  t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].drops[kDropTxFailed], 2u);
  EXPECT_EQ(t.ports[kHost].tx_packets, kGood);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

// A port whose kernel interface's MTU went down while frames for it were
// queued (note_iface_mtu_for_testing: what link watching does for an
// af_packet port) drops the larger ones as oversize where they leave. Those
// drops are not the port taking anything: on a port that refuses everything
// (its TX ring full) they must not end a stall, restart the 100 ms wait or
// count as the probe's packets taken. One lcore pass at a time (run_once),
// so each step's fate is decided before the next.
class TxShortMtuTest : public ::testing::TestWithParam<std::string> {
 protected:
  static constexpr uint32_t kShortMtu = 1000;
  // A frame of the job, from UDP source port `sport`: small (fits kShortMtu)
  // or large (does not, but fits the configured 1500).
  static std::vector<uint8_t> frame(uint16_t sport, bool large) {
    pkt::PacketSpec s;
    s.proto = pkt::kUdp;
    s.dport = 2222;
    s.sport = sport;
    s.payload_len = large ? 1200 : 100;
    return pkt::build_packet(s);
  }
  // `n` frames (n <= 32) in one RX burst: small, or (`mixed`) every second
  // one large. Returns the large ones.
  static unsigned inject_burst(PipelineHarness& h, unsigned n, bool mixed) {
    rte_mbuf* pkts[32];
    unsigned large = 0;
    for (unsigned i = 0; i < n; ++i) {
      const bool big = mixed && i % 2 == 1;
      pkts[i] = h.mbuf_of(frame(static_cast<uint16_t>(1000 + i), big));
      large += big;
    }
    EXPECT_EQ(h.inject(kWire, pkts, n), n);
    return large;
  }
  static uint64_t host_drops(const Totals& t, DropReason r) { return t.ports[kHost].drops[r]; }
};

// A stalled port (it refused everything for 100 ms) stays stalled when a
// burst it refuses had large frames, dropped as oversize: the old code took
// them for packets the port took and ended the stall (and held the rest for
// another 100 ms instead of counting them at once).
TEST_P(TxShortMtuTest, AStalledPortStaysStalledWhenQueuedFramesLeaveAsOversize) {
  PipelineHarness h(config_body(GetParam()), /*start_lcores=*/false);
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_TRUE(h.hold_tx(kHost, 0));  // the host port takes nothing
  // 32 small frames refused at once (pending), then 32 queued behind them,
  // half of them large.
  inject_burst(h, 32, false);
  ASSERT_TRUE(h.dataplane().run_once());
  const unsigned large = inject_burst(h, 32, true);
  ASSERT_TRUE(h.dataplane().run_once());
  ASSERT_EQ(h.dataplane().read_totals(false).rx_total(), 64u);
  h.dataplane().note_iface_mtu_for_testing(kHost, kShortMtu);
  // Passes through the stall time (an lcore's absence is not the port's
  // refusal). In the pass that ends it, the pending burst is given up (the
  // port is stalled); the queued one is dequeued, its large frames dropped
  // as oversize, the rest refused and, the port being stalled, counted at
  // once.
  pass_for(h, std::chrono::nanoseconds(kTxStallTimeoutNs) + std::chrono::milliseconds(10), [](unsigned) {});
  EXPECT_TRUE(h.dataplane().ports_stalled()[kHost]) << "an oversize drop ended the stall of a port that takes nothing";
  Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(host_drops(t, kDropOversize), large);
  EXPECT_EQ(host_drops(t, kDropTxFailed), 64u - large) << "a stalled port's refused burst is counted at once";
  EXPECT_EQ(t.ports[kHost].tx_packets, 0u);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
  nlohmann::json health = h.control().handle({{"cmd", "health"}})["result"];
  EXPECT_EQ(health["ports_stalled"], nlohmann::json::array({"host"})) << health.dump();
  EXPECT_EQ(health["ports_short_mtu"], nlohmann::json::array({"host"})) << health.dump();
  // The port takes packets again: the first it takes ends the stall.
  h.release_tx(kHost);
  inject_burst(h, 1, false);
  ASSERT_TRUE(h.dataplane().run_once());
  EXPECT_FALSE(h.dataplane().ports_stalled()[kHost]);
  EXPECT_EQ(drain_tx(h, kHost), 1u);
  h.stop();
  t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.rx_total(), 65u);
  EXPECT_EQ(t.ports[kHost].tx_packets, 1u);
  EXPECT_EQ(host_drops(t, kDropOversize), large);
  EXPECT_EQ(host_drops(t, kDropTxFailed), 64u - large);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

// A port that takes nothing stalls 100 ms after it first refused, however
// many of the frames it was offered meanwhile left as oversize, and gives
// nothing up as tx_failed before: the old code restarted the 100 ms at each
// oversize drop, both where the pending frames are retried and where the
// probe offers the frames behind a refused head (whose "taken" frames then
// cost that head, refused twice, as tx_failed on a port that was only full).
TEST_P(TxShortMtuTest, OversizeDropsDoNotRestartTheWaitOfAPortThatTakesNothing) {
  PipelineHarness h(config_body(GetParam()), /*start_lcores=*/false);
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_TRUE(h.hold_tx(kHost, 0));
  // 16 refused at once (pending: the probe tops it up from the class queue),
  // 32 queued behind them, half of each large.
  unsigned large = inject_burst(h, 16, true);
  ASSERT_TRUE(h.dataplane().run_once());  // the port's refusals begin
  large += inject_burst(h, 32, true);
  ASSERT_TRUE(h.dataplane().run_once());
  ASSERT_EQ(h.dataplane().read_totals(false).rx_total(), 48u);
  // Well into the wait, the MTU goes down: the first retry drops the large
  // pending frames, each probe the large ones it took from the queue.
  // (Passes throughout, each time counted only where they were close
  // enough: an lcore's absence is not the port's refusal.)
  auto none_given_up_unstalled = [&h](unsigned pass) {
    const Totals t = h.dataplane().read_totals(false);
    EXPECT_TRUE(host_drops(t, kDropTxFailed) == 0 || h.dataplane().ports_stalled()[kHost])
        << "pass " << pass << ": " << host_drops(t, kDropTxFailed)
        << " given up as tx_failed by a port not stalled that took nothing";
  };
  pass_for(h, std::chrono::milliseconds(60), none_given_up_unstalled);
  h.dataplane().note_iface_mtu_for_testing(kHost, kShortMtu);
  pass_for(h,
           std::chrono::nanoseconds(kTxStallTimeoutNs) - std::chrono::milliseconds(60) + std::chrono::milliseconds(20),
           none_given_up_unstalled);
  ASSERT_TRUE(h.dataplane().run_once());
  EXPECT_TRUE(h.dataplane().ports_stalled()[kHost])
      << "taking nothing for more than 100 ms, the port is not stalled (oversize drops restarted the wait)";
  // Once stalled, what is still queued is refused at once: everything is counted.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(h.dataplane().run_once());
  h.stop();
  const Totals t = h.dataplane().read_totals(false);
  EXPECT_EQ(t.ports[kHost].tx_packets, 0u);
  EXPECT_EQ(host_drops(t, kDropOversize), large);
  EXPECT_EQ(host_drops(t, kDropTxFailed), 48u - large);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

// A data lcore slower to stop than the stop waits (a driver call that takes
// its time; on a loaded machine, an lcore thread the kernel did not run for
// seconds): stop_and_drain gives up on it, and the data plane was then freed
// under it. The lcore went on in freed memory (a SIGSEGV in a later test) and
// EAL still saw it busy ("data lcore 1 is not an lcore EAL can launch work
// on"). Freed, the data plane waits for it: the lcore is idle again after.
TEST(TxSlowLcore, ADataPlaneFreedWhileAnLcoreIsSlowToStopWaitsForIt) {
  // Static: on a data plane that does not wait, the lcore reads it after the test.
  static PipelineHarness::TxBlock block;
  auto h = std::make_unique<PipelineHarness>(config_body("[1]"));
  ASSERT_TRUE(h->ok()) << h->error();
  ASSERT_TRUE(h->block_tx(kWire, &block) && h->block_tx(kHost, &block));
  ASSERT_EQ(inject(*h, kWire, job_frame(3000), 1), 1u);
  ASSERT_EQ(inject(*h, kHost, job_frame(3001), 1), 1u);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!block.entered.load() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(block.entered.load()) << "the lcore never sent";
  // Held past the one stop the harness asks for (drain timeout 200 ms and
  // kStuckLcoreGraceNs), then let go: what a slow lcore does.
  std::thread releaser([] {
    std::this_thread::sleep_for(std::chrono::nanoseconds(Dataplane::kStuckLcoreGraceNs) + std::chrono::seconds(2));
    block.hold = false;
  });
  h.reset();
  EXPECT_EQ(rte_eal_get_lcore_state(1), WAIT) << "the data plane was freed with its lcore still running on it";
  releaser.join();
}

INSTANTIATE_TEST_SUITE_P(Lcores, TxShortMtuTest, ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined),
                         [](const ::testing::TestParamInfo<std::string>& info) { return lcore_mode_name(info.param); });

INSTANTIATE_TEST_SUITE_P(Lcores, TxStallTest, ::testing::Values("[1]", "[1, 2]", kOneTwoPipelined, kOneTwoThreeHybrid),
                         [](const ::testing::TestParamInfo<std::string>& info) { return lcore_mode_name(info.param); });

}  // namespace
}  // namespace psgate::testing
