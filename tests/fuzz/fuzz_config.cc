// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: arbitrary bytes as a config file. parse_config must never
// crash, throw or hang, every error must be one line prefixed with the source
// name, and an accepted config must satisfy what validation promises.
// The same bytes also go through the unit and match-rule parsers (cheap), whose
// accepted values must round-trip.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "psgate/config.h"
#include "psgate/match_rule.h"
#include "psgate/text.h"
#include "psgate/units.h"

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "invariant broken: %s: %s\n", what, detail.c_str());
  std::abort();
}

void check_error(const std::string& e, std::string_view prefix) {
  if (e.empty()) fail("empty error", "");
  if (e.find('\n') != std::string::npos) fail("error is not one line", e);
  if (e.rfind(prefix, 0) != 0) fail("error lacks the source prefix", e);
}

bool pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

void check_spec(const psgate::ConfigSpec& c) {
  using psgate::kNoDscp;
  if (c.source != "fuzz.toml") fail("source", c.source);
  if (c.wire.device.empty() || c.host.device.empty()) fail("device empty", "");
  for (const psgate::PortSpec* p : {&c.wire, &c.host}) {
    if (!pow2(p->rx_desc) || p->rx_desc < 64 || p->rx_desc > 16384) fail("rx_desc", "");
    if (!pow2(p->tx_desc) || p->tx_desc < 64 || p->tx_desc > 16384) fail("tx_desc", "");
    if (p->overhead_bytes > 64) fail("overhead", "");
    if (p->headroom_bytes > 65536) fail("headroom", "");
    if (p->shaper && (p->shaper->rate_bps == 0 || p->shaper->burst_bytes < 64)) fail("shaper", "");
  }
  if (c.data_lcores.empty()) fail("no data lcores", "");
  std::set<unsigned> lcores(c.data_lcores.begin(), c.data_lcores.end());
  // Data lcores are distinct CPUs; the main lcore may share one of them (it sleeps).
  if (lcores.size() != c.data_lcores.size()) fail("data lcores not distinct", "");
  if (c.wire.mtu != c.host.mtu || c.wire.mtu < 68 || c.wire.mtu > 65505) fail("mtu", "");
  if (c.class_count < 2 || c.class_count > 64) fail("class_count", "");
  if (c.default_class < 1 || c.default_class >= c.class_count) fail("default_class", "");
  if (c.classes.size() != c.class_count) fail("classes size", "");
  // The shared classes and each port's ([classes.N.<port>] applied).
  for (const auto* classes : {&c.classes, &psgate::port_classes(c, 0), &psgate::port_classes(c, 1)}) {
    if (classes->size() != c.class_count) fail("port classes size", "");
    for (size_t i = 0; i < classes->size(); ++i) {
      const psgate::ClassSpec& cs = (*classes)[i];
      if (cs.depth < 1 || cs.depth > 65536) fail("depth", "");
      if (cs.depth != c.classes[i].depth) fail("depth differs per port", "");
      if (cs.ecn_threshold != 0 && cs.ecn_threshold >= cs.depth) fail("ecn_threshold", "");
      if (cs.dscp != kNoDscp && (cs.dscp < 0 || cs.dscp > 63)) fail("dscp", "");
      // In bytes per second, the unit the classes run in.
      if (cs.cap && cs.floor && cs.floor->rate_bps / 8 > cs.cap->rate_bps / 8) fail("floor > cap", "");
    }
  }
  std::set<uint32_t> ids;
  for (const psgate::JobSpec& j : c.jobs) {
    if (j.id == 0 || !ids.insert(j.id).second) fail("job id", std::to_string(j.id));
    if (!psgate::name_problem(j.name).empty()) fail("job name breaks the name rule", j.name);
    if (j.match.empty()) fail("job without rules", j.name);
    for (const psgate::MatchRule& r : j.match) {
      const auto back = psgate::parse_match_rule(psgate::to_string(r));
      if (!back.ok() || !(*back == r)) fail("rule round trip", psgate::to_string(r));
    }
  }
  if (c.jobs.size() > c.max_jobs) fail("max_jobs", "");
  if (c.burst < 1 || c.burst > 64) fail("burst", "");
  if (!pow2(c.ring_size) || c.ring_size < 64 || c.ring_size > 65536) fail("ring_size", "");
  // 0: "auto", sized at start (psgate::kAutoMbufs).
  if (c.mbufs != psgate::kAutoMbufs && (c.mbufs < 1024 || c.mbufs > (1u << 30) - 1))
    fail("mbufs", std::to_string(c.mbufs));
  // FlowCache::create's range (a start must not be the first to refuse it).
  if (c.flow_cache_entries != 0 && (c.flow_cache_entries < 8 || c.flow_cache_entries > (1u << 26)))
    fail("flow_cache", std::to_string(c.flow_cache_entries));
  // class_for_rank never picks class 0 and stays in range.
  for (uint32_t rank : {0u, 1u, 5u, 63u, 4294967295u}) {
    const unsigned cls = psgate::class_for_rank(c, rank);
    if (cls == 0 || cls >= c.class_count) fail("class_for_rank", std::to_string(cls));
  }
}

// Unit parsers: an accepted value re-parses from its plain base-unit form.
void check_units(std::string_view text) {
  struct {
    psgate::Result<uint64_t> (*parse)(std::string_view);
    const char* base_unit;
  } parsers[] = {{psgate::parse_rate_bps, "bit/s"}, {psgate::parse_size_bytes, "B"}, {psgate::parse_duration_ns, "ns"}};
  for (const auto& p : parsers) {
    const auto r = p.parse(text);
    if (!r.ok()) continue;
    const auto again = p.parse(std::to_string(*r) + p.base_unit);
    if (!again.ok() || *again != *r) fail("unit round trip", std::string(text));
  }
}

void check_rule(std::string_view text) {
  const auto r = psgate::parse_match_rule(text);
  if (!r.ok()) return;
  const std::string canon = psgate::to_string(*r);
  const auto back = psgate::parse_match_rule(canon);
  if (!back.ok()) fail("canonical rule rejected", canon + " <- " + back.error());
  if (!(*back == *r)) fail("rule round trip", canon);
  if (psgate::to_string(*back) != canon) fail("to_string not canonical", canon);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto r = psgate::parse_config(text, "fuzz.toml");
  if (r.ok()) {
    check_spec(*r);
  } else {
    check_error(r.error(), "fuzz.toml:");
  }
  if (size <= 256) {
    check_units(text);
    check_rule(text);
  }
  return 0;
}
