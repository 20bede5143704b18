// SPDX-License-Identifier: BSD-3-Clause
// parse_control_line / parse_control_request: every command with good
// arguments (the typed result checked field by field), and every class of bad
// input with the exact error an operator reads (each names the argument, or
// quotes the registry's wording where the check moved from JobRegistry).
// Requests are written as the lines a client sends, so integers go through the
// same JSON parser as on the socket.
#include "psgate/control_commands.h"
#include "psgate/control_request.h"

#include "finishes_within.h"
#include "psgate/request_lines.h"
#include "psgate/text.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <variant>

namespace psgate {
namespace {

using json = nlohmann::json;

constexpr unsigned kClasses = 8;

MatchRule rule(const char* text) {
  auto r = parse_match_rule(text);
  EXPECT_TRUE(r.ok()) << text;
  return r.ok() ? *r : MatchRule{};
}

template <typename T>
const T& as(const Result<ControlRequest>& r, const std::string& line) {
  static const T kEmpty{};
  EXPECT_TRUE(r.ok()) << line << ": " << r.error();
  if (!r.ok()) return kEmpty;
  EXPECT_TRUE(std::holds_alternative<T>(*r)) << line << ": parsed as variant index " << r->index();
  return std::holds_alternative<T>(*r) ? std::get<T>(*r) : kEmpty;
}

template <typename T>
Change<T> absent() {
  return {};
}
template <typename T>
Change<T> removed() {
  return {true, std::nullopt};
}
template <typename T>
Change<T> set(T v) {
  return {true, v};
}

// ---- good requests ---------------------------------------------------------

struct Good {
  std::string line;
  unsigned class_count;
  std::function<void(const Result<ControlRequest>&, const std::string&)> check;
};

TEST(ControlRequest, GoodRequestsParseToTypedValues) {
  const std::vector<Good> cases = {
      {R"({"cmd":"health"})", kClasses, [](auto& r, auto& l) { as<HealthRequest>(r, l); }},
      // The echoed "id" may be any JSON value.
      {R"({"cmd":"health","id":"req-1"})", kClasses, [](auto& r, auto& l) { as<HealthRequest>(r, l); }},
      {R"({"cmd":"jobs.list"})", kClasses, [](auto& r, auto& l) { as<JobsListRequest>(r, l); }},
      {R"({"cmd":"stats","id":[1,2]})", kClasses, [](auto& r, auto& l) { as<StatsRequest>(r, l); }},
      {"{\"cmd\":\"config\"}\n", kClasses, [](auto& r, auto& l) { as<ConfigRequest>(r, l); }},
      {R"({"cmd":"jobs.add","job":7,"match":["dst=10.0.0.5/32,dport=2222,proto=tcp"]})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<JobsAddRequest>(r, l);
         EXPECT_EQ(q.id, 7u);
         EXPECT_EQ(q.name, "");
         ASSERT_EQ(q.rules.size(), 1u);
         EXPECT_EQ(q.rules[0], rule("dst=10.0.0.5/32,dport=2222,proto=tcp"));
         EXPECT_FALSE(q.rank);
         EXPECT_FALSE(q.police);
       }},
      {R"({"cmd":"jobs.add","job":4294967295,"name":"resnet-a","rank":0,"police":"300Mbit/s",)"
       R"("police_burst":"128KiB","match":["src=fd00::5/128,sport=2222-2230,proto=udp",""]})",
       kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<JobsAddRequest>(r, l);
         EXPECT_EQ(q.id, 4294967295u);
         EXPECT_EQ(q.name, "resnet-a");
         ASSERT_EQ(q.rules.size(), 2u);
         EXPECT_EQ(q.rules[0], rule("src=fd00::5/128,sport=2222-2230,proto=udp"));
         EXPECT_EQ(q.rules[1], MatchRule{});  // the empty rule matches every IP packet
         EXPECT_EQ(q.rank, std::optional<uint32_t>(0));
         ASSERT_TRUE(q.police);
         EXPECT_EQ(q.police->rate_bps, 300'000'000u);
         EXPECT_EQ(q.police->burst_bytes, 128u * 1024);
       }},
      {R"({"cmd":"jobs.add","job":1,"match":["proto=tcp"],"police":"1Gbit/s"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<JobsAddRequest>(r, l);
         ASSERT_TRUE(q.police);
         EXPECT_EQ(q.police->rate_bps, 1'000'000'000u);
         EXPECT_EQ(q.police->burst_bytes, kControlDefaultBurstBytes);
         EXPECT_EQ(q.name, "");
       }},
      // null police: no policer.
      {R"({"cmd":"jobs.add","job":2,"match":["proto=udp"],"police":null})", kClasses,
       [](auto& r, auto& l) { EXPECT_FALSE(as<JobsAddRequest>(r, l).police); }},
      {R"({"cmd":"jobs.add","job":2,"match":["proto=udp"],"name":")" + std::string(64, 'n') + R"("})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<JobsAddRequest>(r, l).name.size(), 64u); }},
      {R"({"cmd":"jobs.remove","job":3})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<JobsRemoveRequest>(r, l).id, 3u); }},
      {R"({"cmd":"order","ids":[3,1,2]})", kClasses,
       [](auto& r, auto& l) {
         EXPECT_EQ(as<OrderRequest>(r, l).ids, (std::vector<uint32_t>{3, 1, 2}));
       }},
      {R"({"cmd":"order","ids":[]})", kClasses,
       [](auto& r, auto& l) { EXPECT_TRUE(as<OrderRequest>(r, l).ids.empty()); }},
      {R"({"cmd":"rank","job":3,"rank":4294967295})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<RankRequest>(r, l);
         EXPECT_EQ(q.id, 3u);
         EXPECT_EQ(q.rank, 4294967295u);
       }},
      {R"({"cmd":"class.set","port":"host","class":7,"cap":"1Gbit/s","cap_burst":"1MiB","floor":"100Mbit/s",)"
       R"("floor_burst":null,"ecn_threshold":64,"dscp":46})",
       kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ClassSetRequest>(r, l);
         EXPECT_EQ(q.port, 1u);
         EXPECT_EQ(q.cls, 7u);
         EXPECT_EQ(q.cap_bps, set<uint64_t>(1'000'000'000));
         EXPECT_EQ(q.cap_burst_bytes, set<uint64_t>(1 << 20));
         EXPECT_EQ(q.floor_bps, set<uint64_t>(100'000'000));
         EXPECT_EQ(q.floor_burst_bytes, removed<uint64_t>());
         EXPECT_EQ(q.ecn_threshold, std::optional<uint32_t>(64));
         EXPECT_EQ(q.dscp, set<uint8_t>(46));
       }},
      {R"({"cmd":"class.set","port":"wire","class":0,"cap":null,"floor":null,"dscp":null,"ecn_threshold":0})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ClassSetRequest>(r, l);
         EXPECT_EQ(q.port, 0u);
         EXPECT_EQ(q.cls, 0u);
         EXPECT_EQ(q.cap_bps, removed<uint64_t>());
         EXPECT_EQ(q.cap_burst_bytes, absent<uint64_t>());
         EXPECT_EQ(q.floor_bps, removed<uint64_t>());
         EXPECT_EQ(q.floor_burst_bytes, absent<uint64_t>());
         EXPECT_EQ(q.ecn_threshold, std::optional<uint32_t>(0));
         EXPECT_EQ(q.dscp, removed<uint8_t>());
       }},
      {R"({"cmd":"class.set","port":"wire","class":63,"dscp":0,"ecn_threshold":65535})", 64,
       [](auto& r, auto& l) {
         const auto& q = as<ClassSetRequest>(r, l);
         EXPECT_EQ(q.cls, 63u);
         EXPECT_EQ(q.cap_bps, absent<uint64_t>());
         EXPECT_EQ(q.dscp, set<uint8_t>(0));
         EXPECT_EQ(q.ecn_threshold, std::optional<uint32_t>(65535));
       }},
      // Bounds: 8bit/s, 64B, 512MiB; a burst of 0 means "the default".
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"8bit/s","floor":"8bit/s","cap_burst":"64B",)"
       R"("floor_burst":"512MiB"})",
       2,
       [](auto& r, auto& l) {
         const auto& q = as<ClassSetRequest>(r, l);
         EXPECT_EQ(q.cap_bps, set<uint64_t>(8));
         EXPECT_EQ(q.floor_bps, set<uint64_t>(8));  // equal to the cap: allowed
         EXPECT_EQ(q.cap_burst_bytes, set<uint64_t>(64));
         EXPECT_EQ(q.floor_burst_bytes, set<uint64_t>(512u << 20));
       }},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap_burst":"0B"})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<ClassSetRequest>(r, l).cap_burst_bytes, set<uint64_t>(0)); }},
      {R"({"cmd":"shaper.set","port":"wire","rate":"9.5Gbit/s","burst":"64KiB"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ShaperSetRequest>(r, l);
         EXPECT_EQ(q.port, 0u);
         EXPECT_EQ(q.rate_bps, std::optional<uint64_t>(9'500'000'000));
         EXPECT_EQ(q.burst_bytes, std::optional<uint64_t>(65536));
       }},
      {R"({"cmd":"shaper.set","port":"host","rate":null,"burst":null})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ShaperSetRequest>(r, l);
         EXPECT_EQ(q.port, 1u);
         EXPECT_FALSE(q.rate_bps);
         EXPECT_FALSE(q.burst_bytes);
       }},
      {R"({"cmd":"progress","job":3,"fraction":0.25})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ProgressRequest>(r, l);
         EXPECT_EQ(q.id, 3u);
         EXPECT_EQ(q.fraction, std::optional<double>(0.25));
         EXPECT_FALSE(q.iteration);
         EXPECT_FALSE(q.batch);
       }},
      {R"({"cmd":"progress","job":3,"fraction":1,"iteration":18446744073709551615,"batch":0})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ProgressRequest>(r, l);
         EXPECT_EQ(q.fraction, std::optional<double>(1.0));
         EXPECT_EQ(q.iteration, std::optional<uint64_t>(UINT64_MAX));
         EXPECT_EQ(q.batch, std::optional<uint64_t>(0));
       }},
      // -0.0 is 0: it was stored as such and shown as "-0.0%".
      {R"({"cmd":"progress","job":3,"fraction":-0.0})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ProgressRequest>(r, l);
         ASSERT_TRUE(q.fraction);
         EXPECT_EQ(*q.fraction, 0.0);
         EXPECT_FALSE(std::signbit(*q.fraction));
       }},
      {R"({"cmd":"progress","job":3,"batch":12})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<ProgressRequest>(r, l).batch, std::optional<uint64_t>(12)); }},
      {R"({"cmd":"policy"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<PolicyRequest>(r, l);
         EXPECT_FALSE(q.kind);
         EXPECT_FALSE(q.interval_ns);
         EXPECT_FALSE(q.rotate_on);
       }},
      {R"({"cmd":"policy","name":"round-robin","interval":"5s","rotate_on":"iteration"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<PolicyRequest>(r, l);
         EXPECT_EQ(q.kind, std::optional<PolicyKind>(PolicyKind::kRoundRobin));
         EXPECT_EQ(q.interval_ns, std::optional<uint64_t>(5'000'000'000));
         EXPECT_EQ(q.rotate_on, std::optional<RotateOn>(RotateOn::kIteration));
       }},
      {R"({"cmd":"policy","name":"round-robin","rotate_on":"time"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<PolicyRequest>(r, l);
         EXPECT_FALSE(q.interval_ns);
         EXPECT_EQ(q.rotate_on, std::optional<RotateOn>(RotateOn::kTime));
       }},
      {R"({"cmd":"policy","name":"progress","interval":"1ms"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<PolicyRequest>(r, l);
         EXPECT_EQ(q.kind, std::optional<PolicyKind>(PolicyKind::kProgress));
         EXPECT_EQ(q.interval_ns, std::optional<uint64_t>(1'000'000));
         EXPECT_FALSE(q.rotate_on);
       }},
  };
  for (const Good& g : cases) {
    SCOPED_TRACE(g.line);
    g.check(parse_control_line(g.line, g.class_count), g.line);
  }
}

