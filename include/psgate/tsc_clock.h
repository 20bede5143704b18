// SPDX-License-Identifier: BSD-3-Clause
// The TSC frequency, measured rather than trusted.
//
// DPDK 22.11 takes the TSC frequency from CPUID/MSRs where it can and rounds
// it (on the KVM guests we run on: 2600 MHz for a TSC the kernel calibrates at
// 2596.134 MHz). Every rate psgate enforces is bytes per tick times ticks per
// second, so that rounding alone made every shaper 0.15% slow. Measuring the
// TSC against CLOCK_MONOTONIC_RAW (the kernel's unslewed clock) over a short
// interval removes it; the measurement is taken once per process.
#pragma once

#include <time.h>

#include <cstdint>

#include <rte_cycles.h>

namespace psgate {

namespace detail {

inline uint64_t raw_clock_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// One (ns, tsc) pair, taken where the two clock reads around the TSC read are
// closest together (a preemption in between would skew the pair).
inline void clock_pair(uint64_t& ns, uint64_t& tsc) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 16; ++i) {
    const uint64_t a = raw_clock_ns();
    const uint64_t t = rte_rdtsc_precise();
    const uint64_t b = raw_clock_ns();
    if (b - a < best) {
      best = b - a;
      ns = a + (b - a) / 2;
      tsc = t;
    }
  }
}

inline uint64_t measure_tsc_hz(uint64_t nominal_hz) {
  constexpr uint64_t kIntervalNs = 50'000'000;    // 50 ms: the pairs' ~1 us jitter is then 2e-5
  uint64_t ns0 = 0, tsc0 = 0, ns1 = 0, tsc1 = 0;  // always set by clock_pair (16 tries)
  clock_pair(ns0, tsc0);
  const timespec interval{0, static_cast<long>(kIntervalNs)};
  nanosleep(&interval, nullptr);
  clock_pair(ns1, tsc1);
  if (ns1 <= ns0 || tsc1 <= tsc0) return nominal_hz;
  const auto measured =
      static_cast<uint64_t>(static_cast<unsigned __int128>(tsc1 - tsc0) * 1'000'000'000ull / (ns1 - ns0));
  // A wildly different figure means the measurement, not DPDK, is wrong
  // (e.g. the thread was migrated across unsynchronised TSCs): keep DPDK's.
  if (measured < nominal_hz - nominal_hz / 50 || measured > nominal_hz + nominal_hz / 50) return nominal_hz;
  return measured;
}

}  // namespace detail

// The TSC frequency in Hz: measured once per process (50 ms) against
// CLOCK_MONOTONIC_RAW, or DPDK's figure if the measurement is implausible
// (more than 2% away from it). Needs an initialised EAL.
inline uint64_t tsc_hz() {
  static const uint64_t hz = detail::measure_tsc_hz(rte_get_tsc_hz());
  return hz;
}

}  // namespace psgate
