// SPDX-License-Identifier: BSD-3-Clause
// TokenBucket against exact arithmetic with a hand-ticked clock.
//
// The greedy-sender tests use the bucket's own invariant to get an exact bound
// instead of a loose tolerance: with no tokens lost to the burst clamp,
//   tokens(t) = burst*hz + rate*(t - t0) - sent*hz     (byte-ticks)
// and right after a greedy send at time t, 0 <= tokens < next_len*hz.
// The polling gap is kept below (burst - max_len) / rate so nothing is clamped.
#include "psgate/token_bucket.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

namespace psgate {
namespace {

using i128 = __int128;

constexpr uint64_t kGbit = 1'000'000'000 / 8;  // bytes per second in 1 Gbit/s

struct GreedyResult {
  uint64_t sent_bytes = 0;
  uint64_t packets = 0;
  uint64_t last_poll = 0;    // ticks
  uint32_t blocked_len = 0;  // length of the packet that did not conform at last_poll
};

// Polls at random intervals in [0, max_gap] ticks until `end`, sending
// packets while the bucket conforms. pkt_len 0 means random lengths 64..9000.
GreedyResult run_greedy(TokenBucket& tb, uint64_t start, uint64_t end, uint64_t max_gap, uint32_t pkt_len,
                        std::mt19937_64& rng) {
  std::uniform_int_distribution<uint64_t> gap(0, max_gap);
  std::uniform_int_distribution<uint32_t> size(64, 9000);
  GreedyResult r;
  uint32_t next = pkt_len ? pkt_len : size(rng);
  for (uint64_t now = start; now <= end; now += gap(rng)) {
    tb.refill(now);
    while (tb.conforms(next)) {
      tb.consume(next);
      r.sent_bytes += next;
      ++r.packets;
      next = pkt_len ? pkt_len : size(rng);
    }
    r.last_poll = now;
    r.blocked_len = next;
  }
  return r;
}

struct RateCase {
  uint64_t bytes_per_sec;
  uint32_t pkt_len;  // 0: random 64..9000
  uint64_t tick_hz;
};

void PrintTo(const RateCase& c, std::ostream* os) {
  *os << c.bytes_per_sec << " B/s, len " << c.pkt_len << ", " << c.tick_hz << " Hz";
}

class TokenBucketRate : public ::testing::TestWithParam<RateCase> {};

TEST_P(TokenBucketRate, GreedySenderGetsConfiguredRate) {
  const RateCase c = GetParam();
  const uint64_t max_len = c.pkt_len ? c.pkt_len : 9000;
  // Burst: 1 ms of traffic, and at least two maximum packets.
  const uint64_t burst = std::max<uint64_t>(2 * max_len, c.bytes_per_sec / 1000);
  // 10 s, or longer for slow rates so that >= 2000 packets pass and one
  // packet of quantization stays below 0.05%.
  const uint64_t seconds = std::max<uint64_t>(10, 2000 * max_len / c.bytes_per_sec + 1);
  const uint64_t t0 = 12345;
  const uint64_t end = t0 + seconds * c.tick_hz;
  const uint64_t max_gap = static_cast<uint64_t>(static_cast<i128>(burst - max_len) * c.tick_hz / c.bytes_per_sec);
  ASSERT_GT(max_gap, 0u);

  TokenBucket tb(c.bytes_per_sec, burst, c.tick_hz, t0);
  std::mt19937_64 rng(c.bytes_per_sec ^ c.pkt_len ^ c.tick_hz);
  const GreedyResult r = run_greedy(tb, t0, end, max_gap, c.pkt_len, rng);

  // Exact: 0 <= earned - sent < blocked_len, all in byte-ticks.
  const i128 earned = static_cast<i128>(burst) * c.tick_hz + static_cast<i128>(c.bytes_per_sec) * (r.last_poll - t0);
  const i128 left = earned - static_cast<i128>(r.sent_bytes) * c.tick_hz;
  EXPECT_GE(left, 0) << "sent more than rate * time + burst";
  EXPECT_LT(left, static_cast<i128>(r.blocked_len) * c.tick_hz) << "left tokens unused";

  // And the headline figure: rate within 0.1%.
  const double elapsed_s = static_cast<double>(r.last_poll - t0) / static_cast<double>(c.tick_hz);
  const double rate = static_cast<double>(r.sent_bytes - burst) / elapsed_s;
  EXPECT_NEAR(rate, static_cast<double>(c.bytes_per_sec), 1e-3 * static_cast<double>(c.bytes_per_sec))
      << "packets " << r.packets;
}

std::vector<RateCase> rate_cases() {
  std::vector<RateCase> v;
  const uint64_t rates[] = {1'250,           // 10 kbit/s
                            125'000,         // 1 Mbit/s
                            12'500'000,      // 100 Mbit/s
                            kGbit,           // 1 Gbit/s
                            10 * kGbit + 7,  // ~10 Gbit/s, not a round number
                            25 * kGbit,      // 25 Gbit/s
                            100 * kGbit};    // 100 Gbit/s
  const uint32_t lens[] = {64, 1500, 9000, 0};
  for (uint64_t r : rates)
    for (uint32_t l : lens) {
      if (r >= 25 * kGbit && l == 64) continue;  // > 10^8 packets: too slow for a unit test
      v.push_back({r, l, 1'000'000'000});
      v.push_back({r, l, 2'600'000'000});
    }
  return v;
}

INSTANTIATE_TEST_SUITE_P(TokenBucket, TokenBucketRate, ::testing::ValuesIn(rate_cases()),
                         [](const ::testing::TestParamInfo<RateCase>& i) {
                           return "r" + std::to_string(i.param.bytes_per_sec) + "_len" +
                                  std::to_string(i.param.pkt_len) + "_hz" +
                                  std::to_string(i.param.tick_hz / 1'000'000) + "M";
                         });

TEST(TokenBucket, BurstHonouredAfterIdle) {
  struct Case {
    uint64_t burst;
    uint32_t len;
    uint64_t expect_packets;
  };
  const Case cases[] = {
      {15'000, 1500, 10},  {15'001, 1500, 10},     {16'499, 1500, 10}, {64, 64, 1},
      {63, 64, 1},  // frame larger than burst: one passes (bucket goes into debt)
      {128'000, 64, 2000}, {1'000'000, 9000, 111}, {0, 64, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("burst " + std::to_string(c.burst) + " len " + std::to_string(c.len));
    const uint64_t hz = 1'000'000'000;
    TokenBucket tb(kGbit, c.burst, hz, 0);
    // Drain, then idle for an hour: the bucket must hold exactly `burst`.
    while (tb.conforms(c.len)) tb.consume(c.len);
    const uint64_t now = 3600 * hz;
    tb.refill(now);
    EXPECT_EQ(tb.tokens_bytes(), static_cast<int64_t>(c.burst));
    uint64_t packets = 0;
    while (tb.conforms(c.len) && packets < 1'000'000) {
      tb.consume(c.len);
      ++packets;
    }
    EXPECT_EQ(packets, c.expect_packets);
    // Refilling at the same instant adds nothing.
    tb.refill(now);
    EXPECT_FALSE(tb.conforms(c.len));
  }
}

TEST(TokenBucket, FrameLargerThanBurstPassesAtConfiguredRate) {
  // 1 byte per tick: a 9000-byte frame with a 1500-byte burst conforms when
  // the bucket holds 1500 bytes, then owes 7500, so frames leave every 9000
  // ticks exactly.
  const uint64_t hz = 1'000'000;
  TokenBucket tb(1'000'000, 1500, hz, 0);
  std::vector<uint64_t> sends;
  for (uint64_t now = 0; now <= 10 * hz; ++now) {
    tb.refill(now);
    if (tb.conforms(9000)) {
      tb.consume(9000);
      sends.push_back(now);
      EXPECT_FALSE(tb.conforms(9000));
    }
  }
  ASSERT_EQ(sends.size(), 10 * hz / 9000 + 1);
  for (size_t i = 0; i < sends.size(); ++i) EXPECT_EQ(sends[i], i * 9000) << i;
}

TEST(TokenBucket, SetRateMidRun) {
  struct Case {
    uint64_t r1, r2;
    uint32_t len;
  };
  const Case cases[] = {
      {kGbit, 10 * kGbit, 1500}, {10 * kGbit, kGbit, 64}, {125'000, 12'500'000, 9000}, {12'500'000, 125'000, 1500}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.r1) + " -> " + std::to_string(c.r2));
    const uint64_t hz = 2'600'000'000;
    const uint64_t burst = std::max<uint64_t>(4 * c.len, std::max(c.r1, c.r2) / 1000);
    const uint64_t gap = (burst - c.len) * hz / std::max(c.r1, c.r2);
    std::mt19937_64 rng(c.r1 + c.r2);
    TokenBucket tb(c.r1, burst, hz, 0);
    const uint64_t t1 = 5 * hz;
    const uint64_t t2 = 10 * hz;
    GreedyResult a = run_greedy(tb, 0, t1 - 1, gap, c.len, rng);
    tb.set_rate(c.r2, t1);
    EXPECT_EQ(tb.rate_bytes_per_sec(), c.r2);
    GreedyResult b = run_greedy(tb, t1, t2, gap, c.len, rng);
    const i128 earned =
        static_cast<i128>(burst) * hz + static_cast<i128>(c.r1) * t1 + static_cast<i128>(c.r2) * (b.last_poll - t1);
    const i128 left = earned - static_cast<i128>(a.sent_bytes + b.sent_bytes) * hz;
    EXPECT_GE(left, 0);
    EXPECT_LT(left, static_cast<i128>(c.len) * hz);
  }
}

TEST(TokenBucket, SetRateZeroPausesAndKeepsTokens) {
  const uint64_t hz = 1'000'000'000;
  TokenBucket tb(1000, 10'000, hz, 0);
  tb.consume(10'000);
  EXPECT_EQ(tb.tokens_bytes(), 0);
  tb.set_rate(0, hz);  // 1 s at 1000 B/s earned first
  EXPECT_EQ(tb.tokens_bytes(), 1000);
  tb.refill(100 * hz);
  EXPECT_EQ(tb.tokens_bytes(), 1000);
  tb.set_rate(1000, 100 * hz);
  tb.refill(102 * hz);
  EXPECT_EQ(tb.tokens_bytes(), 3000);
  // A higher rate later keeps the tokens, clamped to the burst.
  tb.set_rate(1'000'000, 200 * hz);
  EXPECT_EQ(tb.tokens_bytes(), 10'000);
}

TEST(TokenBucket, ClockGoingBackwardsAddsNothing) {
  const uint64_t hz = 1'000'000'000;
  TokenBucket tb(1'000'000'000, 1'000'000, hz, 5 * hz);  // 1 byte per tick
  tb.consume(1'000'000);
  EXPECT_EQ(tb.tokens_bytes(), 0);
  tb.refill(5 * hz - 1000);  // backwards by 1 us (another core's reading)
  EXPECT_EQ(tb.tokens_bytes(), 0);
  tb.refill(5 * hz);  // back to the last time: still nothing
  EXPECT_EQ(tb.tokens_bytes(), 0);
  tb.refill(5 * hz + 100);  // only the 100 ticks after the last refill count
  EXPECT_EQ(tb.tokens_bytes(), 100);
  tb.refill(5 * hz + 50);
  EXPECT_EQ(tb.tokens_bytes(), 100);
  tb.refill(5 * hz + 150);
  EXPECT_EQ(tb.tokens_bytes(), 150);
}

// A clock that steps back by more than 100 ms (a VM moved to a host whose
// TSC is behind) earns nothing for the step, and then earns from the new
// reading on: the bucket held its last refill time and earned nothing until
// the clock caught up with it, a stall as long as the step (30 s here).
TEST(TokenBucket, AClockSteppedBackFarEarnsAgainFromTheNewReading) {
  const uint64_t hz = 1'000'000'000;
  TokenBucket tb(1'000'000'000, 1'000'000, hz, 40 * hz);  // 1 byte per tick
  tb.consume(1'000'000);
  tb.refill(10 * hz);  // 30 s back
  EXPECT_EQ(tb.tokens_bytes(), 0);
  tb.refill(10 * hz + 500);
  EXPECT_EQ(tb.tokens_bytes(), 500);
  tb.refill(10 * hz + 1'000'000);
  EXPECT_EQ(tb.tokens_bytes(), 1'000'000);
}

TEST(TokenBucket, LongIdleDoesNotOverflow) {
  const uint64_t tsc = 2'600'000'000;
  // Largest burst the header allows at this clock: capacity < 2^62 byte-ticks.
  const uint64_t max_burst = ((uint64_t{1} << 62) - 1) / tsc;
  const uint64_t rates[] = {1, 1'250, kGbit, 100 * kGbit, 400 * kGbit};
  const uint64_t bursts[] = {0, 1500, uint64_t{1} << 30, max_burst};
  const uint64_t idles[] = {3600 * tsc, 24 * 3600 * tsc, 365ull * 24 * 3600 * tsc, 1};
  for (uint64_t rate : rates)
    for (uint64_t burst : bursts)
      for (uint64_t idle : idles) {
        SCOPED_TRACE("rate " + std::to_string(rate) + " burst " + std::to_string(burst) + " idle " +
                     std::to_string(idle));
        const uint64_t t0 = 1'000'000;
        TokenBucket tb(rate, burst, tsc, t0);
        // Go into the deepest debt a maximum packet allows.
        while (tb.conforms(65'536)) tb.consume(65'536);
        const int64_t before = tb.tokens_bytes();
        tb.refill(t0 + idle);
        const int64_t after = tb.tokens_bytes();
        EXPECT_GE(after, before);
        EXPECT_LE(after, static_cast<int64_t>(burst));
        if (static_cast<i128>(idle / tsc) * rate >= static_cast<i128>(burst) + 65'536) {
          EXPECT_EQ(after, static_cast<int64_t>(burst));
        }
      }
}

TEST(TokenBucket, RefillJustShortOfFullDoesNotOverflow) {
  // The worst product elapsed * rate happens just below the "refill to full"
  // shortcut, with the bucket nearly full: tokens + elapsed * rate must not wrap.
  const uint64_t tsc = 2'600'000'000;
  const uint64_t max_burst = ((uint64_t{1} << 62) - 1) / tsc;
  const uint64_t rates[] = {1, 1'250, kGbit, 100 * kGbit};
  for (uint64_t rate : rates)
    for (uint64_t burst : {uint64_t{1} << 30, max_burst}) {
      SCOPED_TRACE("rate " + std::to_string(rate) + " burst " + std::to_string(burst));
      TokenBucket tb(rate, burst, tsc, 0);
      tb.consume(1);
      // Span from deepest debt to full, in ticks, minus a little.
      const uint64_t span = (burst + TokenBucket::kMaxPacketBytes) * tsc / rate;
      for (uint64_t back : {uint64_t{2}, uint64_t{1000}, span / 2}) {
        TokenBucket t = tb;
        t.refill(span - back);
        EXPECT_EQ(t.tokens_bytes(), static_cast<int64_t>(burst));
      }
    }
}

}  // namespace
}  // namespace psgate
