// SPDX-License-Identifier: BSD-3-Clause
// The configuration in force as JSON in the config file's own structure
// (control `config` command; psgatectl config --toml writes it as TOML).
//
// Every value is written so that the loader reads back exactly the value in
// force: rates, sizes and durations in the largest unit that divides them
// (no rounding), keys as docs/configuration.md names them, and a key only
// where it differs from what the loader would assume without it.
#include "config/config_json.h"

#include <map>

namespace psgate {

using json = nlohmann::json;

namespace {

void put_rate(json& t, const char* rate_key, const char* burst_key, const std::optional<RateSpec>& r) {
  if (!r) return;
  t[rate_key] = rate_text_exact(r->rate_bps);
  t[burst_key] = size_text_exact(r->burst_bytes);
}

// The value most classes share (ties: the smallest), for the [classes] default.
template <typename F>
uint32_t most_common(const std::vector<ClassSpec>& a, const std::vector<ClassSpec>& b, F field, uint32_t fallback) {
  std::map<uint32_t, unsigned> count;
  for (const auto* v : {&a, &b})
    for (const ClassSpec& c : *v) ++count[field(c)];
  uint32_t best = fallback;
  unsigned n = 0;
  for (const auto& [value, k] : count)
    if (k > n) best = value, n = k;
  return best;
}

const char* lcore_mode_name(ConfigSpec::LcoreMode mode) {
  switch (mode) {
    case ConfigSpec::LcoreMode::kAuto:
      return "auto";
    case ConfigSpec::LcoreMode::kPipelined:
      return "pipelined";
    case ConfigSpec::LcoreMode::kHybrid:
      return "hybrid";
  }
  return "auto";
}

json port_json(const PortSpec& p) {
  return {{"device", p.device}, {"rx_desc", p.rx_desc}, {"tx_desc", p.tx_desc}, {"mtu", p.mtu}};
}

json shaper_json(const PortSpec& p) {
  json s = json::object();
  if (p.shaper) put_rate(s, "rate", "burst", p.shaper);
  s["overhead"] = size_text_exact(p.overhead_bytes);
  if (p.headroom_bytes != 0 || p.headroom_permille == 0) {
    s["headroom"] = std::to_string(p.headroom_bytes) + "B";
  } else {
    std::string share = std::to_string(p.headroom_permille / 10);
    if (p.headroom_permille % 10 != 0) share += "." + std::to_string(p.headroom_permille % 10);
    s["headroom"] = share + "%";
  }
  return s;
}

json classes_json(const ConfigSpec& c) {
  const std::vector<ClassSpec>& wire = port_classes(c, 0);
  const std::vector<ClassSpec>& host = port_classes(c, 1);
  json out = {{"count", c.class_count}, {"default", c.default_class}};
  const uint32_t depth = most_common(
      wire, host, [](const ClassSpec& s) { return s.depth; }, 1024);
  uint32_t ecn = most_common(
      wire, host, [](const ClassSpec& s) { return s.ecn_threshold; }, 0);
  if (ecn >= depth) ecn = 0;  // the loader's rule for the defaults
  out["depth"] = depth;
  out["ecn_threshold"] = ecn;
  // The network-control limit: in [classes] when the ports share it, else
  // in [classes.<port>] each.
  auto put_control = [](json& t, const std::optional<RateSpec>& r) {
    if (r) put_rate(t, "control_rate", "control_burst", r);
    else t["control_rate"] = "off";
  };
  if (c.wire.control == c.host.control) {
    put_control(out, c.wire.control);
  } else {
    put_control(out["wire"], c.wire.control);
    put_control(out["host"], c.host.control);
  }
  for (size_t i = 0; i < wire.size() && i < host.size(); ++i) {
    const ClassSpec& w = wire[i];
    const ClassSpec& h = host[i];
    json base = json::object(), per[2] = {json::object(), json::object()};
    if (w.depth != depth) base["depth"] = w.depth;  // one depth per class, both ports
    // A setting the ports share goes in [classes.N]; one they differ in, in
    // [classes.N.wire] and [classes.N.host] over the [classes] defaults.
    if (w.cap == h.cap) {
      put_rate(base, "cap", "cap_burst", w.cap);
    } else {
      put_rate(per[0], "cap", "cap_burst", w.cap);
      put_rate(per[1], "cap", "cap_burst", h.cap);
    }
    if (w.floor == h.floor) {
      put_rate(base, "floor", "floor_burst", w.floor);
    } else {
      put_rate(per[0], "floor", "floor_burst", w.floor);
      put_rate(per[1], "floor", "floor_burst", h.floor);
    }
    if (w.ecn_threshold == h.ecn_threshold) {
      if (w.ecn_threshold != ecn) base["ecn_threshold"] = w.ecn_threshold;
    } else {
      // The class table itself must be valid with its own depth.
      if (ecn != 0 && ecn >= w.depth) base["ecn_threshold"] = 0;
      per[0]["ecn_threshold"] = w.ecn_threshold;
      per[1]["ecn_threshold"] = h.ecn_threshold;
    }
    if (w.dscp == h.dscp) {
      if (w.dscp != kNoDscp) base["dscp"] = w.dscp;
    } else {
      if (w.dscp != kNoDscp) per[0]["dscp"] = w.dscp;
      if (h.dscp != kNoDscp) per[1]["dscp"] = h.dscp;
    }
    if (!per[0].empty()) base["wire"] = per[0];
    if (!per[1].empty()) base["host"] = per[1];
    if (!base.empty()) out[std::to_string(i)] = base;
  }
  return out;
}

json jobs_json(const std::vector<JobSpec>& jobs) {
  json out = json::array();
  for (const JobSpec& j : jobs) {
    json rules = json::array();
    for (const MatchRule& r : j.match) rules.push_back(to_string(r));
    json t = {{"id", j.id}, {"name", j.name}, {"rank", j.rank}, {"match", rules}};
    put_rate(t, "police", "police_burst", j.police);
    out.push_back(t);
  }
  return out;
}

json policy_json(const PolicyParams& p) {
  json out = {{"name", policy_name(p.kind)}, {"interval", duration_text_exact(p.interval_ns)}};
  // The loader takes rotate_on for round-robin only.
  if (p.kind == PolicyKind::kRoundRobin) out["rotate_on"] = rotate_on_name(p.rotate_on);
  return out;
}

}  // namespace

json config_to_json(const ConfigSpec& c) {
  json control = {{"socket", c.control.socket}, {"unread_timeout", duration_text_exact(c.control.unread_timeout_ns)}};
  if (!c.control.state.empty()) control["state"] = c.control.state;
  json out = {{"eal", {{"args", c.eal_args}}},
              {"ports", {{"wire", port_json(c.wire)}, {"host", port_json(c.host)}}},
              {"lcores", {{"main", c.main_lcore}, {"data", c.data_lcores}, {"mode", lcore_mode_name(c.lcore_mode)}}},
              {"shaper", {{"wire", shaper_json(c.wire)}, {"host", shaper_json(c.host)}}},
              {"classes", classes_json(c)},
              {"jobs", jobs_json(c.jobs)},
              {"dataplane",
               {{"burst", c.burst},
                {"ring_size", c.ring_size},
                {"mbufs", c.mbufs == kAutoMbufs ? json("auto") : json(c.mbufs)},
                {"flow_cache", c.flow_cache_entries},
                {"max_jobs", c.max_jobs},
                {"drain_timeout", duration_text_exact(c.drain_timeout_ns)},
                {"takeover_hold", duration_text_exact(c.takeover_hold_ns)},
                {"idle_sleep", duration_text_exact(c.idle_sleep_ns)}}},
              {"stats", {{"interval", duration_text_exact(c.stats_interval_ns)}}},
              {"log", {{"level", c.log_level}}},
              {"control", control},
              {"metrics", {{"listen", c.metrics.listen}}},
              {"policy", policy_json(c.policy)}};
  if (c.cluster) {
    const ClusterSpec& cl = *c.cluster;
    json cluster = {{"endpoints", cl.endpoints},
                    {"name", cl.name},
                    {"prefix", cl.prefix},
                    {"address", cl.address},
                    {"lease_ttl", duration_text_exact(cl.lease_ttl_ns)},
                    {"compact_every", duration_text_exact(cl.compact_every_ns)}};
    for (auto [key, value] : {std::pair{"ca", &cl.ca}, {"cert", &cl.cert}, {"key", &cl.key}})
      if (!value->empty()) cluster[key] = *value;
    out["cluster"] = std::move(cluster);
  }
  return out;
}

}  // namespace psgate
