// SPDX-License-Identifier: BSD-3-Clause
// Control requests: JSON -> typed values (pure; see control_request.h).
//
// The order of the checks within each command is the order the operations
// applied them before the parser was split out, so a request with several
// mistakes still gets the same (first) error.
#include "psgate/control_request.h"

#include "control/command_parsers.h"
#include "psgate/control_commands.h"
#include "psgate/text.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "psgate/counters.h"  // kPortNames
#include "psgate/units.h"

namespace psgate {

using json = nlohmann::json;
using Parsed = Result<ControlRequest>;

namespace {

template <typename T>
Result<T> fail(std::string message) {
  return Result<T>::failure(std::move(message));
}

std::string quoted(const char* key) { return std::string("\"") + key + "\""; }

// Argument readers: each error names the argument.
Result<uint64_t> arg_uint(const json& req, const char* key, uint64_t max) {
  auto it = req.find(key);
  if (it == req.end()) return fail<uint64_t>("missing argument " + quoted(key));
  const json& v = *it;
  // An integer past 2^64-1 reaches here as a float: it is too large, not
  // "not a non-negative integer".
  if (v.is_number_float() && v.get<double>() > static_cast<double>(max) &&
      v.get<double>() == std::floor(v.get<double>()))
    return fail<uint64_t>(quoted(key) + " must be at most " + std::to_string(max));
  if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<int64_t>() < 0))
    return fail<uint64_t>(quoted(key) + " must be a non-negative integer");
  const uint64_t n = v.get<uint64_t>();
  if (n > max) return fail<uint64_t>(quoted(key) + " must be at most " + std::to_string(max));
  return n;
}

Result<uint32_t> arg_u32(const json& req, const char* key) {
  auto v = arg_uint(req, key, UINT32_MAX);
  if (!v) return fail<uint32_t>(v.error());
  return static_cast<uint32_t>(*v);
}

using QuantityParser = Result<uint64_t> (*)(std::string_view);

Result<Change<uint64_t>> arg_quantity(const json& req, const char* key, QuantityParser parse) {
  using R = Result<Change<uint64_t>>;
  Change<uint64_t> c;
  auto it = req.find(key);
  if (it == req.end()) return c;
  c.present = true;
  if (it->is_null()) return c;
  if (!it->is_string()) return R::failure(quoted(key) + " must be a string with a unit, or null");
  auto parsed = parse(it->get_ref<const std::string&>());
  if (!parsed) return R::failure(quoted(key) + ": " + parsed.error());
  c.value = *parsed;
  return c;
}

Result<unsigned> arg_port(const json& req) {
  auto it = req.find("port");
  if (it == req.end()) return fail<unsigned>("missing argument \"port\" (\"wire\" or \"host\")");
  if (!it->is_string()) return fail<unsigned>("\"port\" must be a string (\"wire\" or \"host\")");
  const std::string& p = it->get_ref<const std::string&>();
  for (unsigned i = 0; i < kPortCount; ++i)
    if (p == kPortNames[i]) return i;
  return fail<unsigned>("unknown port \"" + p + "\" (expected \"wire\" or \"host\")");
}

// 0 stands for "the default" where the operations accept it (class and shaper bursts).
bool burst_out_of_range(const std::optional<uint64_t>& b) {
  return b && *b != 0 && (*b < kControlMinBurstBytes || *b > kControlMaxBurstBytes);
}

}  // namespace

// ---- one parser per command -------------------------------------------------

