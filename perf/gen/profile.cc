// SPDX-License-Identifier: BSD-3-Clause
// Profile parsing: TOML -> validated Profile, one error line naming the key.
#include "profile.h"

#include "psgate/config.h"  // kMaxConfigFileBytes
#include "psgate/text.h"

#include <arpa/inet.h>

#include <fcntl.h>
#include <unistd.h>
#include <algorithm>

#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <span>
#include <tuple>

#include "flow_map.h"
#include "psgate/toml_reader.h"
#include "psgate/units.h"

namespace psgate::gen {
namespace {

constexpr std::string_view kTopKeys[] = {"generator", "jobs"};
constexpr std::string_view kGeneratorKeys[] = {"duration", "drain",      "interval", "link_timeout", "settle",
                                               "burst",    "tx_retries", "mbufs",    "host_port",    "wire_port"};
constexpr std::string_view kJobKeys[] = {"id",          "name",    "count", "ps",   "workers",   "worker_addr",
                                         "worker_port", "flows",   "proto", "size", "direction", "rate",
                                         "pacer_depth", "pattern", "push",  "pull", "gap"};

// What a string key holds, for the error a bare number gets: `--rate 1000`
// or `ps = 2222` said only "is not a string".
constexpr std::string_view kRateForm = "\"max\", a packet rate (\"10kpps\") or a bit rate (\"2.5Gbit/s\")";
constexpr std::string_view kEndpointForm = "an endpoint ADDRESS:PORT (\"10.0.0.5:2222\", \"[fd00::5]:2222\")";

using u128 = unsigned __int128;

// Whether `text`, a quantity that `parse` accepted ("1.5kpps", "64B"), is a
// whole number of the unit `parse` returns: units' parsers round to the
// nearest integer, which for a rate or a size would run something other
// than what was written ("1.5pps" sent 2 packets a second). The unit's
// factor is what `parse` makes of "1<unit>", so every unit the parser knows
// is covered and its tables stay in one place (psgate/units.h).
bool whole_quantity(std::string_view text, Result<uint64_t> (*parse)(std::string_view)) {
  const size_t unit_at = std::min(text.find_first_not_of("0123456789."), text.size());
  const std::string_view number = text.substr(0, unit_at);
  const size_t dot = number.find('.');
  if (dot == std::string_view::npos) return true;
  std::string_view fraction = number.substr(dot + 1);
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  if (fraction.empty()) return true;
  const auto factor = parse("1" + std::string(text.substr(unit_at)));
  // The parser took at most 24 digits after the point and its factors are at
  // most 1e12: the product stays below 2^128.
  if (!factor.ok() || fraction.size() > 24) return false;
  u128 digits = 0, scale = 1;
  for (char c : fraction) {
    digits = digits * 10 + static_cast<unsigned>(c - '0');
    scale *= 10;
  }
  return digits * *factor % scale == 0;
}

// The generic reading (typed getters, unknown keys with "did you mean",
// one-line errors) is psgate's config reader; this is the profile's schema.
// Profiles say "5 is not a string" where the config says "expected a string,
// got integer 5".
class Parser : TomlReader {
 public:
  Parser(std::string_view source, const OverrideOptions& options)
      : TomlReader(source, Wording::kIsNot), options_(options) {}

  Result<Profile> run(const toml::table& root, const toml::table& overrides) {
    Profile p;
    if (!check_keys(root, "", kTopKeys)) return fail();
    if (const toml::node* g = root.get("generator")) {
      const toml::table* t = g->as_table();
      if (!t) return error("generator", "must be a table");
      if (!parse_generator(*t, p)) return fail();
    }
    std::vector<toml::table> entries;
    if (const toml::node* j = root.get("jobs")) {
      const toml::array* a = j->as_array();
      if (!a || a->empty()) return error("jobs", "must be an array of tables ([[jobs]]) with at least one job");
      for (size_t i = 0; i < a->size(); ++i) {
        const toml::table* t = a->get(i)->as_table();
        if (!t) return error("jobs[" + std::to_string(i) + "]", "must be a table");
        entries.push_back(*t);
      }
    } else {
      entries.emplace_back();  // a job made of the overrides (and defaults)
    }
    // Overrides apply to every entry: the keys that tell jobs apart would
    // make several entries collide (equal ids, PS endpoints, or count copies
    // of each starting at the same id and port).
    if (entries.size() > 1) {
      for (std::string_view key : {"count", "id", "ps"}) {
        if (!overrides.get(key)) continue;
        return error(std::string(key),
                     "cannot be set from the command line (" + std::string(key == "count" ? "--jobs, " : "") +
                         "--set " + std::string(key) + "=...) for a profile with " + std::to_string(entries.size()) +
                         " [[jobs]] entries: it would apply to each of them and make them collide; set it in the "
                         "profile's entries instead");
      }
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      toml::table& t = entries[i];
      for (auto&& [k, v] : overrides) t.insert_or_assign(k, v);
      const std::string path = "jobs[" + std::to_string(i) + "]";
      if (!parse_job(t, path, p)) return fail_in_job(path, root.get("jobs") != nullptr);
    }
    if (!validate(p)) return fail();
    return p;
  }

