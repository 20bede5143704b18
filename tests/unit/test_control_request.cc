// parse_control_line / parse_control_request: every command with good
// arguments (the typed result checked field by field), and every class of bad
// input with the exact error an operator reads (each names the argument, or
// quotes the registry's wording where the check moved from JobRegistry).
// Requests are written as the lines a client sends, so integers go through the
// same JSON parser as on the socket.
#include "psgate/control_request.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <string>
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
      // The echoed "id" may be any JSON value where the command takes no job id.
      {R"({"cmd":"health","id":"req-1"})", kClasses, [](auto& r, auto& l) { as<HealthRequest>(r, l); }},
      {R"({"cmd":"jobs.list"})", kClasses, [](auto& r, auto& l) { as<JobsListRequest>(r, l); }},
      {R"({"cmd":"stats","extra":[1,2]})", kClasses, [](auto& r, auto& l) { as<StatsRequest>(r, l); }},
      {"{\"cmd\":\"config\"}\n", kClasses, [](auto& r, auto& l) { as<ConfigRequest>(r, l); }},
      {R"({"cmd":"jobs.add","id":7,"match":["dst=10.0.0.5/32,dport=2222,proto=tcp"]})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<JobsAddRequest>(r, l);
         EXPECT_EQ(q.id, 7u);
         EXPECT_EQ(q.name, "");
         ASSERT_EQ(q.rules.size(), 1u);
         EXPECT_EQ(q.rules[0], rule("dst=10.0.0.5/32,dport=2222,proto=tcp"));
         EXPECT_FALSE(q.rank);
         EXPECT_FALSE(q.police);
       }},
      {R"({"cmd":"jobs.add","id":4294967295,"name":"resnet-a","rank":0,"police":"300Mbit/s",)"
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
      {R"({"cmd":"jobs.add","id":1,"match":["proto=tcp"],"police":"1Gbit/s","name":""})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<JobsAddRequest>(r, l);
         ASSERT_TRUE(q.police);
         EXPECT_EQ(q.police->rate_bps, 1'000'000'000u);
         EXPECT_EQ(q.police->burst_bytes, kControlDefaultBurstBytes);
         EXPECT_EQ(q.name, "");
       }},
      // null police: no policer, and its burst is then ignored.
      {R"({"cmd":"jobs.add","id":2,"match":["proto=udp"],"police":null,"police_burst":"1B"})", kClasses,
       [](auto& r, auto& l) { EXPECT_FALSE(as<JobsAddRequest>(r, l).police); }},
      {R"({"cmd":"jobs.add","id":2,"match":["proto=udp"],"name":")" + std::string(64, 'n') + R"("})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<JobsAddRequest>(r, l).name.size(), 64u); }},
      {R"({"cmd":"jobs.remove","id":3})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<JobsRemoveRequest>(r, l).id, 3u); }},
      {R"({"cmd":"order","ids":[3,1,2]})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<OrderRequest>(r, l).ids, (std::vector<uint32_t>{3, 1, 2})); }},
      {R"({"cmd":"order","ids":[]})", kClasses,
       [](auto& r, auto& l) { EXPECT_TRUE(as<OrderRequest>(r, l).ids.empty()); }},
      {R"({"cmd":"rank","id":3,"rank":4294967295})", kClasses,
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
      {R"({"cmd":"class.set","port":"wire","class":0,"cap":null,"floor":null,"dscp":null,"ecn_threshold":0})",
       kClasses,
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
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"8bit/s","floor":"15bit/s","cap_burst":"64B",)"
       R"("floor_burst":"512MiB"})",
       2,
       [](auto& r, auto& l) {
         const auto& q = as<ClassSetRequest>(r, l);
         EXPECT_EQ(q.cap_bps, set<uint64_t>(8));
         EXPECT_EQ(q.floor_bps, set<uint64_t>(15));  // both 1 byte/s: not above the cap
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
      {R"({"cmd":"progress","id":3,"fraction":0.25})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ProgressRequest>(r, l);
         EXPECT_EQ(q.id, 3u);
         EXPECT_EQ(q.fraction, std::optional<double>(0.25));
         EXPECT_FALSE(q.iteration);
         EXPECT_FALSE(q.batch);
       }},
      {R"({"cmd":"progress","id":3,"fraction":1,"iteration":18446744073709551615,"batch":0})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<ProgressRequest>(r, l);
         EXPECT_EQ(q.fraction, std::optional<double>(1.0));
         EXPECT_EQ(q.iteration, std::optional<uint64_t>(UINT64_MAX));
         EXPECT_EQ(q.batch, std::optional<uint64_t>(0));
       }},
      {R"({"cmd":"progress","id":3,"batch":12})", kClasses,
       [](auto& r, auto& l) { EXPECT_EQ(as<ProgressRequest>(r, l).batch, std::optional<uint64_t>(12)); }},
      {R"({"cmd":"policy"})", kClasses,
       [](auto& r, auto& l) {
         const auto& q = as<PolicyRequest>(r, l);
         EXPECT_FALSE(q.kind);
         EXPECT_FALSE(q.interval_ns);
         EXPECT_FALSE(q.rotate_on);
       }},
      // Without a name the command only shows the policy: other arguments are not read.
      {R"({"cmd":"policy","interval":"soon","rotate_on":5})", kClasses,
       [](auto& r, auto& l) { EXPECT_FALSE(as<PolicyRequest>(r, l).kind); }},
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
      {"static", PolicyKind::kStatic},       {"fifo", PolicyKind::kFifo},
      {"tensorlights-one", PolicyKind::kTensorLightsOne}, {"round-robin", PolicyKind::kRoundRobin},
      {"progress", PolicyKind::kProgress},   {"batch", PolicyKind::kBatch},
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
  EXPECT_EQ(as<OrderRequest>(parse_control_request(order, kClasses), order.dump()).ids,
            (std::vector<uint32_t>{3, 1}));
  const json rank = {{"cmd", "rank"}, {"id", 1}, {"rank", 2}};
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
constexpr const char* kRateMin = "rates must be at least 8bit/s";

TEST(ControlRequest, BadRequestsGetTheErrorAPersonReads) {
  const std::vector<Bad> cases = {
      // The request itself.
      {"", "malformed JSON request (one JSON object per line expected)"},
      {"{", "malformed JSON request (one JSON object per line expected)"},
      {R"({"cmd":"health"} {"cmd":"health"})", "malformed JSON request (one JSON object per line expected)"},
      {R"({"cmd":"health",})", "malformed JSON request (one JSON object per line expected)"},
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
      {R"({"cmd":"jobs.add","match":["proto=tcp"]})", "missing argument \"id\""},
      {R"({"cmd":"jobs.add","id":"7","match":["proto=tcp"]})", "\"id\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","id":-1,"match":["proto=tcp"]})", "\"id\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","id":1.5,"match":["proto=tcp"]})", "\"id\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","id":null,"match":["proto=tcp"]})", "\"id\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","id":4294967296,"match":["proto=tcp"]})", "\"id\" must be at most 4294967295"},
      {R"({"cmd":"jobs.add","id":0,"match":["proto=tcp"]})", "job id must be at least 1"},
      {R"({"cmd":"jobs.add","id":7})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","id":7,"match":[]})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","id":7,"match":"proto=tcp"})", "\"match\" must be a non-empty list of rule strings"},
      {R"({"cmd":"jobs.add","id":7,"match":[5]})", "match[0] must be a string"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp","bogus=1"]})", "match[1]: bad match rule \"bogus=1\"",
       Match::kPrefix},
      {R"({"cmd":"jobs.add","id":7,"match":["dst=10.0.0.0/33"]})", "match[0]: ", Match::kPrefix},
      {R"({"cmd":"jobs.add","id":7,"match":["src=10.0.0.1,dst=fd00::1"]})", "match[0]: ", Match::kPrefix},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"name":5})", "\"name\" must be a string"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"name":")" + std::string(65, 'n') + "\"}",
       "job 7: name must be 1..64 characters"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"name":"a\u0001b"})",
       "job 7: name must not contain control characters"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"rank":-1})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"rank":4294967296})", "\"rank\" must be at most 4294967295"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":300})",
       "\"police\" must be a string with a unit, or null"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":"300"})", "\"police\": \"300\" is not a rate",
       Match::kPrefix},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":"-1Mbit/s"})",
       "\"police\": \"-1Mbit/s\" is not a rate", Match::kPrefix},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":"7bit/s"})", "\"police\" must be at least 8bit/s"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":"1Mbit/s","police_burst":"63B"})",
       "\"police_burst\" must be between 64B and 512MiB"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police":"1Mbit/s","police_burst":"513MiB"})",
       "\"police_burst\" must be between 64B and 512MiB"},
      {R"({"cmd":"jobs.add","id":7,"match":["proto=tcp"],"police_burst":"64"})", "\"police_burst\": \"64\" is not a size",
       Match::kPrefix},
      // Precedence as before the split: argument errors before the registry's.
      {R"({"cmd":"jobs.add","id":0,"match":[]})", "\"match\" must be a non-empty list of rule strings"},
      // jobs.remove, rank
      {R"({"cmd":"jobs.remove"})", "missing argument \"id\""},
      {R"({"cmd":"jobs.remove","id":"3"})", "\"id\" must be a non-negative integer"},
      {R"({"cmd":"rank","rank":1})", "missing argument \"id\""},
      {R"({"cmd":"rank","id":3})", "missing argument \"rank\""},
      {R"({"cmd":"rank","id":3,"rank":-2})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"rank","id":3,"rank":"first"})", "\"rank\" must be a non-negative integer"},
      {R"({"cmd":"rank","id":3,"rank":4294967296})", "\"rank\" must be at most 4294967295"},
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
      {R"({"cmd":"class.set","port":0,"class":1})", "missing argument \"port\" (\"wire\" or \"host\")"},
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
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"7bit/s"})", kRateMin},
      {R"({"cmd":"class.set","port":"wire","class":1,"floor":"0bit/s"})", kRateMin},
      {R"({"cmd":"class.set","port":"wire","class":1,"cap":"10Mbit/s","floor":"20Mbit/s"})",
       "the floor cannot exceed the cap"},
      {R"({"cmd":"class.set","port":"wire","class":1,"ecn_threshold":65536})", "\"ecn_threshold\" must be at most 65535"},
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
      {R"({"cmd":"shaper.set","port":"wire","rate":"1bit/s"})", kRateMin},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit/s","burst":"10B"})", kBurstRange},
      {R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit/s","burst":5})",
       "\"burst\" must be a string with a unit, or null"},
      // progress
      {R"({"cmd":"progress","fraction":0.5})", "missing argument \"id\""},
      {R"({"cmd":"progress","id":3})", "give at least one of \"fraction\", \"iteration\", \"batch\""},
      {R"({"cmd":"progress","id":3,"fraction":"half"})", "\"fraction\" must be a number between 0 and 1"},
      {R"({"cmd":"progress","id":3,"fraction":null})", "\"fraction\" must be a number between 0 and 1"},
      {R"({"cmd":"progress","id":3,"fraction":1.5})", "fraction must be between 0 and 1"},
      {R"({"cmd":"progress","id":3,"fraction":-0.1})", "fraction must be between 0 and 1"},
      {R"({"cmd":"progress","id":3,"iteration":-1})", "\"iteration\" must be a non-negative integer"},
      {R"({"cmd":"progress","id":3,"iteration":18446744073709551616})", "\"iteration\" must be a non-negative integer"},
      {R"({"cmd":"progress","id":3,"batch":1.5})", "\"batch\" must be a non-negative integer"},
      // policy
      {R"({"cmd":"policy","name":5})", "\"name\" must be a string"},
      {R"({"cmd":"policy","name":null})", "\"name\" must be a string"},
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
  const std::vector<std::string> protocol = {"health", "jobs.list", "jobs.add", "jobs.remove", "order", "rank",
                                             "class.set", "shaper.set", "progress", "policy", "stats", "config"};
  std::vector<std::string> names;
  for (const CommandInfo& c : control_commands()) {
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
      case 0: v %= 128; break;
      case 1: v = uint64_t{UINT32_MAX} - 2 + v % 5; break;
      case 2: v = 65533 + v % 6; break;
      default: break;
    }
    const unsigned classes = 2 + static_cast<unsigned>(rng() % 63);
    const std::string n = std::to_string(v);
    {
      const std::string line = R"({"cmd":"rank","id":1,"rank":)" + n + "}";
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
        R"({"cmd":"jobs.add","id":9,"match":["proto=tcp"],"name":")" + std::string(len, 'x') + "\"}";
    const auto r = parse_control_line(line, kClasses);
    EXPECT_EQ(r.ok(), len <= 64) << len;
  }
  for (const char* esc : {"\\u0000", "\\u001f", "\\u007f", "\\n"}) {
    const std::string line = R"({"cmd":"jobs.add","id":9,"match":["proto=tcp"],"name":"a)" + std::string(esc) + "\"}";
    const auto r = parse_control_line(line, kClasses);
    ASSERT_FALSE(r.ok()) << line;
    EXPECT_EQ(r.error(), "job 9: name must not contain control characters");
  }
  // Not control characters: UTF-8 is fine.
  EXPECT_TRUE(parse_control_line(R"({"cmd":"jobs.add","id":9,"match":["proto=tcp"],"name":"résumé-α"})", kClasses).ok());
}

}  // namespace
}  // namespace psgate
