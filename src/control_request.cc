// Control requests: JSON -> typed values (pure; see control_request.h).
//
// The order of the checks within each command is the order the operations
// applied them before the parser was split out, so a request with several
// mistakes still gets the same (first) error.
#include "psgate/control_request.h"
#include "psgate/text.h"

#include <string>
#include <unordered_set>
#include <utility>

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
  if (it == req.end() || !it->is_string())
    return fail<unsigned>("missing argument \"port\" (\"wire\" or \"host\")");
  const std::string& p = it->get_ref<const std::string&>();
  for (unsigned i = 0; i < kPortCount; ++i)
    if (p == kPortNames[i]) return i;
  return fail<unsigned>("unknown port \"" + p + "\" (expected \"wire\" or \"host\")");
}

// 0 stands for "the default" where the operations accept it (class and shaper bursts).
bool burst_out_of_range(const std::optional<uint64_t>& b) {
  return b && *b != 0 && (*b < kControlMinBurstBytes || *b > kControlMaxBurstBytes);
}

// ---- one parser per command -------------------------------------------------

Parsed parse_health(const json&, unsigned) { return ControlRequest{HealthRequest{}}; }
Parsed parse_jobs_list(const json&, unsigned) { return ControlRequest{JobsListRequest{}}; }
Parsed parse_stats(const json&, unsigned) { return ControlRequest{StatsRequest{}}; }
Parsed parse_config(const json&, unsigned) { return ControlRequest{ConfigRequest{}}; }