TEST(ControlRequest, EveryPolicyNameParses) {
  const std::pair<const char*, PolicyKind> names[] = {
      {"static", PolicyKind::kStatic},
      {"fifo", PolicyKind::kFifo},
      {"tensorlights-one", PolicyKind::kTensorLightsOne},
      {"round-robin", PolicyKind::kRoundRobin},
      {"progress", PolicyKind::kProgress},
      {"batch", PolicyKind::kBatch},
      {"shortest-first", PolicyKind::kShortestFirst},
  };
  for (const auto& [name, kind] : names) {
    const std::string line = std::string(R"({"cmd":"policy","name":")") + name + "\"}";
    EXPECT_EQ(as<PolicyRequest>(parse_control_line(line, kClasses), line).kind, std::optional<PolicyKind>(kind));
  }
}

// A json built in C++ holds small integers as signed: they are job ids all the same.
TEST(ControlRequest, SignedIntegersFromCxxJsonAreAccepted) {
  const json order = {{"cmd", "order"}, {"ids", {3, 1}}};
  EXPECT_EQ(as<OrderRequest>(parse_control_request(order, kClasses), order.dump()).ids, (std::vector<uint32_t>{3, 1}));
  const json rank = {{"cmd", "rank"}, {"job", 1}, {"rank", 2}};
  EXPECT_EQ(as<RankRequest>(parse_control_request(rank, kClasses), rank.dump()).rank, 2u);
  const json negative = {{"cmd", "order"}, {"ids", {3, -1}}};
  const auto r = parse_control_request(negative, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "\"ids\" must hold job ids");
}

