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
#include <string_view>

#include "psgate/result.h"

namespace psgate {

Result<uint64_t> parse_rate_bps(std::string_view text);
Result<uint64_t> parse_size_bytes(std::string_view text);
Result<uint64_t> parse_duration_ns(std::string_view text);
Result<uint64_t> parse_share_permille(std::string_view text);

// Users state rates in bit/s; token buckets run in bytes per second. These two
// are the only places the factor 8 is written.
constexpr uint64_t bytes_per_sec(uint64_t bits_per_sec) { return bits_per_sec / 8; }
// And back, for replies (a rate shows as what is in force, a multiple of 8).
constexpr uint64_t bits_per_sec(uint64_t bytes_per_sec) { return bytes_per_sec * 8; }

}  // namespace psgate
