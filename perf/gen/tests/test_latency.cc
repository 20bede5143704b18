// LatencyBuckets: psgate's histogram with readable buckets. Same percentiles,
// min and max as psgate::LatencyHistogram on the same samples; the listed
// buckets add up to the count and each holds exactly its samples.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "latency.h"

namespace psgate::gen {
namespace {

TEST(LatencyBuckets, AgreesWithPsgatesHistogram) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 50; ++round) {
    LatencyBuckets a, part2;
    LatencyHistogram ref;
    std::map<uint64_t, uint64_t> truth;  // upper bound -> samples, computed from bucket_of
    const int n = 1 + static_cast<int>(rng() % 2000);
    for (int i = 0; i < n; ++i) {
      // Log-uniform over 0 .. 2^40 ns, so every bucket width is exercised.
      const uint64_t ns = rng() >> (24 + rng() % 40);
      (i % 3 ? a : part2).record(ns);
      ref.record(ns);
      ++truth[LatencyHistogram::bucket_upper_bound(LatencyHistogram::bucket_of(ns))];
    }
    a.merge(part2);
    ASSERT_EQ(a.count(), ref.count());
    EXPECT_EQ(a.min(), ref.min());
    EXPECT_EQ(a.max(), ref.max());
    for (double q : {0.0, 0.001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0}) EXPECT_EQ(a.percentile(q), ref.percentile(q)) << q;
    const auto buckets = a.nonempty();
    const std::map<uint64_t, uint64_t> listed(buckets.begin(), buckets.end());
    EXPECT_EQ(listed, truth);
    for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1].first, buckets[i].first);
  }
}

TEST(LatencyBuckets, EmptyAndExtremes) {
  LatencyBuckets h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_TRUE(h.nonempty().empty());
  h.record(0);
  h.record(UINT64_MAX);
  const auto b = h.nonempty();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::pair<uint64_t, uint64_t>{0, 1}));
  EXPECT_EQ(b[1], (std::pair<uint64_t, uint64_t>{UINT64_MAX, 1}));
}

}  // namespace
}  // namespace psgate::gen
