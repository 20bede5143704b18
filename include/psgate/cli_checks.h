// SPDX-License-Identifier: BSD-3-Clause
// CLI11 checks shared by psgate, psgatectl and psgate-gen, so one option type
// is refused with one message in every program.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "psgate/units.h"

namespace psgate::cli {

// A CLI11 check from a function that returns "" when the text is acceptable.
inline CLI::Validator check(std::function<std::string(const std::string&)> fn) {
  return CLI::Validator([fn = std::move(fn)](std::string& s) { return fn(s); }, "");
}

// Plain seconds from 0 to `max` (parse_seconds: NaN and trailing text
// refused). --help shows the range ("FLOAT:0..1e8 s"), so that the limit a
// value is refused at is one the help told of.
inline CLI::Validator seconds_up_to(double max) {
  // 100000000 as "1e8": trailing zeros as an exponent from four on.
  auto text = [](double v) {
    unsigned long long m = static_cast<unsigned long long>(v);
    int exp = 0;
    while (m >= 10 && m % 10 == 0) m /= 10, ++exp;
    return exp >= 4 ? std::to_string(m) + "e" + std::to_string(exp)
                    : std::to_string(static_cast<unsigned long long>(v));
  };
  return CLI::Validator(
      [max](std::string& s) -> std::string {
        const auto r = parse_seconds(s, max);
        return r ? "" : r.error();
      },
      "0.." + text(max) + " s");
}

}  // namespace psgate::cli
