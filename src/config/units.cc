// SPDX-License-Identifier: BSD-3-Clause
// Parsing of rates, sizes and durations with explicit units (see units.h).
//
// Arithmetic is exact: the decimal number is kept as integer + fraction digits
// and scaled with 128-bit integers, so "9.5Gbit/s" is exactly 9'500'000'000 and
// "0.1s" exactly 100'000'000 ns (a double would give 99'999'999.99...).
// Rounding is to the nearest integer, halves up.
#include "psgate/units.h"

#include "psgate/text.h"

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

namespace psgate {
namespace {

using u128 = unsigned __int128;

struct Unit {
  std::string_view name;
  uint64_t multiplier;
};

// Longest spellings are matched as whole suffixes, so order does not matter.
constexpr std::array<Unit, 10> kRateUnits{{
    {"bit/s", 1},
    {"kbit/s", 1'000},
    {"Mbit/s", 1'000'000},
    {"Gbit/s", 1'000'000'000},
    {"Tbit/s", 1'000'000'000'000},
    {"bps", 1},
    {"kbps", 1'000},
    {"Mbps", 1'000'000},
    {"Gbps", 1'000'000'000},
    {"Tbps", 1'000'000'000'000},
}};

constexpr std::array<Unit, 7> kSizeUnits{{
    {"B", 1},
    {"KB", 1'000},
    {"MB", 1'000'000},
    {"GB", 1'000'000'000},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
}};

constexpr std::array<Unit, 4> kDurationUnits{{
    {"ns", 1},
    {"us", 1'000},
    {"ms", 1'000'000},
    {"s", 1'000'000'000},
}};

// A share of something else (a bucket, ...): "25%" is 250 per mille.
constexpr std::array<Unit, 1> kShareUnits{{
    {"%", 10},
}};

// 20 digits already exceed uint64; 24 fraction digits times the largest
// multiplier (1e12) stay below 2^128 (about 3.4e38).
constexpr size_t kMaxIntegerDigits = 20;
constexpr size_t kMaxFractionDigits = 24;

struct Kind {
  const char* noun;     // "rate"
  const char* example;  // "9.5Gbit/s"
  const char* base;     // unit of the result, for the overflow message
};

template <size_t N>
Result<uint64_t> parse_quantity(std::string_view text, const std::array<Unit, N>& units, const Kind& kind) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const std::string expected = std::string("(expected e.g. \"") + kind.example + "\")";
  auto fail = [&](const std::string& why) {
    return Result<uint64_t>::failure(quoted + " is not a " + kind.noun + " " + expected + ": " + why);
  };

  if (text.empty()) {
    return Result<uint64_t>::failure(std::string("empty ") + kind.noun + " " + expected);
  }
  if (text.front() == '-') return fail("negative values are not allowed");
  if (text.front() == '+') return fail("no sign allowed");

  // Split "<digits>[.<digits>]" from the unit.
  size_t pos = 0;
  while (pos < text.size() && (text[pos] == '.' || (text[pos] >= '0' && text[pos] <= '9'))) {
    ++pos;
  }
  const std::string_view number = text.substr(0, pos);
  const std::string_view unit_text = text.substr(pos);
  if (number.empty()) return fail("it does not start with a number");

  const size_t dot = number.find('.');
  std::string_view int_digits = number.substr(0, dot);
  std::string_view frac_digits = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
  if (dot != std::string_view::npos &&
      (int_digits.empty() || frac_digits.empty() || frac_digits.find('.') != std::string_view::npos)) {
    return fail("malformed number \"" + std::string(number) + "\"");
  }

  if (unit_text.empty()) return fail("missing unit");
  const Unit* unit = nullptr;
  for (const Unit& u : units) {
    if (u.name == unit_text) unit = &u;
  }
  if (unit == nullptr) {
    std::string names;
    for (const Unit& u : units) {
      names += names.empty() ? "" : ", ";
      names += u.name;
    }
    return fail("unknown unit \"" + std::string(unit_text) + "\"; units (case-sensitive): " + names);
  }

  // Leading zeros of the integer part and trailing zeros of the fraction do
  // not count towards the digit limits.
  while (int_digits.size() > 1 && int_digits.front() == '0') int_digits.remove_prefix(1);
  while (!frac_digits.empty() && frac_digits.back() == '0') frac_digits.remove_suffix(1);

  const std::string too_large =
      quoted + " is too large (at most " + std::to_string(std::numeric_limits<uint64_t>::max()) + " " + kind.base + ")";
  if (int_digits.size() > kMaxIntegerDigits) return Result<uint64_t>::failure(too_large);
  if (frac_digits.size() > kMaxFractionDigits) {
    return fail("more than " + std::to_string(kMaxFractionDigits) + " digits after the point");
  }

  u128 whole = 0;
  for (char c : int_digits) whole = whole * 10 + static_cast<unsigned>(c - '0');
  u128 frac = 0;
  u128 frac_scale = 1;
  for (char c : frac_digits) {
    frac = frac * 10 + static_cast<unsigned>(c - '0');
    frac_scale *= 10;
  }

  // whole < 1e20 and multiplier <= 1e12: the product fits in 128 bits.
  const u128 scaled_whole = whole * unit->multiplier;
  const u128 scaled_frac = frac * unit->multiplier;  // < 1e24 * 1e12
  u128 frac_units = scaled_frac / frac_scale;
  if ((scaled_frac % frac_scale) * 2 >= frac_scale) ++frac_units;  // round half up
  const u128 total = scaled_whole + frac_units;
  if (total > std::numeric_limits<uint64_t>::max()) return Result<uint64_t>::failure(too_large);
  return static_cast<uint64_t>(total);
}

}  // namespace

Result<uint64_t> parse_rate_bps(std::string_view text) {
  return parse_quantity(text, kRateUnits, Kind{"rate", "9.5Gbit/s", "bit/s"});
}

Result<uint64_t> parse_size_bytes(std::string_view text) {
  return parse_quantity(text, kSizeUnits, Kind{"size", "64KiB", "bytes"});
}

Result<uint64_t> parse_share_permille(std::string_view text) {
  return parse_quantity(text, kShareUnits, Kind{"share", "25%", "per mille"});
}

Result<uint64_t> parse_duration_ns(std::string_view text) {
  return parse_quantity(text, kDurationUnits, Kind{"duration", "500ms", "ns"});
}

Result<double> parse_seconds(std::string_view text, double max) {
  const std::string copy(text);  // strtod needs the terminating NUL
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(copy.c_str(), &end);
  // ERANGE with 0: a value too small to be told from 0 ("1e-400" read as 0
  // would mean "until signalled" for a duration); a tiny one that is still
  // a number (subnormal, also ERANGE) is taken, and too large is past max.
  // Decimal digits only: strtod also takes leading blanks and C's hex
  // floats ("0x10" is 16 s), neither of which a duration is written as.
  const bool decimal = !copy.empty() && copy.find_first_not_of("0123456789.eE+-") == std::string::npos;
  if (!decimal || end != copy.c_str() + copy.size() || (errno == ERANGE && v == 0) || !(v >= 0 && v <= max)) {
    // 1e8 as "1e8", as --help writes it (cli_checks.h), not %g's "1e+08".
    char bound[32];
    const int exp = max >= 1e4 ? static_cast<int>(std::lround(std::log10(max))) : -1;
    if (exp > 0 && std::pow(10.0, exp) == max) std::snprintf(bound, sizeof(bound), "1e%d", exp);
    else std::snprintf(bound, sizeof(bound), "%g", max);
    return Result<double>::failure("not a number of seconds from 0 to " + std::string(bound));
  }
  return v;
}

Result<uint64_t> parse_uint(std::string_view text, uint64_t min, uint64_t max) {
  auto range = [&] {
    return "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
           " in decimal digits, not '" + escape_control_chars(text) + "'";  // never a terminal's escape
  };
  if (text.empty() || text.front() < '0' || text.front() > '9') return Result<uint64_t>::failure(range());
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return Result<uint64_t>::failure(range());
  }
  return value;
}

namespace {

// The largest unit that divides `v` exactly, so the text parses back to `v`.
std::string exact(uint64_t v, std::initializer_list<std::pair<uint64_t, const char*>> units, const char* one) {
  for (const auto& [factor, name] : units)
    if (v != 0 && v % factor == 0) return std::to_string(v / factor) + name;
  return std::to_string(v) + one;
}

}  // namespace

std::string rate_text_exact(uint64_t bps) {
  return exact(bps, {{1'000'000'000, "Gbit/s"}, {1'000'000, "Mbit/s"}, {1'000, "kbit/s"}}, "bit/s");
}

std::string size_text_exact(uint64_t bytes) {
  return exact(bytes, {{1u << 30, "GiB"}, {1u << 20, "MiB"}, {1u << 10, "KiB"}}, "B");
}

std::string duration_text_exact(uint64_t ns) {
  if (ns == 0) return "0s";
  return exact(ns, {{1'000'000'000, "s"}, {1'000'000, "ms"}, {1'000, "us"}}, "ns");
}

std::optional<std::string> check_rate_bps(uint64_t bps) {
  if (bps < kMinRateBps) return "must be at least 8bit/s (1 byte/s)";
  // Buckets count whole bytes per second. Truncating would run another rate
  // than the one written, and compare a floor against a cap by what neither
  // says (1000007bit/s "fits" under 1Mbit/s): refuse, naming what would fit.
  const uint64_t below = bits_per_sec(bytes_per_sec(bps));
  if (below != bps) {
    std::string fits = "\"" + rate_text_exact(below) + "\"";
    if (below <= std::numeric_limits<uint64_t>::max() - 8) fits += " or \"" + rate_text_exact(below + 8) + "\"";
    return rate_text_exact(bps) + " is not a whole number of bytes per second, the unit rates run in: give " + fits;
  }
  return std::nullopt;
}

}  // namespace psgate