// ---- bad requests ------------------------------------------------------------

enum class Match { kExact, kPrefix };

struct Bad {
  std::string line;
  std::string error;
  Match match = Match::kExact;
  unsigned class_count = kClasses;
};

constexpr const char* kBurstRange = "bursts must be between 64B and 512MiB";

TEST(ControlRequest, BadRequestsGetTheErrorAPersonReads) {
  const std::vector<Bad> cases = {
      // The request itself.
      // The parser's reason follows, so that NaN, a number too large or
      // bytes that are not UTF-8 are told apart from a missing brace.
      {"",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 1: syntax error "
       "while parsing value - unexpected end of input; expected '[', '{', or a literal"},
      {"{",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 2: syntax error "
       "while parsing object key - unexpected end of input; expected string literal"},
      {R"({"cmd":"health"} {"cmd":"health"})",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 18: syntax error "
       "while parsing value - unexpected '{'; expected end of input"},
      {R"({"cmd":"health",})",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 17: syntax error "
       "while parsing object key - unexpected '}'; expected string literal"},
      {R"({"cmd":"progress","job":1,"fraction":NaN})",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 38: syntax error "
       "while parsing value - invalid literal",
       Match::kPrefix},
      {R"({"cmd":"progress","job":1,"fraction":1e400})",
       "malformed JSON request (one JSON object per line expected): number overflow parsing '1e400'"},
      {"{\"cmd\":\"jobs.add\",\"job\":1,\"name\":\"\xff\"}",
       "malformed JSON request (one JSON object per line expected): parse error at line 1, column 35: syntax error "
       "while parsing value - invalid string: ill-formed UTF-8 byte",
       Match::kPrefix},
      {"[1]", "a request must be a JSON object"},
      {"3", "a request must be a JSON object"},
      {"null", "a request must be a JSON object"},
      {R"("health")", "a request must be a JSON object"},
      {"{}", "missing \"cmd\" (a string naming the command)"},
      {R"({"id":1})", "missing \"cmd\" (a string naming the command)"},
      {R"({"cmd":5})", "missing \"cmd\" (a string naming the command)"},
      {R"({"cmd":null})", "missing \"cmd\" (a string naming the command)"},
      {R"({"cmd":"x"})", "unknown command \"x\""},
      {R"({"cmd":"Health"})", "unknown command \"Health\""},
      {R"({"cmd":"jobs"})", "unknown command \"jobs\""},
      // jobs.add
      {R"({"cmd":"jobs.add","match":["proto=tcp"]})", "missing argument \"job\""},
      {R"({"cmd":"jobs.add","job":"7","match":["proto=tcp"]})", "\"job\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","job":-1,"match":["proto=tcp"]})", "\"job\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","job":1.5,"match":["proto=tcp"]})", "\"job\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","job":null,"match":["proto=tcp"]})", "\"job\" must be a non-negative integer"},
      // Past 2^64-1 (a float to the JSON parser): too large, not "not an integer".
      {R"({"cmd":"jobs.add","job":18446744073709551616,"match":["proto=tcp"]})", "\"job\" must be at most 4294967295"},
      {R"({"cmd":"jobs.add","job":4294967296,"match":["proto=tcp"]})", "\"job\" must be at most 4294967295"},
      {R"({"cmd":"jobs.add","job":0,"match":["proto=tcp"]})", "job id must be at least 1"},
      {R"({"cmd":"jobs.add","job":7})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","job":7,"match":[]})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","job":7,"match":"proto=tcp"})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","job":7,"match":[5]})", "match[0] must be a string"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp","bogus=1"]})", "match[1]: bad match rule \"bogus=1\"",
       Match::kPrefix},
      {R"({"cmd":"jobs.add","job":7,"match":["dst=10.0.0.0/33"]})", "match[0]: ", Match::kPrefix},
      {R"({"cmd":"jobs.add","job":7,"match":["src=10.0.0.1,dst=fd00::1"]})", "match[0]: ", Match::kPrefix},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"name":5})", "\"name\" must be a string"},
      // An empty name is refused, as the config loader refuses it (it was
      // taken for "no name" and became job-7).
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"name":""})", "job 7: name must be 1..64 bytes"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"name":")" + std::string(65, 'n') + "\"}",
       "job 7: name must be 1..64 bytes"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"name":"a\u0001b"})",
       "job 7: name must not contain control characters"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"rank":-1})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"rank":4294967296})", "\"rank\" must be at most 4294967295"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":300})",
       "\"police\" must be a string with a unit, or null"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"300"})", "\"police\": \"300\" is not a rate",
       Match::kPrefix},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"-1Mbit/s"})",
       "\"police\": \"-1Mbit/s\" is not a rate", Match::kPrefix},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"0bit/s"})",
       "\"police\" must be at least 8bit/s (1 byte/s)"},
      {R"({"cmd":"jobs.load","jobs":[{"job":7,"match":["proto=tcp"]},{"job":8,"match":["proto=udp"]},)"
       R"({"job":7,"match":["proto=sctp"]}]})",
       "jobs[2]: job 7 is also jobs[0]; list each job once"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"12345bit/s"})",
       "\"police\" 12345bit/s is not a whole number of bytes per second, the unit rates run in: give \"12344bit/s\" or "
       "\"12352bit/s\""},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"1Mbit/s","police_burst":"63B"})",
       "\"police_burst\" must be between 64B and 512MiB"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":"1Mbit/s","police_burst":"513MiB"})",
       "\"police_burst\" must be between 64B and 512MiB"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police_burst":"64"})",
       "\"police_burst\": \"64\" is not a size", Match::kPrefix},
      // As the loader: a policer burst without its rate (null or absent) is refused.
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police_burst":"64KiB"})",
       "\"police_burst\" given without \"police\" (set both or neither)"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"police":null,"police_burst":"64KiB"})",
       "\"police_burst\" given without \"police\" (set both or neither)"},
      // Precedence as before the split: argument errors before the registry's.
      {R"({"cmd":"jobs.add","job":0,"match":[]})", "\"match\" must be a non-empty list of rule strings"},
      // jobs.remove, rank
      {R"({"cmd":"jobs.remove"})", "missing argument \"job\""},
      {R"({"cmd":"jobs.remove","job":"3"})", "\"job\" must be a non-negative integer"},
      {R"({"cmd":"rank","rank":1})", "missing argument \"job\""},
      {R"({"cmd":"rank","job":3})", "missing argument \"rank\""},
      {R"({"cmd":"rank","job":3,"rank":-2})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"rank","job":3,"rank":"first"})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"rank","job":3,"rank":4294967296})", "\"rank\" must be at most 4294967295"},
      // order
      {R"({"cmd":"order"})", "\"ids\" must be a list of job ids"},
      {R"({"cmd":"order","ids":"1,2"})", "\"ids\" must be a list of job ids"},
      {R"({"cmd":"order","ids":[1,-2]})", "\"ids\" must hold job ids"},
      {R"({"cmd":"order","ids":[1.0]})", "\"ids\" must hold job ids"},
      {R"({"cmd":"order","ids":[1,4294967296]})", "\"ids\" must hold job ids"},
      {R"({"cmd":"order","ids":[[1]]})", "\"ids\" must hold job ids"},
      {R"({"cmd":"order","ids":[2,1,2]})", "job 2 is listed twice"},
      // class.set
      {R"({"cmd":"class.set","class":1})", "missing argument \"port\" (\"wire\" or \"host\")"},
      {R"({"cmd":"class.set","port":0,"class":1})", "\"port\" must be a string (\"wire\" or \"host\")"},
      {R"({"cmd":"class.set","port":"lan","class":1})", "unknown port \"lan\" (expected \"wire\" or \"host\")"},
      {R"({"cmd":"class.set","port":"wire"})", "missing argument \"class\""},
      {R"({"cmd":"class.set","port":"wire","class":-1})", "\"class\" must be a non-negative integer"},
      {R"({"cmd":"class.set","port":"wire","class":"3"})", "\"class\" must be a non-negative integer"},
      {R"({"cmd":"class.set","port":"wire","class":8})", "\"class\" must be at most 7"},
      {R"({"cmd":"class.set","port":"wire","class":2})", "\"class\" must be at most 1", Match::kExact, 2},
      {R"({"cmd":"class.set","port":"wire","class":64})", "\"class\" must be at most 63", Match::kExact, 64},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":100})", "\"cap\" must be a string with a unit, or null"},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"fast"})", "\"cap\": \"fast\" is not a rate",
       Match::kPrefix},
      {R"({"cmd":"class.set","port":"wire","class":1,"floor":"1Gb"})", "\"floor\": \"1Gb\" is not a rate",
       Match::kPrefix},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap_burst":"64"})", "\"cap_burst\": \"64\" is not a size",
       Match::kPrefix},
      {R"({"cmd":"class.set","port":"wire","class":1,"floor_burst":true})",
       "\"floor_burst\" must be a string with a unit, or null"},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap_burst":"63B"})", kBurstRange},
      {R"({"cmd":"class.set","port":"wire","class":1,"floor_burst":"513MiB"})", kBurstRange},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"7bit/s"})", "\"cap\" must be at least 8bit/s (1 byte/s)"},
      // 1000007bit/s is no more than 1Mbit/s in whole bytes: refused, not
      // compared truncated against the cap.
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"1Mbit/s","floor":"1000007bit/s"})",
       "\"floor\" 1000007bit/s is not a whole number of bytes per second", Match::kPrefix},
      {R"({"cmd":"class.set","port":"wire","class":1,"floor":"0bit/s"})",
       "\"floor\" must be at least 8bit/s (1 byte/s)"},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"10Mbit/s","floor":"20Mbit/s"})",
       "the floor cannot exceed the cap"},
      {R"({"cmd":"class.set","port":"wire","class":1,"ecn_threshold":65536})",
       "\"ecn_threshold\" must be at most 65535"},
      {R"({"cmd":"class.set","port":"wire","class":1,"ecn_threshold":-1})",
       "\"ecn_threshold\" must be a non-negative integer"},
      {R"({"cmd":"class.set","port":"wire","class":1,"ecn_threshold":null})",
       "\"ecn_threshold\" must be a non-negative integer"},
      {R"({"cmd":"class.set","port":"wire","class":1,"dscp":64})", "\"dscp\" must be at most 63"},
      {R"({"cmd":"class.set","port":"wire","class":1,"dscp":-1})", "\"dscp\" must be a non-negative integer"},
      {R"({"cmd":"class.set","port":"wire","class":1,"dscp":"ef"})", "\"dscp\" must be a non-negative integer"},
      // shaper.set
      {R"({"cmd":"shaper.set","rate":"1Gbit/s"})", "missing argument \"port\" (\"wire\" or \"host\")"},
      {R"({"cmd":"shaper.set","port":"wire"})", "missing argument \"rate\" (a rate, or null for unshaped)"},
      {R"({"cmd":"shaper.set","port":"wire","burst":"64KiB"})",
       "missing argument \"rate\" (a rate, or null for unshaped)"},
      {R"({"cmd":"shaper.set","port":"wire","rate":1000})", "\"rate\" must be a string with a unit, or null"},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit"})", "\"rate\": \"1Gbit\" is not a rate", Match::kPrefix},
      {R"({"cmd":"shaper.set","port":"wire","rate":"-5Mbit/s"})", "\"rate\": \"-5Mbit/s\" is not a rate",
       Match::kPrefix},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1bit/s"})", "\"rate\" must be at least 8bit/s (1 byte/s)"},
      {R"({"cmd":"shaper.set","port":"wire","rate":"9.999999999Gbit/s"})",
       "\"rate\" 9999999999bit/s is not a whole number of bytes per second, the unit rates run in: give "
       "\"9999999992bit/s\" or \"10Gbit/s\""},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit/s","burst":"10B"})", kBurstRange},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit/s","burst":5})",
       "\"burst\" must be a string with a unit, or null"},
      // progress
      {R"({"cmd":"progress","fraction":0.5})", "missing argument \"job\""},
      {R"({"cmd":"progress","job":3})", "give at least one of \"fraction\", \"iteration\", \"batch\""},
      {R"({"cmd":"progress","job":3,"fraction":"half"})", "\"fraction\" must be a number between 0 and 1"},
      {R"({"cmd":"progress","job":3,"fraction":null})", "\"fraction\" must be a number between 0 and 1"},
      {R"({"cmd":"progress","job":3,"fraction":1.5})", "fraction must be between 0 and 1"},
      {R"({"cmd":"progress","job":3,"fraction":-0.1})", "fraction must be between 0 and 1"},
      {R"({"cmd":"progress","job":3,"iteration":-1})", "\"iteration\" must be a non-negative integer"},
      {R"({"cmd":"progress","job":3,"iteration":18446744073709551616})",
       "\"iteration\" must be a non-negative integer"},
      {R"({"cmd":"progress","job":3,"batch":1.5})", "\"batch\" must be a non-negative integer"},
      // policy
      {R"({"cmd":"policy","name":5})", "\"name\" must be a string"},
      {R"({"cmd":"policy","name":null})", "\"name\" must be a string"},
      // Without a name the command shows the policy: settings given with it
      // would be dropped, so they are refused (they were acknowledged).
      {R"({"cmd":"policy","interval":"5s"})", "\"interval\" and \"rotate_on\" need \"name\" (the policy they set)"},
      {R"({"cmd":"policy","rotate_on":"bogus"})", "\"interval\" and \"rotate_on\" need \"name\" (the policy they set)"},
      {R"({"cmd":"policy","name":"lifo"})",
       "unknown policy \"lifo\" (static, fifo, tensorlights-one, round-robin, progress, batch, shortest-first)"},
      {R"({"cmd":"policy","name":"round-robin","interval":20})", "\"interval\" must be a duration such as \"20s\""},
      {R"({"cmd":"policy","name":"round-robin","interval":"20"})", "\"interval\": \"20\" is not a duration",
       Match::kPrefix},
      {R"({"cmd":"policy","name":"round-robin","interval":"999us"})", "\"interval\" must be at least 1ms"},
      {R"({"cmd":"policy","name":"round-robin","rotate_on":"sometimes"})",
       "\"rotate_on\" must be \"time\" or \"iteration\""},
      {R"({"cmd":"policy","name":"round-robin","rotate_on":1})", "\"rotate_on\" must be \"time\" or \"iteration\""},
      {R"({"cmd":"policy","name":"fifo","rotate_on":"iteration"})", "\"rotate_on\" applies to round-robin only"},
      {R"({"cmd":"policy","name":"static","rotate_on":"time"})", "\"rotate_on\" applies to round-robin only"},
      // Control characters from the request are escaped: an error is one line.
      {R"({"cmd":"a\nb"})", "unknown command \"a\\nb\""},
      {R"({"cmd":"class.set","port":"w\u0007\t","class":1})",
       "unknown port \"w\\x07\\t\" (expected \"wire\" or \"host\")"},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1\nGbit/s"})", "\"rate\": \"1\\nGbit/s\" is not a rate",
       Match::kPrefix},
  };
  for (const Bad& b : cases) {
    SCOPED_TRACE(b.line);
    const auto r = parse_control_line(b.line, b.class_count);
    ASSERT_FALSE(r.ok()) << "accepted as variant index " << r->index();
    const std::string& e = r.error();
    if (b.match == Match::kExact) {
      EXPECT_EQ(e, b.error);
    } else {
      EXPECT_EQ(e.substr(0, b.error.size()), b.error) << e;
    }
    for (unsigned char c : e) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "control character in: " << e;
  }
}

