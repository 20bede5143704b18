// SPDX-License-Identifier: BSD-3-Clause
// CLI11 checks shared by psgate, psgatectl and psgate-gen, so one option type
// is refused with one message in every program.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "psgate/units.h"

namespace psgate::cli {

// A CLI11 check from a function that returns "" when the text is acceptable.
inline CLI::Validator check(std::function<std::string(const std::string&)> fn) {
  return CLI::Validator([fn = std::move(fn)](std::string& s) { return fn(s); }, "");
}

// Plain seconds from 0 to `max` (parse_seconds: NaN and trailing text
// refused). --help shows the range (psgate-gen's --duration:
// "FLOAT:0..1e8 s"), so that the limit a value is refused at is one the help
// told of.
inline CLI::Validator seconds_up_to(double max) {
  // 100000000 as "1e8" (whole powers of ten from 1e4 up), else as %g does.
  auto text = [](double v) {
    int exp = 0;
    double m = v;
    while (m >= 10 && m < 9e18 && m == static_cast<double>(static_cast<long long>(m)) &&
           static_cast<long long>(m) % 10 == 0)
      m /= 10, ++exp;
    if (m == 1 && exp >= 4) return "1e" + std::to_string(exp);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return std::string(buf);
  };
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        const auto r = parse_seconds(s, max);
        return r ? "" : r.error();
      },
      "0.." + text(max) + " s");
}

// A whole number from `min` to `max` in decimal digits (parse_uint: hex,
// octal, signs and fractions refused, where CLI11's own reading of an
// integer takes "0x10" as 16 and "010" as 8). --help shows the range
// ("N:1..64"). The option is best a string, converted with parse_uint once
// checked: CLI11 would read an integer option's text in its own way again.
inline CLI::Validator whole_number(uint64_t min, uint64_t max) {
  return CLI::Validator(
      [min, max](std::string& s) -> std::string {
        const auto r = parse_uint(s, min, max);
        return r ? "" : r.error();
      },
      std::to_string(min) + ".." + std::to_string(max));
}

}  // namespace psgate::cli
