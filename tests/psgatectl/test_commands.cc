// SPDX-License-Identifier: BSD-3-Clause
// (a) psgatectl's argv -> request mapping, one table row per form of every
// subcommand, and usage errors -> exit 2 before anything is sent.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "client.h"
#include "commands.h"
#include "finishes_within.h"
#include "jobs_file.h"
#include "psgate/control_commands.h"
#include "psgate/policy.h"

namespace psgatectl {
namespace {

using nlohmann::json;

ParseOutcome parse(const std::vector<std::string>& args, const char* env_socket = nullptr) {
  std::vector<const char*> argv{"psgatectl"};
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data(), env_socket);
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

struct MapCase {
  std::vector<std::string> args;
  const char* request;  // JSON
  Kind kind;
  bool json_output = false;
};

const MapCase kMapCases[] = {
    {{"health"}, R"({"cmd":"health"})", Kind::kHealth},
    {{"health", "--json"}, R"({"cmd":"health"})", Kind::kHealth, true},
    {{"jobs", "list"}, R"({"cmd":"jobs.list"})", Kind::kJobsList},
    {{"jobs", "list", "--json"}, R"({"cmd":"jobs.list"})", Kind::kJobsList, true},
    {{"jobs", "add", "3", "--match", "dst=10.0.0.5/32,dport=2222,proto=tcp"},
     R"({"cmd":"jobs.add","job":3,"match":["dst=10.0.0.5/32,dport=2222,proto=tcp"]})",
     Kind::kJobsAdd},
    {{"jobs", "add", "7", "-m", "src=fd00::5", "--match", "dport=2222-2230,proto=udp", "--name", "bert-c", "--rank",
      "0", "--police", "300Mbit/s", "--police-burst", "64KiB"},
     R"({"cmd":"jobs.add","job":7,"match":["src=fd00::5","dport=2222-2230,proto=udp"],"name":"bert-c",
         "rank":0,"police":"300Mbit/s","police_burst":"64KiB"})",
     Kind::kJobsAdd},
    // The ID may follow the options; each --match takes exactly one rule.
    {{"jobs", "add", "--match", "proto=tcp", "4294967295"},
     R"({"cmd":"jobs.add","job":4294967295,"match":["proto=tcp"]})",
     Kind::kJobsAdd},
    {{"jobs", "add", "1", "--match", "proto=tcp", "--json"},
     R"({"cmd":"jobs.add","job":1,"match":["proto=tcp"]})",
     Kind::kJobsAdd,
     true},
    {{"jobs", "rm", "3"}, R"({"cmd":"jobs.remove","job":3})", Kind::kJobsRemove},
    {{"jobs", "remove", "12"}, R"({"cmd":"jobs.remove","job":12})", Kind::kJobsRemove},
    {{"order", "3", "1", "2"}, R"({"cmd":"order","ids":[3,1,2]})", Kind::kOrder},
    {{"order", "5"}, R"({"cmd":"order","ids":[5]})", Kind::kOrder},
    {{"rank", "3", "0"}, R"({"cmd":"rank","job":3,"rank":0})", Kind::kRank},
    {{"rank", "3", "17"}, R"({"cmd":"rank","job":3,"rank":17})", Kind::kRank},
    {{"class", "wire", "2", "--cap", "300Mbit/s", "--cap-burst", "64KiB", "--floor", "none", "--ecn-threshold", "20",
      "--dscp", "46"},
     R"({"cmd":"class.set","port":"wire","class":2,"cap":"300Mbit/s","cap_burst":"64KiB","floor":null,
         "ecn_threshold":20,"dscp":46})",
     Kind::kClassSet},
    {{"class", "host", "1", "--cap", "none", "--floor", "1Gbit/s", "--floor-burst", "2KB", "--dscp", "none"},
     R"({"cmd":"class.set","port":"host","class":1,"cap":null,"floor":"1Gbit/s","floor_burst":"2KB",
         "dscp":null})",
     Kind::kClassSet},
    {{"class", "wire", "0", "--ecn-threshold", "0"},
     R"({"cmd":"class.set","port":"wire","class":0,"ecn_threshold":0})",
     Kind::kClassSet},
    {{"class", "wire", "63"}, R"({"cmd":"class.set","port":"wire","class":63})", Kind::kClassSet},
    {{"shaper", "wire", "1Gbit/s", "--burst", "64KiB"},
     R"({"cmd":"shaper.set","port":"wire","rate":"1Gbit/s","burst":"64KiB"})",
     Kind::kShaperSet},
    {{"shaper", "host", "9.5Gbps"}, R"({"cmd":"shaper.set","port":"host","rate":"9.5Gbps"})", Kind::kShaperSet},
    {{"shaper", "host", "none"}, R"({"cmd":"shaper.set","port":"host","rate":null})", Kind::kShaperSet},
    {{"progress", "3", "0.5"}, R"({"cmd":"progress","job":3,"fraction":0.5})", Kind::kProgress},
    {{"progress", "3", "1"}, R"({"cmd":"progress","job":3,"fraction":1.0})", Kind::kProgress},
    {{"progress", "3", ".25", "--iteration", "12", "--batch", "4"},
     R"({"cmd":"progress","job":3,"fraction":0.25,"iteration":12,"batch":4})",
     Kind::kProgress},
    {{"progress", "9", "--batch", "18446744073709551615"},
     R"({"cmd":"progress","job":9,"batch":18446744073709551615})",
     Kind::kProgress},
    {{"policy"}, R"({"cmd":"policy"})", Kind::kPolicyShow},
    {{"policy", "--json"}, R"({"cmd":"policy"})", Kind::kPolicyShow, true},
    {{"policy", "static"}, R"({"cmd":"policy","name":"static"})", Kind::kPolicySet},
    {{"policy", "round-robin", "--interval", "20s", "--rotate-on", "iteration"},
     R"({"cmd":"policy","name":"round-robin","interval":"20s","rotate_on":"iteration"})",
     Kind::kPolicySet},
    {{"policy", "progress", "--interval", "500ms"},
     R"({"cmd":"policy","name":"progress","interval":"500ms"})",
     Kind::kPolicySet},
    {{"policy", "shortest-first"}, R"({"cmd":"policy","name":"shortest-first"})", Kind::kPolicySet},
    {{"policy", "tensorlights-one"}, R"({"cmd":"policy","name":"tensorlights-one"})", Kind::kPolicySet},
    {{"stats"}, R"({"cmd":"stats"})", Kind::kStats},
    {{"stats", "--json"}, R"({"cmd":"stats"})", Kind::kStats, true},
    {{"stats", "--watch"}, R"({"cmd":"stats"})", Kind::kStatsWatch},
    {{"config"}, R"({"cmd":"config"})", Kind::kConfig},
    {{"config", "--json"}, R"({"cmd":"config"})", Kind::kConfig, true},
    {{"config", "--toml"}, R"({"cmd":"config"})", Kind::kConfigToml},
};

