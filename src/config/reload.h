// SPDX-License-Identifier: BSD-3-Clause
// `psgatectl reload` (systemctl reload psgate): the configuration file read
// again, compared with what is running. What the running gateway can change
// in place (the settings `class`, `shaper` and `policy` change) is applied
// where the file changed it since it was last read, so a reload of an
// unchanged file undoes no change made on the socket. The log level (no
// command changes it) is set to the file's. Every other difference needs a
// restart and is named by its key.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "psgate/config.h"
#include "psgate/counters.h"  // kPortCount
#include "psgate/port_live.h"
#include "psgate/result.h"

namespace psgate {

struct ReloadPlan {
  // [classes.N] / [classes.N.<port>] rates and actions that changed in the
  // file, as (port, class), and [shaper.<port>] rate and burst, by port.
  std::vector<std::pair<unsigned, unsigned>> classes;
  std::vector<unsigned> shapers;
  bool policy = false;  // [policy] changed in the file
  // Keys whose new value takes effect only at the next start, e.g.
  // "lcores.data", "ports.wire.mtu", "classes.3.depth".
  std::vector<std::string> restart_needed;
  // [[jobs]] changed: jobs are not reloaded (the job table is the state
  // file's and the socket's; [[jobs]] seed it at a start without one).
  bool jobs = false;
  bool changes_nothing() const {
    return classes.empty() && shapers.empty() && !policy && restart_needed.empty() && !jobs;
  }
};

// `running`: the configuration the gateway started with (what needs a restart
// is compared with it). `last_read`: the file as it was last read (at start or
// by the previous reload). `now`: the file as it is.
ReloadPlan plan_reload(const ConfigSpec& running, const ConfigSpec& last_read, const ConfigSpec& now);

// What "changed in the file" is measured against: the file as last read, or
// what runs where the last read had another class count (classes could not
// be compared with it).
const ConfigSpec& reload_base(const ConfigSpec& running, const ConfigSpec& last_read, const ConfigSpec& now);

// The class in force with the file's changes to it: each setting (cap with
// its burst, floor with its burst, ECN threshold, DSCP) the file changed
// from `was` to `is` (the file's class compiled, before and now) comes
// from `is`; every other one stays as it is in force, socket changes
// included.
ClassLive merge_class_change(const ClassLive& in_force, const ClassLive& was, const ClassLive& is);
// The same for a port's shaper (rate, burst; a shaper removed from the file
// leaves the port unshaped). False when the file did not change it.
bool merge_shaper_change(PortLive& in_force, const PortLive& was, const PortLive& is);

// The settings `class`, `shaper` and `policy` change, as a configuration
// file gives them (compile_ports, config/compile.h). The state file records the file's at each
// write, so that a start can tell what the file changed since.
struct FileSettings {
  PolicyParams policy;
  std::array<PortLive, kPortCount> ports;
  bool operator==(const FileSettings&) const = default;
};

// A start with a state file: what the file changed since the state file was
// written (`was`, recorded in it; `is`, the file now) replaces the saved
// value in `live` and `policy`, setting by setting as a reload applies it;
// everything else keeps the saved value (a socket change included). So an
// edit followed by a restart, rather than a reload, is not lost. The policy
// only when `take_policy` (cluster mode: the policy is the store's).
// Returns the keys taken from the file ("shaper.wire", "classes.3.host",
// "policy"). Whether the merged values still fit together is the caller's
// to check (take_file_changes, control/state_file.h).
std::vector<std::string> apply_file_changes(std::array<PortLive, kPortCount>& live, PolicyParams& policy,
                                            const FileSettings& was, const FileSettings& is, bool take_policy);

// The config file for a reload, read on the control thread: only a regular
// file of at most kMaxConfigFileBytes (as at start), opened without
// blocking, so a FIFO or a device named as the config cannot stall every
// control command.
Result<ConfigSpec> read_config_for_reload(const std::string& path);

}  // namespace psgate
