// SPDX-License-Identifier: BSD-3-Clause
// Parsing of user-facing quantities. Every rate and size in the config and on
// the control socket carries its unit, so "1G" can never be misread.
//
//   rates:     "9.5Gbit/s", "100Mbit/s", "1.5kbit/s", "800bit/s", "10Gbps"
//              SI multipliers (k = 1000). Result: bits per second.
//   sizes:     "64KiB", "1MiB", "1500B", "2KB" (KiB/MiB/GiB are 1024-based,
//              KB/MB/GB 1000-based). Result: bytes.
//   durations: "500ms", "20s", "100us", "250ns", "1.5s". Result: nanoseconds.
//   shares:    "25%", "12.5%", "100%". Result: per mille (rounded half up).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "psgate/result.h"

namespace psgate {

Result<uint64_t> parse_rate_bps(std::string_view text);
Result<uint64_t> parse_size_bytes(std::string_view text);
Result<uint64_t> parse_duration_ns(std::string_view text);
Result<uint64_t> parse_share_permille(std::string_view text);

// A command-line time in plain seconds ("2.5", "1e3"), from 0 to `max`. One
// check refuses NaN too: a range test alone lets it through (every
// comparison with NaN is false), and it then ran forever or was ignored.
Result<double> parse_seconds(std::string_view text, double max);

// A command-line whole number from `min` to `max`, in decimal digits only:
// no sign, blank, fraction, exponent or "0x" (strtol, and so CLI11, reads
// "0x10" as 16 and "010" as 8). The one check for psgatectl's and
// psgate-gen's number options; the error reads "must be ...".
Result<uint64_t> parse_uint(std::string_view text, uint64_t min, uint64_t max);

// Users state rates in bit/s; token buckets run in bytes per second. These two
// are the only places the factor 8 is written.
constexpr uint64_t bytes_per_sec(uint64_t bits_per_sec) { return bits_per_sec / 8; }
// And back, for replies (a rate shows as what is in force, a multiple of 8).
constexpr uint64_t bits_per_sec(uint64_t bytes_per_sec) { return bytes_per_sec * 8; }

// The lowest rate any input may set: below 1 byte/s a bucket never refills.
inline constexpr uint64_t kMinRateBps = 8;
// Why `bps` cannot be a rate in force, or nullopt: at least 8bit/s, and a
// whole number of bytes per second. The one check for the config loader,
// the control socket, the state file and the cluster store.
std::optional<std::string> check_rate_bps(uint64_t bps);

// Exact text forms the parsers above read back to the same number: the
// largest unit that divides the value ("100Mbit/s", "12500kbit/s", "64KiB",
// "1500B", "500ms", "20s").
std::string rate_text_exact(uint64_t bits_per_second);
std::string size_text_exact(uint64_t bytes);
std::string duration_text_exact(uint64_t ns);

}  // namespace psgate
