// SPDX-License-Identifier: BSD-3-Clause
#include "reply_shape.h"

#include <string>
#include <string_view>

namespace psgatectl {

namespace {

using ojson = nlohmann::ordered_json;

enum class Type { kObject, kArray, kString, kUint, kNumber, kBool };

// A member by path from the result: "jobs" is result.jobs, "jobs[].id" the
// "id" of every element of result.jobs, "ports.*" every value of the object
// result.ports. One that may be null by the protocol (a cap removed) must
// still be there: a table prints a missing one as null would read ("none").
// An optional one may be left out, and is checked when it is there.
enum class Presence { kRequired, kNullable, kOptional };
struct Member {
  std::string_view path;
  Type type;
  Presence presence = Presence::kRequired;
};
constexpr Presence kNullable = Presence::kNullable;
constexpr Presence kOptional = Presence::kOptional;

// What each command's formatter reads (format.cc), in the daemon's shape
// (control_apply.cc, control_cluster.cc, stats_json.cc, config_json.cc).
constexpr Member kHealth[] = {{"status", Type::kString}, {"version", Type::kString}};
constexpr Member kJob[] = {{"job", Type::kObject}, {"job.id", Type::kUint}, {"job.rank", Type::kUint}};
constexpr Member kJobsList[] = {{"jobs", Type::kArray},
                                {"jobs[]", Type::kObject},
                                {"jobs[].id", Type::kUint},
                                {"jobs[].name", Type::kString},
                                {"jobs[].rank", Type::kUint},
                                {"jobs[].match", Type::kArray},
                                {"jobs[].progress", Type::kObject}};
constexpr Member kStats[] = {{"ports", Type::kObject},     {"ports.*", Type::kObject}, {"classes", Type::kArray},
                             {"classes[]", Type::kObject}, {"jobs", Type::kArray},     {"jobs[]", Type::kObject},
                             {"jobs[].id", Type::kUint},   {"totals", Type::kObject}};
constexpr Member kConfig[] = {{"ports", Type::kObject}, {"control", Type::kObject}, {"jobs", Type::kArray}};
constexpr Member kPolicy[] = {{"policy", Type::kObject}, {"policy.name", Type::kString}};
constexpr Member kCluster[] = {{"mode", Type::kString}};
constexpr Member kClusterMode[] = {{"gateways", Type::kArray}, {"gateways[]", Type::kObject}};
constexpr Member kReload[] = {{"file", Type::kString},
                              {"applied", Type::kArray},
                              {"restart_needed", Type::kArray},
                              {"not_applied", Type::kArray}};
constexpr Member kOrder[] = {{"jobs", Type::kArray}, {"jobs[]", Type::kObject}, {"jobs[].id", Type::kUint}};
constexpr Member kClusterWrite[] = {{"store_revision", Type::kUint}};
// The confirmations of jobs.load, jobs.remove, class.set and shaper.set
// (control_apply.cc), which format_confirmation prints.
constexpr Member kJobsLoad[] = {{"added", Type::kArray}, {"added[]", Type::kUint}};
constexpr Member kJobsRemove[] = {{"removed", Type::kUint}, {"note", Type::kString, kOptional}};
constexpr Member kClassSet[] = {{"port", Type::kString},           {"class", Type::kUint},
                                {"cap", Type::kString, kNullable}, {"floor", Type::kString, kNullable},
                                {"ecn_threshold", Type::kUint},    {"dscp", Type::kUint, kNullable}};
constexpr Member kShaperSet[] = {
    {"port", Type::kString}, {"rate", Type::kString, kNullable}, {"burst", Type::kString, kNullable}};

const char* type_name(Type t) {
  switch (t) {
    case Type::kObject:
      return "an object";
    case Type::kArray:
      return "an array";
    case Type::kString:
      return "a string";
    case Type::kUint:
      return "a whole number";
    case Type::kNumber:
      return "a number";
    case Type::kBool:
      return "true or false";
  }
  return "?";
}

bool has_type(const ojson& v, Type t) {
  switch (t) {
    case Type::kObject:
      return v.is_object();
    case Type::kArray:
      return v.is_array();
    case Type::kString:
      return v.is_string();
    case Type::kUint:
      return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    case Type::kNumber:
      return v.is_number();
    case Type::kBool:
      return v.is_boolean();
  }
  return false;
}

// What is wrong with the values under `path` (from `at`, named `shown` so
// far) for type `t`: the first one missing or of another type. Containers on
// the way were checked by earlier members of the table, so a path through a
// value of the wrong kind is left to them.
struct Wrong {
  std::string name;  // empty: nothing wrong
  bool missing = false;
};

Wrong first_wrong(const ojson& at, std::string_view path, const std::string& shown, Type t, Presence p) {
  if (path.empty())
    return has_type(at, t) || (p == Presence::kNullable && at.is_null()) ? Wrong{} : Wrong{shown, false};
  const auto step = [](std::string_view r) { return r.starts_with(".") ? r.substr(1) : r; };
  if (path.starts_with("[]")) {  // every element
    if (!at.is_array()) return {};
    for (size_t i = 0; i < at.size(); ++i) {
      Wrong w = first_wrong(at[i], step(path.substr(2)), shown + "[" + std::to_string(i) + "]", t, p);
      if (!w.name.empty()) return w;
    }
    return {};
  }
  const size_t end = path.find_first_of(".[");
  const std::string head(path.substr(0, end));
  const std::string_view rest = end == std::string_view::npos ? std::string_view() : step(path.substr(end));
  if (head == "*") {  // every value of an object
    if (!at.is_object()) return {};
    for (auto it = at.begin(); it != at.end(); ++it) {
      Wrong w = first_wrong(it.value(), rest, shown + "." + it.key(), t, p);
      if (!w.name.empty()) return w;
    }
    return {};
  }
  const std::string name = shown.empty() ? head : shown + "." + head;
  if (!at.is_object()) return {};
  if (!at.contains(head)) return p == Presence::kOptional && rest.empty() ? Wrong{} : Wrong{name, true};
  return first_wrong(at[head], rest, name, t, p);
}

template <size_t N>
std::string check(const ojson& result, const Member (&members)[N], const std::string& command) {
  for (const Member& m : members) {
    const Wrong w = first_wrong(result, m.path, "", m.type, m.presence);
    if (w.name.empty()) continue;
    const std::string type = std::string(type_name(m.type)) + (m.presence == Presence::kNullable ? " or null" : "");
    return command + ": the reply's \"" + w.name + "\" " + (w.missing ? "is missing" : "is not " + type) +
           (w.missing ? " (should be " + type + ")" : std::string()) +
           "; the daemon may be of another version than this psgatectl (`psgatectl health --json` shows its "
           "\"version\" and \"protocol\")";
  }
  return "";
}

}  // namespace

psgate::Result<bool> check_reply_shape(Kind kind, const std::string& command, const ojson& result) {
  std::string bad;
  // Cluster mode: a change written to the store, not yet applied here, has
  // no job or order to show (format_confirmation).
  const bool to_store = result.is_object() && result.contains("applied_here") && result["applied_here"] == false;
  // Cluster mode, applied here, the job removed by another writer before
  // the reply was made: "job" is null (control_apply.cc, job_json).
  const bool job_gone =
      result.is_object() && result.contains("store_revision") && result.contains("job") && result["job"].is_null();
  switch (kind) {
    case Kind::kHealth:
      bad = check(result, kHealth, command);
      break;
    case Kind::kJobsList:
      bad = check(result, kJobsList, command);
      break;
    case Kind::kStats:
    case Kind::kStatsWatch:
      bad = check(result, kStats, command);
      break;
    case Kind::kConfig:
    case Kind::kConfigToml:
      bad = check(result, kConfig, command);
      break;
    case Kind::kPolicyShow:
      bad = check(result, kPolicy, command);
      break;
    case Kind::kCluster:
      bad = check(result, kCluster, command);
      if (bad.empty() && result["mode"] == "cluster") bad = check(result, kClusterMode, command);
      break;
    case Kind::kReload:
      bad = check(result, kReload, command);
      break;
    case Kind::kJobsAdd:
    case Kind::kRank:
    case Kind::kProgress:
      bad = to_store || job_gone ? check(result, kClusterWrite, command) : check(result, kJob, command);
      break;
    case Kind::kPolicySet:
      bad = to_store ? check(result, kClusterWrite, command) : check(result, kPolicy, command);
      break;
    case Kind::kOrder:
      bad = to_store ? check(result, kClusterWrite, command) : check(result, kOrder, command);
      break;
    case Kind::kJobsLoad:
      bad = to_store ? check(result, kClusterWrite, command) : check(result, kJobsLoad, command);
      break;
    case Kind::kJobsRemove:
      bad = to_store ? check(result, kClusterWrite, command) : check(result, kJobsRemove, command);
      break;
    // A gateway's own settings: applied here in cluster mode too.
    case Kind::kClassSet:
      bad = check(result, kClassSet, command);
      break;
    case Kind::kShaperSet:
      bad = check(result, kShaperSet, command);
      break;
      // No default: a command without a shape here is a compiler warning
      // (-Wswitch), not a reply taken on trust.
  }
  if (bad.empty()) return true;
  return psgate::Result<bool>::failure(bad);
}

}  // namespace psgatectl