// The registry lists exactly the protocol's commands, and each is parsed (no
// "unknown command" for any of them).
TEST(ControlRequest, RegistryMatchesTheProtocol) {
  const std::vector<std::string> protocol = {"health", "jobs.list", "jobs.add",  "jobs.load",  "jobs.remove",
                                             "order",  "rank",      "class.set", "shaper.set", "progress",
                                             "policy", "stats",     "config",    "cluster",    "reload"};
  std::vector<std::string> names;
  for (const CommandSpec& c : control_commands()) {
    names.push_back(c.name);
    EXPECT_NE(std::string(c.help), "") << c.name;
    const auto r = parse_control_request(json{{"cmd", c.name}}, kClasses);
    if (!r.ok()) {
      EXPECT_EQ(r.error().find("unknown command"), std::string::npos) << c.name << ": " << r.error();
    }
  }
  EXPECT_EQ(names, protocol);
}

// Integer arguments against a reference on random values (fixed seed): accepted
// exactly when within range, and then read back unchanged.
TEST(ControlRequest, IntegerRangesAgainstReference) {
  std::mt19937_64 rng(20240611);
  for (int i = 0; i < 2000; ++i) {
    // Mostly near the interesting bounds, sometimes anywhere.
    uint64_t v = rng();
    switch (i % 4) {
      case 0:
        v %= 128;
        break;
      case 1:
        v = uint64_t{UINT32_MAX} - 2 + v % 5;
        break;
      case 2:
        v = 65533 + v % 6;
        break;
      default:
        break;
    }
    const unsigned classes = 2 + static_cast<unsigned>(rng() % 63);
    const std::string n = std::to_string(v);
    {
      const std::string line = R"({"cmd":"rank","job":1,"rank":)" + n + "}";
      const auto r = parse_control_line(line, classes);
      ASSERT_EQ(r.ok(), v <= UINT32_MAX) << line;
      if (r.ok()) {
        EXPECT_EQ(std::get<RankRequest>(*r).rank, v);
      }
    }
    {
      const std::string line = R"({"cmd":"class.set","port":"host","class":)" + std::to_string(v % 70) +
                               R"(,"ecn_threshold":)" + n + R"(,"dscp":)" + std::to_string(v % 80) + "}";
      const auto r = parse_control_line(line, classes);
      const bool want = v % 70 < classes && v <= 65535 && v % 80 <= 63;
      ASSERT_EQ(r.ok(), want) << line << " classes=" << classes << ": " << (r.ok() ? "" : r.error());
      if (r.ok()) {
        const auto& q = std::get<ClassSetRequest>(*r);
        EXPECT_EQ(q.cls, v % 70);
        EXPECT_EQ(q.ecn_threshold, std::optional<uint32_t>(static_cast<uint32_t>(v)));
        EXPECT_EQ(q.dscp, set<uint8_t>(static_cast<uint8_t>(v % 80)));
      }
    }
  }
}