 private:
  Result<Profile> fail() { return Result<Profile>::failure(TomlReader::error()); }
  // The error of job `path`, naming the option when the key that failed is
  // one the command line set: its value is not the profile's. TomlReader's
  // errors read "<source>: <key path>: <problem>"; the entry is told when it
  // is the profile's (`from_profile`), as the option applies to every one.
  Result<Profile> fail_in_job(const std::string& path, bool from_profile) {
    const std::string& error = TomlReader::error();
    for (const auto& [key, option] : options_) {
      const std::string prefix = source() + ": " + key_path(path, key) + ": ";
      if (!error.starts_with(prefix)) continue;
      const std::string where = from_profile ? " (for " + path + " of " + source() + ")" : "";
      return Result<Profile>::failure(option + where + ": " + error.substr(prefix.size()));
    }
    return fail();
  }
  Result<Profile> error(const std::string& key, const std::string& what) {
    set_error(key, what);
    return fail();
  }
  bool set_error(const std::string& key, const std::string& what) { return TomlReader::fail(key, what); }

  // Absent: leaves `out` (the default). Whole units only (whole_quantity):
  // a duration of "0.4ns" was rounded to 0, which means "until SIGINT" for
  // the run's duration, and "1.5B" of push data to 2 bytes.
  bool quantity(const toml::table& t, std::string_view key, const std::string& path,
                Result<uint64_t> (*parse)(std::string_view), const char* example, uint64_t& out) {
    std::optional<uint64_t> v;
    if (!TomlReader::quantity(t, key, path, parse, example, v)) return false;
    if (!v) return true;
    const std::string& text = t.get(std::string(key))->as_string()->get();  // TomlReader took only a string
    if (!whole_quantity(text, parse)) {
      return set_error(path + "." + std::string(key), "\"" + text + "\" is not a whole number of " +
                                                          (parse == parse_size_bytes ? "bytes" : "nanoseconds"));
    }
    out = *v;
    return true;
  }

  bool parse_generator(const toml::table& t, Profile& p) {
    const std::string path = "generator";
    if (!check_keys(t, path, kGeneratorKeys)) return false;
    if (!quantity(t, "duration", path, parse_duration_ns, "500ms", p.duration_ns)) return false;
    if (!quantity(t, "drain", path, parse_duration_ns, "500ms", p.drain_ns)) return false;
    if (!quantity(t, "interval", path, parse_duration_ns, "500ms", p.interval_ns)) return false;
    if (!quantity(t, "link_timeout", path, parse_duration_ns, "500ms", p.link_timeout_ns)) return false;
    if (!quantity(t, "settle", path, parse_duration_ns, "200ms", p.settle_ns)) return false;
    // Times become std::chrono::nanoseconds (signed 64 bits): far past that
    // (292 years) one would wrap negative and end the run at once.
    for (auto [key, value] :
         {std::pair{"duration", p.duration_ns}, std::pair{"drain", p.drain_ns}, std::pair{"interval", p.interval_ns},
          std::pair{"link_timeout", p.link_timeout_ns}, std::pair{"settle", p.settle_ns}}) {
      if (value > kMaxTimeNs) return set_error(path + "." + key, "at most 100000000s (about 3 years)");
    }
    uint64_t v = p.tx_burst;
    if (!integer(t, "burst", path, 1, kMaxTxBurst, v)) return false;
    p.tx_burst = static_cast<uint32_t>(v);
    v = p.tx_retries;
    if (!integer(t, "tx_retries", path, 0, 1'000'000, v)) return false;
    p.tx_retries = static_cast<uint32_t>(v);
    v = p.mbufs;
    if (!integer(t, "mbufs", path, 1023, 1 << 24, v)) return false;
    p.mbufs = static_cast<uint32_t>(v);
    for (auto [key, out] : {std::pair{"host_port", &p.host_port}, std::pair{"wire_port", &p.wire_port}}) {
      const toml::node* n = t.get(key);
      if (!n) continue;
      if (n->is_integer() && n->value<int64_t>().value() >= 0 && n->value<int64_t>().value() < 65536) {
        *out = std::to_string(*n->value<int64_t>());
      } else if (n->is_string() && !n->as_string()->get().empty()) {
        *out = n->as_string()->get();
      } else {
        return set_error(path + "." + key, describe_value(*n) + " is not a port id or a device name");
      }
    }
    return true;
  }

