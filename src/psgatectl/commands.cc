// SPDX-License-Identifier: BSD-3-Clause
// argv -> request, derived from the control protocol's command table
// (psgate/control_commands.h): each command is one subcommand under
// psgatectl's words for it, each argument one positional or option, checked
// by its type with psgate's own parsers and sent as the user typed it (the
// daemon parses it again; the protocol carries text). Help comes from the
// same table. psgatectl's own additions: --json, stats --watch/--count,
// config --toml, and
// the few combinations the protocol accepts that on a command line are
// surely mistakes (check_combinations).
#include "commands.h"

#include <sys/un.h>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include <CLI/CLI.hpp>

#include "jobs_file.h"
#include "psgate/cli_checks.h"
#include "psgate/control_commands.h"
#include "psgate/counters.h"  // kPortNames
#include "psgate/match_rule.h"
#include "psgate/policy.h"
#include "psgate/text.h"  // name_problem
#include "psgate/units.h"

namespace psgatectl {

using nlohmann::json;
using psgate::ArgSpec;
using psgate::ArgType;
using psgate::CommandSpec;
using psgate::Result;

namespace {

constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

// How each command's reply is printed (format.h), by wire name. `policy`
// and `stats` are refined by their arguments in build().
struct KindOf {
  std::string_view command;
  Kind kind;
};
constexpr KindOf kKinds[] = {
    {"health", Kind::kHealth},      {"jobs.list", Kind::kJobsList},     {"jobs.add", Kind::kJobsAdd},
    {"jobs.load", Kind::kJobsLoad}, {"jobs.remove", Kind::kJobsRemove}, {"order", Kind::kOrder},
    {"rank", Kind::kRank},          {"class.set", Kind::kClassSet},     {"shaper.set", Kind::kShaperSet},
    {"progress", Kind::kProgress},  {"policy", Kind::kPolicySet},       {"stats", Kind::kStats},
    {"config", Kind::kConfig},      {"cluster", Kind::kCluster},        {"reload", Kind::kReload},
};

// Commands of two words ("jobs add") sit under a group; what the group says.
struct Group {
  std::string_view word;
  const char* help;
  const char* hint;  // when the group is given alone
};
constexpr Group kGroups[] = {
    {"jobs", "Add, remove, list or load (from a file) training jobs", "jobs: give add, rm, list or load"},
};

// A usage error found after CLI11 accepted the syntax.
struct UsageError {
  std::string message;
};

using psgate::cli::check;

std::string error_of(const Result<uint64_t>& r) { return r ? "" : r.error(); }

CLI::Validator uint_in(uint64_t min, uint64_t max) {
  return check([=](const std::string& s) { return error_of(parse_uint(s, min, max)); });
}
CLI::Validator duration() {
  return check([](const std::string& s) -> std::string {
    auto r = psgate::parse_duration_ns(s);
    if (!r) return r.error();
    return *r == 0 ? "must be longer than 0s" : "";
  });
}

// Numbers are checked by the validators; this converts the checked text.
uint64_t num(const std::string& s) { return *parse_uint(s, 0, kU64Max); }

// "a, b or c"
std::string one_of(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

// ---- arguments, by their type in the command table ----------------------------

bool is_positional(const ArgSpec& a) { return a.cli[0] != '-'; }

// What messages call the argument: "ID", "--police-burst" (not "-m,--match").
std::string label(const ArgSpec& a) {
  const std::string_view cli = a.cli;
  const size_t comma = cli.rfind(',');
  return std::string(comma == std::string_view::npos ? cli : cli.substr(comma + 1));
}

std::string type_name(const ArgSpec& a) {
  if (is_positional(a)) return "";  // the positional's own name says it
  std::string t;
  switch (a.type) {
    case ArgType::kJobId:
    case ArgType::kJobIds:
    case ArgType::kUint:
      t = "N";
      break;
    case ArgType::kRate:
      t = "RATE";
      break;
    case ArgType::kSize:
      t = "SIZE";
      break;
    case ArgType::kDuration:
      t = "DURATION";
      break;
    case ArgType::kPort:
      t = "PORT";
      break;
    case ArgType::kRules:
      t = "RULE";
      break;
    case ArgType::kJobs:
      t = "FILE";
      break;
    case ArgType::kText:
      t = "TEXT";
      break;
    case ArgType::kFraction:
      t = "FRACTION";
      break;
    case ArgType::kPolicy:
      t = "NAME";
      break;
    case ArgType::kRotateOn:
      t = "time|iteration";
      break;
  }
  return a.nullable ? t + "|none" : t;
}

std::string help_of(const ArgSpec& a) {
  std::string h = a.help;
  if (a.type == ArgType::kPolicy) h += " (one of: " + psgate::policy_name_list() + ")";
  if (a.type == ArgType::kRules) h += ", e.g. " + std::string(a.example);
  return h;
}

// "" when `s` is a valid value for `a` as typed on the command line.
std::string check_text(const ArgSpec& a, const std::string& s) {
  if (a.nullable && s == "none") return "";
  switch (a.type) {
    case ArgType::kJobId:
    case ArgType::kJobIds:
      return error_of(parse_uint(s, 1, kU32Max));
    case ArgType::kUint:
      return error_of(parse_uint(s, a.min, a.max));
    case ArgType::kRate: {
      auto r = psgate::parse_rate_bps(s);
      return r ? "" : r.error();
    }
    case ArgType::kSize: {
      auto r = psgate::parse_size_bytes(s);
      return r ? "" : r.error();
    }
    case ArgType::kDuration: {
      auto r = psgate::parse_duration_ns(s);
      if (!r) return r.error();
      return *r == 0 ? "must be longer than 0s" : "";
    }
    case ArgType::kPort: {
      std::vector<std::string> names;
      for (const char* p : psgate::kPortNames) {
        if (s == p) return "";
        names.push_back(p);
      }
      return "'" + s + "' is not a port (" + one_of(names) + ")";
    }
    case ArgType::kRules: {
      // The protocol reads an empty rule as "every IP packet"; on a command
      // line it is far more often a variable that was not set, and a job
      // that takes every packet it outranks is no small mistake.
      if (s.find_first_not_of(" \t") == std::string::npos)
        return "an empty rule would match every IP packet (an unset variable?); name what the job sends, "
               "e.g. proto=tcp,dport=2222 (a jobs file may hold \"\" to mean every packet)";
      auto r = psgate::parse_match_rule(s);
      return r ? "" : r.error();
    }
    case ArgType::kText:  // a job's name: checked here, as the daemon would (and JSON needs UTF-8)
      return s.empty() ? "" : psgate::name_problem(s);  // empty: "must not be empty", as for every argument
    case ArgType::kJobs:                                // the file is read and checked by value_of
      return "";
    case ArgType::kFraction: {
      auto r = parse_fraction(s);
      return r ? "" : r.error();
    }
    case ArgType::kPolicy:
      return psgate::policy_from_name(s) ? ""
                                         : "unknown policy '" + s + "' (one of: " + psgate::policy_name_list() + ")";
    case ArgType::kRotateOn:
      return psgate::rotate_on_from_name(s) ? "" : "must be time or iteration, not '" + s + "'";
  }
  return "";
}

// One argument of one subcommand and what the command line gave it.
struct Bound {
  const ArgSpec* spec = nullptr;
  CLI::Option* option = nullptr;
  std::string text;               // single values
  std::vector<std::string> list;  // kRules, kJobIds
  bool given() const { return option->count() > 0; }
};

// The request's value for a given, checked argument.
json value_of(const Bound& b) {
  const ArgSpec& a = *b.spec;
  if (a.nullable && b.text == "none") return nullptr;
  switch (a.type) {
    case ArgType::kJobId:
    case ArgType::kUint:
      return num(b.text);
    case ArgType::kJobIds: {
      json ids = json::array();
      std::set<uint64_t> seen;
      for (const auto& text : b.list) {
        const uint64_t id = num(text);
        if (!seen.insert(id).second) throw UsageError{label(a) + ": job " + text + " is listed twice"};
        ids.push_back(id);
      }
      return ids;
    }
    case ArgType::kRules:
      return b.list;
    case ArgType::kJobs: {
      auto jobs = read_jobs_file(b.text);
      if (!jobs) throw UsageError{jobs.error()};
      return std::move(*jobs);
    }
    case ArgType::kFraction:
      return *parse_fraction(b.text);
    case ArgType::kText:
      if (b.text.empty()) throw UsageError{label(a) + ": must not be empty"};
      return b.text;
    default:
      return b.text;  // rates, sizes, durations and names travel as text
  }
}

CLI::Option* add_argument(CLI::App* sub, Bound& b) {
  const ArgSpec& a = *b.spec;
  const bool many = a.type == ArgType::kRules || a.type == ArgType::kJobIds;
  CLI::Option* opt = many ? sub->add_option(a.cli, b.list, help_of(a)) : sub->add_option(a.cli, b.text, help_of(a));
  opt->type_name(type_name(a));
  if (a.required) opt->required();
  if (many && !is_positional(a)) opt->allow_extra_args(false);  // one rule per --match
  opt->check(check([&a](const std::string& s) { return check_text(a, s); }));
  return opt;
}

// ---- subcommands ----------------------------------------------------------------

struct Leaf {
  const CommandSpec* spec = nullptr;
  CLI::App* app = nullptr;
  std::vector<std::unique_ptr<Bound>> args;
  const Bound* arg(std::string_view name) const {
    for (const auto& b : args)
      if (b->spec->name == name) return b.get();
    return nullptr;
  }
};

// Everything psgatectl binds besides the commands' arguments.
struct Globals {
  std::string socket;
  std::string timeout = "5s";
  bool json_output = false;
  bool watch = false;
  std::string count;
  bool toml = false;  // config --toml
};

// A burst argument and the rate it belongs to.
struct BurstOf {
  std::string_view command, burst, rate;
};
constexpr BurstOf kBursts[] = {
    {"jobs.add", "police_burst", "police"},
    {"class.set", "cap_burst", "cap"},
    {"class.set", "floor_burst", "floor"},
    {"shaper.set", "burst", "rate"},
};

// Combinations that on a command line are surely mistakes, said before
// anything is sent (the daemon refuses a burst for a rate that is not in
// force too, once it knows which is).
void check_combinations(const Leaf& leaf, const json& req) {
  const std::string_view cmd = leaf.spec->name;
  for (const BurstOf& b : kBursts) {
    if (b.command != cmd || !req.contains(b.burst)) continue;
    const ArgSpec& rate = *leaf.arg(b.rate)->spec;
    const std::string burst = label(*leaf.arg(b.burst)->spec);
    if (req.contains(b.rate) && req[b.rate].is_null())
      throw UsageError{burst + ": makes no sense with " + label(rate) + " none"};
    if (!req.contains(b.rate) && !rate.nullable && !rate.required)
      throw UsageError{burst + " needs " + label(rate) + " " + type_name(rate)};
  }
  auto labels = [&](std::initializer_list<const char*> names) {
    std::vector<std::string> out;
    for (const char* n : names) out.push_back(label(*leaf.arg(n)->spec));
    return out;
  };
  if (cmd == "progress" && !req.contains("fraction") && !req.contains("iteration") && !req.contains("batch"))
    throw UsageError{"progress: give " + one_of(labels({"fraction", "iteration", "batch"}))};
  if (cmd == "policy") {
    if (!req.contains("name") && (req.contains("interval") || req.contains("rotate_on"))) {
      const auto l = labels({"interval", "rotate_on", "name"});
      throw UsageError{l[0] + " and " + l[1] + " need a policy " + l[2]};
    }
    if (req.contains("rotate_on") && req["name"] != "round-robin")
      throw UsageError{labels({"rotate_on"})[0] + ": only for round-robin"};
  }
}

Kind kind_of(const Leaf& leaf, const json& req, const Globals& g) {
  const std::string_view cmd = leaf.spec->name;
  if (cmd == "policy" && !req.contains("name")) return Kind::kPolicyShow;
  if (cmd == "stats" && g.watch) return Kind::kStatsWatch;
  if (cmd == "config" && g.toml) return Kind::kConfigToml;
  for (const KindOf& k : kKinds)
    if (k.command == cmd) return k.kind;
  throw UsageError{"no output format for command " + std::string(cmd)};  // a new command needs one in kKinds
}

Invocation build(const Leaf& leaf, const Globals& g) {
  Invocation inv;
  inv.json_output = g.json_output;
  inv.request = {{"cmd", leaf.spec->name}};
  for (const auto& b : leaf.args)
    if (b->given()) inv.request[b->spec->name] = value_of(*b);
  check_combinations(leaf, inv.request);
  inv.kind = kind_of(leaf, inv.request, g);
  if (leaf.spec->name == std::string_view("stats") && leaf.app->count("--count") > 0) inv.watch_count = num(g.count);
  return inv;
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

// psgatectl's additions to one command: --json everywhere, and stats' live view.
void add_client_options(Leaf& leaf, Globals& g) {
  CLI::App* sub = leaf.app;
  const bool load = leaf.spec->name == std::string_view("jobs.load");
  CLI::Option* json_opt = sub->add_flag("--json", g.json_output,
                                        load ? "Print the daemon's replies as one JSON object: {\"added\": [job ids], "
                                               "\"requests\": N}"
                                             : "Print the reply's result as JSON (indented), not a table");
  if (leaf.spec->name == std::string_view("config")) {
    sub->add_flag("--toml", g.toml,
                  "Print it as a TOML config file: psgate --config FILE starts a gateway that runs the same")
        ->excludes(json_opt);
    return;
  }
  if (leaf.spec->name != std::string_view("stats")) return;
  CLI::Option* watch_opt = sub->add_flag(
      "-w,--watch", g.watch, "Live per-job table (Mbit/s sent, drops/s, telemetry), every second until Ctrl-C");
  watch_opt->excludes(json_opt);
  sub->add_option("--count", g.count, "With --watch: stop after N refreshes")
      ->type_name("N")
      ->needs(watch_opt)
      ->check(uint_in(1, kU64Max));
}

}  // namespace

Result<double> parse_fraction(std::string_view text) {
  auto bad = [&] {
    return Result<double>::failure("must be a fraction from 0 to 1 (0.25 is a quarter done), not '" +
                                   std::string(text) + "'");
  };
  if (text.empty() || !(text.front() == '.' || (text.front() >= '0' && text.front() <= '9'))) return bad();
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value < 0 || value > 1) {
    return bad();
  }
  return value;
}

ParseOutcome parse_command_line(int argc, const char* const* argv, const char* env_socket) {
  Globals g;
  g.socket = env_socket != nullptr && *env_socket != '\0' ? env_socket : kDefaultSocket;

  CLI::App app{
      "psgatectl: control a running psgate gateway through its control socket.\n"
      "Each command sends one request (docs/control-protocol.md) and prints the reply;\n"
      "stats --watch sends one a second.",
      "psgatectl"};
  app.footer(
      "Exit status: 0 success, 1 the daemon refused the request (its error on stderr) or the\n"
      "output could not be written,\n"
      "2 usage error (nothing sent), 3 the daemon cannot be reached, speaks another control\n"
      "protocol (then only health was sent) or its reply cannot be used.\n"
      "Run 'psgatectl COMMAND --help' for a command's arguments.");
  // At most one command; a missing one is reported below, so that an unknown
  // word reads "not expected: WORD" rather than "a subcommand is required".
  app.require_subcommand(0, 1);
  app.fallthrough();  // -s/--timeout may also follow the command
  auto formatter = std::make_shared<UsageFormatter>();
  formatter->column_width(34);
  app.formatter(formatter);  // inherited by the subcommands added below
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "psgatectl: " + std::string(e.what()) + "\nRun with --help for more information.\n";
  });
  app.add_option("-s,--socket", g.socket,
                 std::string("Control socket (default: $PSGATE_SOCKET, else ") + kDefaultSocket + ")")
      ->type_name("PATH")
      ->check(check([](const std::string& s) -> std::string { return s.empty() ? "must not be empty" : ""; }));
  app.add_option("--timeout", g.timeout,
                 "How long to wait for the daemon to accept and answer a request,\n"
                 "e.g. 500ms, 10s (default 5s, at most 86400s; rounded up to whole ms)")
      ->type_name("DURATION")
      ->check(duration())
      ->check(check([](const std::string& s) -> std::string {
        // Milliseconds in a signed 64-bit count: a larger value wrapped
        // negative and timed out at once.
        const auto ns = psgate::parse_duration_ns(s);
        return ns && *ns > kMaxTimeoutNs ? "at most 86400s (a day)" : "";
      }));

