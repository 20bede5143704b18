// SPDX-License-Identifier: BSD-3-Clause
// LatencyHistogram against a sorted-vector reference (nearest-rank percentile).
#include "psgate/latency_histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace psgate {
namespace {

// Nearest rank: the smallest sample with at least ceil(q * n) samples <= it.
uint64_t reference_percentile(const std::vector<uint64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double r = std::ceil(q * static_cast<double>(sorted.size()));
  const size_t rank = std::clamp<size_t>(static_cast<size_t>(std::max(r, 1.0)), 1, sorted.size());
  return sorted[rank - 1];
}

// The histogram reports the upper bound of the bucket: never below the true
// value and less than 1/16 (6.25%) above it.
void expect_close(uint64_t got, uint64_t want, const std::string& what) {
  EXPECT_GE(got, want) << what;
  EXPECT_LE(static_cast<long double>(got - want), static_cast<long double>(want) / 16) << what;
}

TEST(LatencyHistogram, BucketOfTable) {
  struct Case {
    uint64_t value;
    unsigned bucket;
  };
  const Case cases[] = {
      {0, 0},
      {1, 1},
      {15, 15},
      {16, 16},
      {17, 17},
      {31, 31},
      {32, 32},
      {33, 32},
      {34, 33},
      {63, 47},
      {64, 48},
      {67, 48},
      {68, 49},
      {1000, 6 * 16 + ((1000 >> 5) & 15)},  // msb 9: group 6
      {uint64_t{1} << 63, 60 * 16},
      {UINT64_MAX, LatencyHistogram::kBuckets - 1},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(LatencyHistogram::bucket_of(c.value), c.bucket) << c.value;
  }
}

TEST(LatencyHistogram, BucketsTileTheValueRange) {
  // Bucket b covers (upper(b-1), upper(b)]: contiguous, increasing, with the
  // width never above 1/16 of the lower bound, and bucket_of inverts it.
  uint64_t prev_upper = 0;
  EXPECT_EQ(LatencyHistogram::bucket_upper_bound(0), 0u);
  for (unsigned b = 1; b < LatencyHistogram::kBuckets; ++b) {
    const uint64_t upper = LatencyHistogram::bucket_upper_bound(b);
    const uint64_t lower = prev_upper + 1;
    ASSERT_GE(upper, lower) << b;
    EXPECT_EQ(LatencyHistogram::bucket_of(lower), b) << b;
    EXPECT_EQ(LatencyHistogram::bucket_of(upper), b) << b;
    EXPECT_LE(upper - lower, lower / 16) << b;
    prev_upper = upper;
  }
  EXPECT_EQ(prev_upper, UINT64_MAX);
}

TEST(LatencyHistogram, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_EQ(h.percentile(1.0), 0u);
}

TEST(LatencyHistogram, EdgeValues) {
  const uint64_t values[] = {0, 1, 15, 16, 17, 31, 32, 1'000'000, UINT64_MAX - 1, UINT64_MAX};
  for (uint64_t v : values) {
    LatencyHistogram h;
    h.record(v);
    EXPECT_EQ(h.count(), 1u) << v;
    EXPECT_EQ(h.min(), v) << v;
    EXPECT_EQ(h.max(), v) << v;
    // One sample: every percentile is clamped to [min, max] = v.
    for (double q : {0.0, 0.5, 0.99, 1.0}) EXPECT_EQ(h.percentile(q), v) << v << " q " << q;
  }
  LatencyHistogram h;
  for (uint64_t v : values) h.record(v);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.max(), UINT64_MAX);
  EXPECT_EQ(h.percentile(0.0), 0u);
  EXPECT_EQ(h.percentile(1.0), UINT64_MAX);
  EXPECT_EQ(h.percentile(0.3), 15u);  // rank 3 of 10, below 32 values are exact
  EXPECT_EQ(h.percentile(0.5), 17u);
}

struct Dist {
  const char* name;
  int kind;  // 0 uniform small, 1 log-uniform, 2 exponential-ish, 3 constant
  size_t n;
};

void PrintTo(const Dist& d, std::ostream* os) { *os << d.name; }

class LatencyHistogramRandom : public ::testing::TestWithParam<Dist> {};

