// SPDX-License-Identifier: BSD-3-Clause
// The scheduler parameters a snapshot carries per port (shaper, class rates
// and actions), apart from the snapshot so that code without DPDK (the state
// file) can hold them too.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "psgate/config.h"  // kNoDscp, ClassSpec
#include "psgate/units.h"   // bits_per_sec

namespace psgate {

// What the scheduler stage does to a class's packets: the ECN threshold is
// checked at enqueue, the DSCP (and a CE mark decided then) written at
// dequeue. Its own struct because the egress port keeps an array of just
// these, read per packet, apart from the rates it reads only on a change.
struct ClassActions {
  uint32_t ecn_threshold = 0;  // packets; 0 = never mark
  int dscp = kNoDscp;          // 0..63 remark, kNoDscp = keep
  bool operator==(const ClassActions&) const = default;
};

// A class's compiled form ([classes.N] and live `class` changes, per port) in
// the units the scheduler takes (config/compile.h converts). Scheduler lcores
// apply it when they see a new generation.
struct ClassLive {
  uint64_t cap_bytes_per_sec = 0, cap_burst_bytes = 0;      // 0: none
  uint64_t floor_bytes_per_sec = 0, floor_burst_bytes = 0;  // 0: none
  ClassActions actions;
  bool operator==(const ClassLive&) const = default;
};
struct PortLive {
  uint64_t shaper_bytes_per_sec = 0, shaper_burst_bytes = 0;  // 0: unshaped
  std::vector<ClassLive> classes;
  bool operator==(const PortLive&) const = default;
};

// A class in force as the config states one (rates back in bit/s), for the
// loader's own check (check_class) and for `config`.
inline ClassSpec class_spec(const ClassLive& c, uint32_t depth) {
  ClassSpec s;
  s.depth = depth;
  if (c.cap_bytes_per_sec) s.cap = RateSpec{bits_per_sec(c.cap_bytes_per_sec), c.cap_burst_bytes};
  if (c.floor_bytes_per_sec) s.floor = RateSpec{bits_per_sec(c.floor_bytes_per_sec), c.floor_burst_bytes};
  s.ecn_threshold = c.actions.ecn_threshold;
  s.dscp = c.actions.dscp;
  return s;
}

// check_floors_fit for a port in force.
inline std::optional<std::string> floors_problem(const PortLive& p) {
  std::vector<uint64_t> floors;
  for (const ClassLive& c : p.classes) floors.push_back(c.floor_bytes_per_sec);
  return check_floors_fit(p.shaper_bytes_per_sec, floors);
}

}  // namespace psgate