  // One subcommand per command of the table, under psgatectl's words for it.
  std::vector<Leaf> leaves;
  std::vector<std::pair<CLI::App*, const Group*>> groups;
  std::vector<std::string> top_words;
  for (const CommandSpec& spec : psgate::control_commands()) {
    const std::string_view cli = spec.cli;
    const size_t space = cli.find(' ');
    CLI::App* parent = &app;
    std::string word(cli);
    if (space != std::string_view::npos) {
      const std::string_view group_word = cli.substr(0, space);
      word = std::string(cli.substr(space + 1));
      auto known =
          std::find_if(groups.begin(), groups.end(), [&](const auto& gr) { return gr.second->word == group_word; });
      if (known == groups.end()) {
        const Group* group = nullptr;
        for (const Group& gr : kGroups)
          if (gr.word == group_word) group = &gr;
        if (group == nullptr) throw std::logic_error("psgatectl: no group for " + std::string(cli));
        CLI::App* sub = app.add_subcommand(std::string(group_word), group->help);
        sub->require_subcommand(0, 1);
        groups.emplace_back(sub, group);
        top_words.emplace_back(group_word);
        known = groups.end() - 1;
      }
      parent = known->first;
    } else {
      top_words.push_back(word);
    }
    Leaf leaf;
    leaf.spec = &spec;
    leaf.app = parent->add_subcommand(word, spec.help);
    // A grouped command also answers to the protocol's own word ("jobs remove").
    const std::string_view name = spec.name;
    const std::string_view wire_word = name.substr(name.rfind('.') + 1);
    if (parent != &app && wire_word != word) leaf.app->alias(std::string(wire_word));
    for (const ArgSpec& a : spec.args) {
      auto b = std::make_unique<Bound>();
      b->spec = &a;
      b->option = add_argument(leaf.app, *b);
      leaf.args.push_back(std::move(b));
    }
    add_client_options(leaf, g);
    leaves.push_back(std::move(leaf));
  }

  ParseOutcome outcome;
  std::ostringstream out, err;
  try {
    app.parse(argc, argv);
    const Leaf* chosen = nullptr;
    for (const Leaf& leaf : leaves)
      if (leaf.app->parsed()) chosen = &leaf;
    if (chosen == nullptr) {
      for (const auto& [sub, group] : groups)
        if (sub->parsed()) throw UsageError{group->hint};
      throw UsageError{"give a command: " + one_of(top_words)};
    }
    // The path's length, whether from -s or $PSGATE_SOCKET: one check for
    // both (a usage error, not a daemon that cannot be reached).
    if (g.socket.size() >= sizeof(sockaddr_un{}.sun_path))
      throw UsageError{"--socket/$PSGATE_SOCKET: path longer than " +
                       std::to_string(sizeof(sockaddr_un{}.sun_path) - 1) + " bytes"};
    Invocation inv = build(*chosen, g);
    inv.socket = g.socket;
    const uint64_t timeout_ns = *psgate::parse_duration_ns(g.timeout);
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