  bool parse_job(const toml::table& t, const std::string& path, Profile& p) {
    if (!check_keys(t, path, kJobKeys)) return false;
    JobProfile j;
    uint64_t v = p.jobs.size() + 1;
    // From 1, as psgate's: a job 0 could never be matched against its stats.
    if (!integer(t, "id", path, 1, UINT32_MAX, v)) return false;
    j.id = static_cast<uint32_t>(v);
    const std::string* name = string(t, "name", path);
    if (failed()) return false;
    uint64_t count = 1;
    if (!integer(t, "count", path, 1, static_cast<int64_t>(kMaxJobs), count)) return false;

    j.ps_addr = Addr{false, 0, 0x0a000005};  // 10.0.0.5
    if (const std::string* ps = string(t, "ps", path, false, kEndpointForm)) {
      auto e = parse_endpoint(*ps);
      if (!e.ok()) return set_error(path + ".ps", e.error());
      j.ps_addr = e->first;
      j.ps_port = e->second;
    } else if (failed()) {
      return false;
    }
    v = j.workers;
    if (!integer(t, "workers", path, 1, 1 << 24, v)) return false;
    j.workers = static_cast<uint32_t>(v);
    j.worker_addr = j.ps_addr.v6 ? Addr{true, 0xfd01ull << 48, 1} : Addr{false, 0, 0x0a010001};  // fd01::1, 10.1.0.1
    if (const std::string* w = string(t, "worker_addr", path, false, "an address (\"10.1.0.1\", \"fd01::1\")")) {
      auto a = parse_addr(*w);
      if (!a.ok()) return set_error(path + ".worker_addr", a.error());
      if (a->v6 != j.ps_addr.v6) return set_error(path + ".worker_addr", "must be of the same family as ps");
      j.worker_addr = *a;
    } else if (failed()) {
      return false;
    }
    v = j.worker_port;
    if (!integer(t, "worker_port", path, 1, 65535, v)) return false;
    j.worker_port = static_cast<uint16_t>(v);
    v = j.workers;
    if (!integer(t, "flows", path, 1, static_cast<int64_t>(kMaxFlowsPerJob), v)) return false;
    j.flows = v;
    if (j.flows < j.workers) {
      return set_error(path + ".flows", std::to_string(j.flows) + " is fewer than the " + std::to_string(j.workers) +
                                            " workers (each worker has at least one flow)");
    }
    if (const std::string* s = string(t, "proto", path, false, "udp or tcp")) {
      if (*s == "udp") {
        j.proto = Proto::kUdp;
      } else if (*s == "tcp") {
        j.proto = Proto::kTcp;
      } else {
        return set_error(path + ".proto", "\"" + *s + "\" is not udp or tcp");
      }
    } else if (failed()) {
      return false;
    }
    const uint32_t min_size = min_frame_size(j.ps_addr.v6, j.proto);
    // The default (64 B) below what TCP or IPv6 needs: the smallest such
    // frame, as sent and as reported (the report said 64B for 74 B frames).
    if (j.size_model == SizeModel::kFixed && j.size < min_size) j.size = min_size;
    if (const toml::node* n = t.get("size")) {
      const std::string s = n->is_string() ? n->as_string()->get() : "";
      if (s == "imix") {
        j.size_model = SizeModel::kImix;
      } else if (s == "ps") {
        j.size_model = SizeModel::kPsLike;
      } else {
        // Read as 64 bits signed: -64 must not wrap into 18446744073709551552.
        const int64_t integer = n->is_integer() ? n->value<int64_t>().value() : 0;
        auto bytes =
            n->is_integer()
                ? (integer < 0 ? Result<uint64_t>::failure(std::to_string(integer) + " is not a size (negative)")
                               : Result<uint64_t>(static_cast<uint64_t>(integer)))
            : n->is_string() ? parse_size_bytes(s)
                             : Result<uint64_t>::failure(describe_value(*n) + " is not a size");
        if (!bytes.ok()) return set_error(path + ".size", bytes.error() + ", \"imix\" or \"ps\"");
        // "64.5B" was sent as 65-byte frames.
        if (n->is_string() && !whole_quantity(s, parse_size_bytes))
          return set_error(path + ".size", "\"" + s + "\" is not a whole number of bytes");
        if (*bytes < min_size || *bytes > kMaxFrameSize) {
          return set_error(path + ".size", std::to_string(*bytes) + " bytes is outside " + std::to_string(min_size) +
                                               ".." + std::to_string(kMaxFrameSize) +
                                               " (frame size with FCS; the minimum holds the " +
                                               (j.ps_addr.v6 ? "IPv6" : "IPv4") + "/" +
                                               (j.proto == Proto::kTcp ? "TCP" : "UDP") + " headers and the stamp)");
        }
        j.size = static_cast<uint32_t>(*bytes);
      }
    }
    if (const std::string* s = string(t, "direction", path, false, "push, pull or both")) {
      if (*s == "push") {
        j.dirs = 1u << kPush;
      } else if (*s == "pull") {
        j.dirs = 1u << kPull;
      } else if (*s == "both") {
        j.dirs = 3;
      } else {
        return set_error(path + ".direction", "\"" + *s + "\" is not push, pull or both");
      }
    } else if (failed()) {
      return false;
    }
    if (const std::string* s = string(t, "rate", path, false, kRateForm)) {
      if (*s == "max") {
        j.rate_mode = RateMode::kMax;
      } else if (s->size() > 3 && s->ends_with("pps") && !s->ends_with("bps")) {
        auto r = parse_pps(*s);
        if (!r.ok()) return set_error(path + ".rate", r.error());
        j.rate_mode = RateMode::kPps;
        j.rate = *r;
      } else {
        auto r = parse_rate_bps(*s);
        if (!r.ok()) return set_error(path + ".rate", r.error() + ", a packet rate (\"10kpps\") or \"max\"");
        j.rate_mode = RateMode::kBps;
        j.rate = *r;
      }
      // Refused rather than rounded: a benchmark's offered rate must be the
      // one it was given. The pacer counts whole packets (or bits) per
      // second in exact integer arithmetic, so any whole rate is kept
      // exactly over any run length ("1.5kpps" is 1500); a fraction of a
      // unit per second ("1000.5bit/s") it cannot keep, and rounding it
      // would change the rate. parse_pps refuses fractions of a packet
      // itself.
      if (j.rate_mode == RateMode::kBps && !whole_quantity(*s, parse_rate_bps)) {
        return set_error(path + ".rate", "\"" + *s +
                                             "\" is not a whole number of bits per second: the pacer sends whole "
                                             "ones, and rounding would send another rate than the one given");
      }
      if (j.rate_mode != RateMode::kMax && j.rate == 0) return set_error(path + ".rate", "must be above zero");
    } else if (failed()) {
      return false;
    }
    if (!quantity(t, "pacer_depth", path, parse_duration_ns, "500ms", j.pacer_depth_ns)) return false;
    // Added to the TSC in ticks: past kMaxTimeNs a depth saturates and a gap's
    // end wraps, and the gap would be skipped rather than kept.
    if (j.pacer_depth_ns > kMaxTimeNs) return set_error(path + ".pacer_depth", "at most 100000000s (about 3 years)");
    // As push, pull and gap without the iteration pattern: a setting that
    // cannot act is refused rather than ignored ("max" has no pacer).
    if (t.get("pacer_depth") && j.rate_mode == RateMode::kMax)
      return set_error(path + ".pacer_depth", "only with a packet or bit rate (rate \"max\" is not paced)");
    if (const std::string* s = string(t, "pattern", path, false, "constant or iteration")) {
      if (*s == "constant") {
        j.pattern = Pattern::kConstant;
      } else if (*s == "iteration") {
        j.pattern = Pattern::kIteration;
      } else {
        return set_error(path + ".pattern", "\"" + *s + "\" is not constant or iteration");
      }
    } else if (failed()) {
      return false;
    }
    if (!quantity(t, "push", path, parse_size_bytes, "64KiB", j.push_bytes)) return false;
    if (!quantity(t, "pull", path, parse_size_bytes, "64KiB", j.pull_bytes)) return false;
    if (!quantity(t, "gap", path, parse_duration_ns, "500ms", j.gap_ns)) return false;
    if (j.gap_ns > kMaxTimeNs) return set_error(path + ".gap", "at most 100000000s (about 3 years)");
    if (j.pattern == Pattern::kIteration) {
      if (j.dirs != 3) return set_error(path + ".direction", "the iteration pattern sends both directions");
      if (j.push_bytes + j.pull_bytes == 0) return set_error(path + ".push", "push and pull are both zero");
      constexpr uint64_t kMaxPhase = 1ull << 40;  // 1 TiB per worker
      if (j.push_bytes > kMaxPhase || j.pull_bytes > kMaxPhase) return set_error(path + ".push", "above 1TiB");
      // A phase's bytes for all workers must fit in 64 bits (1 TiB x 2^24
      // workers is exactly 2^64, which wrapped to a phase of nothing).
      if (std::max(j.push_bytes, j.pull_bytes) > UINT64_MAX / j.workers)
        return set_error(path + ".push", "push or pull times workers is 2^64 bytes or more");
    } else {
      for (std::string_view k : {"push", "pull", "gap"}) {
        if (t.get(k)) return set_error(path + "." + std::string(k), "only with pattern = \"iteration\"");
      }
    }
    // Address space of the workers (flow_map.h).
    const uint64_t hosts = worker_hosts_needed(j.workers, j.worker_port, j.flows);
    const uint64_t limit = j.worker_addr.v6 ? UINT64_MAX : UINT32_MAX;
    if (j.worker_addr.lo > limit - (hosts - 1)) {
      // IPv6 worker addresses count up in the low 64 bits only (no carry into
      // the prefix: FlowMap), so that is what runs out, not the address space.
      const Addr last{j.worker_addr.v6, j.worker_addr.hi, limit};
      return set_error(path + ".worker_addr",
                       format_addr(j.worker_addr) + " + " + std::to_string(hosts) + " worker addresses overflow " +
                           (j.worker_addr.v6 ? "the address's low 64 bits (worker addresses count up in them, "
                                               "without a carry into the upper 64: the last one is "
                                             : "the IPv4 address space (the last address is ") +
                           format_addr(last) + "); give a lower worker_addr or fewer workers or flows");
    }

    if (count > 1 && uint64_t{j.ps_port} + count - 1 > 65535) {
      return set_error(path + ".count", "ps port " + std::to_string(j.ps_port) + " + " + std::to_string(count) +
                                            " copies exceeds 65535");
    }
    if (count > 1 && uint64_t{j.id} + count - 1 > UINT32_MAX) {
      return set_error(path + ".count",
                       "job id " + std::to_string(j.id) + " + " + std::to_string(count) + " copies exceeds 4294967295");
    }
    if (p.jobs.size() + count > kMaxJobs) return set_error(path + ".count", "more than 32768 jobs in total");
    for (uint64_t k = 0; k < count; ++k) {
      JobProfile c = j;
      c.id = static_cast<uint32_t>(j.id + k);
      c.ps_port = static_cast<uint16_t>(j.ps_port + k);
      c.name = name ? (count > 1 ? *name + "-" + std::to_string(k) : *name) : "job-" + std::to_string(c.id);
      // psgate's rule for job names (text.h), so that a name shown in the
      // report is what it looks like and fits where psgate's would; checked
      // on the copy's name, whose "-k" can take it past 64 bytes.
      if (const std::string problem = name_problem(c.name); !problem.empty()) {
        return set_error(path + ".name", toml_quote(c.name) + " " + problem +
                                             (name && count > 1 ? " (the name of copy " + std::to_string(k) +
                                                                      ": the name, '-' and the copy's number)"
                                                                : ""));
      }
      p.jobs.push_back(std::move(c));
    }
    return true;
  }