// Job names as JobRegistry accepts them; the parser checks the same rule.
TEST(ControlRequest, JobNameRule) {
  for (int len : {0, 1, 63, 64, 65, 200}) {
    const std::string line =
        R"({"cmd":"jobs.add","job":9,"match":["proto=tcp"],"name":")" + std::string(len, 'x') + "\"}";
    const auto r = parse_control_line(line, kClasses);
    EXPECT_EQ(r.ok(), len >= 1 && len <= 64) << len;
  }
  for (const char* esc : {"\\u0000", "\\u001f", "\\u007f", "\\n"}) {
    const std::string line = R"({"cmd":"jobs.add","job":9,"match":["proto=tcp"],"name":"a)" + std::string(esc) + "\"}";
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), "job 9: name must not contain control characters");
  }
  // C1 controls are control characters too.
  for (const char* esc : {"\\u0080", "\\u009f"}) {
    const std::string line = R"({"cmd":"jobs.add","job":9,"match":["proto=tcp"],"name":"a)" + std::string(esc) + "\"}";
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), "job 9: name must not contain control characters");
  }
  // Bidirectional controls would let a name display as another one.
  for (const char* esc : {"\\u202a", "\\u202e", "\\u2066", "\\u2069", "\\u200e", "\\u200f", "\\u061c"}) {
    const std::string line = R"({"cmd":"jobs.add","job":9,"match":["proto=tcp"],"name":"a)" + std::string(esc) + "b\"}";
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), "job 9: name must not contain bidirectional control characters");
  }
  // Not control characters: UTF-8 is fine.
  EXPECT_TRUE(
      parse_control_line(R"({"cmd":"jobs.add","job":9,"match":["proto=tcp"],"name":"résumé-α"})", kClasses).ok());
  // Invalid UTF-8 in a request built in C++ (a parsed line cannot hold it).
  const json bad_utf8 = {{"cmd", "jobs.add"}, {"job", 9}, {"match", {"proto=tcp"}}, {"name", "a\xc3"}};
  const auto r = parse_control_request(bad_utf8, kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "job 9: name must be valid UTF-8");
}

