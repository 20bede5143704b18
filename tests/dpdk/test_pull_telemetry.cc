// SPDX-License-Identifier: BSD-3-Clause
// The pull telemetry as the wire egress measures it: RX notes each pull
// packet's worker (its destination address), tx records when each worker's
// packets left, and the job's burst state turns the workers' last packets
// into the straggler wait. The burst logic itself
// is unit-tested with an injected clock (test_job_telemetry.cc); this runs
// the real RX, cut-through and TX stages (one data lcore driven by run_once
// on the test's thread), so what is checked is what tx takes from the wire.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "packet_builder.h"
#include "pipeline_harness.h"
#include "psgate/job_telemetry.h"

namespace psgate::testing {
namespace {

constexpr unsigned kHost = 1;
constexpr uint16_t kJobPort = 2222;
constexpr uint32_t kMaxJobs = 16;

// How a pull packet is framed. RX gives tx the worker of a plain IPv4 cache
// hit from its flow key, and reads any other packet's (tagged, IPv6) from
// its header: each way is checked.
enum class Framing { kPlain, kTagged, kIpv6 };

// A pull packet of the job (PS 10.0.0.5 or fd00::5, sport 2222) to worker
// 10.0.1.`worker` (or fd00::1:`worker`).
std::vector<uint8_t> pull_to(uint8_t worker, uint16_t ip_id, Framing framing = Framing::kPlain) {
  pkt::PacketSpec s = pkt::from_ps(kJobPort, ip_id, 200);
  s.dst4 = {10, 0, 1, worker};
  if (framing == Framing::kTagged) s.vlans.push_back(pkt::VlanTag{pkt::kTpid8021Q, 7});
  if (framing == Framing::kIpv6) {
    s.l3 = pkt::L3::kIpv6;
    s.src6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
    s.dst6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, worker};
  }
  return pkt::build_packet(s);
}

// How the packets reach tx: straight from RX (the cut-through), or through
// the class FIFOs, which a shaped port takes (a fast shaper: everything
// leaves in the pass it came in).
enum class Path { kCutThrough, kQueued };

class Wire {
 public:
  explicit Wire(Path path = Path::kCutThrough)
      : h_("[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 64\n"
           "[dataplane]\nburst = 32\nmbufs = 8191\nmax_jobs = " +
               std::to_string(kMaxJobs) + "\n[stats]\ninterval = \"0s\"\n" +
               (path == Path::kQueued ? "[shaper.wire]\nrate = \"100Gbit/s\"\nburst = \"1MiB\"\n" : "") +
               "[[jobs]]\nid = 1\nrank = 0\n"
               "match = [\"src=10.0.0.5/32,sport=2222,proto=tcp\", \"src=fd00::5/128,sport=2222,proto=tcp\"]\n",
           /*start_lcores=*/false) {}
  bool ok() const { return h_.ok(); }
  const std::string& error() const { return h_.error(); }

  // One RX burst of these frames through the data plane, and what left freed.
  void pass(const std::vector<std::vector<uint8_t>>& frames) {
    std::vector<rte_mbuf*> burst;
    for (const auto& f : frames) {
      rte_mbuf* m = h_.mbuf_of(f);
      ASSERT_NE(m, nullptr);
      burst.push_back(m);
    }
    ASSERT_EQ(h_.inject(kHost, burst.data(), static_cast<unsigned>(burst.size())), burst.size());
    ASSERT_TRUE(h_.dataplane().run_once());
    rte_mbuf* out[64];
    unsigned left = 0;
    for (unsigned n; (n = h_.collect(0, out, 64)) != 0; left += n) rte_pktmbuf_free_bulk(out, n);
    ASSERT_EQ(left, frames.size()) << "every pull packet leaves by the wire";
  }

