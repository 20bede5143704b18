// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: arbitrary bytes as one control-socket request line. The
// first byte picks the configured class count (2..64), the rest is the line.
// parse_control_line is the control server's one path from a line to a
// request (ControlPlane::handle_line calls it just so, echo id included); it
// must never crash, throw or hang; an error must be one
// non-empty line without control characters; an accepted request must hold
// only values within the ranges control_request.h documents, and come from a
// line whose keys are all distinct and whose top-level keys are "cmd", "id"
// or the command's own arguments.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <variant>
#include <vector>

#include "psgate/control_commands.h"
#include "psgate/control_request.h"
#include "psgate/counters.h"

namespace {

using namespace psgate;

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_rate(const std::optional<uint64_t>& bps, const char* what) {
  // At least 1 byte/s, and whole bytes per second (what a bucket runs).
  if (bps && (*bps < kControlMinRateBps || *bps % 8 != 0)) fail(what, std::to_string(*bps));
}

void check_burst(const std::optional<uint64_t>& bytes, const char* what) {
  if (bytes && *bytes != 0 && (*bytes < kControlMinBurstBytes || *bytes > kControlMaxBurstBytes))
    fail(what, std::to_string(*bytes));
}

template <typename T>
void check_change(const Change<T>& c, const char* what) {
  if (c.value && !c.present) fail(what, "value without present");
}

struct Checker {
  unsigned class_count;

  void operator()(const HealthRequest&) const {}
  void operator()(const JobsListRequest&) const {}
  void operator()(const StatsRequest&) const {}
  void operator()(const ConfigRequest&) const {}
  void operator()(const ClusterRequest&) const {}
  void operator()(const ReloadRequest&) const {}
  void operator()(const JobsRemoveRequest&) const {}
  void operator()(const RankRequest&) const {}

  void operator()(const JobsAddRequest& q) const {
    if (q.id == 0) fail("jobs.add id", "0");
    if (q.rules.empty()) fail("jobs.add without rules", "");
    for (const MatchRule& r : q.rules) {
      const auto back = parse_match_rule(to_string(r));
      if (!back.ok() || !(*back == r)) fail("rule round trip", to_string(r));
      // Values that could never match what they say are refused, not kept.
      if (r.proto == uint8_t{0}) fail("proto 0 accepted", to_string(r));
      for (const auto& p : {r.src, r.dst}) {
        static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (p && p->family == 6 && std::equal(kMapped, kMapped + 12, p->addr.begin()))
          fail("IPv4-mapped prefix kept as IPv6", to_string(r));
      }
    }
    if (!q.name.empty() && !name_problem(q.name).empty()) fail("job name breaks the name rule", q.name);
    if (q.police) {
      check_rate(q.police->rate_bps, "police rate");
      if (q.police->burst_bytes < kControlMinBurstBytes || q.police->burst_bytes > kControlMaxBurstBytes)
        fail("police burst", std::to_string(q.police->burst_bytes));
    }
  }

  // jobs.load: at least one job, each as jobs.add's parser checks it.
  void operator()(const JobsLoadRequest& q) const {
    if (q.jobs.empty()) fail("jobs.load without jobs", "");
    for (const JobsAddRequest& job : q.jobs) (*this)(job);
  }

  void operator()(const OrderRequest& q) const {
    std::unordered_set<uint32_t> seen;
    for (uint32_t id : q.ids)
      if (!seen.insert(id).second) fail("order: repeated id", std::to_string(id));
  }

