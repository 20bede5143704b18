// SPDX-License-Identifier: BSD-3-Clause
// Shared pieces of psgate-micro (perf/micro/README.md): every benchmark works
// on bursts of kBurst packets, as the data path does, and reports per packet:
// items_per_second (Google Benchmark's rate, from CPU time) and the user
// counters cycles_per_pkt and wall_cycles_per_pkt (PerPacket below).
#pragma once

#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>

#include <time.h>

#include <array>
#include <cstdint>
#include <vector>

namespace psgate::micro {

inline constexpr unsigned kBurst = 32;

// The pool every benchmark's frames live in (main.cc creates it after EAL).
rte_mempool* mbuf_pool();

// Takes the clocks when constructed; finish() turns the loop's time and
// iterations into the per-packet figures. Call finish() after the loop.
//   cycles_per_pkt: the thread's CPU time in TSC cycles (CPU ns * TSC Hz), so
//     time this thread spent preempted by others does not count (the machines
//     we measure on are shared);
//   wall_cycles_per_pkt: rte_rdtsc around the loop, preemption included. The
//     two agree on a quiet core; a gap says the run was disturbed.
class PerPacket {
 public:
  explicit PerPacket(benchmark::State& state, unsigned packets_per_iteration = kBurst)
      : state_(state), per_iteration_(packets_per_iteration), cpu_start_(thread_cpu_ns()), tsc_start_(rte_rdtsc()) {}
  void finish() {
    const uint64_t tsc = rte_rdtsc() - tsc_start_;
    const uint64_t cpu_ns = thread_cpu_ns() - cpu_start_;
    const double packets = static_cast<double>(state_.iterations()) * per_iteration_;
    state_.SetItemsProcessed(static_cast<int64_t>(packets));
    if (packets <= 0) return;
    const double hz = static_cast<double>(rte_get_tsc_hz());
    state_.counters["cycles_per_pkt"] = benchmark::Counter(static_cast<double>(cpu_ns) * hz / 1e9 / packets);
    state_.counters["wall_cycles_per_pkt"] = benchmark::Counter(static_cast<double>(tsc) / packets);
  }

 private:
  static uint64_t thread_cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
  }
  benchmark::State& state_;
  unsigned per_iteration_;
  uint64_t cpu_start_;
  uint64_t tsc_start_;
};

// kBurst frames copied into mbufs of mbuf_pool(), freed on destruction; the
// frames are used round-robin when fewer than kBurst are given.
struct MbufBurst {
  std::array<rte_mbuf*, kBurst> m{};
  explicit MbufBurst(const std::vector<std::vector<uint8_t>>& frames);
  ~MbufBurst();
  MbufBurst(const MbufBurst&) = delete;
  MbufBurst& operator=(const MbufBurst&) = delete;
  bool ok() const { return m[kBurst - 1] != nullptr; }
};

// A cheap pseudo-random stream (xorshift64*): a few ALU operations per draw,
// so that picking a flow or a class costs the same in every case.
struct FastRng {
  uint64_t s;
  explicit FastRng(uint64_t seed) : s(seed | 1) {}
  uint64_t next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545f4914f6cdd1dull;
  }
  // Uniform in [0, n) by multiply-shift (no division).
  uint32_t below(uint32_t n) { return static_cast<uint32_t>(((next() >> 32) * n) >> 32); }
};

// One registration function per stage (each *_bench.cc).
void register_parser();
void register_flow_cache();
void register_classify();
void register_sched();
void register_token_bucket();
void register_rewrite();
void register_counters();
void register_telemetry();

}  // namespace psgate::micro
