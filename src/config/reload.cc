// SPDX-License-Identifier: BSD-3-Clause
#include "config/reload.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "psgate/counters.h"  // kPortCount
#include "psgate/text.h"

namespace psgate {
namespace {

// A class as `class` changes it: everything but its depth (the depth sizes
// the scheduler's rings, allocated at start).
bool same_live_class(const ClassSpec& a, const ClassSpec& b) {
  return a.cap == b.cap && a.floor == b.floor && a.ecn_threshold == b.ecn_threshold && a.dscp == b.dscp;
}

bool same_policy(const PolicyParams& a, const PolicyParams& b) {
  return a.kind == b.kind && a.interval_ns == b.interval_ns && a.rotate_on == b.rotate_on;
}

void compare_port(const char* name, const PortSpec& was, const PortSpec& now, std::vector<std::string>& restart) {
  const std::string p = std::string("ports.") + name + ".";
  if (was.device != now.device) restart.push_back(p + "device");
  if (was.rx_desc != now.rx_desc) restart.push_back(p + "rx_desc");
  if (was.tx_desc != now.tx_desc) restart.push_back(p + "tx_desc");
  if (was.mtu != now.mtu) restart.push_back(p + "mtu");
  const std::string s = std::string("shaper.") + name + ".";
  if (was.overhead_bytes != now.overhead_bytes) restart.push_back(s + "overhead");
  if (was.headroom_permille != now.headroom_permille || was.headroom_bytes != now.headroom_bytes)
    restart.push_back(s + "headroom");
  // The key that changed: turned on or off ("off") and a rate are control_rate's.
  const std::string c = std::string("classes.") + name + ".";
  if (was.control.has_value() != now.control.has_value() ||
      (was.control && was.control->rate_bps != now.control->rate_bps))
    restart.push_back(c + "control_rate");
  if (was.control && now.control && was.control->burst_bytes != now.control->burst_bytes)
    restart.push_back(c + "control_burst");
}

}  // namespace

ReloadPlan plan_reload(const ConfigSpec& running, const ConfigSpec& last_read, const ConfigSpec& now) {
  ReloadPlan plan;
  std::vector<std::string>& restart = plan.restart_needed;
  auto differs = [&](bool changed, const char* key) {
    if (changed) restart.emplace_back(key);
  };
  differs(running.eal_args != now.eal_args, "eal.args");
  compare_port("wire", running.wire, now.wire, restart);
  compare_port("host", running.host, now.host, restart);
  differs(running.main_lcore != now.main_lcore, "lcores.main");
  differs(running.data_lcores != now.data_lcores, "lcores.data");
  differs(running.lcore_mode != now.lcore_mode, "lcores.mode");
  differs(running.class_count != now.class_count, "classes.count");
  differs(running.default_class != now.default_class, "classes.default");
  differs(running.burst != now.burst, "dataplane.burst");
  differs(running.ring_size != now.ring_size, "dataplane.ring_size");
  differs(running.mbufs != now.mbufs, "dataplane.mbufs");
  differs(running.flow_cache_entries != now.flow_cache_entries, "dataplane.flow_cache");
  differs(running.max_jobs != now.max_jobs, "dataplane.max_jobs");
  differs(running.drain_timeout_ns != now.drain_timeout_ns, "dataplane.drain_timeout");
  differs(running.takeover_hold_ns != now.takeover_hold_ns, "dataplane.takeover_hold");
  differs(running.idle_sleep_ns != now.idle_sleep_ns, "dataplane.idle_sleep");
  differs(running.stats_interval_ns != now.stats_interval_ns, "stats.interval");
  differs(running.control.socket != now.control.socket, "control.socket");
  differs(running.control.state != now.control.state, "control.state");
  differs(running.control.unread_timeout_ns != now.control.unread_timeout_ns, "control.unread_timeout");
  differs(running.cluster != now.cluster, "cluster");
  differs(running.metrics.listen != now.metrics.listen, "metrics.listen");

  // Classes: only with the count that runs can they be compared one by one
  // (another count needs a restart, named above).
  if (running.class_count == now.class_count) {
    const ConfigSpec& base = reload_base(running, last_read, now);
    for (unsigned port = 0; port < kPortCount; ++port) {
      const auto& run = port_classes(running, port);
      const auto& was = port_classes(base, port);
      const auto& is = port_classes(now, port);
      for (unsigned c = 0; c < now.class_count; ++c) {
        if (run[c].depth != is[c].depth) {
          const std::string key = "classes." + std::to_string(c) + ".depth";
          if (std::find(restart.begin(), restart.end(), key) == restart.end()) restart.push_back(key);
        }
        if (!same_live_class(was[c], is[c])) plan.classes.emplace_back(port, c);
      }
    }
  }
  if (last_read.wire.shaper != now.wire.shaper) plan.shapers.push_back(0);
  if (last_read.host.shaper != now.host.shaper) plan.shapers.push_back(1);
  plan.policy = !same_policy(last_read.policy, now.policy);
  plan.jobs = last_read.jobs != now.jobs;
  return plan;
}

const ConfigSpec& reload_base(const ConfigSpec& running, const ConfigSpec& last_read, const ConfigSpec& now) {
  return last_read.class_count == now.class_count ? last_read : running;
}

ClassLive merge_class_change(const ClassLive& in_force, const ClassLive& was, const ClassLive& is) {
  ClassLive out = in_force;
  if (was.cap_bytes_per_sec != is.cap_bytes_per_sec || was.cap_burst_bytes != is.cap_burst_bytes) {
    out.cap_bytes_per_sec = is.cap_bytes_per_sec;
    out.cap_burst_bytes = is.cap_burst_bytes;
  }
  if (was.floor_bytes_per_sec != is.floor_bytes_per_sec || was.floor_burst_bytes != is.floor_burst_bytes) {
    out.floor_bytes_per_sec = is.floor_bytes_per_sec;
    out.floor_burst_bytes = is.floor_burst_bytes;
  }
  if (was.actions.ecn_threshold != is.actions.ecn_threshold) out.actions.ecn_threshold = is.actions.ecn_threshold;
  if (was.actions.dscp != is.actions.dscp) out.actions.dscp = is.actions.dscp;
  return out;
}

bool merge_shaper_change(PortLive& in_force, const PortLive& was, const PortLive& is) {
  const bool rate_changed = was.shaper_bytes_per_sec != is.shaper_bytes_per_sec;
  const bool burst_changed = was.shaper_burst_bytes != is.shaper_burst_bytes;
  if (!rate_changed && !burst_changed) return false;
  if (is.shaper_bytes_per_sec == 0) {  // removed from the file: unshaped (the burst stays for a later rate)
    in_force.shaper_bytes_per_sec = 0;
    return true;
  }
  if (rate_changed) in_force.shaper_bytes_per_sec = is.shaper_bytes_per_sec;
  // A shaper new in the file brings its burst, as does one whose burst it
  // changed, or a port that never had one.
  if (was.shaper_bytes_per_sec == 0 || burst_changed || !in_force.shaper_burst_bytes)
    in_force.shaper_burst_bytes = is.shaper_burst_bytes;
  return true;
}

std::vector<std::string> apply_file_changes(std::array<PortLive, kPortCount>& live, PolicyParams& policy,
                                            const FileSettings& was, const FileSettings& is, bool take_policy) {
  std::vector<std::string> taken;
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortLive& a = was.ports[p];
    const PortLive& b = is.ports[p];
    if (merge_shaper_change(live[p], a, b)) taken.push_back(std::string("shaper.") + kPortNames[p]);
    // The class count is the same in all three (a record of another
    // classes.count is not used: read_state_file).
    const size_t classes = std::min({live[p].classes.size(), a.classes.size(), b.classes.size()});
    for (size_t k = 0; k < classes; ++k) {
      if (a.classes[k] == b.classes[k]) continue;
      live[p].classes[k] = merge_class_change(live[p].classes[k], a.classes[k], b.classes[k]);
      taken.push_back("classes." + std::to_string(k) + "." + kPortNames[p]);
    }
  }
  if (take_policy && !(was.policy == is.policy)) {
    policy = is.policy;
    taken.emplace_back("policy");
  }
  return taken;
}

Result<ConfigSpec> read_config_for_reload(const std::string& path) {
  using R = Result<ConfigSpec>;
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return R::failure(path + ": cannot read config: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return R::failure(path + ": not a regular file; reload reads only a regular config file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxConfigFileBytes) {  // refused unread
    ::close(fd);
    return R::failure(config_read_error(path, EFBIG));
  }
  // The limit holds while reading too: a file may grow after the fstat.
  std::string text;
  const int err = read_text_fd(fd, text, kMaxConfigFileBytes);
  ::close(fd);
  if (err) return R::failure(config_read_error(path, err));
  return parse_config(text, path);
}

}  // namespace psgate