namespace parsers {

Parsed health(const json&, unsigned) { return ControlRequest{HealthRequest{}}; }
Parsed jobs_list(const json&, unsigned) { return ControlRequest{JobsListRequest{}}; }
Parsed stats(const json&, unsigned) { return ControlRequest{StatsRequest{}}; }
Parsed config(const json&, unsigned) { return ControlRequest{ConfigRequest{}}; }

Parsed cluster(const json&, unsigned) { return ControlRequest{ClusterRequest{}}; }
Parsed reload(const json&, unsigned) { return ControlRequest{ReloadRequest{}}; }

Parsed jobs_add(const json& req, unsigned) {
  JobsAddRequest out;
  auto id = arg_u32(req, "job");
  if (!id) return fail<ControlRequest>(id.error());
  out.id = *id;
  auto match = req.find("match");
  if (match == req.end() || !match->is_array() || match->empty())
    return fail<ControlRequest>("\"match\" must be a non-empty list of rule strings");
  size_t i = 0;
  for (const json& r : *match) {
    const std::string where = "match[" + std::to_string(i++) + "]";
    if (!r.is_string()) return fail<ControlRequest>(where + " must be a string");
    auto rule = parse_match_rule(r.get_ref<const std::string&>());
    if (!rule) return fail<ControlRequest>(where + ": " + rule.error());
    out.rules.push_back(*rule);
  }
  const auto name = req.find("name");
  if (name != req.end()) {
    if (!name->is_string()) return fail<ControlRequest>("\"name\" must be a string");
    out.name = name->get<std::string>();
  }
  if (req.contains("rank")) {
    auto rank = arg_u32(req, "rank");
    if (!rank) return fail<ControlRequest>(rank.error());
    out.rank = *rank;
  }
  auto police = arg_quantity(req, "police", parse_rate_bps);
  if (!police) return fail<ControlRequest>(police.error());
  auto police_burst = arg_quantity(req, "police_burst", parse_size_bytes);
  if (!police_burst) return fail<ControlRequest>(police_burst.error());
  // The loader's rule for [[jobs]]: a burst without a rate is a mistake to
  // report, not a setting to drop silently.
  if (police_burst->value && !police->value)
    return fail<ControlRequest>("\"police_burst\" given without \"police\" (set both or neither)");
  if (police->value) {
    if (auto problem = check_rate_bps(*police->value)) return fail<ControlRequest>("\"police\" " + *problem);
    const uint64_t burst = police_burst->value.value_or(kControlDefaultBurstBytes);
    // The config's bound: a larger burst overflows the token bucket (token_bucket.h).
    if (burst < kControlMinBurstBytes || burst > kControlMaxBurstBytes)
      return fail<ControlRequest>("\"police_burst\" must be between 64B and 512MiB");
    out.police = RateSpec{*police->value, burst};
  }
  // The registry's own checks (JobRegistry::add), with its wording, so they
  // come after every argument check as they did before.
  if (out.id == 0) return fail<ControlRequest>("job id must be at least 1");
  const std::string label = "job " + std::to_string(out.id) + ": ";
  // A name given is checked even when empty: "" is refused, as the config
  // loader refuses it, not taken for "no name" (job-<id>).
  if (name != req.end())
    if (const std::string problem = name_problem(out.name); !problem.empty())
      return fail<ControlRequest>(label + "name " + problem);
  return ControlRequest{std::move(out)};
}

Parsed jobs_load(const json& req, unsigned class_count) {
  auto jobs = req.find("jobs");
  if (jobs == req.end() || !jobs->is_array() || jobs->empty())
    return fail<ControlRequest>("\"jobs\" must be a non-empty list of job objects");
  JobsLoadRequest out;
  out.jobs.reserve(jobs->size());
  std::unordered_map<uint32_t, size_t> index_of;  // a job listed twice is the list's mistake, not the table's
  size_t i = 0;
  for (const json& job : *jobs) {
    const std::string where = "jobs[" + std::to_string(i++) + "]";
    if (!job.is_object()) return fail<ControlRequest>(where + " must be an object with jobs.add's arguments");
    if (job.contains("cmd") || job.contains("id"))
      return fail<ControlRequest>(where + ": a job has jobs.add's arguments only (the job id is \"job\")");
    // Each job is checked as the jobs.add request it stands for: the same
    // parser, the same unknown-argument check.
    json add = job;
    add["cmd"] = "jobs.add";
    auto parsed = parse_control_request(add, class_count);
    if (!parsed) return fail<ControlRequest>(where + ": " + parsed.error());
    const uint32_t id = std::get<JobsAddRequest>(*parsed).id;
    if (const auto [it, first] = index_of.emplace(id, i - 1); !first)
      return fail<ControlRequest>(where + ": job " + std::to_string(id) + " is also jobs[" +
                                  std::to_string(it->second) + "]; list each job once");
    out.jobs.push_back(std::move(std::get<JobsAddRequest>(*parsed)));
  }
  return ControlRequest{std::move(out)};
}

Parsed jobs_remove(const json& req, unsigned) {
  auto id = arg_u32(req, "job");
  if (!id) return fail<ControlRequest>(id.error());
  return ControlRequest{JobsRemoveRequest{*id}};
}

Parsed order(const json& req, unsigned) {
  auto ids = req.find("ids");
  if (ids == req.end() || !ids->is_array()) return fail<ControlRequest>("\"ids\" must be a list of job ids");
  OrderRequest out;
  for (const json& v : *ids) {
    // A parsed line holds non-negative integers as unsigned; a json built in
    // C++ may hold them as signed.
    const bool non_negative = v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
    if (!non_negative || v.get<uint64_t>() > UINT32_MAX) return fail<ControlRequest>("\"ids\" must hold job ids");
    out.ids.push_back(v.get<uint32_t>());
  }
  std::unordered_set<uint32_t> seen;
  for (uint32_t id : out.ids)
    if (!seen.insert(id).second) return fail<ControlRequest>("job " + std::to_string(id) + " is listed twice");
  return ControlRequest{std::move(out)};
}

Parsed rank(const json& req, unsigned) {
  auto id = arg_u32(req, "job");
  if (!id) return fail<ControlRequest>(id.error());
  auto rank = arg_u32(req, "rank");
  if (!rank) return fail<ControlRequest>(rank.error());
  return ControlRequest{RankRequest{*id, *rank}};
}

Parsed class_set(const json& req, unsigned class_count) {
  ClassSetRequest out;
  auto port = arg_port(req);
  if (!port) return fail<ControlRequest>(port.error());
  out.port = *port;
  if (class_count == 0) return fail<ControlRequest>("\"class\": no classes are configured");
  auto cls = arg_uint(req, "class", class_count - 1);
  if (!cls) return fail<ControlRequest>(cls.error());
  out.cls = static_cast<unsigned>(*cls);
  auto cap = arg_quantity(req, "cap", parse_rate_bps);
  auto cap_burst = arg_quantity(req, "cap_burst", parse_size_bytes);
  auto floor = arg_quantity(req, "floor", parse_rate_bps);
  auto floor_burst = arg_quantity(req, "floor_burst", parse_size_bytes);
  for (auto* r : {&cap, &cap_burst, &floor, &floor_burst})
    if (!*r) return fail<ControlRequest>(r->error());
  out.cap_bps = *cap;
  out.cap_burst_bytes = *cap_burst;
  out.floor_bps = *floor;
  out.floor_burst_bytes = *floor_burst;
  if (burst_out_of_range(cap_burst->value) || burst_out_of_range(floor_burst->value))
    return fail<ControlRequest>("bursts must be between 64B and 512MiB");
  for (const auto& [key, rate] : {std::pair{"cap", &cap->value}, std::pair{"floor", &floor->value}})
    if (*rate)
      if (auto problem = check_rate_bps(**rate)) return fail<ControlRequest>(quoted(key) + " " + *problem);
  // Compared in bytes per second, the unit the classes run in (as the
  // operation compares them against the cap in force).
  if (cap->value && floor->value && bytes_per_sec(*floor->value) > bytes_per_sec(*cap->value))
    return fail<ControlRequest>("the floor cannot exceed the cap");
  if (req.contains("ecn_threshold")) {
    auto t = arg_uint(req, "ecn_threshold", kControlMaxEcnThreshold);
    if (!t) return fail<ControlRequest>(t.error());
    out.ecn_threshold = static_cast<uint32_t>(*t);
  }
  if (auto dscp = req.find("dscp"); dscp != req.end()) {
    out.dscp.present = true;
    if (!dscp->is_null()) {
      auto d = arg_uint(req, "dscp", 63);
      if (!d) return fail<ControlRequest>(d.error());
      out.dscp.value = static_cast<uint8_t>(*d);
    }
  }
  return ControlRequest{std::move(out)};
}

Parsed shaper_set(const json& req, unsigned) {
  ShaperSetRequest out;
  auto port = arg_port(req);
  if (!port) return fail<ControlRequest>(port.error());
  out.port = *port;
  auto rate = arg_quantity(req, "rate", parse_rate_bps);
  if (!rate) return fail<ControlRequest>(rate.error());
  if (!rate->present) return fail<ControlRequest>("missing argument \"rate\" (a rate, or null for unshaped)");
  auto burst = arg_quantity(req, "burst", parse_size_bytes);
  if (!burst) return fail<ControlRequest>(burst.error());
  if (rate->value)
    if (auto problem = check_rate_bps(*rate->value)) return fail<ControlRequest>("\"rate\" " + *problem);
  if (burst_out_of_range(burst->value)) return fail<ControlRequest>("bursts must be between 64B and 512MiB");
  out.rate_bps = rate->value;
  out.burst_bytes = burst->value;
  return ControlRequest{std::move(out)};
}

Parsed progress(const json& req, unsigned) {
  ProgressRequest out;
  auto id = arg_u32(req, "job");
  if (!id) return fail<ControlRequest>(id.error());
  out.id = *id;
  if (auto f = req.find("fraction"); f != req.end()) {
    if (!f->is_number()) return fail<ControlRequest>("\"fraction\" must be a number between 0 and 1");
    out.fraction = f->get<double>() + 0.0;  // -0.0 is 0 (it was shown as "-0.0%")
  }
  if (req.contains("iteration")) {
    auto it = arg_uint(req, "iteration", UINT64_MAX);
    if (!it) return fail<ControlRequest>(it.error());
    out.iteration = *it;
  }
  if (req.contains("batch")) {
    auto b = arg_uint(req, "batch", UINT64_MAX);
    if (!b) return fail<ControlRequest>(b.error());
    out.batch = *b;
  }
  if (!out.fraction && !out.iteration && !out.batch)
    return fail<ControlRequest>("give at least one of \"fraction\", \"iteration\", \"batch\"");
  // JobRegistry::set_progress's check and wording.
  if (out.fraction && !valid_progress_fraction(*out.fraction))
    return fail<ControlRequest>("fraction must be between 0 and 1");
  return ControlRequest{std::move(out)};
}

Parsed policy(const json& req, unsigned) {
  PolicyRequest out;
  auto name = req.find("name");
  if (name == req.end()) {
    // Without a name the request shows the policy; settings given with it
    // would be dropped silently.
    if (req.contains("interval") || req.contains("rotate_on"))
      return fail<ControlRequest>("\"interval\" and \"rotate_on\" need \"name\" (the policy they set)");
    return ControlRequest{out};  // show the current policy
  }
  if (!name->is_string()) return fail<ControlRequest>("\"name\" must be a string");
  const std::string& text = name->get_ref<const std::string&>();
  out.kind = policy_from_name(text);
  if (!out.kind) return fail<ControlRequest>("unknown policy \"" + text + "\" (" + policy_name_list() + ")");
  if (auto interval = req.find("interval"); interval != req.end()) {
    if (!interval->is_string()) return fail<ControlRequest>("\"interval\" must be a duration such as \"20s\"");
    auto d = parse_duration_ns(interval->get_ref<const std::string&>());
    if (!d) return fail<ControlRequest>("\"interval\": " + d.error());
    if (!valid_policy_interval_ns(*d)) return fail<ControlRequest>("\"interval\" must be at least 1ms");
    out.interval_ns = *d;
  }
  if (auto rotate = req.find("rotate_on"); rotate != req.end()) {
    const auto on = rotate->is_string() ? rotate_on_from_name(rotate->get_ref<const std::string&>()) : std::nullopt;
    if (!on) return fail<ControlRequest>("\"rotate_on\" must be \"time\" or \"iteration\"");
    if (*out.kind != PolicyKind::kRoundRobin) return fail<ControlRequest>("\"rotate_on\" applies to round-robin only");
    out.rotate_on = *on;
  }
  return ControlRequest{out};
}

}  // namespace parsers

