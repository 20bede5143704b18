// SPDX-License-Identifier: BSD-3-Clause
// parse_rate_bps / parse_size_bytes / parse_duration_ns: exact values for good
// input, an understandable error (naming the text and the problem) for bad.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

#include "psgate/units.h"

namespace psgate {
namespace {

using ParseFn = Result<uint64_t> (*)(std::string_view);

struct Good {
  const char* text;
  uint64_t want;
};

struct Bad {
  const char* text;
  const char* error_contains;  // a phrase that tells the operator what is wrong
};

void expect_good(ParseFn parse, const Good& g) {
  const auto r = parse(g.text);
  ASSERT_TRUE(r.ok()) << g.text << ": " << r.error();
  EXPECT_EQ(*r, g.want) << g.text;
}

void expect_bad(ParseFn parse, const Bad& b) {
  const auto r = parse(b.text);
  ASSERT_FALSE(r.ok()) << "\"" << b.text << "\" parsed as " << *r;
  EXPECT_NE(r.error().find(b.error_contains), std::string::npos) << "\"" << b.text << "\": " << r.error();
  // One line, and it quotes the input so the operator sees what was read.
  EXPECT_EQ(r.error().find('\n'), std::string::npos) << r.error();
  if (*b.text != '\0') {
    EXPECT_NE(r.error().find(std::string("\"") + b.text + "\""), std::string::npos) << r.error();
  }
}

TEST(UnitsRate, GoodValues) {
  const Good cases[] = {
      {"9.5Gbit/s", 9'500'000'000},
      {"100Mbit/s", 100'000'000},
      {"1.5kbit/s", 1'500},
      {"800bit/s", 800},
      {"10Gbps", 10'000'000'000},
      {"1Tbit/s", 1'000'000'000'000},
      {"2Tbps", 2'000'000'000'000},
      {"300Mbps", 300'000'000},
      {"64kbps", 64'000},
      {"1bps", 1},
      {"0bit/s", 0},
      {"0.0005kbit/s", 1},         // 0.5 rounds half up
      {"0.0004kbit/s", 0},         // 0.4 rounds down
      {"1.0000005kbit/s", 1'000},  // 1000.0005 -> 1000
      {"007Mbit/s", 7'000'000},    // leading zeros
      {"2.50000Gbit/s", 2'500'000'000},
      {"0.1Gbit/s", 100'000'000},  // exact, not 99'999'999.99 from a double
      {"18446744073709551615bit/s", UINT64_MAX},
      {"18446744.073709551615Tbit/s", UINT64_MAX},
      // 24 fraction digits are exact; trailing zeros beyond do not count.
      {"1.000000000000000000000001Tbit/s", 1'000'000'000'000},
      {"1.5000000000000000000000000000000000Mbit/s", 1'500'000},
  };
  for (const auto& g : cases) expect_good(parse_rate_bps, g);
}

TEST(UnitsRate, BadValues) {
  const Bad cases[] = {
      {"", "empty rate"},
      {"1Gbps/s", "unknown unit \"Gbps/s\""},
      {"1Gbps/s", "is not a rate (expected e.g. \"9.5Gbit/s\")"},
      {"100", "missing unit"},
      {"100.5", "missing unit"},
      {"-1Gbit/s", "negative"},
      {"+1Gbit/s", "sign"},
      {"Gbit/s", "does not start with a number"},
      {"1GB", "unknown unit"},  // a size is not a rate
      {"1gbit/s", "case-sensitive"},
      {"1Kbit/s", "unknown unit"},
      {"1 Gbit/s", "unknown unit \" Gbit/s\""},
      {"1Gbit/s ", "unknown unit \"Gbit/s \""},  // trailing garbage
      {"1Gbit/sx", "unknown unit"},
      {"1.Gbit/s", "malformed number"},
      {".5Gbit/s", "malformed number"},
      {"1.2.3Gbit/s", "malformed number"},
      {"1e9bit/s", "unknown unit \"e9bit/s\""},
      {"0x10bit/s", "unknown unit"},
      {"18446744073709551616bit/s", "too large"},
      {"18446744073709551615.5bit/s", "too large"},  // rounds up past the max
      {"18446745Tbit/s", "too large"},
      {"123456789012345678901bit/s", "too large"},
      {"1.0000000000000000000000001Tbit/s", "digits after the point"},
  };
  for (const auto& b : cases) expect_bad(parse_rate_bps, b);
}

TEST(UnitsSize, GoodValues) {
  const Good cases[] = {
      {"64KiB", 65'536},
      {"1MiB", 1'048'576},
      {"1500B", 1'500},
      {"2KB", 2'000},
      {"1GiB", 1ull << 30},
      {"3GB", 3'000'000'000},
      {"5MB", 5'000'000},
      {"1.5KiB", 1'536},
      {"0B", 0},
      {"0.5B", 1},
      {"0.49B", 0},
      {"24B", 24},
      {"0.001KiB", 1},                           // 1.024 -> 1
      {"17179869183GiB", 17179869183ull << 30},  // (2^34 - 1) GiB, just below 2^64
  };
  for (const auto& g : cases) expect_good(parse_size_bytes, g);
}

TEST(UnitsSize, BadValues) {
  const Bad cases[] = {
      {"", "empty size"},
      {"64", "missing unit"},
      {"64K", "unknown unit \"K\""},
      {"64kb", "unknown unit"},
      {"64kiB", "unknown unit"},
      {"1TiB", "unknown unit"},  // strict list: up to GiB
      {"1TB", "unknown unit"},
      {"1Gbit/s", "unknown unit"},
      {"-64KiB", "negative"},
      {"64KiB,", "unknown unit"},
      {"17179869184GiB", "too large"},  // exactly 2^64
      {"KiB", "does not start with a number"},
  };
  for (const auto& b : cases) expect_bad(parse_size_bytes, b);
}

TEST(UnitsShare, GoodAndBadValues) {
  const Good good[] = {{"25%", 250}, {"12.5%", 125}, {"100%", 1000}, {"0%", 0}, {"0.04%", 0}, {"0.05%", 1}};
  for (const auto& g : good) expect_good(parse_share_permille, g);
  const Bad bad[] = {{"25", "missing unit"}, {"25 %", "unknown unit"}, {"-5%", "negative"}, {"%", "does not start"}};
  for (const auto& b : bad) expect_bad(parse_share_permille, b);
}

TEST(UnitsDuration, GoodValues) {
  const Good cases[] = {
      {"500ms", 500'000'000}, {"20s", 20'000'000'000}, {"100us", 100'000},
      {"250ns", 250},         {"1.5s", 1'500'000'000}, {"0s", 0},
      {"0.1s", 100'000'000},  {"1.0005us", 1'001},  // 1000.5 ns rounds up
      {"0.25ns", 0},
  };
  for (const auto& g : cases) expect_good(parse_duration_ns, g);
}

TEST(UnitsDuration, BadValues) {
  const Bad cases[] = {
      {"", "empty duration"},  {"500", "missing unit"},       {"1m", "unknown unit"},  {"1min", "unknown unit"},
      {"1h", "unknown unit"},  {"1S", "unknown unit"},        {"1µs", "unknown unit"}, {"-1s", "negative"},
      {"1s1", "unknown unit"}, {"99999999999s", "too large"},
  };
  for (const auto& b : cases) expect_bad(parse_duration_ns, b);
}

TEST(UnitsSeconds, APlainNumberWithinItsRangeOnly) {
  for (const auto& [text, value] :
       {std::pair{"0", 0.0}, std::pair{"2.5", 2.5}, std::pair{"1e2", 100.0}, std::pair{"99", 99.0}}) {
    const auto r = parse_seconds(text, 100);
    ASSERT_TRUE(r) << text << ": " << r.error();
    EXPECT_EQ(*r, value) << text;
  }
  // NaN fails a range test that only compares; "inf" and a unit are refused too.
  // A value too small to be told from 0 is no 0 ("1e-400" would mean "until
  // signalled" for a duration).
  // Nor C's hex floats ("0x10" read as 16) or leading blanks.
  for (const char* text : {"nan", "NaN", "-nan", "inf", "100.5", "-1", "", "5s", "1,5", "x", "1e-400", "-1e-400",
                           "0x10", "0x1p3", " 5", "\t5"}) {
    const auto r = parse_seconds(text, 100);
    EXPECT_FALSE(r) << text;
    if (!r) {
      EXPECT_EQ(r.error(), "not a number of seconds from 0 to 100") << text;
    }
  }
  // The bound as --help writes it.
  EXPECT_EQ(parse_seconds("2e8", 1e8).error(), "not a number of seconds from 0 to 1e8");
}

// Reference check: random decimal strings against an independent evaluation
// in long double (enough precision for the few digits used here, and the
// inputs avoid exact halves so rounding direction is unambiguous).
TEST(UnitsRate, MatchesReferenceOnRandomDecimals) {
  std::mt19937_64 rng(12345);
  struct U {
    const char* name;
    long double mult;
  };
  const U units[] = {{"bit/s", 1}, {"kbit/s", 1e3}, {"Mbit/s", 1e6}, {"Gbit/s", 1e9}, {"Tbit/s", 1e12}};
  for (int i = 0; i < 20000; ++i) {
    const uint64_t whole = rng() % 100000;
    const unsigned frac_digits = rng() % 7;
    uint64_t frac = 0, scale = 1;
    for (unsigned d = 0; d < frac_digits; ++d) frac = frac * 10 + rng() % 10, scale *= 10;
    const U& u = units[rng() % 5];
    char text[64];
    if (frac_digits == 0) {
      std::snprintf(text, sizeof(text), "%" PRIu64 "%s", whole, u.name);
    } else {
      std::snprintf(text, sizeof(text), "%" PRIu64 ".%0*" PRIu64 "%s", whole, static_cast<int>(frac_digits), frac,
                    u.name);
    }
    const long double exact =
        (static_cast<long double>(whole) + static_cast<long double>(frac) / static_cast<long double>(scale)) * u.mult;
    const long double lower = std::floor(exact);
    const long double dist = exact - lower;
    if (dist > 0.4999L && dist < 0.5001L) continue;  // too close to a half to judge
    const uint64_t want = static_cast<uint64_t>(dist >= 0.5L ? lower + 1 : lower);
    const auto r = parse_rate_bps(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error();
    ASSERT_EQ(*r, want) << text;
  }
}

}  // namespace
}  // namespace psgate