  // The one job's telemetry: the only slot that saw any traffic.
  JobTelemetry job() {
    JobTelemetry found;
    unsigned slots = 0;
    for (uint32_t s = 0; s < kMaxJobs; ++s) {
      const JobTelemetry t = h_.dataplane().job_telemetry(s);
      if (t.bursts == 0 && t.current_burst_bytes == 0) continue;
      found = t;
      ++slots;
    }
    EXPECT_EQ(slots, 1u);
    return found;
  }

 private:
  PipelineHarness h_;
};

class StragglerTest : public ::testing::TestWithParam<std::tuple<Framing, Path>> {};

// Worker 1 gets its last packet in the first pass, worker 2 also in a pass
// about 3 ms later (within the 5 ms gap that ends a burst): the straggler
// wait is the time between the two passes. A packet after more than the gap
// closes that burst, which is when it is recorded. Were the two workers' keys
// taken for one (a wrong address read), there would be no straggler wait.
// A burst before it puts both flows in the flow cache, so the measured one
// takes the path of a cache hit (plain frames) throughout.
TEST_P(StragglerTest, TheWorkersOfABurstGiveTheStragglerWait) {
  using Clock = std::chrono::steady_clock;
  const auto [framing, path] = GetParam();
  Wire w(path);
  ASSERT_TRUE(w.ok()) << w.error();
  std::vector<std::vector<uint8_t>> first;
  for (uint16_t i = 0; i < 8; ++i) first.push_back(pull_to(static_cast<uint8_t>(1 + i % 2), i, framing));
  w.pass({pull_to(1, 100, framing), pull_to(2, 101, framing)});  // the warm-up burst
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  const auto t0 = Clock::now();
  w.pass(first);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  const auto t1 = Clock::now();
  w.pass({pull_to(2, 8, framing), pull_to(2, 9, framing)});
  const auto t2 = Clock::now();
  const double between_ms = std::chrono::duration<double, std::milli>(t2 - t0).count();
  if (between_ms > 4.5) {
    GTEST_SKIP() << "the test thread was held up " << between_ms
                 << " ms between the passes, near the 5 ms gap that would split the burst";
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  w.pass({pull_to(1, 10, framing)});  // starts the next burst, which ends this one

  const JobTelemetry t = w.job();
  EXPECT_EQ(t.bursts, 2u) << "the warm-up and the measured burst (the new one is still going)";
  EXPECT_EQ(t.last_burst_bytes, 10 * first[0].size()) << "the measured burst's 10 frames";
  const double min_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  EXPECT_GE(t.straggler_wait_ms, min_ms - 0.5) << "worker 2 finished a pass after worker 1";
  EXPECT_LE(t.straggler_wait_ms, between_ms + 0.5);
}

INSTANTIATE_TEST_SUITE_P(Framings, StragglerTest,
                         ::testing::Combine(::testing::Values(Framing::kPlain, Framing::kTagged, Framing::kIpv6),
                                            ::testing::Values(Path::kCutThrough, Path::kQueued)),
                         [](const ::testing::TestParamInfo<std::tuple<Framing, Path>>& info) {
                           const Framing f = std::get<0>(info.param);
                           return std::string(f == Framing::kPlain    ? "Plain"
                                              : f == Framing::kTagged ? "Tagged"
                                                                      : "Ipv6") +
                                  (std::get<1>(info.param) == Path::kQueued ? "Queued" : "CutThrough");
                         });

// Every packet of a burst to one worker: no straggler, however long the
// burst lasts.
TEST(PullTelemetryTest, OneWorkerHasNoStragglerWait) {
  Wire w;
  ASSERT_TRUE(w.ok()) << w.error();
  w.pass({pull_to(7, 0), pull_to(7, 1)});
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  w.pass({pull_to(7, 2)});
  std::this_thread::sleep_for(std::chrono::milliseconds(12));
  w.pass({pull_to(7, 3)});
  const JobTelemetry t = w.job();
  EXPECT_GE(t.bursts, 1u);
  EXPECT_EQ(t.straggler_wait_ms, 0.0);
}

}  // namespace
}  // namespace psgate::testing
