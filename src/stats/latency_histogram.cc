// SPDX-License-Identifier: BSD-3-Clause
// Log-linear bucketing (see the header). Bucket layout, with S = kSubBuckets = 16:
//
//   value            bucket                      width
//   0..15            value (exact)               1
//   16..31           value (exact)               1      msb = 4
//   2^m..2^(m+1)-1   (m - 3) * S + next 4 bits   2^(m-4)
//
// The 4 bits below the most significant bit select the sub-bucket, so a bucket
// never spans more than 1/16 of its lower bound: the upper bound reported for a
// value x lies in [x, x * (1 + 1/16)).  The last bucket (m = 63, sub 15) is
// 60 * 16 + 15 = 975 = kBuckets - 1.
#include "psgate/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace psgate {

uint64_t LatencyHistogram::bucket_upper_bound(unsigned bucket) {
  if (bucket < kSubBuckets) return bucket;
  if (bucket >= kBuckets) return UINT64_MAX;
  const unsigned group = bucket / kSubBuckets;  // = msb - 3, >= 1
  const unsigned sub = bucket % kSubBuckets;
  const unsigned shift = group - 1;  // = msb - 4
  const uint64_t lower = (uint64_t{kSubBuckets} + sub) << shift;
  // lower + width - 1, written so the last bucket ends at UINT64_MAX without overflow.
  return lower + ((uint64_t{1} << shift) - 1);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
  // The count is the sum of the buckets read, not other.count_: a reader
  // merging an lcore's histogram while it records may see the one updated
  // and not the other, and a count ahead of its buckets made percentile()
  // run past them and report max() for every quantile near 1.
  uint64_t n = 0;
  unsigned lowest = kBuckets, highest = 0;  // of other's buckets read non-empty
  for (unsigned b = 0; b < kBuckets; ++b) {
    const uint64_t c = other.counts_[b];
    counts_[b] += c;
    n += c;
    if (c) {
      lowest = std::min(lowest, b);
      highest = b;
    }
  }
  count_ += n;
  uint64_t other_min = other.min_, other_max = other.max_;
  // Likewise a first sample's bucket seen before its min and max (min still
  // UINT64_MAX, max 0): the bounds of the buckets read stand in for them,
  // rather than a min of 2^64-1 and a max below it.
  if (n != 0 && other_min > other_max) {
    other_min = lowest == 0 ? 0 : bucket_upper_bound(lowest - 1) + 1;
    other_max = bucket_upper_bound(highest);
  }
  min_ = std::min(min_, other_min);
  max_ = std::max(max_, other_max);
}

uint64_t LatencyHistogram::percentile(double q) const {
  if (count_ == 0) return 0;
  // Nearest-rank definition: the smallest value with at least ceil(q * n)
  // samples at or below it (rank 1 for q <= 0, n for q >= 1 or NaN).
  uint64_t rank = count_;
  if (q <= 0.0) {
    rank = 1;
  } else if (q < 1.0) {
    const double r = std::ceil(q * static_cast<double>(count_));
    rank = std::clamp<uint64_t>(static_cast<uint64_t>(r), 1, count_);
  }
  uint64_t seen = 0;
  for (unsigned b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    // (min_ <= max_ for anything recorded or merged; clamp requires it.)
    if (seen >= rank) return min_ <= max_ ? std::clamp(bucket_upper_bound(b), min_, max_) : bucket_upper_bound(b);
  }
  return max_;  // unreachable while counts_ sums to count_
}

std::vector<std::pair<uint64_t, uint64_t>> LatencyHistogram::nonempty_buckets() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (unsigned b = 0; b < kBuckets; ++b) {
    if (counts_[b]) out.emplace_back(bucket_upper_bound(b), counts_[b]);
  }
  return out;
}

}  // namespace psgate