  bool validate(const Profile& p) {
    std::set<uint32_t> ids;
    std::set<std::tuple<bool, uint64_t, uint64_t, uint16_t, Proto>> endpoints;
    uint64_t states = 0;
    for (size_t i = 0; i < p.jobs.size(); ++i) {
      const JobProfile& j = p.jobs[i];
      if (!ids.insert(j.id).second) return set_error("jobs", "job id " + std::to_string(j.id) + " is used twice");
      if (!endpoints.insert({j.ps_addr.v6, j.ps_addr.hi, j.ps_addr.lo, j.ps_port, j.proto}).second) {
        return set_error("jobs", "job " + std::to_string(j.id) + ": PS endpoint " + format_addr(j.ps_addr) + ":" +
                                     std::to_string(j.ps_port) +
                                     " is used by another job (flows would collide; give each job its own ps)");
      }
      states += j.flows * static_cast<unsigned>(__builtin_popcount(j.dirs));
    }
    if (states > kMaxFlowStates) {
      return set_error("jobs", std::to_string(states) + " flows x directions in total; at most " +
                                   std::to_string(kMaxFlowStates) + " (per-flow state is kept in memory)");
    }
    return true;
  }

  const OverrideOptions& options_;
};

}  // namespace

uint64_t worker_hosts_needed(uint32_t workers, uint16_t worker_port, uint64_t flows) {
  if (flows == 0 || workers == 0) return 0;
  // host(f) = f % W + W * ((f / W) / span) is largest in the last round of
  // connections: at worker W-1 when that round holds a complete row of W
  // flows before the last one, else at the last flow's worker.
  const uint64_t span = 65536u - worker_port;
  const uint64_t c_last = (flows - 1) / workers;
  const uint64_t round = c_last / span;
  const uint64_t w_max = c_last > round * span ? workers - 1 : (flows - 1) % workers;
  return w_max + uint64_t{workers} * round + 1;
}

Result<Addr> parse_addr(std::string_view text) {
  const std::string s(text);
  Addr a;
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    a.lo = ntohl(v4.s_addr);
    return a;
  }
  if (inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
    a.v6 = true;
    for (int i = 0; i < 8; ++i) a.hi = a.hi << 8 | v6.s6_addr[i];
    for (int i = 8; i < 16; ++i) a.lo = a.lo << 8 | v6.s6_addr[i];
    return a;
  }
  return Result<Addr>::failure("\"" + s + "\" is not an IPv4 or IPv6 address");
}

