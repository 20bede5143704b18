// SPDX-License-Identifier: BSD-3-Clause
// Pull telemetry alone (psgate/job_telemetry.h), what tx does for each run of
// a job's packets it sent: telemetry_on_tx once per burst, then
// telemetry_saw_worker per packet, which records each worker's (destination's)
// last packet. Destinations are drawn at random from `workers` addresses, so
// a burst interleaves them as a PS's pull to many workers does; past 16
// (kTrackedWorkers) most packets go to workers that are not tracked.
#include <string>
#include <vector>

#include "micro.h"
#include "psgate/job_telemetry.h"

namespace psgate::micro {

namespace {

void bench_telemetry(benchmark::State& state, unsigned workers) {
  // 64 Ki draws: too many for a branch predictor to learn the sequence.
  constexpr unsigned kDraws = 1u << 16;
  std::vector<uint32_t> dst(kDraws);
  FastRng rng(workers);
  for (auto& d : dst) d = 0x0a000000u + 1u + rng.below(workers);  // 10.0.0.x
  JobBurstState s;
  uint64_t now = 1'000'000;
  unsigned at = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    // Bursts 1 tick apart never end a burst: the tracked set fills and stays.
    telemetry_on_tx(s, ++now, 64 * kBurst, 1'000'000);
    for (unsigned i = 0; i < kBurst; ++i) telemetry_saw_worker(s, dst[at + i], now);
    at = (at + kBurst) & (kDraws - 1);
    benchmark::ClobberMemory();
  }
  pp.finish();
  const unsigned expect = workers < kTrackedWorkers ? workers : kTrackedWorkers;
  if (state.iterations() * kBurst >= 4 * kDraws && s.workers != expect) state.SkipWithError("tracked the wrong count");
}

}  // namespace

void register_telemetry() {
  for (unsigned workers : {1u, 8u, 16u, 64u}) {
    const std::string name =
        "telemetry/saw_worker/" + std::to_string(workers) + (workers == 1 ? "_worker" : "_workers");
    benchmark::RegisterBenchmark(name.c_str(), bench_telemetry, workers);
  }
}

}  // namespace psgate::micro