namespace {

// Every key but "cmd" and the echoed "id" must be one of the command's
// arguments: a typo ("flor") must not be answered ok with nothing set.
Result<bool> check_arguments(const json& request, const CommandSpec& command) {
  std::vector<std::string_view> allowed;
  for (const ArgSpec& a : command.args) allowed.push_back(a.name);
  for (const auto& [key, value] : request.items()) {
    (void)value;
    if (key == "cmd" || key == "id") continue;
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string msg = "unknown argument \"" + key + "\"";
    if (const std::string_view best = closest_key(key, allowed); !best.empty())
      msg += " (did you mean \"" + std::string(best) + "\"?)";
    std::string list;
    for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    msg += "; allowed: " + (list.empty() ? std::string("none") : list);
    return Result<bool>::failure(std::move(msg));
  }
  return true;
}

bool takes_job(const CommandSpec& command) {
  for (const ArgSpec& a : command.args)
    if (a.type == ArgType::kJobId && std::string_view(a.name) == "job") return true;
  return false;
}

Parsed parse_request(const json& request, unsigned class_count, std::string* deprecation) {
  if (!request.is_object()) return fail<ControlRequest>("a request must be a JSON object");
  auto cmd = request.find("cmd");
  if (cmd == request.end() || !cmd->is_string())
    return fail<ControlRequest>("missing \"cmd\" (a string naming the command)");
  const std::string& name = cmd->get_ref<const std::string&>();
  const CommandSpec* command = find_control_command(name);
  if (command == nullptr) return fail<ControlRequest>("unknown command \"" + name + "\"");
  // Protocol 1 named the job "id", the key the reply echoes. Until protocol
  // 3, a request without "job" whose "id" is there is read the old way, and
  // its reply says so (kControlIdAsJobDeprecation).
  const bool old_form = takes_job(*command) && !request.contains("job") && request.contains("id");
  json renamed;
  if (old_form) {
    renamed = request;
    renamed["job"] = renamed["id"];
    renamed.erase("id");
    if (deprecation != nullptr) *deprecation = kControlIdAsJobDeprecation;
  }
  const json& args = old_form ? renamed : request;
  if (auto known = check_arguments(args, *command); !known) return fail<ControlRequest>(known.error());
  return command->parse(args, class_count);
}

}  // namespace

