// SPDX-License-Identifier: BSD-3-Clause
// Log-linear latency histogram (HdrHistogram-like): values in nanoseconds,
// 16 linear sub-buckets per power of two, so any reported percentile is within
// 6.25% of the true value. Fixed size, no allocation, one writer; readers merge
// per-lcore copies.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace psgate {

// A sojourn of `ticks` timer ticks in ns, for a timer of `hz` whose
// ns_per_tick_q32 is (1e9 << 32) / hz: Q32 fixed point, the product in 128
// bits (one multiply on x86-64; a timer below 1 GHz, such as an Arm generic
// timer at 25 MHz to 1 GHz, makes ns_per_tick_q32 exceed 2^32). Sojourns of
// more than 2^32 ticks (seconds) are rare: exact, with a division. A
// "negative" one is an arrival stamped on a core whose TSC runs ahead of the
// reader's (VMs, some multi-socket machines): no wait, not 2^64 ticks of one.
inline uint64_t sojourn_ticks_to_ns(uint64_t ticks, uint64_t ns_per_tick_q32, uint64_t hz) {
  if (ticks >= (uint64_t{1} << 32)) [[unlikely]] {
    if (static_cast<int64_t>(ticks) < 0) return 0;
    return static_cast<uint64_t>(static_cast<unsigned __int128>(ticks) * 1'000'000'000u / hz);
  }
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * ns_per_tick_q32) >> 32);
}

// Cache-line aligned: the data path keeps an array of these (one per class
// and port), and unaligned, three in eight would split their totals and first
// bucket (the private members below) over two lines.
class alignas(64) LatencyHistogram {
 public:
  static constexpr unsigned kSubBucketBits = 4;
  static constexpr unsigned kSubBuckets = 1u << kSubBucketBits;
  static constexpr unsigned kBuckets = (64 - kSubBucketBits + 1) * kSubBuckets;

  // `n` samples of the same value (the fast path records a run of packets
  // that arrived together and left together at once).
  void record(uint64_t ns, uint64_t n = 1) {
    counts_[bucket_of(ns)] += n;
    count_ += n;
    min_ = ns < min_ ? ns : min_;
    max_ = ns > max_ ? ns : max_;
  }
  void merge(const LatencyHistogram& other);
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  // q in [0, 1]; returns the upper bound of the bucket holding the q-quantile,
  // clamped to [min(), max()]. 0 for an empty histogram.
  uint64_t percentile(double q) const;
  // The non-empty buckets in ascending order, (upper bound in ns, count): the
  // whole distribution, for reports that draw it (psgate-gen's JSON). Cold path.
  std::vector<std::pair<uint64_t, uint64_t>> nonempty_buckets() const;

  static unsigned bucket_of(uint64_t ns) {
    if (ns < kSubBuckets) return static_cast<unsigned>(ns);
    const unsigned msb = 63u - static_cast<unsigned>(__builtin_clzll(ns));  // >= 4
    const unsigned shift = msb - kSubBucketBits;
    const unsigned sub = static_cast<unsigned>(ns >> shift) & (kSubBuckets - 1);
    return (msb - kSubBucketBits + 1) * kSubBuckets + sub;
  }
  static uint64_t bucket_upper_bound(unsigned bucket);

 private:
  // The totals first, then the buckets: recording a small value (a packet
  // that waited less than 16 ns, the cut-through's 0) then writes one cache
  // line, not two 7.8 KB apart. The fast path records into one of these per
  // class and port, more than L1 holds.
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
  std::array<uint64_t, kBuckets> counts_{};
};

}  // namespace psgate