// The one rule for names (text.h), as the config loader and the registry use it.
TEST(NameRule, PrintableUtf8WithoutBidiControls) {
  EXPECT_EQ(name_problem("bert-large"), "");
  EXPECT_EQ(name_problem("训练-α"), "");
  EXPECT_EQ(name_problem("\xf0\x9f\x98\x80"), "");  // U+1F600
  EXPECT_EQ(name_problem(""), "must be 1..64 bytes");
  EXPECT_EQ(name_problem(std::string(65, 'x')), "must be 1..64 bytes");
  for (const char* bad : {"\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff", "a\xe2\x80"})
    EXPECT_EQ(name_problem(bad), "must be valid UTF-8") << bad;
  for (const char* ctl : {"a\tb", "\x7f", "\xc2\x85"})
    EXPECT_EQ(name_problem(ctl), "must not contain control characters");
  EXPECT_EQ(name_problem("gpu\xe2\x80\xaejob"), "must not contain bidirectional control characters");  // U+202E
  // Invisible characters would make "job" and "job<U+200B>" two names that
  // look the same.
  for (const char* invisible : {"job\xe2\x80\x8b",
                                "jo\xc2\xad"
                                "b",
                                "\xef\xbb\xbfjob",
                                "jo\xe2\x81\xa0"
                                "b",
                                "j\xe2\x80\x8dob"})
    EXPECT_EQ(name_problem(invisible), "must not contain invisible characters (zero-width, soft hyphen, BOM)")
        << invisible;
  // A line or paragraph separator ends a report's line, or shows as nothing.
  for (const char* separator : {"job\xe2\x80\xa8",
                                "jo\xe2\x80\xa9"
                                "b"})
    EXPECT_EQ(name_problem(separator), "must not contain line or paragraph separators (U+2028, U+2029)") << separator;
  // One an older version took (a state file, a job document) loads, shown escaped.
  EXPECT_EQ(stored_name("job\xe2\x80\xa8"), "job\\u2028");
  EXPECT_EQ(stored_name("job\xe2\x80\x8b"), "job\\u200b");
  EXPECT_EQ(stored_name("job\x01"), "job\x01") << "other problems are left for the check to refuse";
}

// The one escaping for text on a terminal: errors, and the daemon's error
// text as psgatectl prints it.
TEST(ReasonList, ShowsTheFirstFewAndCountsTheRest) {
  ReasonList none("jobs");
  EXPECT_EQ(none.str(), "");
  ReasonList few("jobs");
  few.add("a");
  few.add("b");
  few.add("c");
  EXPECT_EQ(few.str(), "a; b; c");
  ReasonList many("jobs", 2);
  for (int i = 0; i < 5000; ++i) many.add("job " + std::to_string(i) + ": no free slot");
  EXPECT_EQ(many.count(), 5000u);
  EXPECT_EQ(many.str(), "job 0: no free slot; job 1: no free slot; and 4998 more jobs likewise");
}

TEST(TerminalText, ControlBidiInvisibleAndNonUtf8AreShownEscaped) {
  EXPECT_EQ(escape_control_chars("résumé-α 训练 \xf0\x9f\x98\x80"), "résumé-α 训练 \xf0\x9f\x98\x80");
  EXPECT_EQ(escape_control_chars("a\nb\tc\x1b[31m\x7f"), "a\\nb\\tc\\x1b[31m\\x7f");
  EXPECT_EQ(escape_control_chars("gpu\xe2\x80\xaejob"), "gpu\\u202ejob");  // bidi
  EXPECT_EQ(escape_control_chars("job\xe2\x80\x8b"), "job\\u200b");        // zero-width space
  EXPECT_EQ(escape_control_chars("a\xe2\x80\xa8"
                                 "b"),
            "a\\u2028b");  // line separator
  EXPECT_EQ(escape_control_chars("\xc2\x9b"
                                 "2J"),
            "\\u009b2J");  // C1 CSI, as UTF-8
  EXPECT_EQ(escape_control_chars("\x9b"
                                 "2J\xc3"),
            "\\x9b2J\\xc3");  // not UTF-8: bytes
  EXPECT_EQ(escape_control_chars(""), "");
}

