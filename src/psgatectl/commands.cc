// argv -> request. Each subcommand mirrors one protocol command; arguments are
// checked here with psgate's own unit and rule parsers and sent as the user
// typed them (the daemon parses them again; the protocol carries text).
#include "commands.h"

#include <array>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <sstream>
#include <sys/un.h>

#include <CLI/CLI.hpp>

#include "psgate/match_rule.h"
#include "psgate/units.h"

namespace psgatectl {

using nlohmann::json;
using psgate::Result;

namespace {

constexpr std::array<std::string_view, 7> kPolicyNames = {
    "static", "fifo", "tensorlights-one", "round-robin", "progress", "batch", "shortest-first"};

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxClass = 63;  // classes.count is at most 64
constexpr uint64_t kMaxDscp = 63;

// A usage error found after CLI11 accepted the syntax.
struct UsageError {
  std::string message;
};

// A CLI11 check from a function that returns "" when the text is acceptable.
CLI::Validator check(std::function<std::string(const std::string&)> fn) {
  return CLI::Validator([fn](std::string& s) { return fn(s); }, "");
}

std::string error_of(const Result<uint64_t>& r) { return r ? "" : r.error(); }

CLI::Validator job_id() {
  return check([](const std::string& s) { return error_of(parse_uint(s, 1, kU32Max)); });
}
CLI::Validator uint_in(uint64_t min, uint64_t max) {
  return check([=](const std::string& s) { return error_of(parse_uint(s, min, max)); });
}
CLI::Validator rate_or_none(bool allow_none) {
  return check([=](const std::string& s) -> std::string {
    if (allow_none && s == "none") return "";
    auto r = psgate::parse_rate_bps(s);
    return r ? "" : r.error();
  });
}
CLI::Validator size() {
  return check([](const std::string& s) -> std::string {
    auto r = psgate::parse_size_bytes(s);
    return r ? "" : r.error();
  });
}
CLI::Validator duration() {
  return check([](const std::string& s) -> std::string {
    auto r = psgate::parse_duration_ns(s);
    if (!r) return r.error();
    return *r == 0 ? "must be longer than 0s" : "";
  });
}
CLI::Validator port_name() {
  return check([](const std::string& s) -> std::string {
    return s == "wire" || s == "host" ? "" : "'" + s + "' is not a port (wire or host)";
  });
}

// Numbers are checked by the validators above; these convert the checked text.
uint64_t num(const std::string& s) { return *parse_uint(s, 0, kU64Max); }
json rate_json(const std::string& s) { return s == "none" ? json(nullptr) : json(s); }

std::string policy_list() {
  std::string out;
  for (auto name : kPolicyNames) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// A command is required but checked after parsing (see require_subcommand
// below), so CLI11 would print it as optional: "[SUBCOMMAND]". Say what is true.
class UsageFormatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App* app, std::string name) const override {
    std::string usage = CLI::Formatter::make_usage(app, std::move(name));
    const std::string optional = " [SUBCOMMAND]";
    const size_t at = usage.find(optional);
    if (at != std::string::npos) usage.replace(at, optional.size(), " COMMAND ...");
    return usage;
  }
};

// Everything the subcommands bind to; read after a successful parse.
struct Args {
  std::string socket;
  std::string timeout = "5s";
  bool json_output = false;
  // jobs add / rm, rank, progress
  std::string id;
  std::vector<std::string> match;
  std::string name, rank, police, police_burst;
  // order
  std::vector<std::string> ids;
  // class / shaper
  std::string port, cls, cap, cap_burst, floor, floor_burst, ecn_threshold, dscp, rate, burst;
  // progress
  std::string fraction, iteration, batch;
  // policy
  std::string policy, interval, rotate_on;
  // stats
  bool watch = false;
  std::string count;
};

CLI::App* add_json_flag(CLI::App* sub, Args& a, const char* what) {
  sub->add_flag("--json", a.json_output, std::string("Print ") + what + " exactly as the daemon sent it");
  return sub;
}

// Map the parsed subcommand to the request. Throws UsageError for the
// combinations CLI11 cannot express.
struct Subcommands {
  CLI::App *health, *jobs, *jobs_add, *jobs_rm, *jobs_list, *order, *rank, *cls, *shaper, *progress,
      *policy, *stats, *config;
};

Invocation build(const Subcommands& s, const Args& a) {
  Invocation inv;
  inv.json_output = a.json_output;
  json& req = inv.request;
  auto given = [](CLI::App* sub, const char* opt) { return sub->count(opt) > 0; };

  if (s.health->parsed()) {
    inv.kind = Kind::kHealth;
    req = {{"cmd", "health"}};
  } else if (s.jobs_list->parsed()) {
    inv.kind = Kind::kJobsList;
    req = {{"cmd", "jobs.list"}};
  } else if (s.jobs_add->parsed()) {
    inv.kind = Kind::kJobsAdd;
    req = {{"cmd", "jobs.add"}, {"id", num(a.id)}, {"match", a.match}};
    if (given(s.jobs_add, "--name")) {
      if (a.name.empty()) throw UsageError{"--name: must not be empty"};
      req["name"] = a.name;
    }
    if (given(s.jobs_add, "--rank")) req["rank"] = num(a.rank);
    if (given(s.jobs_add, "--police")) req["police"] = a.police;
    if (given(s.jobs_add, "--police-burst")) {
      if (!given(s.jobs_add, "--police")) throw UsageError{"--police-burst needs --police RATE"};
      req["police_burst"] = a.police_burst;
    }
  } else if (s.jobs_rm->parsed()) {
    inv.kind = Kind::kJobsRemove;
    req = {{"cmd", "jobs.remove"}, {"id", num(a.id)}};
  } else if (s.order->parsed()) {
    inv.kind = Kind::kOrder;
    std::vector<uint64_t> ids;
    std::set<uint64_t> seen;
    for (const auto& text : a.ids) {
      const uint64_t id = num(text);
      if (!seen.insert(id).second) throw UsageError{"ID: job " + text + " is listed twice"};
      ids.push_back(id);
    }
    req = {{"cmd", "order"}, {"ids", ids}};
  } else if (s.rank->parsed()) {
    inv.kind = Kind::kRank;
    req = {{"cmd", "rank"}, {"id", num(a.id)}, {"rank", num(a.rank)}};
  } else if (s.cls->parsed()) {
    inv.kind = Kind::kClassSet;
    req = {{"cmd", "class.set"}, {"port", a.port}, {"class", num(a.cls)}};
    if (given(s.cls, "--cap")) req["cap"] = rate_json(a.cap);
    if (given(s.cls, "--cap-burst")) req["cap_burst"] = a.cap_burst;
    if (given(s.cls, "--floor")) req["floor"] = rate_json(a.floor);
    if (given(s.cls, "--floor-burst")) req["floor_burst"] = a.floor_burst;
    if (given(s.cls, "--ecn-threshold")) req["ecn_threshold"] = num(a.ecn_threshold);
    if (given(s.cls, "--dscp")) req["dscp"] = a.dscp == "none" ? json(nullptr) : json(num(a.dscp));
    if (given(s.cls, "--cap-burst") && given(s.cls, "--cap") && a.cap == "none") {
      throw UsageError{"--cap-burst: makes no sense with --cap none"};
    }
    if (given(s.cls, "--floor-burst") && given(s.cls, "--floor") && a.floor == "none") {
      throw UsageError{"--floor-burst: makes no sense with --floor none"};
    }
  } else if (s.shaper->parsed()) {
    inv.kind = Kind::kShaperSet;
    req = {{"cmd", "shaper.set"}, {"port", a.port}, {"rate", rate_json(a.rate)}};
    if (given(s.shaper, "--burst")) {
      if (a.rate == "none") throw UsageError{"--burst: makes no sense with RATE none"};
      req["burst"] = a.burst;
    }
  } else if (s.progress->parsed()) {
    inv.kind = Kind::kProgress;
    req = {{"cmd", "progress"}, {"id", num(a.id)}};
    if (given(s.progress, "FRACTION")) req["fraction"] = *parse_fraction(a.fraction);
    if (given(s.progress, "--iteration")) req["iteration"] = num(a.iteration);
    if (given(s.progress, "--batch")) req["batch"] = num(a.batch);
    if (req.size() == 2) throw UsageError{"progress: give FRACTION, --iteration or --batch"};
  } else if (s.policy->parsed()) {
    const bool named = given(s.policy, "NAME");
    inv.kind = named ? Kind::kPolicySet : Kind::kPolicyShow;
    req = {{"cmd", "policy"}};
    if (!named && (given(s.policy, "--interval") || given(s.policy, "--rotate-on"))) {
      throw UsageError{"--interval and --rotate-on need a policy NAME"};
    }
    if (named) req["name"] = a.policy;
    if (given(s.policy, "--interval")) req["interval"] = a.interval;
    if (given(s.policy, "--rotate-on")) {
      if (a.policy != "round-robin") throw UsageError{"--rotate-on: only for round-robin"};
      req["rotate_on"] = a.rotate_on;
    }
  } else if (s.stats->parsed()) {
    inv.kind = a.watch ? Kind::kStatsWatch : Kind::kStats;
    req = {{"cmd", "stats"}};
    if (given(s.stats, "--count")) inv.watch_count = num(a.count);
  } else if (s.config->parsed()) {
    inv.kind = Kind::kConfig;
    req = {{"cmd", "config"}};
  } else if (s.jobs->parsed()) {
    throw UsageError{"jobs: give add, rm or list"};
  } else {
    throw UsageError{"give a command: health, jobs, order, rank, class, shaper, progress, policy, stats or config"};
  }
  return inv;
}

}  // namespace