TEST(PsgatectlCommands, MapsEveryCommandToItsRequest) {
  for (const MapCase& c : kMapCases) {
    SCOPED_TRACE(joined(c.args));
    ParseOutcome o = parse(c.args);
    ASSERT_TRUE(o.invocation.has_value()) << o.err;
    EXPECT_EQ(o.invocation->request, json::parse(c.request));
    EXPECT_EQ(o.invocation->kind, c.kind);
    EXPECT_EQ(o.invocation->json_output, c.json_output);
    EXPECT_EQ(o.invocation->socket, kDefaultSocket);
    EXPECT_EQ(o.invocation->timeout_ms, kDefaultTimeoutMs);
    EXPECT_TRUE(o.out.empty());
    EXPECT_TRUE(o.err.empty());
  }
}

TEST(PsgatectlCommands, SocketTimeoutAndWatchCount) {
  struct Case {
    std::vector<std::string> args;
    const char* env;
    std::string socket;
    uint64_t timeout_ms;
    uint64_t watch_count;
  };
  const Case cases[] = {
      {{"health"}, nullptr, kDefaultSocket, 5000, 0},
      {{"health"}, "/tmp/env.sock", "/tmp/env.sock", 5000, 0},
      {{"health"}, "", kDefaultSocket, 5000, 0},  // empty variable = unset
      {{"-s", "/tmp/a.sock", "health"}, "/tmp/env.sock", "/tmp/a.sock", 5000, 0},
      {{"--socket", "/tmp/b.sock", "health"}, nullptr, "/tmp/b.sock", 5000, 0},
      {{"health", "-s", "/tmp/c.sock"}, nullptr, "/tmp/c.sock", 5000, 0},  // after the command too
      {{"--timeout", "250ms", "stats"}, nullptr, kDefaultSocket, 250, 0},
      {{"--timeout", "1.5s", "stats"}, nullptr, kDefaultSocket, 1500, 0},
      {{"--timeout", "10us", "stats"}, nullptr, kDefaultSocket, 1, 0},  // rounded up, never 0
      {{"--timeout", "86400s", "stats"}, nullptr, kDefaultSocket, 86'400'000, 0},
      {{"stats", "--watch", "--count", "3"}, nullptr, kDefaultSocket, 5000, 3},
      {{"stats", "-w", "--count", "1"}, nullptr, kDefaultSocket, 5000, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(joined(c.args));
    ParseOutcome o = parse(c.args, c.env);
    ASSERT_TRUE(o.invocation.has_value()) << o.err;
    EXPECT_EQ(o.invocation->socket, c.socket);
    EXPECT_EQ(o.invocation->timeout_ms, c.timeout_ms);
    EXPECT_EQ(o.invocation->watch_count, c.watch_count);
  }
  // A path no socket can have is a usage error whichever way it came (it
  // was "cannot reach", exit 3, from $PSGATE_SOCKET).
  const std::string long_path = "/tmp/" + std::string(120, 'x');
  for (const auto& [args, env] : {std::pair{std::vector<std::string>{"health"}, long_path.c_str()},
                                  std::pair{std::vector<std::string>{"-s", long_path, "health"}, "/tmp/ok.sock"}}) {
    ParseOutcome o = parse(args, env);
    EXPECT_FALSE(o.invocation.has_value());
    EXPECT_EQ(o.exit_code, kExitUsage) << o.err;
    EXPECT_NE(o.err.find("longer than 107 bytes"), std::string::npos) << o.err;
  }
}

struct UsageCase {
  std::vector<std::string> args;
  const char* message;  // must appear in stderr
};

const UsageCase kUsageCases[] = {
    {{}, "give a command: health, jobs"},
    {{"frobnicate"}, "not expected: frobnicate"},
    {{"health", "stats"}, "not expected: stats"},
    {{"jobs"}, "jobs: give add, rm, list or load"},
    {{"jobs", "purge"}, "not expected: purge"},
    {{"health", "extra"}, "extra"},
    {{"jobs", "add", "3"}, "--match is required"},
    {{"jobs", "add", "--match", "proto=tcp"}, "ID is required"},
    {{"jobs", "add", "3", "--match", "dst=10.0.0.999"}, "--match: "},
    {{"jobs", "add", "3", "--match", "colour=red"}, "--match"},
    // An unset variable ($RULE) is no rule: empty would match every packet.
    {{"jobs", "add", "3", "-m", ""}, "an empty rule would match every IP packet"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "-m", "  "}, "an empty rule would match every IP packet"},
    {{"jobs", "add", "3", "--match", "proto=tcp", "proto=udp"}, "proto=udp"},  // one rule per --match
    {{"jobs", "add", "0", "--match", "proto=tcp"}, "ID: must be a whole number from 1"},
    {{"jobs", "add", "x", "--match", "proto=tcp"}, "ID: must be a whole number"},
    {{"jobs", "add", "-3", "--match", "proto=tcp"}, "-3"},
    {{"jobs", "add", "0x10", "--match", "proto=tcp"}, "ID: must be a whole number"},
    {{"jobs", "add", "4294967296", "--match", "proto=tcp"}, "to 4294967295"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--police", "300Mbit"}, "--police"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--police", "none"}, "--police"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--police-burst", "64KiB"}, "--police-burst needs --police"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--police", "1Gbit/s", "--police-burst", "64"}, "--police-burst"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--rank", "first"}, "--rank: must be a whole number"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--name", ""}, "--name: must not be empty"},
    // Latin-1 from a script: JSON cannot carry it (the request's dump threw: SIGABRT).
    {{"jobs", "add", "3", "-m", "proto=tcp", "--name", "caf\xe9"}, "--name: must be valid UTF-8"},
    {{"jobs", "add", "3", "-m", "proto=tcp", "--name", std::string(65, 'n')}, "--name: must be 1..64 bytes"},
    {{"jobs", "rm"}, "ID is required"},
    {{"jobs", "rm", "three"}, "ID: must be a whole number"},
    {{"order"}, "ID is required"},
    {{"order", "1", "2", "1"}, "job 1 is listed twice"},
    {{"order", "1", "two"}, "ID: must be a whole number"},
    {{"rank", "3"}, "N is required"},
    {{"rank", "3", "1.5"}, "N: must be a whole number"},
    {{"class", "eth0", "1"}, "PORT: 'eth0' is not a port"},
    {{"class", "wire", "64"}, "CLASS: must be a whole number from 0 to 63"},
    {{"class", "wire"}, "CLASS is required"},
    {{"class", "wire", "1", "--cap", "fast"}, "--cap"},
    {{"class", "wire", "1", "--floor", "10"}, "--floor"},
    {{"class", "wire", "1", "--cap-burst", "1Mbit/s"}, "--cap-burst"},
    {{"class", "wire", "1", "--dscp", "64"}, "--dscp: must be a whole number from 0 to 63"},
    {{"class", "wire", "1", "--ecn-threshold", "-1"}, "-1"},
    {{"class", "wire", "1", "--cap", "none", "--cap-burst", "1KiB"}, "--cap-burst: makes no sense"},
    {{"class", "wire", "1", "--floor", "none", "--floor-burst", "1KiB"}, "--floor-burst: makes no sense"},
    {{"shaper", "wire"}, "RATE is required"},
    {{"shaper", "wire", "1G"}, "RATE"},
    {{"shaper", "lan", "1Gbit/s"}, "PORT: 'lan' is not a port"},
    {{"shaper", "wire", "none", "--burst", "64KiB"}, "--burst: makes no sense with RATE none"},
    {{"shaper", "wire", "1Gbit/s", "--burst", "lots"}, "--burst"},
    {{"progress", "3"}, "give FRACTION, --iteration or --batch"},
    {{"progress", "3", "1.5"}, "FRACTION: must be a fraction from 0 to 1"},
    {{"progress", "3", "nan"}, "FRACTION: must be a fraction"},
    {{"progress", "3", "inf"}, "FRACTION: must be a fraction"},
    {{"progress", "3", "50%"}, "FRACTION: must be a fraction"},
    {{"progress", "3", "--iteration", "-2"}, "-2"},
    {{"progress", "3", "--batch", "18446744073709551616"}, "--batch: must be a whole number"},
    {{"policy", "lottery"}, "unknown policy 'lottery'"},
    {{"policy", "--interval", "5s"}, "--interval and --rotate-on need a policy NAME"},
    {{"policy", "static", "--rotate-on", "time"}, "--rotate-on: only for round-robin"},
    {{"policy", "round-robin", "--rotate-on", "sometimes"}, "--rotate-on: must be time or iteration"},
    {{"policy", "round-robin", "--interval", "0s"}, "--interval: must be longer than 0s"},
    {{"policy", "round-robin", "--interval", "20"}, "--interval"},
    {{"stats", "--watch", "--json"}, "excludes"},
    {{"config", "--toml", "--json"}, "excludes"},
    {{"health", "--toml"}, "--toml"},
    {{"stats", "--count", "3"}, "requires"},
    {{"stats", "--watch", "--count", "0"}, "--count: must be a whole number from 1"},
    {{"--timeout", "5", "health"}, "--timeout"},
    {{"--timeout", "0ms", "health"}, "--timeout: must be longer than 0s"},
    {{"--timeout", "86401s", "health"}, "--timeout: at most 86400s"},  // once wrapped negative: timed out at once
    {{"-s", "", "health"}, "must not be empty"},
    {{"-s", std::string(120, 'x'), "health"}, "path longer than 107 bytes"},
};