// Unknown arguments are refused, naming the nearest one (the config loader's rule).
TEST(ControlRequest, UnknownArgumentsAreRefusedWithASuggestion) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"cmd":"class.set","port":"wire","class":1,"flor":"10Mbit/s"})",
       "unknown argument \"flor\" (did you mean \"floor\"?); allowed: port, class, cap, cap_burst, floor, "
       "floor_burst, ecn_threshold, dscp"},
      {R"({"cmd":"jobs.add","job":7,"match":["proto=tcp"],"polic":"1Mbit/s"})",
       "unknown argument \"polic\" (did you mean \"police\"?); allowed: job, match, name, rank, police, police_burst"},
      {R"({"cmd":"health","verbose":true})", "unknown argument \"verbose\"; allowed: none"},
      {R"({"cmd":"shaper.set","port":"wire","rate":null,"x":1})", "unknown argument \"x\"; allowed: port, rate, burst"},
      {R"({"cmd":"policy","name":"fifo","x\u0007":1})",
       "unknown argument \"x\\x07\"; allowed: name, interval, rotate_on"},
  };
  for (const auto& [line, error] : cases) {
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), error) << line;
  }
  // "id" is the echoed request id, never an argument.
  EXPECT_TRUE(parse_control_line(R"({"cmd":"health","id":"req-1"})", kClasses).ok());
  // Every command's allowed list is its table row.
  for (const CommandSpec& c : control_commands()) {
    const auto r = parse_control_request(json{{"cmd", c.name}, {"zzzzzzzz", 1}}, kClasses);
    ASSERT_FALSE(r.ok()) << c.name;
    std::string allowed;
    for (const ArgSpec& a : c.args) allowed += (allowed.empty() ? "" : ", ") + std::string(a.name);
    EXPECT_EQ(r.error(), "unknown argument \"zzzzzzzz\"; allowed: " + (allowed.empty() ? "none" : allowed));
  }
}

// nlohmann::json keeps the last duplicate; the protocol refuses them at any depth.
TEST(ControlRequest, DuplicateKeysAreRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {R"({"cmd":"health","cmd":"jobs.remove","job":1})", "duplicate key \"cmd\""},
      {R"({"cmd":"rank","job":1,"rank":0,"rank":5})", "duplicate key \"rank\""},
      {R"({"cmd":"health","id":{"a":1,"a":2}})", "duplicate key \"a\""},
      {R"({"cmd":"health","id":{"":1,"b":0,"":2}})", "duplicate key \"\""},  // the empty key (found by fuzzing)
      {R"({"cmd":"health","id":[{"b":1},{"b":2,"c":{"d":1,"d":1}}]})", "duplicate key \"d\""},
      {R"({"cmd":"health","x\u0001":1,"x\u0001":2})", "duplicate key \"x\\x01\""},
  };
  for (const auto& [line, error] : cases) {
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), error) << line;
  }
  // The same key in sibling objects is no duplicate.
  EXPECT_TRUE(parse_control_line(R"({"cmd":"health","id":[{"b":1},{"b":2}]})", kClasses).ok());
  // The id is echoed unless it is the repeated key.
  std::optional<json> echo;
  EXPECT_FALSE(parse_control_line(R"({"cmd":"health","id":7,"cmd":"stats"})", kClasses, &echo).ok());
  EXPECT_EQ(echo, std::optional<json>(7));
  echo.reset();
  EXPECT_FALSE(parse_control_line(R"({"cmd":"health","id":7,"id":8})", kClasses, &echo).ok());
  EXPECT_FALSE(echo);
  // Nor when another key was repeated first: a pipelining client would
  // match the reply to the wrong request.
  EXPECT_FALSE(parse_control_line(R"({"id":1,"cmd":"health","cmd":"x","id":3})", kClasses, &echo).ok());
  EXPECT_FALSE(echo);
}

// JSON has no raw NUL, and the JSON parser takes one for the end of its
// input: `{"cmd":"rank",...}\0junk` was applied, the junk neither read nor
// refused. A line with a NUL is refused whole, saying where; so is a state
// or rules file (parse_json_bounded).
TEST(ControlRequest, ALineWithANulByteIsRefusedWhole) {
  using namespace std::string_literals;
  for (const std::string& line : {R"({"cmd":"rank","job":3,"rank":2})"s + '\0' + R"({"cmd":"jobs.remove", not json)",
                                  R"({"cmd":"health"})"s + '\0', R"({"cmd":"he)"s + '\0' + R"(alth"})"}) {
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line.size();
    EXPECT_NE(r.error().find("a NUL byte at offset " + std::to_string(line.find('\0'))), std::string::npos)
        << r.error();
  }
  EXPECT_TRUE(parse_json_bounded(R"({"version":2})"s + '\0' + "garbage{{{").is_discarded());
  EXPECT_FALSE(parse_json_bounded(R"({"version":2})").is_discarded());
}

// A request nested thousands of levels deep (an id of [[[[...]]]] fits a
// 64 KiB line 32,000 deep) is refused with a reason, and what is kept of it,
// the echoed id included, is at most kMaxJsonDepth deep: copying and
// dumping a JSON value recurse once per level, which overflowed a small
// stack. Nesting up to the limit is a request like any other.
TEST(ControlRequest, DeepNestingIsRefusedWithoutBuildingIt) {
  auto nested = [](int levels) {
    return R"({"cmd":"health","id":)" + std::string(levels, '[') + std::string(levels, ']') + "}";
  };
  std::optional<json> echo;
  const auto deep = parse_control_line(nested(32000), kClasses, &echo);
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.error(), "request nested deeper than 64 levels");
  int depth = 0;
  for (const json* v = echo ? &*echo : nullptr; v && v->is_array() && !v->empty(); v = &(*v)[0]) ++depth;
  EXPECT_LE(depth, kMaxJsonDepth) << "the echoed id keeps only what is within the limit";
  EXPECT_TRUE(echo.has_value()) << "the id is still echoed, cut at the limit";
  // The request object is level 0: an id of kMaxJsonDepth arrays is within.
  EXPECT_TRUE(parse_control_line(nested(kMaxJsonDepth), kClasses).ok());
  EXPECT_FALSE(parse_control_line(nested(kMaxJsonDepth + 1), kClasses).ok());
}

