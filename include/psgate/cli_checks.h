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

// Plain seconds from 0 to `max` (parse_seconds: NaN and trailing text refused).
inline CLI::Validator seconds_up_to(double max) {
  return check([max](const std::string& s) -> std::string {
    const auto r = parse_seconds(s, max);
    return r ? "" : r.error();
  });
}

}  // namespace psgate::cli