std::string format_addr(const Addr& a) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (!a.v6) {
    in_addr v4{htonl(static_cast<uint32_t>(a.lo))};
    inet_ntop(AF_INET, &v4, buf, sizeof(buf));
  } else {
    in6_addr v6{};
    for (int i = 0; i < 8; ++i) v6.s6_addr[i] = static_cast<uint8_t>(a.hi >> (56 - 8 * i));
    for (int i = 0; i < 8; ++i) v6.s6_addr[8 + i] = static_cast<uint8_t>(a.lo >> (56 - 8 * i));
    inet_ntop(AF_INET6, &v6, buf, sizeof(buf));
  }
  return buf;
}

Result<std::pair<Addr, uint16_t>> parse_endpoint(std::string_view text) {
  using R = Result<std::pair<Addr, uint16_t>>;
  const std::string quoted = "\"" + std::string(text) + "\"";
  std::string_view host, port;
  const bool bracketed = !text.empty() && text.front() == '[';
  if (bracketed) {
    const size_t close = text.find("]:");
    if (close == std::string_view::npos) return R::failure(quoted + " is not [IPv6]:port");
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.find(':') != colon)
      return R::failure(quoted + " is not address:port (IPv6: [address]:port)");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  auto a = parse_addr(host);
  if (!a.ok()) return R::failure(a.error());
  // Brackets only set an IPv6 address's colons apart from the port's colon.
  // Around an IPv4 address they are a slip (or an IPv6 address that lost
  // its colons), and taking them would make "[x]:port" mean either family.
  if (bracketed && !a->v6) {
    return R::failure(quoted + ": brackets are for IPv6 addresses only (IPv4: \"" + std::string(host) + ":" +
                      std::string(port) + "\")");
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos)
    return R::failure(quoted + ": port is not a number");
  const unsigned long p = std::stoul(std::string(port));
  if (p == 0 || p > 65535) return R::failure(quoted + ": port out of range 1..65535");
  return std::pair{*a, static_cast<uint16_t>(p)};
}