Result<ControlRequest> parse_control_request(const json& request, unsigned class_count, std::string* deprecation) {
  Parsed r = parse_request(request, class_count, deprecation);
  if (!r) return fail<ControlRequest>(escape_control_chars(r.error()));
  return r;
}

namespace {

// nlohmann 3.11.2 bounds depth only through a parse callback, and its parser
// with a callback is quadratic in the length of arrays and objects: at the
// end of every object it walks the whole enclosing array or object for a
// discarded element to erase (json_sax_dom_callback_parser::end_object). A
// state file of 100,000 jobs took 25 s to read and one of 1,000,000
// (dataplane.max_jobs allows them) most of an hour; psgatectl's jobs files
// and its replies the same. So a first pass that builds nothing finds the
// depth and the repeated keys, and the plain parser, linear, builds the
// value; the callback parser builds only a text found too deep (for its
// value with the deep part left out: a refused request's echoed id).
struct ScanSax : nlohmann::json_sax<json> {
  explicit ScanSax(bool note) : note_duplicates(note) {}
  bool note_duplicates;
  int open = 0;  // arrays and objects open
  bool too_deep = false;
  std::vector<std::set<std::string>> keys;  // one per open object, when noting duplicates
  std::optional<std::string> duplicate;
  bool id_repeated = false;
  // The depth the callback parser reports for an element (a value, a key,
  // the start of an array or object) is the number of arrays and objects
  // open around it.
  bool element() {
    if (open > kMaxJsonDepth) too_deep = true;
    return !too_deep;  // stops the scan: the callback parser reads it instead
  }
  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t&) override { return element(); }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override {
    if (!element()) return false;
    ++open;
    if (note_duplicates) keys.emplace_back();
    return true;
  }
  bool key(string_t& k) override {
    if (!element()) return false;
    if (note_duplicates && !keys.empty() && !keys.back().insert(k).second) {
      if (open == 1 && k == "id") id_repeated = true;
      if (!duplicate) duplicate = k;
    }
    return true;
  }
  bool end_object() override {
    --open;
    if (note_duplicates && !keys.empty()) keys.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (!element()) return false;
    ++open;
    return true;
  }
  bool end_array() override {
    --open;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

// A text nested too deep, with the callback parser: the deep part is left
// out of the value (and its keys unchecked). Quadratic as above, so only for
// texts already found too deep.
JsonNotingDuplicates parse_too_deep_noting_duplicates(std::string_view text) {
  JsonNotingDuplicates out;
  std::vector<std::set<std::string>> open;  // one per object being parsed
  out.value = json::parse(
      text.begin(), text.end(),
      [&](int depth, json::parse_event_t event, json& parsed) {
        if (depth > kMaxJsonDepth) {
          out.too_deep = true;
          return false;  // not kept: the parser itself does not recurse, the value would
        }
        if (event == json::parse_event_t::object_start) {
          open.emplace_back();
        } else if (event == json::parse_event_t::object_end) {
          if (!open.empty()) open.pop_back();
        } else if (event == json::parse_event_t::key && !open.empty() &&
                   !open.back().insert(parsed.get<std::string>()).second) {
          if (depth == 1 && parsed.get<std::string>() == "id") out.id_repeated = true;
          if (!out.duplicate) out.duplicate = parsed.get<std::string>();
        }
        return true;
      },
      /*allow_exceptions=*/false);
  return out;
}

}  // namespace

JsonNotingDuplicates parse_json_noting_duplicates(std::string_view text) {
  // A request {"cmd":"health","cmd":"jobs.remove"} must not run either: the
  // keys of every open object, at any depth, are tracked while parsing.
  JsonNotingDuplicates out;
  // JSON has no raw NUL, and the parser takes one for the end of its input:
  // what follows (`{"cmd":"health"}\0garbage`) was neither read nor refused.
  if (text.find('\0') != std::string_view::npos) {
    out.value = json(json::value_t::discarded);
    return out;
  }
  ScanSax scan(/*note=*/true);
  const bool json_text = json::sax_parse(text.begin(), text.end(), &scan);
  if (scan.too_deep) return parse_too_deep_noting_duplicates(text);
  out.duplicate = std::move(scan.duplicate);
  out.id_repeated = scan.id_repeated;
  out.value = json_text ? json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false)
                        : json(json::value_t::discarded);
  return out;
}

