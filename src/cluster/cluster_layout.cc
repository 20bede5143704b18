// SPDX-License-Identifier: BSD-3-Clause
// Cluster mode's keys, documents, mirror and policy (see cluster_layout.h).
#include "psgate/cluster_layout.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>
#include <stdexcept>

#include "config/config_json.h"
#include "psgate/control_request.h"
#include "psgate/job_registry.h"
#include "psgate/text.h"
#include "psgate/units.h"

namespace psgate {

using json = nlohmann::json;

namespace {

// unreceived_value's text starts with this: a NUL, which no JSON document does.
constexpr std::string_view kUnreceivedMark{"\0unreceived:", 12};

// Whether `doc` is an object whose "schema" is this layout's. json::value()
// would throw on a "schema" of another type ("1", null), and a document a
// script wrote by hand must be refused, not end the gateway's watch.
bool schema_ok(const json& doc) {
  if (!doc.is_object()) return false;
  auto schema = doc.find("schema");
  return schema != doc.end() && schema->is_number_integer() && schema->get<int64_t>() == kClusterSchema;
}

// A document's JSON, read as strictly as a control request: nested deeper
// than kMaxJsonDepth, or with a key repeated (the socket refuses that; read
// with its last value, a document would mean what the socket never
// accepts), is refused with `problem` set.
json store_json(std::string_view text, std::string& problem) {
  if (text.starts_with(kUnreceivedMark)) {
    problem = std::string(text.substr(kUnreceivedMark.size()));
    return json(json::value_t::discarded);
  }
  JsonNotingDuplicates parsed = parse_json_noting_duplicates(text);
  if (auto why = strict_json_problem(parsed)) {
    problem = std::move(*why);
    return json(json::value_t::discarded);
  }
  return std::move(parsed.value);
}

// An unsigned integer of a document, checked: json's get<uint32_t>() turns
// -1 into 4294967295 and 2^32 into 0 without a word.
uint64_t unsigned_at(const json& list, size_t i, uint64_t max) {
  const json& v = list.at(i);
  if (!v.is_number_unsigned() || v.get<uint64_t>() > max)
    throw std::out_of_range("entry " + std::to_string(i) + " is not an integer 0.." + std::to_string(max));
  return v.get<uint64_t>();
}

// A document's body as the control command's request: "schema" checked and
// dropped, "cmd" added, then the command's own parser (so the store accepts
// exactly what the socket does).
Result<ControlRequest> parse_as_command(json doc, const char* cmd, unsigned class_count) {
  if (!doc.is_object()) return Result<ControlRequest>::failure("not a JSON object");
  if (!schema_ok(doc)) return Result<ControlRequest>::failure("\"schema\" is not " + std::to_string(kClusterSchema));
  doc.erase("schema");
  doc["cmd"] = cmd;
  return parse_control_request(doc, class_count);
}

Result<ControlRequest> parse_text_as_command(std::string_view text, const char* cmd, unsigned class_count) {
  std::string problem;
  json doc = store_json(text, problem);
  if (!problem.empty()) return Result<ControlRequest>::failure(problem);
  return parse_as_command(std::move(doc), cmd, class_count);
}

// A job document an older psgate wrote: what it accepted and this version
// refuses only by a stricter rule is read as it ran, not dropped (the job
// would vanish from the upgraded gateways alone, its traffic unclassified
// there, with nothing in health). A police rate of part bytes ran truncated
// to whole bytes per second; a name with invisible characters is read with
// them escaped (stored_name).
void read_as_older_versions_ran(json& doc) {
  if (!doc.is_object()) return;
  if (auto it = doc.find("police"); it != doc.end() && it->is_string()) {
    const auto bps = parse_rate_bps(it->get_ref<const std::string&>());
    const uint64_t whole = bps ? bits_per_sec(bytes_per_sec(*bps)) : 0;
    if (bps && *bps >= kMinRateBps && whole != *bps) *it = rate_text_exact(whole);
  }
  if (auto it = doc.find("name"); it != doc.end() && it->is_string())
    *it = stored_name(it->get_ref<const std::string&>());
}

std::optional<uint32_t> id_after(std::string_view key, std::string_view dir) {
  if (key.size() <= dir.size() || key.substr(0, dir.size()) != dir) return std::nullopt;
  const std::string_view digits = key.substr(dir.size());
  // Canonical only: "jobs/02" would be a second key for job 2, and removing
  // job 2 (jobs/2) would leave the other to bring it back.
  if (digits.empty() || digits.front() == '0') return std::nullopt;
  uint32_t id = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
  if (ec != std::errc() || end != digits.data() + digits.size() || id == 0) return std::nullopt;
  return id;
}

// The layout's job and registration keys: P/jobs/<id> (canonical, as
// id_after reads it) and P/gateways/<name>, a name a gateway could be
// configured with (cluster.name: name_problem, no '/'). Anything else under
// those prefixes is a key of nobody's, ignored as any key outside the
// layout is: its value not kept, and no change to what a gateway applies.
// Taken for a job, "P/jobs/02" or "P/jobs/x" kept its value (up to etcd's
// 1.5 MiB) and moved ClusterView::jobs_part, so every write to it made every
// gateway apply the store again.
bool is_job_key(const ClusterKeys& keys, std::string_view key) { return id_after(key, keys.jobs()).has_value(); }

bool is_gateway_key(const ClusterKeys& keys, std::string_view key) {
  const std::string dir = keys.gateways();
  if (key.size() <= dir.size() || key.substr(0, dir.size()) != dir) return false;
  const std::string_view name = key.substr(dir.size());
  return name.find('/') == std::string_view::npos && name_problem(name).empty();
}

// Why `key`, none of the layout's, is ignored (view().problems).
std::string stray_key_problem(const ClusterKeys& keys, const std::string& key) {
  if (key.rfind(keys.jobs(), 0) == 0)
    return "not a job key (P/jobs/<id>, id 1..4294967295 without leading zeros; ignored)";
  if (key.rfind(keys.gateways(), 0) == 0)
    return "not a gateway key (P/gateways/<name>, a name cluster.name could be: 1..64 bytes, no '/', no control or "
           "invisible characters; ignored)";
  return "not a key of the cluster layout (ignored)";
}

}  // namespace

std::string prefix_range_end(std::string_view prefix) {
  std::string end(prefix);
  // The first key after every key with this prefix: the last byte that can be
  // incremented is, the rest dropped ("\0" = to the end of the keyspace).
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::vector<uint32_t> ClusterView::full_order() const {
  std::vector<uint32_t> out;
  std::set<uint32_t> known, placed;
  for (const ClusterJob& j : jobs) known.insert(j.spec.id);
  for (uint32_t id : order)
    if (known.count(id) && placed.insert(id).second) out.push_back(id);
  for (const ClusterJob& j : jobs)
    if (placed.insert(j.spec.id).second) out.push_back(j.spec.id);
  return out;
}

// ---- documents -----------------------------------------------------------------

std::string job_document(const JobSpec& job) {
  json match = json::array();
  for (const MatchRule& r : job.match) match.push_back(to_string(r));
  json doc = {{"schema", kClusterSchema}, {"job", job.id}, {"name", job.name}, {"match", match}};
  if (job.police) {
    doc["police"] = rate_text_exact(job.police->rate_bps);
    doc["police_burst"] = size_text_exact(job.police->burst_bytes);
  }
  return doc.dump();
}

std::string order_document(const std::vector<uint32_t>& order) {
  return json{{"schema", kClusterSchema}, {"order", order}}.dump();
}

std::string policy_document(const PolicyParams& policy) {
  json doc = {{"schema", kClusterSchema},
              {"name", policy_name(policy.kind)},
              {"interval", duration_text_exact(policy.interval_ns)}};
  if (policy.kind == PolicyKind::kRoundRobin) doc["rotate_on"] = rotate_on_name(policy.rotate_on);
  return doc.dump();
}

std::string progress_document(const JobProgress& p) {
  json doc = {{"schema", kClusterSchema}};
  if (p.fraction) doc["fraction"] = *p.fraction;
  if (p.iteration) doc["iteration"] = *p.iteration;
  if (p.batch) doc["batch"] = *p.batch;
  return doc.dump();
}

std::string ranks_document(const std::vector<JobRanks>& ranks, const std::string& policy, uint64_t rotation,
                           const std::string& leader) {
  json list = json::array();
  for (const JobRanks& r : ranks) list.push_back({r.id, r.pull_rank, r.push_rank});
  return json{
      {"schema", kClusterSchema}, {"policy", policy}, {"rotation", rotation}, {"leader", leader}, {"ranks", list}}
      .dump();
}

std::string leader_document(const std::string& name) { return json{{"schema", kClusterSchema}, {"name", name}}.dump(); }

json gateway_json(const GatewayInfo& g) {
  json jobs = json::array();
  for (const auto& [id, m] : g.jobs)
    jobs.push_back({id, m.iterations_seen, m.bytes_per_iteration, m.bytes_this_iteration});
  json out = {{"schema", kClusterSchema},
              {"name", g.name},
              {"version", g.version},
              {"address", g.address},
              {"health", g.health},
              {"applied_revision", g.applied_revision},
              {"degraded_since", g.degraded_since_s ? json(*g.degraded_since_s) : json(nullptr)},
              {"top_job", g.top_job},
              {"policy", g.policy},
              {"counters", {{"rx_packets", g.rx_packets}, {"tx_packets", g.tx_packets}, {"dropped", g.dropped}}},
              {"jobs", jobs}};
  // Round-robin's only: an older psgate reads the registration without it.
  if (g.policy_interval_ns && g.policy_rotate_on)
    out["policy_params"] = {{"interval", duration_text_exact(*g.policy_interval_ns)},
                            {"rotate_on", rotate_on_name(*g.policy_rotate_on)}};
  return out;
}

void describe_policy(GatewayInfo& g, const PolicyParams& p) {
  g.policy = policy_name(p.kind);
  g.policy_interval_ns.reset();
  g.policy_rotate_on.reset();
  if (p.kind != PolicyKind::kRoundRobin) return;
  g.policy_interval_ns = p.interval_ns;
  g.policy_rotate_on = p.rotate_on;
}

std::string policy_label(const std::string& policy, const std::string& interval, const std::string& rotate_on) {
  if (interval.empty()) return policy;
  return policy + "(" + (rotate_on == rotate_on_name(RotateOn::kIteration) ? "iteration," + interval : interval) + ")";
}

std::string policy_label(const GatewayInfo& g) {
  if (!g.policy_interval_ns || !g.policy_rotate_on) return g.policy;
  return policy_label(g.policy, duration_text_exact(*g.policy_interval_ns), rotate_on_name(*g.policy_rotate_on));
}

namespace {

// A registration's fields, each checked and named in the error: json's
// get<uint64_t>() reads -1 as 2^64-1 (a gateway "received" 18 quintillion
// packets in psgatectl cluster), and its own errors name no field.
std::string string_field(const json& doc, const char* key, bool required) {
  const auto it = doc.find(key);
  if (it == doc.end()) {
    if (required) throw std::invalid_argument(std::string("\"") + key + "\" is missing");
    return {};
  }
  if (!it->is_string()) throw std::invalid_argument(std::string("\"") + key + "\" is not a string");
  return it->get<std::string>();
}

uint64_t unsigned_field(const json& obj, const char* where, const char* key, uint64_t max) {
  const auto it = obj.find(key);
  if (it == obj.end()) return 0;
  if (!it->is_number_unsigned() || it->get<uint64_t>() > max)
    throw std::invalid_argument(std::string("\"") + where + key + "\" is not an integer 0.." + std::to_string(max));
  return it->get<uint64_t>();
}

}  // namespace

Result<GatewayInfo> parse_gateway(std::string_view text) {
  using R = Result<GatewayInfo>;
  std::string problem;
  json doc = store_json(text, problem);
  if (!problem.empty()) return R::failure(problem);
  if (!doc.is_object()) return R::failure("not a JSON object");
  if (!schema_ok(doc)) return R::failure("\"schema\" is not " + std::to_string(kClusterSchema));
  try {
    GatewayInfo g;
    g.name = string_field(doc, "name", true);
    g.version = string_field(doc, "version", false);
    g.address = string_field(doc, "address", false);
    g.health = string_field(doc, "health", false);
    g.applied_revision = static_cast<int64_t>(unsigned_field(doc, "", "applied_revision", INT64_MAX));
    if (auto d = doc.find("degraded_since"); d != doc.end() && !d->is_null()) {
      if (!d->is_number() || d->get<double>() < 0)
        throw std::invalid_argument("\"degraded_since\" is not null or a unix time");
      g.degraded_since_s = d->get<double>();
    }
    g.top_job = string_field(doc, "top_job", false);
    g.policy = string_field(doc, "policy", false);
    // Said in every gateway's health when the policies differ: a name, not
    // a document (the longest policy name is 16 bytes).
    if (g.policy.size() > 64) throw std::invalid_argument("\"policy\" is longer than 64 bytes");
    // Round-robin's parameters, read with that policy only: on another (a
    // registration written by hand) they would make a label such as
    // "static(20s)" and a mismatch with gateways that run the same policy.
    // Ignored there, as gateway_json writes them for round-robin only.
    if (auto p = doc.find("policy_params");
        p != doc.end() && !p->is_null() && g.policy == policy_name(PolicyKind::kRoundRobin)) {
      if (!p->is_object()) throw std::invalid_argument("\"policy_params\" is not an object");
      const std::string interval = string_field(*p, "interval", false), on = string_field(*p, "rotate_on", false);
      auto ns = parse_duration_ns(interval);
      if (!ns.ok() || !valid_policy_interval_ns(*ns))
        throw std::invalid_argument("\"policy_params.interval\" is not a duration of at least 1ms");
      auto rotate = rotate_on_from_name(on);
      if (!rotate) throw std::invalid_argument("\"policy_params.rotate_on\" is not \"time\" or \"iteration\"");
      g.policy_interval_ns = *ns;
      g.policy_rotate_on = *rotate;
    }
    if (auto c = doc.find("counters"); c != doc.end()) {
      if (!c->is_object()) throw std::invalid_argument("\"counters\" is not an object");
      g.rx_packets = unsigned_field(*c, "counters.", "rx_packets", UINT64_MAX);
      g.tx_packets = unsigned_field(*c, "counters.", "tx_packets", UINT64_MAX);
      g.dropped = unsigned_field(*c, "counters.", "dropped", UINT64_MAX);
    }
    if (auto jobs = doc.find("jobs"); jobs != doc.end()) {
      if (!jobs->is_array()) throw std::invalid_argument("\"jobs\" is not a list");
      for (size_t k = 0; k < jobs->size(); ++k) {
        const json& j = (*jobs)[k];
        try {
          if (!j.is_array() || j.size() < 4)
            throw std::out_of_range("not a list [id, iterations, bytes/iteration, bytes so far]");
          g.jobs[static_cast<uint32_t>(unsigned_at(j, 0, UINT32_MAX))] =
              JobMeasure{unsigned_at(j, 1, UINT64_MAX), unsigned_at(j, 2, UINT64_MAX), unsigned_at(j, 3, UINT64_MAX)};
        } catch (const std::out_of_range& e) {
          throw std::invalid_argument("\"jobs\"[" + std::to_string(k) + "]: " + e.what());
        }
      }
    }
    return g;
  } catch (const std::exception& e) {
    return R::failure(e.what());
  }
}

// ---- the applied documents ---------------------------------------------------
// One parser per document: the view is built with them, and a put checks
// with them whether a new document may replace the one in force.

Result<std::vector<uint32_t>> parse_order_document(std::string_view text, unsigned class_count) {
  using R = Result<std::vector<uint32_t>>;
  std::string problem;
  json doc = store_json(text, problem);
  if (!problem.empty()) return R::failure(problem);
  if (!schema_ok(doc) || !doc.contains("order"))
    return R::failure("not an order document ({\"schema\":1,\"order\":[ids]})");
  doc.erase("schema");
  if (doc.size() != 1) return R::failure("unknown keys besides \"order\"");
  auto parsed = parse_control_request(json{{"cmd", "order"}, {"ids", doc["order"]}}, class_count);
  if (!parsed) {
    // The order command's argument is "ids"; the document's field is "order".
    std::string error = parsed.error();
    for (size_t at; (at = error.find("\"ids\"")) != std::string::npos;) error.replace(at, 5, "\"order\"");
    return R::failure(error);
  }
  return std::get<OrderRequest>(*parsed).ids;
}

Result<PolicyParams> parse_policy_document(std::string_view text, unsigned class_count) {
  auto req = parse_text_as_command(text, "policy", class_count);
  const PolicyRequest* p = req ? std::get_if<PolicyRequest>(&*req) : nullptr;
  if (!p || !p->kind) return Result<PolicyParams>::failure(req ? "no policy \"name\"" : req.error());
  PolicyParams params;
  params.kind = *p->kind;
  params.interval_ns = p->interval_ns.value_or(default_policy_interval_ns(*p->kind));
  params.rotate_on = p->rotate_on.value_or(RotateOn::kTime);
  return params;
}

Result<JobProgress> parse_progress_document(uint32_t job, std::string_view text, unsigned class_count) {
  // The job is the key's; the document holds the rest of progress's arguments.
  std::string problem;
  json doc = store_json(text, problem);
  if (!problem.empty()) return Result<JobProgress>::failure(problem);
  if (doc.is_object()) doc["job"] = job;
  auto req = parse_as_command(std::move(doc), "progress", class_count);
  if (!req) return Result<JobProgress>::failure(req.error());
  const auto& p = std::get<ProgressRequest>(*req);
  return JobProgress{p.fraction, p.iteration, p.batch};
}

struct RanksDocument {
  std::vector<JobRanks> ranks;
  std::string policy;
  uint64_t rotation = 0;
};

// Every field checked and named, as a registration's: rotation -1 read as
// 2^64-1, and the next leader resumed a round-robin from it; a missing or
// unknown policy and a job ranked twice were taken.
Result<RanksDocument> parse_ranks_document(std::string_view text) {
  using R = Result<RanksDocument>;
  std::string problem;
  json doc = store_json(text, problem);
  if (!problem.empty()) return R::failure("not a ranks document: " + problem);
  if (!doc.is_object()) return R::failure("not a ranks document: not a JSON object");
  if (!schema_ok(doc)) return R::failure("\"schema\" is not " + std::to_string(kClusterSchema));
  try {
    RanksDocument out;
    out.policy = string_field(doc, "policy", true);
    if (!policy_from_name(out.policy)) throw std::invalid_argument("\"policy\" is not one of " + policy_name_list());
    out.rotation = unsigned_field(doc, "", "rotation", UINT64_MAX);
    const auto list = doc.find("ranks");
    if (list == doc.end()) throw std::invalid_argument("\"ranks\" is missing");
    if (!list->is_array()) throw std::invalid_argument("\"ranks\" is not a list");
    std::set<uint32_t> seen;
    for (size_t k = 0; k < list->size(); ++k) {
      const json& r = (*list)[k];
      try {
        if (!r.is_array() || r.size() < 3) throw std::out_of_range("not a list [id, pull rank, push rank]");
        const JobRanks ranks{static_cast<uint32_t>(unsigned_at(r, 0, UINT32_MAX)),
                             static_cast<uint32_t>(unsigned_at(r, 1, UINT32_MAX)),
                             static_cast<uint32_t>(unsigned_at(r, 2, UINT32_MAX))};
        if (!seen.insert(ranks.id).second) throw std::out_of_range("job " + std::to_string(ranks.id) + " again");
        out.ranks.push_back(ranks);
      } catch (const std::out_of_range& e) {
        throw std::invalid_argument("\"ranks\"[" + std::to_string(k) + "]: " + e.what());
      }
    }
    return out;
  } catch (const std::exception& ex) {
    return R::failure(std::string("not a ranks document: ") + ex.what());
  }
}

// ---- the mirror ----------------------------------------------------------------

void StoreMirror::reset(std::map<std::string, StoreEntry> entries, int64_t revision, bool replaced) {
  // What vanished goes; what is there is put over what was, so that a
  // document refused after a reconnect still leaves the last good one in
  // force (put).
  // A store that started over (its revision went back: restored, or a new
  // cluster at the same endpoints) has no history with this mirror's: read
  // afresh, nothing held from before. A replaced store whose revision is
  // already past the old one's is one too: its create revisions may equal
  // the old store's, which fence leadership and compaction by epoch.
  const bool started_over = replaced || (revision_ != 0 && revision < revision_);
  if (started_over) {
    ++epoch_;
    entries_.clear();
    jobs_.clear();
    gateways_.clear();
    held_.clear();
  }
  std::vector<std::string> gone;
  for (const auto& [key, e] : entries_)
    if (!entries.count(key)) gone.push_back(key);
  for (const std::string& key : gone) erase(key);
  for (auto& [key, e] : entries) put(key, std::move(e));
  revision_ = revision;
}

std::string unreceived_value(uint64_t bytes) {
  return std::string(kUnreceivedMark) + "a value of about " + std::to_string(bytes) +
         " bytes, more than a gateway can receive (" + std::to_string(kStoreReceiveLimitBytes) + "): not read";
}

bool StoreMirror::keeps_value(const std::string& key) const {
  return is_job_key(keys_, key) || is_gateway_key(keys_, key) || id_after(key, keys_.progresses()) ||
         key == keys_.order() || key == keys_.policy() || key == keys_.ranks() || key == keys_.leader();
}

std::optional<std::string> StoreMirror::applied_document_problem(const std::string& key, std::string_view text) const {
  auto why = [](const auto& parsed) { return parsed ? std::nullopt : std::optional<std::string>(parsed.error()); };
  if (key == keys_.order()) return why(parse_order_document(text, class_count_));
  if (key == keys_.policy()) return why(parse_policy_document(text, class_count_));
  if (key == keys_.ranks()) return why(parse_ranks_document(text));
  if (auto pid = id_after(key, keys_.progresses())) return why(parse_progress_document(*pid, text, class_count_));
  return std::nullopt;
}

void StoreMirror::put(const std::string& key, StoreEntry entry) {
  // Fail static: a document that does not parse does not replace a good
  // one. Read as a deletion, one bad write by a script would re-rank every
  // gateway at once (a bad order: oldest first), or take a job off all of
  // them; the last good one stays in force, and the refusal is reported
  // (view().held, health degraded) until a good document or a delete.
  // Only over the same key's earlier version: one deleted and put again (a
  // delete this mirror missed while it read the store again) is a new key.
  held_.erase(key);
  if (is_job_key(keys_, key)) {
    ParsedJob parsed = parse_job(key, entry);
    if (auto was = jobs_.find(key);
        !parsed.job && was != jobs_.end() && was->second.job && was->second.job->created == entry.create_revision) {
      held_[key] = parsed.problem;
      parsed.job = was->second.job;
    }
    jobs_[key] = std::move(parsed);
  } else if (auto was = entries_.find(key);
             was != entries_.end() && was->second.create_revision == entry.create_revision) {
    if (auto problem = applied_document_problem(key, entry.value);
        problem && !applied_document_problem(key, was->second.value)) {
      held_[key] = *problem;
      entry.value = was->second.value;  // its revisions are the new document's (a write is fenced on them)
    }
  }
  if (is_gateway_key(keys_, key)) gateways_[key] = parse_gateway_entry(key, entry);
  if (!keeps_value(key)) std::string().swap(entry.value);
  entries_[key] = std::move(entry);
}

void StoreMirror::erase(const std::string& key) {
  entries_.erase(key);
  jobs_.erase(key);
  gateways_.erase(key);
  held_.erase(key);
}

StoreMirror::ParsedGateway StoreMirror::parse_gateway_entry(const std::string& key, const StoreEntry& e) const {
  auto g = parse_gateway(e.value);
  if (!g) return {std::nullopt, g.error()};
  // Gateways are listed by name: a document under another gateway's key
  // would replace that gateway's entry (its telemetry, which the leader
  // sums), so the name must be the key's, as for job ids.
  // (The key's name is one a gateway could be configured with, cluster.name:
  // is_gateway_key. One that could not be configured was written by hand,
  // and would be listed, and its telemetry summed, as a gateway's.)
  if (g->name != key.substr(keys_.gateways().size()))
    return {std::nullopt, "\"name\" is \"" + g->name + "\", not the key's"};
  return {std::move(*g), ""};
}

StoreMirror::ParsedJob StoreMirror::parse_job(const std::string& key, const StoreEntry& e) const {
  const auto id = id_after(key, keys_.jobs());  // a job key's (put parses no other)
  if (e.value.size() > kMaxJobDocumentBytes)
    return {std::nullopt, std::to_string(e.value.size()) + " bytes, more than a job document may have (" +
                              std::to_string(kMaxJobDocumentBytes) +
                              "; a gateway writes one from a jobs.add of at most " + std::to_string(kMaxRequestBytes) +
                              ")"};
  std::string problem;
  json doc = store_json(e.value, problem);
  if (!problem.empty()) return {std::nullopt, problem};
  read_as_older_versions_ran(doc);
  auto req = parse_as_command(std::move(doc), "jobs.add", class_count_);
  if (!req) return {std::nullopt, req.error()};
  const auto& add = std::get<JobsAddRequest>(*req);
  if (add.id != *id)
    return {std::nullopt, "\"job\" is " + std::to_string(add.id) + ", not the key's " + std::to_string(*id)};
  ClusterJob job;
  job.spec.id = add.id;
  job.spec.name = add.name.empty() ? "job-" + std::to_string(add.id) : add.name;
  job.spec.match = RuleList(add.rules);
  job.spec.police = add.police;
  job.created = e.create_revision;
  if (auto bad = check_job(job.spec)) return {std::nullopt, bad->key + ": " + bad->problem};
  // jobs.add takes a rank; the cluster ranks by P/order alone. Dropped
  // without a word, it left a scheduler's job last with no sign why; refused,
  // an upgrade would drop jobs such documents hold. Applied, and said.
  if (add.rank)
    return {std::move(job), "its \"rank\" " + std::to_string(*add.rank) +
                                " is not applied: where a job ranks is P/order's to say (psgatectl jobs add --rank "
                                "writes both)"};
  return {std::move(job), ""};
}

ClusterView StoreMirror::view() const {
  const unsigned class_count = class_count_;
  ClusterView v;
  v.revision = revision_;
  v.store_epoch = epoch_;
  auto problem = [&](const std::string& key, const std::string& why) { v.problems.push_back(key + ": " + why); };
  // A part's fingerprint (ClusterView::applied_part says why both).
  auto count_into = [](std::pair<int64_t, size_t>& part, const StoreEntry& e) {
    part.first = std::max(part.first, e.mod_revision);
    ++part.second;
  };
  auto applied = [&](const StoreEntry& e) { count_into(v.applied_part, e); };
  const auto refused_document = [&](const std::string& key, const std::string& why) {
    if (key == keys_.order() || key == keys_.policy() || key == keys_.ranks()) v.refused_documents[key] = why;
  };
  for (const auto& [key, e] : entries_) {
    if (auto held = held_.find(key); held != held_.end()) {
      v.held.push_back(key + ": " + held->second + " (the last good document stays in force)");
      v.held_keys.insert(key);
      v.problems.push_back(v.held.back());
      refused_document(key, held->second);
    }
    if (const auto id = id_after(key, keys_.jobs())) {  // is_job_key
      applied(e);
      count_into(v.jobs_part, e);
      const ParsedJob& parsed = jobs_.at(key);
      if (parsed.job) v.jobs.push_back(*parsed.job);
      if (!parsed.problem.empty()) problem(key, parsed.problem);  // refused, or applied with a part ignored
      if (!parsed.job) v.refused_jobs[*id] = ClusterView::RefusedJob{parsed.problem, e.mod_revision};
    } else if (auto pid = id_after(key, keys_.progresses())) {
      applied(e);
      auto progress = parse_progress_document(*pid, e.value, class_count);
      if (progress) v.progress[*pid] = *progress;
      else problem(key, progress.error());
    } else if (key == keys_.order()) {
      applied(e);
      // Even of a bad document: a new order is written fenced on it, and
      // must replace it, not fail "changed meanwhile" for ever.
      v.order_revision = e.mod_revision;
      auto order = parse_order_document(e.value, class_count);
      if (order) {
        v.order = std::move(*order);
      } else {
        problem(key, order.error());
        refused_document(key, order.error());
      }
    } else if (key == keys_.policy()) {
      applied(e);
      auto policy = parse_policy_document(e.value, class_count);
      if (policy) {
        v.policy = *policy;
      } else {
        problem(key, policy.error());
        refused_document(key, policy.error());
      }
    } else if (key == keys_.ranks()) {
      applied(e);
      auto ranks = parse_ranks_document(e.value);
      if (ranks) {
        v.ranks = std::move(ranks->ranks);
        v.ranks_policy = std::move(ranks->policy);
        v.ranks_rotation = ranks->rotation;
      } else {
        problem(key, ranks.error());
        refused_document(key, ranks.error());
      }
    } else if (is_gateway_key(keys_, key)) {
      const ParsedGateway& g = gateways_.at(key);
      if (!g.gateway) {
        problem(key, g.problem);
      } else if (e.lease == 0) {
        v.unleased_gateways.push_back(g.gateway->name);
        problem(key,
                "a registration without a lease, which never expires (gateways register under their lease): not "
                "listed as a gateway; delete it (etcdctl del KEY), or a gateway of that name writes its own over it");
      } else {
        v.gateways[g.gateway->name] = *g.gateway;
      }
    } else if (key == keys_.leader()) {
      // The key, whatever it holds, is a leadership while it has a lease: no
      // gateway campaigns while it is there (a foreign or later schema's
      // leader is still one). One without a lease, which never expires, is
      // removed by the gateways (EtcdLink::lead).
      v.leader_created = e.create_revision;
      v.leader_lease = e.lease;
      json doc = parse_json_bounded(e.value);
      if (!schema_ok(doc) || !doc.contains("name") || !doc["name"].is_string()) {
        problem(key, "not a leader document ({\"schema\":1,\"name\":gateway})");
        continue;
      }
      v.leader = doc["name"].get<std::string>();
    } else {
      problem(key, stray_key_problem(keys_, key));
    }
  }
  // Jobs added in one transaction (jobs.load) share a create revision; the
  // map's key order would put "jobs/10" before "jobs/9", so ties go by id.
  std::sort(v.jobs.begin(), v.jobs.end(), [](const ClusterJob& a, const ClusterJob& b) {
    return a.created != b.created ? a.created < b.created : a.spec.id < b.spec.id;
  });
  return v;
}

std::string refused_documents_trouble(const ClusterView& v, const ClusterKeys& keys) {
  std::string trouble;
  const auto add = [&trouble](const std::string& part) { trouble += (trouble.empty() ? "" : "; ") + part; };
  // Never parsed here (refused_jobs) or held here over a good one: the
  // same ids on every gateway, whichever it is.
  std::set<uint32_t> jobs;
  for (const auto& [id, job] : v.refused_jobs) jobs.insert(id);
  for (const std::string& key : v.held_keys)
    if (auto id = id_after(key, keys.jobs())) jobs.insert(*id);
  if (!jobs.empty()) {
    // A few keys named, not thousands: health must stay small
    // (cluster.jobs_refused and documents_held list up to 100, with why).
    constexpr size_t kNamed = 3;
    std::string named;
    size_t n = 0;
    for (uint32_t id : jobs) {
      if (n++ == kNamed) {
        named += ", ...";
        break;
      }
      named += (named.empty() ? "" : ", ") + keys.job(id);
    }
    add(std::to_string(jobs.size()) + " job document(s) refused (" + named +
        "): a gateway that had such a job in force keeps it, others do not have it (psgatectl jobs rm ID deletes "
        "one)");
  }
  for (const auto& [key, why] : v.refused_documents) {
    add(key + " refused (" + why +
        "): a gateway that had a good one in force keeps it, one started since reads the key as absent");
  }
  return trouble;
}

std::string policy_mismatch_trouble(const ClusterView& v, const std::string& own_name, const GatewayInfo& own) {
  if (v.policy) return "";                         // every gateway runs P/policy
  std::map<std::string, const GatewayInfo*> runs;  // gateway name -> its registration (policy fields)
  for (const auto& [name, g] : v.gateways)
    if (!g.policy.empty()) runs[name] = &g;
  if (!own.policy.empty()) runs[own_name] = &own;
  // Different names differ; one name differs by its parameters where two
  // registrations carry different ones (one without says nothing of them).
  std::set<std::string> names, labels;
  std::map<std::string, std::vector<std::string>> by_policy;  // label -> gateway names in name order
  for (const auto& [name, g] : runs) {
    names.insert(g->policy);
    if (g->policy_interval_ns) labels.insert(policy_label(*g));
    by_policy[policy_label(*g)].push_back(name);
  }
  if (names.size() < 2 && labels.size() < 2) return "";
  constexpr size_t kNamed = 3;  // health stays small with hundreds of gateways
  std::string said;
  for (const auto& [policy, names] : by_policy) {
    said += (said.empty() ? "" : "; ") + ("\"" + policy + "\" on ");
    for (size_t i = 0; i < names.size() && i < kNamed; ++i) said += (i ? ", " : "") + names[i];
    if (names.size() > kNamed) said += " and " + std::to_string(names.size() - kNamed) + " more";
  }
  return "the gateways run different policies (" + said +
         ") and the store has no policy for all: set one (psgatectl policy NAME) so that every gateway runs the same";
}

WatchOutcome apply_watch_message(StoreMirror& mirror, const WatchMessage& m) {
  if (m.canceled || m.compact_revision > 0) return WatchOutcome::kReadAgain;
  // The revision the mirror is complete up to. Events: the newest of them.
  // Not the header's: a watch catching up (etcd's syncWatchers) is sent
  // its events in batches, each under the store's current revision, so a
  // header ahead of the events would publish the rest at a revision already
  // "applied" (skipped until the next heartbeat moved it), and a write
  // would be reported in force before it was. A progress notification (no
  // events; etcd sends one only to a watch that has caught up) moves it on.
  // A reply to a progress request does not: etcd 3.4.23 may send it ahead of
  // the watch's queued events, which would then come under a revision
  // already applied and wait, unapplied, for the next write (the gateways'
  // registrations, every second, keep the revision moving on an idle
  // cluster). The creation's header says nothing about what was delivered.
  int64_t complete = m.created || m.requested_progress ? 0 : m.revision;
  if (!m.events.empty()) complete = 0;
  for (const WatchEvent& e : m.events) {
    complete = std::max(complete, e.entry.mod_revision);
    if (e.put) mirror.put(e.key, e.entry);
    else mirror.erase(e.key);
  }
  const bool moved = complete > mirror.revision();
  if (moved) mirror.set_revision(complete);
  return !m.events.empty() || moved ? WatchOutcome::kChanged : WatchOutcome::kNothing;
}

// ---- writes --------------------------------------------------------------------

namespace {

// The cluster's order after a change this gateway made to the jobs it holds
// (`local_after`: them, top first). A gateway may hold only some of the
// store's jobs (a smaller max_jobs, slots still draining): the others are
// not its to move, and keep their places. Each stays behind the held job it
// followed in the store's order (or on top, where no held job was above it);
// held jobs the change removed leave; the held jobs take the order of
// `local_after`. A gateway that holds every job writes `local_after`.
std::vector<uint32_t> cluster_order_after(const ClusterView& seen, const JobRegistry& before, const JobRegistry& after,
                                          const std::vector<uint32_t>& local_after) {
  std::vector<uint32_t> top;                            // not held, above every held job
  std::map<uint32_t, std::vector<uint32_t>> followers;  // held job -> the jobs not held behind it
  std::vector<uint32_t>* behind = &top;
  for (uint32_t id : seen.full_order()) {
    if (before.find(id) || after.find(id)) {
      behind = after.find(id) ? &followers[id] : behind;  // a removed job's followers go to the job above it
    } else {
      behind->push_back(id);
    }
  }
  std::vector<uint32_t> out = std::move(top);
  for (uint32_t id : local_after) {
    out.push_back(id);
    if (auto f = followers.find(id); f != followers.end()) out.insert(out.end(), f->second.begin(), f->second.end());
  }
  return out;
}

}  // namespace

StoreWrite refused_job_removal(const ClusterKeys& keys, const ClusterView& seen, uint32_t id) {
  StoreWrite w;
  auto refused = seen.refused_jobs.find(id);
  w.deletes.push_back(keys.job(id));
  w.deletes.push_back(keys.progress(id));
  w.unchanged_since.emplace_back(keys.job(id), refused == seen.refused_jobs.end() ? 0 : refused->second.mod_revision);
  if (std::find(seen.order.begin(), seen.order.end(), id) != seen.order.end()) {
    std::vector<uint32_t> order;
    for (uint32_t o : seen.order)
      if (o != id) order.push_back(o);
    w.puts.emplace_back(keys.order(), order_document(order));
    w.unchanged_since.emplace_back(keys.order(), seen.order_revision);
  }
  return w;
}

void append_store_write(StoreWrite& w, const StoreWrite& extra) {
  w.puts.insert(w.puts.end(), extra.puts.begin(), extra.puts.end());
  w.deletes.insert(w.deletes.end(), extra.deletes.begin(), extra.deletes.end());
  w.absent.insert(w.absent.end(), extra.absent.begin(), extra.absent.end());
  w.unchanged_since.insert(w.unchanged_since.end(), extra.unchanged_since.begin(), extra.unchanged_since.end());
}

StoreWrite store_write(const ClusterKeys& keys, const ClusterView& seen, const JobRegistry& before,
                       const PolicyParams& policy_before, const JobRegistry& after, const PolicyParams& policy_after,
                       bool policy_named) {
  StoreWrite w;
  for (const JobRecord* j : before.in_age_order()) {
    if (after.find(j->spec.id)) continue;
    w.deletes.push_back(keys.job(j->spec.id));
    w.deletes.push_back(keys.progress(j->spec.id));
  }
  for (const JobRecord* j : after.in_age_order()) {
    const JobRecord* had = before.find(j->spec.id);
    if (!had) {
      w.puts.emplace_back(keys.job(j->spec.id), job_document(j->spec));
      w.absent.push_back(keys.job(j->spec.id));
    }
    const JobProgress none;
    const JobProgress& was = had ? had->progress : none;
    if (!(j->progress.fraction == was.fraction && j->progress.iteration == was.iteration &&
          j->progress.batch == was.batch))
      w.puts.emplace_back(keys.progress(j->spec.id), progress_document(j->progress));
  }
  // The order: written whole whenever the operator's order changes (or a job
  // was added with a rank), fenced on the order this gateway last saw.
  std::vector<uint32_t> order_before, order_after;
  for (const JobRecord* j : before.in_rank_order()) order_before.push_back(j->spec.id);
  for (const JobRecord* j : after.in_rank_order()) order_after.push_back(j->spec.id);
  std::vector<uint32_t> kept_before;  // the order without the jobs removed: removal alone changes no rank
  for (uint32_t id : order_before)
    if (after.find(id)) kept_before.push_back(id);
  std::vector<uint32_t> kept_after;  // and without the jobs added
  for (uint32_t id : order_after)
    if (before.find(id)) kept_after.push_back(id);
  bool reordered = kept_after != kept_before;
  // A removed job the stored order still names: rewrite it, or the id would
  // take its old place again if it were ever added back.
  for (uint32_t id : seen.order)
    if (before.find(id) && !after.find(id)) reordered = true;
  // A new job placed anywhere but last (a rank given) changes the order too,
  // and so do new jobs last but not in ascending id order: jobs written in
  // one transaction share a create revision, and the store's unlisted jobs
  // follow by (revision, id) (view()).
  if (!reordered) {
    size_t pos = 0;
    for (; pos < order_after.size() && before.find(order_after[pos]); ++pos) {
    }
    for (size_t i = pos; i < order_after.size(); ++i)
      if (before.find(order_after[i]) || (i > pos && order_after[i] < order_after[i - 1])) reordered = true;
  }
  // The last jobs removed where the store holds no order: an empty order is
  // written, so that the prefix is not left empty. A prefix with no job,
  // order or policy is one wiped (etcdctl del --prefix), which the gateways
  // that had jobs say (ControlPlane::note_store_emptied); an operator's
  // removal is not.
  if (!reordered && after.size() == 0 && before.size() != 0 && seen.order_revision == 0) reordered = true;
  if (reordered) {
    w.puts.emplace_back(keys.order(), order_document(cluster_order_after(seen, before, after, order_after)));
    w.unchanged_since.emplace_back(keys.order(), seen.order_revision);
  }
  const bool policy_changed = !(policy_before == policy_after);
  const bool policy_not_stored = policy_named && !(seen.policy && *seen.policy == policy_after);
  if (policy_changed || policy_not_stored) w.puts.emplace_back(keys.policy(), policy_document(policy_after));
  return w;
}

StoreIdentity store_identity(uint64_t followed_id, uint64_t read_id, const std::vector<uint64_t>& endpoint_ids,
                             const std::vector<bool>& served_followed) {
  // A read without an identity (a proxy's header, no cluster_id) cannot
  // be judged: read as the cluster followed, never as a replaced store.
  if (read_id == 0 || read_id == followed_id) return StoreIdentity::kSame;
  size_t agree = 0;
  bool switched = false;  // an endpoint that answered for the cluster followed answers for this one now
  for (size_t i = 0; i < endpoint_ids.size(); ++i) {
    const uint64_t id = endpoint_ids[i];
    if (id != read_id && id != 0) return StoreIdentity::kForeign;  // it answers for another cluster
    if (id != read_id) continue;
    ++agree;
    if (i < served_followed.size() && served_followed[i]) switched = true;
  }
  // The first read: no endpoint that answers says otherwise (those that do
  // not answer cannot).
  if (followed_id == 0) return StoreIdentity::kSame;
  if (agree == endpoint_ids.size()) return StoreIdentity::kReplaced;  // every endpoint answers for it
  // Some endpoints silent: a restored cluster may lack a member the config
  // still names. The store replaced if most endpoints answer for it and one
  // of them answered for the cluster followed before (the same endpoint,
  // another store). Not one whose endpoints never did: with every member
  // of the cluster followed down, the members of another cluster named in
  // the config are no replaced store, however many.
  return agree * 2 > endpoint_ids.size() && switched ? StoreIdentity::kReplaced : StoreIdentity::kForeign;
}

// ---- the cluster's policy --------------------------------------------------------

std::vector<JobRanks> cluster_ranks(const ClusterView& view, const PolicyParams& policy, PolicyState& state,
                                    uint64_t now_ns) {
  // Each gateway's figure is checked only to fit 64 bits: a sum that wrapped
  // would rank a job with the most bytes left as the one nearly done.
  auto add_saturating = [](uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; };
  std::vector<PolicyJob> input;
  for (uint32_t id : view.full_order()) {
    PolicyJob pj;
    pj.id = id;
    if (auto p = view.progress.find(id); p != view.progress.end()) pj.reported = p->second;
    for (const auto& [name, g] : view.gateways) {
      auto m = g.jobs.find(id);
      if (m == g.jobs.end()) continue;
      pj.iterations_seen = std::max(pj.iterations_seen, m->second.iterations_seen);
      pj.bytes_per_iteration = add_saturating(pj.bytes_per_iteration, m->second.bytes_per_iteration);
      pj.bytes_this_iteration = add_saturating(pj.bytes_this_iteration, m->second.bytes_this_iteration);
    }
    input.push_back(pj);
  }
  return evaluate_policy(policy, state, input, now_ns);
}

}  // namespace psgate
