// Latency distribution of one stream: psgate's log-linear histogram
// (psgate/latency_histogram.h: the same buckets, the same nearest-rank
// percentiles) with its bucket counts readable, so the JSON can carry the
// whole distribution ("buckets": [[upper_bound_ns, count], ...]).
// psgate's class keeps its counts private; this one reuses its bucket_of()
// and bucket_upper_bound(), and a unit test checks that both agree.
// Fixed size (976 counters), no allocation when recording; one writer.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "psgate/latency_histogram.h"

namespace psgate::gen {

class LatencyBuckets {
 public:
  static constexpr unsigned kBuckets = LatencyHistogram::kBuckets;

  void record(uint64_t ns) {
    ++counts_[LatencyHistogram::bucket_of(ns)];
    ++count_;
    min_ = ns < min_ ? ns : min_;
    max_ = ns > max_ ? ns : max_;
  }
  void merge(const LatencyBuckets& other);
  uint64_t count() const { return count_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  uint64_t max() const { return max_; }
  // As LatencyHistogram::percentile: the upper bound of the bucket holding
  // the nearest-rank q-quantile, clamped to [min(), max()]; 0 when empty.
  uint64_t percentile(double q) const;
  // The non-empty buckets in ascending order: (upper bound in ns, count).
  std::vector<std::pair<uint64_t, uint64_t>> nonempty() const;

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t min_ = UINT64_MAX;
  uint64_t max_ = 0;
};

}  // namespace psgate::gen
