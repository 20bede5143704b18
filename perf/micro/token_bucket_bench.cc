// SPDX-License-Identifier: BSD-3-Clause
// A token bucket alone (token_bucket.h), used as the RX stage's per-job
// policer uses it (rx_stage.cc, admit_burst): per packet refill at the burst's
// TSC, conforms, consume. The rate never holds a packet back, so every packet
// takes the conforming path. One job (one bucket, in L1) and 1,024 jobs
// (a bucket picked per packet, as a burst mixing many jobs' flows would).
#include <vector>

#include "micro.h"
#include "psgate/token_bucket.h"

namespace psgate::micro {

namespace {

void bench_police(benchmark::State& state, unsigned jobs) {
  const uint64_t hz = rte_get_tsc_hz();
  std::vector<TokenBucket> buckets(jobs, TokenBucket(1'000'000'000'000, 1 << 20, hz, rte_rdtsc()));
  FastRng rng(jobs);
  std::vector<uint16_t> slot(1024);
  for (auto& s : slot) s = static_cast<uint16_t>(rng.below(jobs));
  size_t at = 0;
  uint64_t conformed = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    const uint64_t now = rte_rdtsc();
    for (unsigned i = 0; i < kBurst; ++i) {
      TokenBucket& tb = buckets[slot[at++ & 1023]];
      tb.refill(now);
      const bool ok = tb.conforms(1514);
      conformed += ok;
      if (ok) tb.consume(1514);
    }
    benchmark::DoNotOptimize(conformed);
  }
  pp.finish();
}

}  // namespace

void register_token_bucket() {
  benchmark::RegisterBenchmark("token_bucket/police/1_job", bench_police, 1u);
  benchmark::RegisterBenchmark("token_bucket/police/1024_jobs", bench_police, 1024u);
}

}  // namespace psgate::micro