TEST(PsgatectlCommands, UsageErrorsExitTwoWithoutARequest) {
  for (const UsageCase& c : kUsageCases) {
    SCOPED_TRACE(joined(c.args));
    ParseOutcome o = parse(c.args);
    EXPECT_FALSE(o.invocation.has_value());
    EXPECT_EQ(o.exit_code, kExitUsage);
    EXPECT_NE(o.err.find(c.message), std::string::npos) << o.err;
    EXPECT_EQ(o.err.rfind("psgatectl: ", 0), 0u) << o.err;
    EXPECT_TRUE(o.out.empty());
  }
}

TEST(PsgatectlCommands, HelpOnEverySubcommandExitsZero) {
  struct Case {
    std::vector<std::string> args;
    std::vector<std::string> mentions;
  };
  const Case cases[] = {
      {{"--help"},
       {"Usage: psgatectl", "--socket", "--timeout", "health", "jobs", "order", "rank", "class", "shaper", "progress",
        "policy", "stats", "config", "Exit status"}},
      {{"-h"}, {"Usage: psgatectl"}},
      {{"health", "--help"}, {"--json"}},
      {{"jobs", "--help"}, {"add", "rm", "list"}},
      {{"jobs", "add", "--help"}, {"ID", "--match", "--name", "--rank", "--police", "--police-burst", "--json"}},
      {{"jobs", "rm", "--help"}, {"ID"}},
      {{"jobs", "list", "--help"}, {"--json"}},
      {{"order", "--help"}, {"highest priority first"}},
      {{"rank", "--help"}, {"ID", "N"}},
      {{"class", "--help"},
       {"PORT", "CLASS", "--cap", "--cap-burst", "--floor", "--floor-burst", "--ecn-threshold", "--dscp"}},
      {{"shaper", "--help"}, {"PORT", "RATE", "--burst"}},
      {{"progress", "--help"}, {"FRACTION", "--iteration", "--batch"}},
      {{"policy", "--help"}, {"NAME", "round-robin", "shortest-first", "--interval", "--rotate-on"}},
      {{"stats", "--help"}, {"--json", "--watch", "--count"}},
      {{"config", "--help"}, {"--json", "--toml", "TOML config file"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(joined(c.args));
    ParseOutcome o = parse(c.args);
    EXPECT_FALSE(o.invocation.has_value());
    EXPECT_EQ(o.exit_code, kExitOk);
    EXPECT_TRUE(o.err.empty()) << o.err;
    for (const auto& m : c.mentions) EXPECT_NE(o.out.find(m), std::string::npos) << m << "\n" << o.out;
  }
}

TEST(PsgatectlCommands, ParseUint) {
  struct Case {
    const char* text;
    uint64_t min, max;
    bool ok;
    uint64_t value;
  };
  const Case cases[] = {
      {"0", 0, 10, true, 0},
      {"10", 0, 10, true, 10},
      {"11", 0, 10, false, 0},
      {"0", 1, 10, false, 0},
      {"007", 0, 10, true, 7},  // decimal, never octal
      {"18446744073709551615", 0, UINT64_MAX, true, UINT64_MAX},
      {"18446744073709551616", 0, UINT64_MAX, false, 0},
      {"", 0, 10, false, 0},
      {"+1", 0, 10, false, 0},
      {"-1", 0, 10, false, 0},
      {" 1", 0, 10, false, 0},
      {"1 ", 0, 10, false, 0},
      {"1e3", 0, 10000, false, 0},
      {"0x1", 0, 10, false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parse_uint(c.text, c.min, c.max);
    ASSERT_EQ(r.ok(), c.ok) << (r ? "" : r.error());
    if (c.ok) {
      EXPECT_EQ(*r, c.value);
    }
  }
}

// The value is quoted in the error as typed, but a control character (a
// terminal's escape sequence pasted in) is escaped, never sent as it is.
TEST(PsgatectlCommands, ParseUintEscapesControlCharactersInItsError) {
  auto r = parse_uint("\x1b[2J", 0, 10);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().find('\x1b'), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("not '\\x1b[2J'"), std::string::npos) << r.error();
}

TEST(PsgatectlCommands, ParseFraction) {
  struct Case {
    const char* text;
    bool ok;
    double value;
  };
  const Case cases[] = {
      {"0", true, 0},        {"1", true, 1},       {"0.5", true, 0.5}, {".25", true, 0.25}, {"1.0", true, 1},
      {"1e-3", true, 0.001}, {"1.0001", false, 0}, {"-0", false, 0},   {"-0.1", false, 0},  {"nan", false, 0},
      {"inf", false, 0},     {"", false, 0},       {"0.5x", false, 0}, {"50%", false, 0},   {"+0.5", false, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    auto r = parse_fraction(c.text);
    ASSERT_EQ(r.ok(), c.ok);
    if (c.ok) {
      EXPECT_DOUBLE_EQ(*r, c.value);
    }
  }
}

// Every command of the protocol's table is a psgatectl command: its words and
// its arguments' examples make a request that the daemon's own parser accepts
// as that command, and its help names every argument.
TEST(PsgatectlCommands, EveryProtocolCommandFromTheTable) {
  size_t index = 0;
  for (const psgate::CommandSpec& c : psgate::control_commands()) {
    std::vector<std::string> args;
    std::istringstream words(c.cli);
    for (std::string w; words >> w;) args.push_back(w);
    std::vector<std::string> help_args = args;
    help_args.push_back("--help");
    for (const psgate::ArgSpec& a : c.args) {
      const std::string cli = a.cli;
      if (cli[0] == '-') args.push_back(cli.substr(cli.rfind(',') + 1));
      if (a.type == psgate::ArgType::kJobs) {
        // A file argument: psgatectl reads it, so the example must exist.
        const std::string path = ::testing::TempDir() + "/" + a.example;
        std::ofstream(path) << R"([{"job": 3, "match": ["proto=tcp"]}])";
        args.push_back(path);
      } else {
        args.push_back(a.example);
      }
    }
    SCOPED_TRACE(joined(args));
    ParseOutcome o = parse(args);
    ASSERT_TRUE(o.invocation.has_value()) << o.err;
    EXPECT_EQ(o.invocation->request["cmd"], c.name);
    const auto r = psgate::parse_control_request(o.invocation->request, 64);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->index(), index);
    ++index;

    ParseOutcome help = parse(help_args);
    EXPECT_EQ(help.exit_code, kExitOk);
    EXPECT_NE(help.out.find(c.help), std::string::npos) << help.out;
    for (const psgate::ArgSpec& a : c.args) {
      const std::string cli = a.cli;
      EXPECT_NE(help.out.find(cli.substr(cli.rfind(',') + 1)), std::string::npos) << a.name << "\n" << help.out;
    }
  }
}

TEST(PsgatectlCommands, PolicyNamesAreTheProtocolsSeven) {
  for (const char* n : {"static", "fifo", "tensorlights-one", "round-robin", "progress", "batch", "shortest-first"}) {
    EXPECT_TRUE(psgate::policy_from_name(n)) << n;
  }
  for (const char* n : {"", "Static", "rr", "tensorlights", "shortest"}) EXPECT_FALSE(psgate::policy_from_name(n)) << n;
}

// jobs load's requests: in order, each within the line limit and at most
// kMaxJobsPerLoadRequest jobs (a cluster-mode request is one etcd
// transaction, refused beyond 128 operations), every job in exactly one.
TEST(JobsLoadSplit, RequestsKeepOrderAndStayWithinBytesAndJobCount) {
  json jobs = json::array();
  for (int id = 1; id <= 300; ++id)
    jobs.push_back({{"job", id}, {"match", json::array({"dst=10.0.0." + std::to_string(id % 250) + "/32"})}});
  for (size_t max_line : {size_t{65536}, size_t{2000}}) {
    auto groups = split_jobs(jobs, max_line);
    ASSERT_TRUE(groups) << groups.error();
    int next = 1;
    for (const json& g : *groups) {
      EXPECT_FALSE(g.empty());
      EXPECT_LE(g.size(), kMaxJobsPerLoadRequest);
      EXPECT_LE(json({{"cmd", "jobs.load"}, {"jobs", g}}).dump().size(), max_line);
      for (const json& j : g) EXPECT_EQ(j["job"], next++);
    }
    EXPECT_EQ(next, 301);
  }
  EXPECT_EQ(split_jobs(jobs, 65536)->size(), (300 + kMaxJobsPerLoadRequest - 1) / kMaxJobsPerLoadRequest);
  EXPECT_FALSE(split_jobs(jobs, 20)) << "a job larger than a request is an error";
}

using psgate::testing::finishes_within;

// A reply or a jobs file with a long array of objects: the parse with a
// depth callback took time quadratic in its length (nlohmann walks the
// array at each object's end), minutes for a jobs.list of 300,000 jobs and
// hours for a million objects. Both are read at once now (the limit is no
// measure of speed).
TEST(JobsLoadFile, LongListsAreReadInLinearTime) {
  std::string reply = R"({"ok": true, "result": {"jobs": [)";
  for (int i = 0; i < 1'000'000; ++i) reply += i ? R"(,{"a":1})" : R"({"a":1})";
  reply += "]}}";
  char tmpl[] = "/tmp/psgatectl-jobs-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  {
    std::ofstream f(path);
    f << "[";
    for (int i = 1; i <= 300'000; ++i) f << (i > 1 ? "," : "") << R"({"job": )" << i << R"(, "match": ["proto=tcp"]})";
    f << "]";
  }
  psgate::Result<Reply> parsed = psgate::Result<Reply>::failure("not parsed");
  psgate::Result<json> jobs = psgate::Result<json>::failure("not read");
  ASSERT_TRUE(finishes_within(std::chrono::seconds(120), [&] {
    parsed = parse_reply(reply);
    jobs = read_jobs_file(path);
  })) << "not parsed within 120 s";
  ::unlink(path.c_str());
  ASSERT_TRUE(parsed) << parsed.error();
  EXPECT_EQ(parsed->result["jobs"].size(), 1'000'000u);
  ASSERT_TRUE(jobs) << jobs.error();
  EXPECT_EQ(jobs->size(), 300'000u);
}

// A jobs file with a key repeated in a job is refused, as the daemon refuses
// such a request, instead of being read with the last value (a parsed json
// keeps only that one).
TEST(JobsLoadFile, ARepeatedKeyIsRefusedNotReadLastWins) {
  char tmpl[] = "/tmp/psgatectl-jobs-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  const std::string path = tmpl;
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write(R"([{"job": 7, "match": ["proto=tcp"], "rank": 0}])");
  EXPECT_TRUE(read_jobs_file(path));
  write(R"([{"job": 7, "match": ["proto=tcp"], "rank": 0, "rank": 5}])");
  auto refused = read_jobs_file(path);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("duplicate key \"rank\""), std::string::npos) << refused.error();
  // A misspelt key beside "jobs" is refused too, as a request's would be.
  write(R"({"jobs": [{"job": 7, "match": ["proto=tcp"]}], "policy": "fifo"})");
  auto extra = read_jobs_file(path);
  ASSERT_FALSE(extra);
  EXPECT_NE(extra.error().find("unknown key \"policy\""), std::string::npos) << extra.error();
  ::unlink(path.c_str());
}

// Files that are no jobs file end in an error, not in an abort (/dev/zero
// was read until memory ran out) or a hang past --timeout (a FIFO nobody
// writes to).
TEST(JobsLoadFile, EndlessOrOddFilesAreErrors) {
  auto endless = read_jobs_file("/dev/zero");
  ASSERT_FALSE(endless);
  EXPECT_NE(endless.error().find("larger than 64 MiB"), std::string::npos) << endless.error();
  auto dir = read_jobs_file("/tmp");
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().find("is a directory"), std::string::npos) << dir.error();
  char tmpl[] = "/tmp/psgatectl-fifo-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string fifo = std::string(tmpl) + "/jobs";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A writer that comes a little after the reader (gen > fifo & jobs load
  // fifo) is waited for.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::ofstream(fifo) << R"([{"job": 7, "match": ["proto=tcp"]}])";
  });
  auto late = read_jobs_file(fifo);
  writer.join();
  EXPECT_TRUE(late) << late.error();
  ::unlink(fifo.c_str());
  ::rmdir(tmpl);
}

}  // namespace
}  // namespace psgatectl
