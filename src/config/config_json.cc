// SPDX-License-Identifier: BSD-3-Clause
// The configuration in force as JSON (control `config` command).
#include "config/config_json.h"

namespace psgate {

namespace {

nlohmann::json rate_spec(const std::optional<RateSpec>& r) {
  if (!r) return nullptr;
  return {{"rate_bps", r->rate_bps}, {"burst_bytes", r->burst_bytes}};
}

nlohmann::json port_json(const PortSpec& p) {
  return {{"device", p.device},
          {"rx_desc", p.rx_desc},
          {"tx_desc", p.tx_desc},
          {"shaper", rate_spec(p.shaper)},
          {"overhead_bytes", p.overhead_bytes},
          {"headroom_bytes", p.headroom_bytes},
          {"headroom_permille", p.headroom_permille}};
}

}  // namespace

nlohmann::json config_to_json(const ConfigSpec& c) {
  nlohmann::json classes = nlohmann::json::array();
  for (size_t i = 0; i < c.classes.size(); ++i) {
    const ClassSpec& cls = c.classes[i];
    classes.push_back({{"class", i},
                       {"depth", cls.depth},
                       {"cap", rate_spec(cls.cap)},
                       {"floor", rate_spec(cls.floor)},
                       {"ecn_threshold", cls.ecn_threshold},
                       {"dscp", cls.dscp == kNoDscp ? nlohmann::json(nullptr) : nlohmann::json(cls.dscp)}});
  }
  return {{"source", c.source},
          {"eal", {{"args", c.eal_args}}},
          {"ports", {{"wire", port_json(c.wire)}, {"host", port_json(c.host)}}},
          {"lcores", {{"main", c.main_lcore}, {"data", c.data_lcores}}},
          {"classes", {{"count", c.class_count}, {"default", c.default_class}, {"per_class", classes}}},
          {"dataplane",
           {{"burst", c.burst},
            {"ring_size", c.ring_size},
            {"mbufs", c.mbufs},
            {"flow_cache", c.flow_cache_entries},
            {"max_jobs", c.max_jobs},
            {"drain_timeout_ns", c.drain_timeout_ns}}},
          {"stats", {{"interval_ns", c.stats_interval_ns}}},
          {"log", {{"level", c.log_level}}},
          {"control", {{"socket", c.control.socket}, {"state", c.control.state}}}};
}

}  // namespace psgate