TEST_P(LatencyHistogramRandom, PercentilesMatchSortedReference) {
  const Dist d = GetParam();
  std::mt19937_64 rng(0x5eed + d.kind * 7919 + d.n);
  std::uniform_int_distribution<uint64_t> small(0, 200);
  std::uniform_int_distribution<unsigned> exp_bits(0, 63);
  std::exponential_distribution<double> expo(1.0 / 20'000.0);
  std::vector<uint64_t> samples;
  LatencyHistogram h;
  for (size_t i = 0; i < d.n; ++i) {
    uint64_t v = 0;
    switch (d.kind) {
      case 0:
        v = small(rng);
        break;
      case 1: {
        const unsigned b = exp_bits(rng);
        v = (rng() >> (63 - b)) | (uint64_t{1} << b);  // msb at b, random below
        break;
      }
      case 2:
        v = static_cast<uint64_t>(expo(rng)) + 500;
        break;
      default:
        v = 123'456'789;
        break;
    }
    samples.push_back(v);
    h.record(v);
  }
  std::sort(samples.begin(), samples.end());
  EXPECT_EQ(h.count(), samples.size());
  EXPECT_EQ(h.min(), samples.front());
  EXPECT_EQ(h.max(), samples.back());
  for (double q : {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 0.9999, 1.0}) {
    expect_close(h.percentile(q), reference_percentile(samples, q), "q " + std::to_string(q));
  }
  std::uniform_real_distribution<double> uq(0.0, 1.0);
  for (int i = 0; i < 200; ++i) {
    const double q = uq(rng);
    expect_close(h.percentile(q), reference_percentile(samples, q), "q " + std::to_string(q));
  }
}

INSTANTIATE_TEST_SUITE_P(LatencyHistogram, LatencyHistogramRandom,
                         ::testing::Values(Dist{"small", 0, 10'000}, Dist{"loguniform", 1, 50'000},
                                           Dist{"exponential", 2, 100'000}, Dist{"constant", 3, 1000},
                                           Dist{"few", 1, 7}),
                         [](const ::testing::TestParamInfo<Dist>& i) { return std::string(i.param.name); });

TEST(LatencyHistogram, MergeEqualsRecordingAll) {
  std::mt19937_64 rng(42);
  std::vector<LatencyHistogram> parts(4);
  LatencyHistogram all;
  for (int i = 0; i < 40'000; ++i) {
    const uint64_t v = rng() >> (rng() % 64);
    parts[rng() % parts.size()].record(v);
    all.record(v);
  }
  LatencyHistogram merged;
  LatencyHistogram empty;
  merged.merge(empty);
  for (const LatencyHistogram& p : parts) merged.merge(p);
  merged.merge(empty);
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  for (int i = 0; i <= 1000; ++i) {
    const double q = i / 1000.0;
    EXPECT_EQ(merged.percentile(q), all.percentile(q)) << q;
  }
  // Merging into an empty histogram copies min and max.
  LatencyHistogram one;
  one.merge(parts[0]);
  EXPECT_EQ(one.min(), parts[0].min());
  EXPECT_EQ(one.max(), parts[0].max());
}

// A reader merging an lcore's histogram while it records its first sample
// may see the sample's bucket before its min and max (still UINT64_MAX and
// 0). The merge reported a min of 2^64-1, and percentile() called clamp with
// its bounds the wrong way round (undefined; 0 here, an abort with
// _GLIBCXX_ASSERTIONS). Such a read is made here by writing the totals the
// lcore had not written yet back to their initial values.
TEST(LatencyHistogram, AMergeThatSeesABucketBeforeItsMinAndMax) {
  static_assert(std::is_standard_layout_v<LatencyHistogram>);
  LatencyHistogram torn;
  torn.record(5000);
  uint64_t totals[3];  // count_, min_, max_: the first members
  std::memcpy(totals, &torn, sizeof totals);
  ASSERT_EQ(totals[0], 1u);
  ASSERT_EQ(totals[1], 5000u);
  totals[1] = UINT64_MAX;
  totals[2] = 0;
  std::memcpy(static_cast<void*>(&torn), totals, sizeof totals);
  LatencyHistogram merged;
  merged.merge(torn);
  const unsigned b = LatencyHistogram::bucket_of(5000);
  EXPECT_EQ(merged.count(), 1u);
  EXPECT_EQ(merged.min(), LatencyHistogram::bucket_upper_bound(b - 1) + 1);
  EXPECT_EQ(merged.max(), LatencyHistogram::bucket_upper_bound(b));
  EXPECT_LE(merged.min(), 5000u);
  EXPECT_GE(merged.max(), 5000u);
  EXPECT_EQ(merged.percentile(0.5), LatencyHistogram::bucket_upper_bound(b));
  EXPECT_EQ(merged.percentile(1.0), LatencyHistogram::bucket_upper_bound(b));
}

}  // namespace
// nonempty_buckets lists every sample once, in its own bucket, ascending,
// and merged histograms list the sum.
TEST(LatencyHistogram, NonemptyBucketsListTheDistribution) {
  std::mt19937_64 rng(5);
  for (int round = 0; round < 50; ++round) {
    LatencyHistogram a, part2, ref;
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
    const auto buckets = a.nonempty_buckets();
    const std::map<uint64_t, uint64_t> listed(buckets.begin(), buckets.end());
    EXPECT_EQ(listed, truth);
    for (size_t i = 1; i < buckets.size(); ++i) EXPECT_LT(buckets[i - 1].first, buckets[i].first);
  }
}

TEST(LatencyHistogram, NonemptyBucketsEmptyAndExtremes) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min(), 0u);
  EXPECT_EQ(h.percentile(0.5), 0u);
  EXPECT_TRUE(h.nonempty_buckets().empty());
  h.record(0);
  h.record(UINT64_MAX);
  const auto b = h.nonempty_buckets();
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::pair<uint64_t, uint64_t>{0, 1}));
  EXPECT_EQ(b[1], (std::pair<uint64_t, uint64_t>{UINT64_MAX, 1}));
}

// Ticks to ns for a 2.6 GHz TSC and a 25 MHz timer, short and long sojourns
// exact to the ns; an arrival stamped by a core whose clock runs ahead is
// no wait, not 2^64 ticks of one (which made max and p99.9 read 6e18 ns).
TEST(SojournTicksToNs, ShortLongAndBackwards) {
  for (const uint64_t hz : {uint64_t{2'600'000'000}, uint64_t{25'000'000}}) {
    const uint64_t q32 = (uint64_t{1'000'000'000} << 32) / hz;
    EXPECT_EQ(sojourn_ticks_to_ns(0, q32, hz), 0u);
    EXPECT_NEAR(static_cast<double>(sojourn_ticks_to_ns(hz / 1000, q32, hz)), 1e6, 1.0) << hz;  // 1 ms
    EXPECT_EQ(sojourn_ticks_to_ns(hz * 10, q32, hz), 10'000'000'000u) << hz;                    // 10 s
    EXPECT_EQ(sojourn_ticks_to_ns(0 - uint64_t{1}, q32, hz), 0u) << hz;
    EXPECT_EQ(sojourn_ticks_to_ns(0 - hz / 1000, q32, hz), 0u) << hz;
  }
}

}  // namespace psgate