JsonShape json_shape(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return JsonShape::kNotJson;  // as above
  ScanSax scan(/*note=*/false);
  const bool json_text = json::sax_parse(text.begin(), text.end(), &scan);
  if (scan.too_deep) return JsonShape::kTooDeep;
  return json_text ? JsonShape::kJson : JsonShape::kNotJson;
}

json parse_json_bounded(std::string_view text) {
  if (json_shape(text) != JsonShape::kJson) return json(json::value_t::discarded);
  return json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

std::optional<std::string> strict_json_problem(const JsonNotingDuplicates& parsed) {
  if (parsed.too_deep) return "nested deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  if (parsed.value.is_discarded()) return std::string("not valid JSON");
  if (parsed.duplicate) return escape_control_chars("duplicate key \"" + *parsed.duplicate + "\"");
  return std::nullopt;
}

namespace {
// Why a line is not JSON, in the parser's words ("syntax error while parsing
// value - invalid literal; last read: 'NaN'"), found by a second pass that
// builds nothing (the first pass's value was discarded, and with it the
// reason).
std::string json_syntax_problem(std::string_view line) {
  struct Sax : nlohmann::json_sax<json> {
    std::string problem;
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
      problem = e.what();
      // "[json.exception.parse_error.101] parse error at line 1, column 5: ..."
      if (const size_t at = problem.find("] "); problem.rfind("[json.exception", 0) == 0 && at != std::string::npos)
        problem.erase(0, at + 2);
      return false;
    }
  } sax;
  json::sax_parse(line.begin(), line.end(), &sax);
  return escape_control_chars(sax.problem);
}
}  // namespace

Result<ControlRequest> parse_control_line(std::string_view line, unsigned class_count, std::optional<json>* echo_id,
                                          std::string* deprecation) {
  const JsonNotingDuplicates parsed = parse_json_noting_duplicates(line);
  const json& request = parsed.value;
  if (request.is_discarded()) {
    const size_t nul = line.find('\0');
    const std::string why =
        nul != std::string_view::npos ? "a NUL byte at offset " + std::to_string(nul) : json_syntax_problem(line);
    return fail<ControlRequest>("malformed JSON request (one JSON object per line expected)" +
                                (why.empty() ? std::string() : ": " + why));
  }
  // Echo the id unless the id itself is what is ambiguous.
  if (echo_id != nullptr && request.is_object() && !parsed.id_repeated) {
    if (auto id = request.find("id"); id != request.end()) *echo_id = *id;
  }
  if (parsed.too_deep)
    return fail<ControlRequest>("request nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  if (parsed.duplicate)
    return fail<ControlRequest>(escape_control_chars("duplicate key \"" + *parsed.duplicate + "\""));
  return parse_control_request(request, class_count, deprecation);
}

}  // namespace psgate