Result<uint64_t> parse_pps(std::string_view text) {
  // Same exact decimal arithmetic and SI prefixes as bit rates: "1.5Mpps" reads as "1.5Mbit/s".
  std::string s(text);
  if (!s.ends_with("pps"))
    return Result<uint64_t>::failure("\"" + s + "\" is not a packet rate (expected e.g. \"10kpps\")");
  s.replace(s.size() - 3, 3, "bit/s");
  auto r = parse_rate_bps(s);
  if (!r.ok() && r.error().find(" is too large") != std::string::npos) {
    return Result<uint64_t>::failure("\"" + std::string(text) + "\" is too large (at most " +
                                     std::to_string(std::numeric_limits<uint64_t>::max()) + "pps)");
  }
  if (!r.ok()) {
    return Result<uint64_t>::failure(
        "\"" + std::string(text) +
        "\" is not a packet rate (expected e.g. \"10kpps\", \"1.5Mpps\"; prefixes k, M, G, T)");
  }
  // parse_rate_bps rounds to whole units: here, packets. Refused in the
  // parser, not only by the profile, so that no caller sends another rate
  // than the one written ("1.5pps" went out as 2 a second).
  if (!whole_quantity(s, parse_rate_bps)) {
    return Result<uint64_t>::failure("\"" + std::string(text) +
                                     "\" is not a whole number of packets per second: rounding it would send another "
                                     "rate than the one given");
  }
  return *r;
}