Parsed parse_jobs_add(const json& req, unsigned) {
  JobsAddRequest out;
  auto id = arg_u32(req, "id");
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
  if (auto name = req.find("name"); name != req.end()) {
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
  // police_burst without a police rate is ignored, as null police is "no policer".
  if (police->value) {
    if (*police->value < kControlMinRateBps) return fail<ControlRequest>("\"police\" must be at least 8bit/s");
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
  if (out.name.size() > kControlMaxJobNameChars) return fail<ControlRequest>(label + "name must be 1..64 characters");
  for (unsigned char ch : out.name)
    if (ch < 0x20 || ch == 0x7f) return fail<ControlRequest>(label + "name must not contain control characters");
  return ControlRequest{std::move(out)};
}

Parsed parse_jobs_remove(const json& req, unsigned) {
  auto id = arg_u32(req, "id");
  if (!id) return fail<ControlRequest>(id.error());
  return ControlRequest{JobsRemoveRequest{*id}};
}

Parsed parse_order(const json& req, unsigned) {
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

Parsed parse_rank(const json& req, unsigned) {
  auto id = arg_u32(req, "id");
  if (!id) return fail<ControlRequest>(id.error());
  auto rank = arg_u32(req, "rank");
  if (!rank) return fail<ControlRequest>(rank.error());
  return ControlRequest{RankRequest{*id, *rank}};
}

Parsed parse_class_set(const json& req, unsigned class_count) {
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
  if ((cap->value && *cap->value < kControlMinRateBps) || (floor->value && *floor->value < kControlMinRateBps))
    return fail<ControlRequest>("rates must be at least 8bit/s");
  // Compared in bytes per second, the unit the classes run in (as the
  // operation compares them against the cap in force).
  if (cap->value && floor->value && *floor->value / 8 > *cap->value / 8)
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

Parsed parse_shaper_set(const json& req, unsigned) {
  ShaperSetRequest out;
  auto port = arg_port(req);
  if (!port) return fail<ControlRequest>(port.error());
  out.port = *port;
  auto rate = arg_quantity(req, "rate", parse_rate_bps);
  if (!rate) return fail<ControlRequest>(rate.error());
  if (!rate->present) return fail<ControlRequest>("missing argument \"rate\" (a rate, or null for unshaped)");
  auto burst = arg_quantity(req, "burst", parse_size_bytes);
  if (!burst) return fail<ControlRequest>(burst.error());
  if (rate->value && *rate->value < kControlMinRateBps) return fail<ControlRequest>("rates must be at least 8bit/s");
  if (burst_out_of_range(burst->value)) return fail<ControlRequest>("bursts must be between 64B and 512MiB");
  out.rate_bps = rate->value;
  out.burst_bytes = burst->value;
  return ControlRequest{std::move(out)};
}

Parsed parse_progress(const json& req, unsigned) {
  ProgressRequest out;
  auto id = arg_u32(req, "id");
  if (!id) return fail<ControlRequest>(id.error());
  out.id = *id;
  if (auto f = req.find("fraction"); f != req.end()) {
    if (!f->is_number()) return fail<ControlRequest>("\"fraction\" must be a number between 0 and 1");
    out.fraction = f->get<double>();
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
  // JobRegistry::set_progress's check and wording; !(a && b) also rejects NaN.
  if (out.fraction && !(*out.fraction >= 0.0 && *out.fraction <= 1.0))
    return fail<ControlRequest>("fraction must be between 0 and 1");
  return ControlRequest{std::move(out)};
}

Parsed parse_policy(const json& req, unsigned) {
  PolicyRequest out;
  auto name = req.find("name");
  if (name == req.end()) return ControlRequest{out};  // show the current policy
  if (!name->is_string()) return fail<ControlRequest>("\"name\" must be a string");
  const std::string& text = name->get_ref<const std::string&>();
  out.kind = policy_from_name(text);
  if (!out.kind)
    return fail<ControlRequest>("unknown policy \"" + text +
                                "\" (static, fifo, tensorlights-one, round-robin, progress, batch, shortest-first)");
  if (auto interval = req.find("interval"); interval != req.end()) {
    if (!interval->is_string()) return fail<ControlRequest>("\"interval\" must be a duration such as \"20s\"");
    auto d = parse_duration_ns(interval->get_ref<const std::string&>());
    if (!d) return fail<ControlRequest>("\"interval\": " + d.error());
    if (*d < kControlMinIntervalNs) return fail<ControlRequest>("\"interval\" must be at least 1ms");
    out.interval_ns = *d;
  }
  if (auto rotate = req.find("rotate_on"); rotate != req.end()) {
    const std::string r = rotate->is_string() ? rotate->get<std::string>() : "";
    if (r != "time" && r != "iteration") return fail<ControlRequest>("\"rotate_on\" must be \"time\" or \"iteration\"");
    if (*out.kind != PolicyKind::kRoundRobin) return fail<ControlRequest>("\"rotate_on\" applies to round-robin only");
    out.rotate_on = r == "iteration" ? RotateOn::kIteration : RotateOn::kTime;
  }
  return ControlRequest{out};
}

struct Command {
  CommandInfo info;
  Parsed (*parse)(const json&, unsigned class_count);
};

// The registry: name, help, parser. ControlPlane dispatches on the parsed type.
const std::vector<Command>& registry() {
  static const std::vector<Command> list = {
      {{"health", "gateway status, version, uptime, snapshot generation"}, parse_health},
      {{"jobs.list", "jobs in rank order with their rules, classes and progress"}, parse_jobs_list},
      {{"jobs.add", "add a job: id, match (rules), optional name, rank, police, police_burst"}, parse_jobs_add},
      {{"jobs.remove", "remove a job: id"}, parse_jobs_remove},
      {{"order", "set the job order: ids, highest priority first"}, parse_order},
      {{"rank", "set one job's rank: id, rank"}, parse_rank},
      {{"class.set", "set a class's cap/floor/ECN threshold/DSCP: port, class, ..."}, parse_class_set},
      {{"shaper.set", "set a port's shaper: port, rate (null: unshaped), burst"}, parse_shaper_set},
      {{"progress", "report a job's progress: id, fraction, iteration, batch"}, parse_progress},
      {{"policy", "show or choose the scheduling policy: name, interval, rotate_on"}, parse_policy},
      {{"stats", "every counter, per port, class and job"}, parse_stats},
      {{"config", "the configuration in force"}, parse_config},
  };
  return list;
}

Parsed parse_request(const json& request, unsigned class_count) {
  if (!request.is_object()) return fail<ControlRequest>("a request must be a JSON object");
  auto cmd = request.find("cmd");
  if (cmd == request.end() || !cmd->is_string())
    return fail<ControlRequest>("missing \"cmd\" (a string naming the command)");
  const std::string& name = cmd->get_ref<const std::string&>();
  for (const Command& c : registry())
    if (name == c.info.name) return c.parse(request, class_count);
  return fail<ControlRequest>("unknown command \"" + name + "\"");
}

}  // namespace

const std::vector<CommandInfo>& control_commands() {
  static const std::vector<CommandInfo> list = [] {
    std::vector<CommandInfo> out;
    for (const Command& c : registry()) out.push_back(c.info);
    return out;
  }();
  return list;
}

Result<ControlRequest> parse_control_request(const json& request, unsigned class_count) {
  Parsed r = parse_request(request, class_count);
  if (!r) return fail<ControlRequest>(escape_control_chars(r.error()));
  return r;
}

Result<ControlRequest> parse_control_line(std::string_view line, unsigned class_count) {
  const json request = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded())
    return fail<ControlRequest>("malformed JSON request (one JSON object per line expected)");
  return parse_control_request(request, class_count);
}

}  // namespace psgate