  void operator()(const ClassSetRequest& q) const {
    if (q.port >= kPortCount) fail("class.set port", std::to_string(q.port));
    if (q.cls >= class_count) fail("class.set class", std::to_string(q.cls));
    check_change(q.cap_bps, "cap");
    check_change(q.cap_burst_bytes, "cap_burst");
    check_change(q.floor_bps, "floor");
    check_change(q.floor_burst_bytes, "floor_burst");
    check_change(q.dscp, "dscp");
    check_rate(q.cap_bps.value, "cap rate");
    check_rate(q.floor_bps.value, "floor rate");
    check_burst(q.cap_burst_bytes.value, "cap burst");
    check_burst(q.floor_burst_bytes.value, "floor burst");
    if (q.cap_bps.value && q.floor_bps.value && *q.floor_bps.value / 8 > *q.cap_bps.value / 8)
      fail("floor above cap", std::to_string(*q.floor_bps.value));
    if (q.ecn_threshold && *q.ecn_threshold > kControlMaxEcnThreshold)
      fail("ecn_threshold", std::to_string(*q.ecn_threshold));
    if (q.dscp.value && *q.dscp.value > 63) fail("dscp", std::to_string(*q.dscp.value));
  }

  void operator()(const ShaperSetRequest& q) const {
    if (q.port >= kPortCount) fail("shaper.set port", std::to_string(q.port));
    check_rate(q.rate_bps, "shaper rate");
    check_burst(q.burst_bytes, "shaper burst");
  }

  void operator()(const ProgressRequest& q) const {
    if (!q.fraction && !q.iteration && !q.batch) fail("progress without a value", "");
    if (q.fraction && !(*q.fraction >= 0.0 && *q.fraction <= 1.0)) fail("fraction", std::to_string(*q.fraction));
  }

  void operator()(const PolicyRequest& q) const {
    if (!q.kind && (q.interval_ns || q.rotate_on)) fail("policy arguments without a name", "");
    if (q.interval_ns && !valid_policy_interval_ns(*q.interval_ns)) fail("interval", std::to_string(*q.interval_ns));
    if (q.rotate_on && *q.kind != PolicyKind::kRoundRobin) fail("rotate_on for a non-round-robin policy", "");
    if (q.kind && !policy_from_name(policy_name(*q.kind))) fail("policy name round trip", "");
  }
};

// An accepted line: every key known, none repeated in any object.
void check_accepted_line(std::string_view line) {
  bool distinct = true;
  std::vector<std::unordered_set<std::string>> open;
  const auto j = nlohmann::json::parse(
      line.begin(), line.end(),
      [&](int, nlohmann::json::parse_event_t e, nlohmann::json& parsed) {
        using E = nlohmann::json::parse_event_t;
        if (e == E::object_start) open.emplace_back();
        if (e == E::object_end) open.pop_back();
        if (e == E::key && !open.back().insert(parsed.get<std::string>()).second) distinct = false;
        return true;
      },
      false);
  if (j.is_discarded() || !j.is_object()) fail("accepted a line that is not a JSON object", std::string(line));
  if (!distinct) fail("accepted a line with a duplicate key", std::string(line));
  const CommandSpec* c = find_control_command(j.value("cmd", ""));
  if (c == nullptr) fail("accepted an unknown command", std::string(line));
  for (const auto& [k, v] : j.items()) {
    bool known = k == "cmd" || k == "id";
    for (const ArgSpec& a : c->args) known |= k == a.name;
    if (!known) fail("accepted an unknown argument", k);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const unsigned class_count = 2 + data[0] % 63;  // 2..64, as the config allows
  const std::string_view line(reinterpret_cast<const char*>(data + 1), size - 1);
  std::optional<nlohmann::json> echo_id;
  const auto r = parse_control_line(line, class_count, &echo_id);
  // The reply echoes the id: it must serialise as the server writes replies.
  if (echo_id) (void)echo_id->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (!r.ok()) {
    const std::string& e = r.error();
    if (e.empty()) fail("empty error", "");
    if (e.find('\n') != std::string::npos) fail("error is not one line", e);
    for (unsigned char c : e)
      if (c < 0x20 || c == 0x7f) fail("control character in error", e);
    return 0;
  }
  check_accepted_line(line);
  std::visit(Checker{class_count}, *r);
  return 0;
}
