// SPDX-License-Identifier: BSD-3-Clause
// The command table (see control_commands.h). A new command is one row here,
// its parser in control_request.cc, its request type in control_request.h and
// its handler, ControlPlane::apply; psgatectl and the docs' check follow.
#include "psgate/control_commands.h"

#include <array>

#include "control/command_parsers.h"

namespace psgate {

namespace {

constexpr ArgSpec required(const char* name, ArgType type, const char* cli, const char* help, const char* example) {
  ArgSpec a;
  a.name = name;
  a.type = type;
  a.required = true;
  a.cli = cli;
  a.help = help;
  a.example = example;
  return a;
}

constexpr ArgSpec optional(const char* name, ArgType type, const char* cli, const char* help, const char* example) {
  ArgSpec a = required(name, type, cli, help, example);
  a.required = false;
  return a;
}

using enum ArgType;

constexpr uint64_t kU32Max = UINT32_MAX;
constexpr uint64_t kMaxClass = 63;  // classes.count is at most 64; the daemon checks the count in force

constexpr ArgSpec kJobsAddArgs[] = {
    required("job", kJobId, "ID", "Job id, not already used", "3"),
    required("match", kRules, "-m,--match",
             "Match rule (keys: src, dst, sport, dport, proto); repeat for more rules, any one selects the job",
             "dst=10.0.0.5/32,dport=2222,proto=tcp"),
    optional("name", kText, "--name", "Label in reports (default: job-ID)", "bert"),
    optional("rank", kUint, "--rank", "Rank, 0 = highest priority (default: after every job)", "0").range(0, kU32Max),
    optional("police", kRate, "--police", "Ingress policer rate (default: none)", "300Mbit/s"),
    optional("police_burst", kSize, "--police-burst", "Policer bucket depth (default 64KiB)", "64KiB"),
};

constexpr ArgSpec kJobsLoadArgs[] = {
    required("jobs", kJobs, "FILE",
             "JSON file: a list of jobs, each an object with jobs.add's arguments (job, match, name, rank, police, "
             "police_burst)",
             "jobs.json"),
};

constexpr ArgSpec kJobsRemoveArgs[] = {
    required("job", kJobId, "ID", "Job id", "3"),
};

constexpr ArgSpec kOrderArgs[] = {
    required("ids", kJobIds, "ID", "Job ids, highest priority first", "3"),
};

constexpr ArgSpec kRankArgs[] = {
    required("job", kJobId, "ID", "Job id", "3"),
    required("rank", kUint, "N", "Rank, 0 = highest priority", "1").range(0, kU32Max),
};

constexpr ArgSpec kClassSetArgs[] = {
    required("port", kPort, "PORT", "Egress port: wire or host", "wire"),
    required("class", kUint, "CLASS", "Class number, 0 = highest, below classes.count", "1").range(0, kMaxClass),
    optional("cap", kRate, "--cap", "Rate cap; none removes it", "1Gbit/s").or_null(),
    optional("cap_burst", kSize, "--cap-burst", "Cap bucket depth (0B: the default 64KiB)", "64KiB"),
    optional("floor", kRate, "--floor", "Minimum rate served ahead of strict priority; none removes it", "100Mbit/s")
        .or_null(),
    optional("floor_burst", kSize, "--floor-burst", "Floor bucket depth (0B: the default 64KiB)", "64KiB"),
    optional("ecn_threshold", kUint, "--ecn-threshold", "Mark CE at this many queued packets; 0 = off", "20")
        .range(0, kControlMaxEcnThreshold),
    optional("dscp", kUint, "--dscp", "Remark DSCP to N; none keeps packets' DSCP", "46").range(0, 63).or_null(),
};

constexpr ArgSpec kShaperSetArgs[] = {
    required("port", kPort, "PORT", "Egress port: wire or host", "wire"),
    required("rate", kRate, "RATE", "Shaper rate; none removes the shaper", "1Gbit/s").or_null(),
    optional("burst", kSize, "--burst", "Bucket depth (default: the one in force, else 64KiB)", "64KiB"),
};

constexpr ArgSpec kProgressArgs[] = {
    required("job", kJobId, "ID", "Job id", "3"),
    optional("fraction", kFraction, "FRACTION", "Fraction of training done, 0..1", "0.5"),
    optional("iteration", kUint, "--iteration", "Current iteration number", "12"),
    optional("batch", kUint, "--batch", "Current batch number", "4"),
};

constexpr ArgSpec kPolicyArgs[] = {
    optional("name", kPolicy, "NAME", "The policy to run; without it, show the current one", "round-robin"),
    optional("interval", kDuration, "--interval",
             "round-robin: rotation period (default 20s); others (default 1s): the cluster leader's evaluation "
             "period, held between 100ms and 1s (one gateway evaluates every 100ms)",
             "20s"),
    optional("rotate_on", kRotateOn, "--rotate-on", "round-robin only: rotate on wall-clock time or at iteration ends",
             "iteration"),
};

constexpr bool kReadsOnly = true;

// In the protocol document's order, which is also ControlRequest's.
constexpr std::array<CommandSpec, 15> kCommands{{
    {"health",
     "health",
     "Show the daemon's status, version, uptime, links and policy",
     {},
     parsers::health,
     kReadsOnly},
    {"jobs.list",
     "jobs list",
     "List jobs in rank order with rules, classes and progress",
     {},
     parsers::jobs_list,
     kReadsOnly},
    {"jobs.add", "jobs add", "Add a job that owns the traffic its match rules select", kJobsAddArgs, parsers::jobs_add},
    {"jobs.load", "jobs load",
     "Add many jobs at once, all or none per request (psgatectl sends a large file in several, up to the first "
     "refused)",
     kJobsLoadArgs, parsers::jobs_load},
    {"jobs.remove", "jobs rm", "Remove a job; its traffic falls back to the default class", kJobsRemoveArgs,
     parsers::jobs_remove},
    {"order", "order",
     "Set the job order, highest priority first; unlisted jobs follow in their current relative order", kOrderArgs,
     parsers::order},
    {"rank", "rank", "Set one job's rank (0 = highest); other jobs keep theirs", kRankArgs, parsers::rank},
    {"class.set", "class",
     "Set an egress class's cap, floor, ECN threshold or DSCP remark; with no option, show its settings", kClassSetArgs,
     parsers::class_set},
    {"shaper.set", "shaper", "Set or remove a port's egress shaper", kShaperSetArgs, parsers::shaper_set},
    {"progress", "progress",
     "Report a job's progress (used by the progress and batch policies); give at least one of FRACTION, "
     "--iteration, --batch",
     kProgressArgs, parsers::progress},
    {"policy", "policy", "Choose the scheduling policy; with no NAME, show the current one", kPolicyArgs,
     parsers::policy},
    {"stats",
     "stats",
     "Show counters: ports, drops by reason, non-empty classes with sojourn percentiles, jobs with telemetry",
     {},
     parsers::stats,
     kReadsOnly},
    {"config",
     "config",
     "Show the configuration in force, live changes applied, in the config file's tables and keys",
     {},
     parsers::config,
     kReadsOnly},
    {"cluster",
     "cluster",
     "Cluster mode: the gateways registered, the policy leader, each gateway's applied store revision and lag",
     {},
     parsers::cluster,
     kReadsOnly},
    {"reload",
     "reload",
     "Read the config file again: apply changed class, shaper, policy and log settings; name what needs a restart",
     {},
     parsers::reload},
}};

static_assert(kCommands.size() == std::variant_size_v<ControlRequest>,
              "one command per ControlRequest alternative, in the same order");

}  // namespace

std::span<const CommandSpec> control_commands() { return kCommands; }

const CommandSpec* find_control_command(std::string_view name) {
  for (const CommandSpec& c : kCommands)
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace psgate
