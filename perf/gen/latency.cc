#include "latency.h"

#include <algorithm>
#include <cmath>

namespace psgate::gen {

void LatencyBuckets::merge(const LatencyBuckets& other) {
  for (unsigned b = 0; b < kBuckets; ++b) counts_[b] += other.counts_[b];
  count_ += other.count_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

uint64_t LatencyBuckets::percentile(double q) const {
  if (count_ == 0) return 0;
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
    if (seen >= rank) return std::clamp(LatencyHistogram::bucket_upper_bound(b), min_, max_);
  }
  return max_;
}

std::vector<std::pair<uint64_t, uint64_t>> LatencyBuckets::nonempty() const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (unsigned b = 0; b < kBuckets; ++b) {
    if (counts_[b]) out.emplace_back(LatencyHistogram::bucket_upper_bound(b), counts_[b]);
  }
  return out;
}

}  // namespace psgate::gen
