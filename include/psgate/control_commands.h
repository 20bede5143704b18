// SPDX-License-Identifier: BSD-3-Clause
// The control protocol's commands, as one table (src/control/control_commands.cc):
// each command's wire name, psgatectl's words for it, its help line, its
// arguments (name, type, required, help) and the parser that turns a request
// into a typed value. Everything that lists commands reads this table:
//
//   control socket   parse_control_line -> the command's parser -> ControlPlane::apply
//                    (the handler: the overload for the parser's request type)
//   psgatectl        subcommands, options, --help and the argv -> request mapping
//   docs             tests check docs/control-protocol.md against it
//
// Pure: no DPDK, no state.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include <nlohmann/json.hpp>

#include "psgate/control_request.h"
#include "psgate/result.h"

namespace psgate {

// What an argument holds, in the request and on psgatectl's command line.
enum class ArgType {
  kJobId,     // a job id, 1..2^32-1
  kJobIds,    // a list of job ids, each at most once
  kUint,      // a whole number within [min, max]
  kRate,      // a rate with its unit: "300Mbit/s"
  kSize,      // a size with its unit: "64KiB"
  kDuration,  // a duration with its unit: "20s"
  kPort,      // "wire" or "host" (kPortNames)
  kRules,     // a list of match rules, at least one: "dst=10.0.0.5/32,dport=2222,proto=tcp"
  kJobs,      // a list of job objects, each with jobs.add's arguments (psgatectl: a JSON file of them)
  kText,      // a string
  kFraction,  // a number from 0 to 1
  kPolicy,    // a policy name (kPolicyNames)
  kRotateOn,  // "time" or "iteration"
};

struct ArgSpec {
  const char* name = "";  // the key in the request object
  ArgType type = ArgType::kText;
  bool required = false;
  bool nullable = false;  // null is a value: remove ("none" on psgatectl's command line)
  uint64_t min = 0;       // kUint only
  uint64_t max = UINT64_MAX;
  const char* cli = "";      // psgatectl: "ID" (a positional) or "--police-burst", "-m,--match"
  const char* help = "";     // one line, for psgatectl --help and the docs
  const char* example = "";  // a valid value as psgatectl takes it

  constexpr ArgSpec range(uint64_t lo, uint64_t hi) const {
    ArgSpec a = *this;
    a.min = lo;
    a.max = hi;
    return a;
  }
  constexpr ArgSpec or_null() const {
    ArgSpec a = *this;
    a.nullable = true;
    return a;
  }
};

using ControlParser = Result<ControlRequest> (*)(const nlohmann::json& request, unsigned class_count);

struct CommandSpec {
  const char* name = "";  // "cmd" in the request: "jobs.add"
  const char* cli = "";   // psgatectl's words: "jobs add"
  const char* help = "";  // one line
  std::span<const ArgSpec> args;
  // Checks the request's arguments; the variant alternative it returns picks
  // the daemon's handler. Reached only through parse_control_request.
  ControlParser parse = nullptr;
  // Changes nothing, whatever its arguments: a reply nobody can read (the
  // client hung up) is not worth running it for (ControlPlane::handle_line).
  bool reads_only = false;
};

// Every command, in the protocol document's order; the i-th command's parser
// yields ControlRequest's i-th alternative.
std::span<const CommandSpec> control_commands();

// nullptr when no command has that wire name.
const CommandSpec* find_control_command(std::string_view name);

}  // namespace psgate
