// SPDX-License-Identifier: BSD-3-Clause
// psgatectl's command line: argv -> one control-protocol request
// (docs/control-protocol.md). The subcommands, their arguments and their help
// come from the protocol's command table (psgate/control_commands.h); values
// are checked on this side with the same parsers the daemon uses, so a typo
// is a usage error (exit 2) before anything is sent.
// No I/O here: parse_command_line returns the text CLI11 would print, which
// keeps the mapping table-testable.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "psgate/result.h"
#include "psgate/units.h"

namespace psgatectl {

inline constexpr const char* kDefaultSocket = "/run/psgate/psgate.sock";
inline constexpr uint64_t kDefaultTimeoutMs = 5000;
inline constexpr uint64_t kMaxTimeoutNs = 24ull * 3600 * 1'000'000'000;  // --timeout

// Exit status of psgatectl (docs/control-protocol.md, "psgatectl").
enum ExitCode : int {
  kExitOk = 0,
  kExitRefused = 1,      // the daemon answered {"ok": false, "error": ...}
  kExitUsage = 2,        // bad command line, rejected before sending
  kExitUnreachable = 3,  // no usable reply: cannot connect, timeout, EOF, garbage, another shape or protocol
};

// Which command was given; selects how the reply is printed.
enum class Kind {
  kHealth,
  kJobsList,
  kJobsAdd,
  kJobsLoad,
  kJobsRemove,
  kOrder,
  kRank,
  kClassSet,
  kShaperSet,
  kProgress,
  kPolicyShow,
  kPolicySet,
  kStats,
  kStatsWatch,
  kConfig,
  kConfigToml,  // config --toml
  kCluster,
  kReload,
};

struct Invocation {
  Kind kind = Kind::kHealth;
  nlohmann::json request;    // exactly the line sent (without the '\n')
  bool json_output = false;  // --json: print the daemon's result verbatim
  std::string socket;
  uint64_t timeout_ms = kDefaultTimeoutMs;  // per request, connect + send + reply
  uint64_t watch_count = 0;                 // stats --watch --count N; 0 = until Ctrl-C
};

struct ParseOutcome {
  // Set when a request is to be sent. Otherwise the command line was handled
  // here (help, or a usage error) and `out`/`err` hold what to print and
  // `exit_code` the status (kExitOk after --help, kExitUsage on errors).
  std::optional<Invocation> invocation;
  int exit_code = kExitOk;
  std::string out;
  std::string err;
};

// env_socket: the value of $PSGATE_SOCKET, or nullptr when unset.
ParseOutcome parse_command_line(int argc, const char* const* argv, const char* env_socket);

// Strict parsers for the numbers on the command line (decimal digits only: no
// sign, no "0x", no leading '+', no trailing text). Errors read "... must be ...".
// parse_uint is psgate's, shared with psgate-gen (psgate/units.h).
using psgate::parse_uint;
psgate::Result<double> parse_fraction(std::string_view text);  // 0 <= x <= 1

}  // namespace psgatectl