using psgate::testing::finishes_within;

// nlohmann's parser with a callback (how the depth was bounded) walks the
// enclosing array at the end of every object: a state file of 1,000,000
// jobs (dataplane.max_jobs allows them) took most of an hour to read, and
// psgatectl's jobs files and replies the same. The depth and the repeated
// keys are now found in a pass of their own, and the plain parser builds
// the value: an array of a million objects reads at once (the limit is no
// measure of speed: the old parse needed 10^11 steps for it, hours), and
// what is found is what was found before.
TEST(ControlRequest, LongArraysOfObjectsAreParsedInLinearTime) {
  std::string text = R"({"jobs":[)";
  constexpr size_t kObjects = 1'000'000;
  for (size_t i = 0; i < kObjects; ++i) text += i ? R"(,{"a":1})" : R"({"a":1})";
  text += "]}";
  json bounded;
  JsonNotingDuplicates noted;
  ASSERT_TRUE(finishes_within(std::chrono::seconds(120), [&] {
    bounded = parse_json_bounded(text);
    noted = parse_json_noting_duplicates(text);
  })) << "not parsed within 120 s";
  ASSERT_TRUE(bounded.is_object());
  EXPECT_EQ(bounded["jobs"].size(), kObjects);
  EXPECT_EQ(noted.value, bounded);
  EXPECT_FALSE(noted.duplicate);
  EXPECT_FALSE(noted.too_deep);

  // The same findings as the callback's: a repeated key after the long
  // array, an id repeated at the top only, the depth limit, not JSON.
  text.insert(text.size() - 1, R"(,"jobs":[],"x":{"id":1,"id":2})");
  noted = parse_json_noting_duplicates(text);
  EXPECT_EQ(noted.duplicate, std::optional<std::string>("jobs"));
  EXPECT_FALSE(noted.id_repeated);
  EXPECT_TRUE(parse_json_noting_duplicates(R"({"id":1,"a":{"id":2},"id":3})").id_repeated);
  const std::string at_limit = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parse_json_bounded(at_limit).is_discarded());
  EXPECT_EQ(json_shape(at_limit), JsonShape::kJson);
  const std::string past = "[" + at_limit + "]";
  EXPECT_TRUE(parse_json_bounded(past).is_discarded());
  EXPECT_EQ(json_shape(past), JsonShape::kTooDeep);
  EXPECT_EQ(json_shape(past + "garbage"), JsonShape::kTooDeep);
  EXPECT_TRUE(parse_json_noting_duplicates(past).too_deep);
  EXPECT_EQ(json_shape("[1,]"), JsonShape::kNotJson);
  EXPECT_EQ(json_shape("[1] [2]"), JsonShape::kNotJson);
  EXPECT_TRUE(parse_json_noting_duplicates(R"({"a":1,"a":2,)").value.is_discarded());
}

// Protocol 2: the job is "job", "id" is the request id. Protocol 1's form
// (the job as "id", no "job") is read until protocol 3, with a notice.
TEST(ControlRequest, TheJobArgumentIsJobAndTheOldIdFormIsDeprecated) {
  std::optional<json> echo;
  std::string deprecation;
  auto r = parse_control_line(R"({"cmd":"rank","id":"req-1","job":3,"rank":1})", kClasses, &echo, &deprecation);
  EXPECT_EQ(as<RankRequest>(r, "new form").id, 3u);
  EXPECT_EQ(echo, std::optional<json>("req-1"));
  EXPECT_EQ(deprecation, "");
  for (const char* old :
       {R"({"cmd":"rank","id":3,"rank":1})", R"({"cmd":"jobs.remove","id":3})",
        R"({"cmd":"progress","id":3,"batch":2})", R"({"cmd":"jobs.add","id":3,"match":["proto=tcp"]})"}) {
    deprecation.clear();
    echo.reset();
    r = parse_control_line(old, kClasses, &echo, &deprecation);
    ASSERT_TRUE(r.ok()) << old << ": " << r.error();
    EXPECT_EQ(deprecation, kControlIdAsJobDeprecation) << old;
    EXPECT_EQ(echo, std::optional<json>(3)) << old;  // echoed as before
  }
  // The old form's errors name the new argument; unknown arguments are still refused.
  r = parse_control_line(R"({"cmd":"rank","id":"req-1","rank":1})", kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "\"job\" must be a non-negative integer");
  r = parse_control_line(R"({"cmd":"rank","id":3,"rank":1,"rnk":2})", kClasses);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "unknown argument \"rnk\" (did you mean \"rank\"?); allowed: job, rank");
  // A command without a job argument never reads "id" as one.
  deprecation.clear();
  EXPECT_TRUE(parse_control_line(R"({"cmd":"health","id":3})", kClasses, nullptr, &deprecation).ok());
  EXPECT_EQ(deprecation, "");
}

// One reply per request line however long: the server's framing.
TEST(RequestLines, AnOversizedLineIsReportedOnceAndTheNextLineStillParses) {
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{100}, size_t{16384}, size_t{1} << 22}) {
    RequestLines lines(64);
    std::vector<std::string> got;
    int oversized = 0;
    // A line of the limit is taken with "\r\n" too; one byte over is not,
    // whether that byte ends it or comes before its "\r".
    const std::string stream = "a\r\n\n" + std::string(2 * 1024 * 1024, 'x') + "\nb\n" + std::string(64, 'y') + "\n" +
                               std::string(65, 'z') + "\n" + std::string(64, 'w') + "\r\n" + std::string(65, 'v') +
                               "\r\n" + std::string(66, 'u') + "\nc";
    for (size_t i = 0; i < stream.size(); i += chunk) {
      lines.feed(
          std::string_view(stream).substr(i, chunk), [&](std::string&& l) { got.push_back(std::move(l)); },
          [&] {
            got.push_back("<oversized>");
            ++oversized;
          });
      EXPECT_LE(lines.buffered(), 65u);
    }
    EXPECT_EQ(got, (std::vector<std::string>{"a", "<oversized>", "b", std::string(64, 'y'), "<oversized>",
                                             std::string(64, 'w'), "<oversized>", "<oversized>"}))
        << "chunk " << chunk;
    EXPECT_EQ(oversized, 4);
    EXPECT_EQ(lines.buffered(), 1u);  // "c", waiting for its newline
  }
}

}  // namespace
}  // namespace psgate