Result<bool> add_override(toml::table& table, std::string_view assignment, std::string_view shortcut) {
  const size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return Result<bool>::failure("--set \"" + std::string(assignment) + "\" is not KEY=VALUE");
  const std::string key(assignment.substr(0, eq));
  const std::string value(assignment.substr(eq + 1));
  toml::table one;
  // Bounded as a profile is (a dotted key of 50,000 parts in an inline
  // table overflowed toml++'s stack): such a value is taken as a string.
  const std::string text = "v = " + value;
  try {
    if (line_of_overlong_key(text) == 0) {
      toml::table t = toml::parse(text);
      if (const toml::node* n = t.get("v"); n && !n->is_table() && !n->is_array()) one.insert_or_assign(key, *n);
    }
  } catch (const toml::parse_error&) {
  }
  if (one.empty()) one.insert_or_assign(key, value);
  // As a profile's keys and strings are (parse_toml): a name with an escape
  // sequence or a newline would print as something else in the table.
  // The value is no table, so the path is the key: a shortcut names itself
  // instead ("--rate", not "--set rate": the user typed no --set).
  if (const std::string bad = control_char_path(one, ""); !bad.empty()) {
    return Result<bool>::failure((shortcut.empty() ? "--set " + bad : std::string(shortcut)) +
                                 ": holds a control character (only tab is allowed in keys and strings)");
  }
  table.insert_or_assign(key, *one.get(key));
  return true;
}

Result<Profile> parse_profile(const toml::table& root, const toml::table& job_overrides, std::string_view source,
                              const OverrideOptions& options) {
  return Parser(source, options).run(root, job_overrides);
}

Result<Profile> parse_profile_text(std::string_view text, const toml::table& job_overrides, std::string_view source,
                                   const OverrideOptions& options) {
  auto root = parse_toml(text, source);
  if (!root) return Result<Profile>::failure(root.error());
  return parse_profile(*root, job_overrides, source, options);
}

Result<Profile> load_profile_file(const std::string& path, const toml::table& job_overrides,
                                  const OverrideOptions& options) {
  std::string text;
  if (const int err = read_text_file(path, text, kMaxConfigFileBytes)) {
    return Result<Profile>::failure(path + ": cannot read profile: " + read_text_error(err));
  }
  return parse_profile_text(text, job_overrides, path, options);
}

}  // namespace psgate::gen