Result<uint64_t> parse_uint(std::string_view text, uint64_t min, uint64_t max) {
  auto range = [&] {
    return "must be a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
           ", not '" + std::string(text) + "'";
  };
  if (text.empty() || text.front() < '0' || text.front() > '9') return Result<uint64_t>::failure(range());
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min || value > max) {
    return Result<uint64_t>::failure(range());
  }
  return value;
}

Result<double> parse_fraction(std::string_view text) {
  auto bad = [&] {
    return Result<double>::failure("must be a fraction from 0 to 1 (0.25 is a quarter done), not '" +
                                   std::string(text) + "'");
  };
  if (text.empty() || !(text.front() == '.' || (text.front() >= '0' && text.front() <= '9'))) return bad();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0 ||
      value > 1) {
    return bad();
  }
  return value;
}

bool is_policy_name(std::string_view name) {
  for (auto p : kPolicyNames) {
    if (p == name) return true;
  }
  return false;
}

ParseOutcome parse_command_line(int argc, const char* const* argv, const char* env_socket) {
  Args a;
  a.socket = env_socket != nullptr && *env_socket != '\0' ? env_socket : kDefaultSocket;

  CLI::App app{"psgatectl: control a running psgate gateway through its control socket.\n"
               "Each command sends one request (docs/control-protocol.md) and prints the reply;\n"
               "stats --watch sends one a second.",
               "psgatectl"};
  app.footer(
      "Exit status: 0 success, 1 the daemon refused the request (its error on stderr),\n"
      "2 usage error (nothing sent), 3 the daemon cannot be reached.\n"
      "Run 'psgatectl COMMAND --help' for a command's arguments.");
  // At most one command; a missing one is reported by build(), so that an
  // unknown word reads "not expected: WORD" rather than "a subcommand is required".
  app.require_subcommand(0, 1);
  app.fallthrough();  // -s/--timeout may also follow the command
  auto formatter = std::make_shared<UsageFormatter>();
  formatter->column_width(34);
  app.formatter(formatter);  // inherited by the subcommands added below
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "psgatectl: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  app.add_option("-s,--socket", a.socket,
                 std::string("Control socket (default: $PSGATE_SOCKET, else ") + kDefaultSocket + ")")
      ->type_name("PATH")
      ->check(check([](const std::string& s) -> std::string {
        if (s.empty()) return "must not be empty";
        if (s.size() >= sizeof(sockaddr_un{}.sun_path)) {
          return "path longer than " + std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes";
        }
        return "";
      }));
  app.add_option("--timeout", a.timeout,
                 "How long to wait for the daemon to accept and answer a request,\n"
                 "e.g. 500ms, 10s (default 5s)")
      ->type_name("DURATION")
      ->check(duration());

  Subcommands s{};
  s.health = add_json_flag(app.add_subcommand("health", "Show the daemon's status, version, uptime and policy"),
                           a, "the result");

  s.jobs = app.add_subcommand("jobs", "Add, remove or list training jobs");
  s.jobs->require_subcommand(0, 1);
  s.jobs_add = s.jobs->add_subcommand("add", "Add a job that owns the traffic its match rules select");
  s.jobs_add->add_option("ID", a.id, "Job id, 1..4294967295, not already used")->type_name("")->required()->check(job_id());
  s.jobs_add
      ->add_option("-m,--match", a.match,
                   "Match rule, e.g. dst=10.0.0.5/32,dport=2222,proto=tcp (keys: src, dst,\n"
                   "sport, dport, proto); repeat for more rules, any one selects the job")
      ->type_name("RULE")
      ->required()
      ->allow_extra_args(false)
      ->check(check([](const std::string& s) -> std::string {
        auto r = psgate::parse_match_rule(s);
        return r ? "" : r.error();
      }));
  s.jobs_add->add_option("--name", a.name, "Label in reports (default: job-ID)")->type_name("NAME");
  s.jobs_add->add_option("--rank", a.rank, "Rank, 0 = highest priority (default: after every job)")
      ->type_name("N")
      ->check(uint_in(0, kU32Max));
  s.jobs_add->add_option("--police", a.police, "Ingress policer rate, e.g. 300Mbit/s (default: none)")
      ->type_name("RATE")
      ->check(rate_or_none(false));
  s.jobs_add->add_option("--police-burst", a.police_burst, "Policer bucket depth, e.g. 64KiB")
      ->type_name("SIZE")
      ->check(size());
  add_json_flag(s.jobs_add, a, "the added job");

  s.jobs_rm = s.jobs->add_subcommand("rm", "Remove a job; its traffic falls back to the default class");
  s.jobs_rm->alias("remove");
  s.jobs_rm->add_option("ID", a.id, "Job id")->type_name("")->required()->check(job_id());
  add_json_flag(s.jobs_rm, a, "the result");

  s.jobs_list = s.jobs->add_subcommand("list", "List jobs in rank order with rules, classes and progress");
  add_json_flag(s.jobs_list, a, "the job list");

  s.order = app.add_subcommand("order",
                               "Set the job order, highest priority first; unlisted jobs follow\n"
                               "in their current relative order");
  s.order->add_option("ID", a.ids, "Job ids, highest priority first")->type_name("")->required()->check(job_id());
  add_json_flag(s.order, a, "the resulting job list");

  s.rank = app.add_subcommand("rank", "Set one job's rank (0 = highest); other jobs keep theirs");
  s.rank->add_option("ID", a.id, "Job id")->type_name("")->required()->check(job_id());
  s.rank->add_option("N", a.rank, "Rank, 0 = highest priority")->type_name("")->required()->check(uint_in(0, kU32Max));
  add_json_flag(s.rank, a, "the job");

  s.cls = app.add_subcommand("class",
                             "Set an egress class's cap, floor, ECN threshold or DSCP remark;\n"
                             "with no option, show its settings");
  s.cls->add_option("PORT", a.port, "Egress port: wire or host")->type_name("")->required()->check(port_name());
  s.cls->add_option("CLASS", a.cls, "Class number, 0 = highest")->type_name("")->required()->check(uint_in(0, kMaxClass));
  s.cls->add_option("--cap", a.cap, "Rate cap, e.g. 300Mbit/s; none removes it")
      ->type_name("RATE|none")
      ->check(rate_or_none(true));
  s.cls->add_option("--cap-burst", a.cap_burst, "Cap bucket depth, e.g. 64KiB")->type_name("SIZE")->check(size());
  s.cls->add_option("--floor", a.floor, "Minimum rate served ahead of strict priority; none removes it")
      ->type_name("RATE|none")
      ->check(rate_or_none(true));
  s.cls->add_option("--floor-burst", a.floor_burst, "Floor bucket depth, e.g. 64KiB")
      ->type_name("SIZE")
      ->check(size());
  s.cls->add_option("--ecn-threshold", a.ecn_threshold, "Mark CE at this many queued packets; 0 = off")
      ->type_name("N")
      ->check(uint_in(0, kU32Max));
  s.cls->add_option("--dscp", a.dscp, "Remark DSCP to N (0..63); none keeps packets' DSCP")
      ->type_name("N|none")
      ->check(check([](const std::string& s) -> std::string {
        return s == "none" ? "" : error_of(parse_uint(s, 0, kMaxDscp));
      }));
  add_json_flag(s.cls, a, "the class settings");

  s.shaper = app.add_subcommand("shaper", "Set or remove a port's egress shaper");
  s.shaper->add_option("PORT", a.port, "Egress port: wire or host")->type_name("")->required()->check(port_name());
  s.shaper->add_option("RATE", a.rate, "Shaper rate, e.g. 1Gbit/s; none removes the shaper")
      ->type_name("RATE|none")
      ->required()
      ->check(rate_or_none(true));
  s.shaper->add_option("--burst", a.burst, "Bucket depth, e.g. 64KiB")->type_name("SIZE")->check(size());
  add_json_flag(s.shaper, a, "the shaper settings");

  s.progress = app.add_subcommand("progress",
                                  "Report a job's progress (used by the progress and batch policies);\n"
                                  "give at least one of FRACTION, --iteration, --batch");
  s.progress->add_option("ID", a.id, "Job id")->type_name("")->required()->check(job_id());
  s.progress->add_option("FRACTION", a.fraction, "Fraction of training done, 0..1")
      ->type_name("")
      ->check(check([](const std::string& s) -> std::string {
        auto r = parse_fraction(s);
        return r ? "" : r.error();
      }));
  s.progress->add_option("--iteration", a.iteration, "Current iteration number")
      ->type_name("N")
      ->check(uint_in(0, kU64Max));
  s.progress->add_option("--batch", a.batch, "Current batch number")->type_name("N")->check(uint_in(0, kU64Max));
  add_json_flag(s.progress, a, "the job");

  s.policy = app.add_subcommand("policy", "Choose the scheduling policy; with no NAME, show the current one");
  s.policy->add_option("NAME", a.policy, "One of: " + policy_list())
      ->type_name("")
      ->check(check([](const std::string& s) -> std::string {
        return is_policy_name(s) ? "" : "unknown policy '" + s + "' (one of: " + policy_list() + ")";
      }));
  s.policy
      ->add_option("--interval", a.interval,
                   "round-robin: rotation period (default 20s); others: how often\n"
                   "they re-evaluate (default 1s)")
      ->type_name("DURATION")
      ->check(duration());
  s.policy->add_option("--rotate-on", a.rotate_on, "round-robin only: rotate on wall-clock time or at iteration ends")
      ->type_name("time|iteration")
      ->check(check([](const std::string& s) -> std::string {
        return s == "time" || s == "iteration" ? "" : "must be time or iteration, not '" + s + "'";
      }));
  add_json_flag(s.policy, a, "the policy");

  s.stats = app.add_subcommand("stats",
                               "Show counters: ports, drops by reason, non-empty classes with\n"
                               "sojourn percentiles, jobs with telemetry");
  auto* json_opt = s.stats->add_flag("--json", a.json_output, "Print the counters exactly as the daemon sent them");
  auto* watch_opt = s.stats->add_flag(
      "-w,--watch", a.watch, "Live per-job table (Mbit/s sent, drops/s, telemetry), every second until Ctrl-C");
  watch_opt->excludes(json_opt);
  s.stats->add_option("--count", a.count, "With --watch: stop after N refreshes")
      ->type_name("N")
      ->needs(watch_opt)
      ->check(uint_in(1, kU64Max));

  s.config = app.add_subcommand("config", "Show the configuration in force, live changes applied");
  add_json_flag(s.config, a, "the configuration");

  ParseOutcome outcome;
  std::ostringstream out, err;
  try {
    app.parse(argc, argv);
    Invocation inv = build(s, a);
    inv.socket = a.socket;
    const uint64_t timeout_ns = *psgate::parse_duration_ns(a.timeout);
    inv.timeout_ms = std::max<uint64_t>(1, (timeout_ns + 999'999) / 1'000'000);
    outcome.invocation = std::move(inv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e, out, err);
    // Help is success; every other parse error is a usage error, whatever
    // CLI11's own code for it.
    outcome.exit_code = code == 0 ? kExitOk : kExitUsage;
  } catch (const UsageError& e) {
    err << "psgatectl: " << e.message << "\nRun with --help for more information.\n";
    outcome.exit_code = kExitUsage;
  }
  outcome.out = out.str();
  outcome.err = err.str();
  return outcome;
}

}  // namespace psgatectl
