// SPDX-License-Identifier: BSD-3-Clause
// Control-socket requests as typed values: one request line (or one JSON
// request object) -> a ControlRequest, or the error reply's text. The commands
// themselves (names, arguments, help, parsers) are listed in
// control_commands.h. Pure: no DPDK, no state. Everything that can be checked from the request alone is checked
// here (types, ranges, units, rules, floor <= cap within one request); checks
// that need the gateway's state (unknown job id, a floor above the class's
// current cap) stay in ControlPlane. See docs/control-protocol.md.
//
// Every error is one line: control characters from the request are escaped
// (\n, \t, \xNN), so an error can be printed or logged as is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "psgate/config.h"
#include "psgate/match_rule.h"
#include "psgate/policy.h"
#include "psgate/result.h"
#include "psgate/text.h"

namespace psgate {

// The protocol's version (health's "protocol"). 2: the job argument of
// jobs.add, jobs.remove, rank and progress is "job"; "id" is only ever the
// request id the reply echoes. Protocol 1's form, the job as "id" (and no
// "job"), is still read until protocol 3, and its reply carries
// "deprecated": kControlIdAsJobDeprecation.
inline constexpr int kControlProtocolVersion = 2;
inline constexpr const char* kControlIdAsJobDeprecation =
    "\"id\" as the job id is deprecated since protocol 2 and goes in protocol 3: send the job as \"job\" "
    "(\"id\" is the request id the reply echoes)";

// One request line, without its newline (the control server's framing limit;
// psgatectl splits a large jobs.load by it).
inline constexpr size_t kMaxRequestBytes = 64 * 1024;

// Limits the parser enforces: the config's (psgate/config.h), so that the
// socket and the file accept the same values. The handlers check the values
// in force with the config's own functions (check_class, check_shaper, check_job).
inline constexpr uint64_t kControlMinRateBps = kMinRateBps;
inline constexpr uint64_t kControlMinBurstBytes = kMinBurstBytes;
inline constexpr uint64_t kControlMaxBurstBytes = kMaxBurstBytes;
inline constexpr uint64_t kControlDefaultBurstBytes = kDefaultBurstBytes;
inline constexpr uint32_t kControlMaxEcnThreshold = kMaxClassDepth - 1;  // below the largest depth
inline constexpr size_t kControlMaxJobNameChars = kMaxNameBytes;         // and the rest of name_problem (text.h)

// A tri-state argument: absent (leave as is), null (remove), or a value.
template <typename T>
struct Change {
  bool present = false;
  std::optional<T> value;  // nullopt with present: null, i.e. remove
  bool operator==(const Change&) const = default;
};

struct HealthRequest {};
struct JobsListRequest {};
struct JobsAddRequest {
  uint32_t id = 0;   // >= 1
  std::string name;  // empty: the registry names the job "job-<id>"; else a valid name (text.h: name_problem)
  std::vector<MatchRule> rules;    // at least one
  std::optional<uint32_t> rank;    // absent: after every job
  std::optional<RateSpec> police;  // rate >= 8bit/s; burst 64B..512MiB (default 64KiB)
};
// Many jobs in one all-or-nothing change: every job is added, or none is
// (a bad job, a duplicate id or no free slot refuses the whole request).
// Partitions are filled in order, so only new partitions are built.
struct JobsLoadRequest {
  std::vector<JobsAddRequest> jobs;  // at least one
};
struct JobsRemoveRequest {
  uint32_t id = 0;
};
struct OrderRequest {
  std::vector<uint32_t> ids;  // highest priority first; distinct; may be empty
};
struct RankRequest {
  uint32_t id = 0;
  uint32_t rank = 0;
};
struct ClassSetRequest {
  unsigned port = 0;  // index into kPortNames: 0 = wire, 1 = host
  unsigned cls = 0;   // < class_count
  // Rates in bits per second (>= 8bit/s); bursts in bytes, 0 or 64B..512MiB
  // (0: the default 64KiB once a rate is set). A null burst changes nothing.
  Change<uint64_t> cap_bps;
  Change<uint64_t> cap_burst_bytes;
  Change<uint64_t> floor_bps;
  Change<uint64_t> floor_burst_bytes;
  std::optional<uint32_t> ecn_threshold;  // packets, 0 = off, <= 65535
  Change<uint8_t> dscp;                   // 0..63; null: leave DSCP as is
};
struct ShaperSetRequest {
  unsigned port = 0;                    // index into kPortNames
  std::optional<uint64_t> rate_bps;     // required argument; null (nullopt): unshaped; else >= 8bit/s
  std::optional<uint64_t> burst_bytes;  // 0 or 64B..512MiB; absent or null: keep the current burst
};
struct ProgressRequest {
  uint32_t id = 0;
  std::optional<double> fraction;  // 0..1
  std::optional<uint64_t> iteration;
  std::optional<uint64_t> batch;  // at least one of the three is given
};
struct PolicyRequest {
  std::optional<PolicyKind> kind;       // absent: show the current policy (other arguments are ignored)
  std::optional<uint64_t> interval_ns;  // >= 1ms; absent: the policy's default
  std::optional<RotateOn> rotate_on;    // round-robin only
};
struct StatsRequest {};
struct ConfigRequest {};
struct ClusterRequest {};
struct ReloadRequest {};

// One alternative per command, in control_commands()'s order.
using ControlRequest = std::variant<HealthRequest, JobsListRequest, JobsAddRequest, JobsLoadRequest, JobsRemoveRequest,
                                    OrderRequest, RankRequest, ClassSetRequest, ShaperSetRequest, ProgressRequest,
                                    PolicyRequest, StatsRequest, ConfigRequest, ClusterRequest, ReloadRequest>;

// One request line (without or with its '\n') -> a typed request; malformed
// JSON is an error like any other. This is the control server's only way from
// a line to a request, and what fuzz_control_request exercises. `echo_id`,
// when given, receives the request's "id" member (to echo in the reply) if the
// line is a JSON object that has one. A key repeated in any object of the
// line is refused ("duplicate key"); the id is then echoed only if it is not
// the repeated key. `deprecation`, when given, receives a notice for the
// reply when the request uses a deprecated form. Never throws.
Result<ControlRequest> parse_control_line(std::string_view line, unsigned class_count,
                                          std::optional<nlohmann::json>* echo_id = nullptr,
                                          std::string* deprecation = nullptr);

// JSON text parsed once, with the first key repeated in any of its objects:
// a parsed json keeps only the last of repeated keys, which a request must
// not be read by. parse_control_line's parse, and psgatectl's for a jobs
// file (checked before anything is sent). `value` is discarded when the text
// is not JSON.
struct JsonNotingDuplicates {
  nlohmann::json value;
  std::optional<std::string> duplicate;  // the first repeated key ("" is a key too)
  bool id_repeated = false;              // "id" repeated in the outermost object (whichever key came first)
  // Nested deeper than kMaxJsonDepth: the deep part is not built (copying
  // and dumping a JSON value recurse once per level; no request needs more
  // than a few), and the text is to be refused.
  bool too_deep = false;
};
inline constexpr int kMaxJsonDepth = 64;
JsonNotingDuplicates parse_json_noting_duplicates(std::string_view text);
// Why a document read with it is to be refused as a request would be (too
// deep, not JSON, a repeated key), or none: for the files and store
// documents that are as strict as requests (jobs files, cluster documents).
std::optional<std::string> strict_json_problem(const JsonNotingDuplicates& parsed);
// JSON from a file or a store, whoever wrote it: discarded (is_discarded())
// when it is not JSON or is nested deeper than kMaxJsonDepth (copying it
// would recurse once per level: a value of 100k '[' would end the process).
nlohmann::json parse_json_bounded(std::string_view text);
// What a text is, found in one pass that builds nothing: JSON within
// kMaxJsonDepth, JSON nested deeper (whatever follows the deep part), or not
// JSON. Then a plain parse (without a callback: nlohmann's parser with one
// takes time quadratic in an array's length) builds a value safe to copy.
enum class JsonShape { kJson, kTooDeep, kNotJson };
JsonShape json_shape(std::string_view text);

// One request object -> a typed request: the command table's parser for its
// "cmd" (control_commands.h). `class_count` is the configured number of
// classes (2..64); class.set's "class" must be below it. A key that is not
// "cmd", "id" or one of the command's arguments is refused, naming the
// nearest argument. Never throws.
Result<ControlRequest> parse_control_request(const nlohmann::json& request, unsigned class_count,
                                             std::string* deprecation = nullptr);

}  // namespace psgate
