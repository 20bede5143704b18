// SPDX-License-Identifier: BSD-3-Clause
#include "gen_ports.h"

#include "psgate/device_rules.h"
#include "psgate/eal_arg_clash.h"

#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>

namespace psgate::gen {
namespace {

using Clock = std::chrono::steady_clock;

std::string port_label(uint16_t port) {
  char name[RTE_ETH_NAME_MAX_LEN] = {};
  rte_eth_dev_get_name_by_port(port, name);
  return "port " + std::to_string(port) + " (" + name + ")";
}

// Sleeps up to 100 ms; true when a stop signal arrived.
bool nap_or_signal(const sigset_t& stop) {
  timespec ts{0, 100'000'000};
  return sigtimedwait(&stop, nullptr, &ts) > 0;
}

}  // namespace

Result<uint16_t> resolve_port(const std::string& spec) {
  if (!spec.empty() && spec.find_first_not_of("0123456789") == std::string::npos) {
    // Digits only, of any length: more than 5 is no port id (std::stoul
    // threw on 20 and more, aborting the run).
    const unsigned long id = spec.size() <= 5 ? std::stoul(spec) : RTE_MAX_ETHPORTS;
    if (id >= RTE_MAX_ETHPORTS || !rte_eth_dev_is_valid_port(static_cast<uint16_t>(id))) {
      return Result<uint16_t>::failure("port " + spec + " does not exist (" +
                                       std::to_string(rte_eth_dev_count_avail()) +
                                       " ports; give devices with --vdev after --)");
    }
    return static_cast<uint16_t>(id);
  }
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(spec.c_str(), &id) != 0) {
    return Result<uint16_t>::failure("device '" + spec + "' not found (give it with --vdev after --)");
  }
  return id;
}

namespace {

// The --vdev arguments' device strings ("net_memif0,role=client,...").
// As EAL reads them (--vd=..., a value that looks like an option).
std::vector<std::string> vdev_specs(const std::vector<std::string>& eal_args) {
  return psgate::eal_option_values(eal_args, "vdev");
}

}  // namespace

std::string memif_buffers_too_small(const std::vector<std::string>& eal_args, uint32_t frame_bytes) {
  std::string small;
  for (const std::string& spec : vdev_specs(eal_args)) {
    if (spec.rfind("net_memif", 0) != 0) continue;
    uint32_t bsize = 2048;  // the driver's default
    for (size_t at = spec.find(','); at != std::string::npos; at = spec.find(',', at + 1)) {
      if (spec.compare(at + 1, 6, "bsize=") == 0)
        bsize = static_cast<uint32_t>(std::strtoul(spec.c_str() + at + 7, nullptr, 0));
    }
    if (bsize < frame_bytes)
      small += (small.empty() ? "" : ", ") + spec.substr(0, spec.find(',')) + " (bsize " + std::to_string(bsize) + ")";
  }
  return small;
}

std::string vdevs_not_created(const std::vector<std::string>& eal_args) {
  std::string missing;
  for (const std::string& spec : vdev_specs(eal_args)) {
    const std::string name = spec.substr(0, spec.find(','));
    if (name.rfind("net_", 0) != 0) continue;
    // By the device each port was made from: a port's own name may differ
    // (net_ring0,nodeaction=r0:0:CREATE makes a port "r0").
    bool made = false;
    uint16_t port = 0;
    RTE_ETH_FOREACH_DEV(port) {
      rte_eth_dev_info info{};
      if (rte_eth_dev_info_get(port, &info) == 0 && info.device != nullptr && name == rte_dev_name(info.device))
        made = true;
    }
    if (!made) missing += (missing.empty() ? "" : ", ") + name;
  }
  return missing;
}

Result<bool> configure_port(uint16_t port, rte_mempool* pool) {
  auto fail = [&](const std::string& what, int rc) {
    return Result<bool>::failure(port_label(port) + ": " + what + ": " + std::strerror(rc < 0 ? -rc : rc));
  };
  // One RX queue is read. A device whose queues its arguments fix, each
  // with traffic of its own (psgate/device_rules.h: af_packet's qpairs,
  // net_pcap's captures, af_xdp's queue_count), would have the frames of
  // the others counted lost, as if psgate had lost them.
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port, &info); rc != 0) return fail("cannot read device info", rc);
  const std::string_view driver = info.driver_name ? info.driver_name : "";
  if (const std::string why = psgate::unread_fixed_rx_queues(driver, info.max_rx_queues, 1); !why.empty()) {
    return Result<bool>::failure(port_label(port) + ": " + std::to_string(info.max_rx_queues) + " RX queues (" + why +
                                 "), and psgate-gen reads one: what arrives on the others would count as lost");
  }
  const rte_devargs* devargs = info.device != nullptr ? rte_dev_devargs(info.device) : nullptr;
  const std::string args = devargs != nullptr && devargs->args != nullptr ? devargs->args : "";
  // net_null makes every frame `size` bytes: one it cannot make fails the
  // queue's setup with only ENOMEM, or writes past the mbufs.
  if (driver == "net_null") {
    if (const std::string why = psgate::null_size_refused(args, psgate::mbuf_data_room(pool)); !why.empty())
      return Result<bool>::failure(port_label(port) + ": " + why);
  }
  // The interface's channels af_xdp does not read pass their frames to the
  // kernel, counted lost here: said, as psgate says it.
  if (driver == "net_af_xdp") {
    const std::string iface = psgate::device_arg(args, "iface");
    const unsigned start =
        static_cast<unsigned>(std::strtoul(psgate::device_arg(args, "start_queue").c_str(), nullptr, 0));
    if (const std::string why =
            psgate::xdp_channels_unread(iface, psgate::interface_combined_channels(iface), start, info.max_rx_queues);
        !why.empty())
      std::fprintf(stderr, "psgate-gen: %s: warning: %s\n", port_label(port).c_str(), why.c_str());
  }
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(port, 1, 1, &conf); rc != 0) return fail("configure failed", rc);
  uint16_t rx_desc = 1024, tx_desc = 1024;
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc); rc != 0)
    return fail("descriptor counts rejected", rc);
  const int socket = rte_eth_dev_socket_id(port);
  if (int rc = rte_eth_rx_queue_setup(port, 0, rx_desc, socket, nullptr, pool); rc != 0)
    return fail("RX queue setup failed", rc);
  if (int rc = rte_eth_tx_queue_setup(port, 0, tx_desc, socket, nullptr); rc != 0)
    return fail("TX queue setup failed", rc);
  return true;
}

bool link_up(uint16_t port) {
  rte_eth_link link{};
  return rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_UP;
}

namespace {

// A memif port of the client role ("slave": DPDK 22.11's deprecated name).
bool memif_client(uint16_t port) {
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0 || info.driver_name == nullptr) return false;
  if (std::string_view(info.driver_name) != "net_memif" || info.device == nullptr) return false;
  const rte_devargs* devargs = rte_dev_devargs(info.device);
  if (devargs == nullptr || devargs->args == nullptr) return false;
  const std::string role = psgate::device_arg(devargs->args, "role");
  return role == "client" || role == "slave";
}

}  // namespace

Result<bool> start_and_wait_links(const std::vector<uint16_t>& ports, Clock::time_point deadline, uint64_t timeout_ns,
                                  const sigset_t& stop) {
  struct State {
    bool started = false;
    bool reconnects = false;  // a memif client: restarted while its link stays down
    int last_rc = 0;
    Clock::time_point started_at;
    std::chrono::milliseconds reconnect_after = kMemifReconnectAfter;
  };
  std::vector<State> state(ports.size());
  for (size_t i = 0; i < ports.size(); ++i) state[i].reconnects = memif_client(ports[i]);
  for (;;) {
    const Clock::time_point now = Clock::now();
    size_t down = ports.size();  // the first port not up, if any
    for (size_t i = 0; i < ports.size(); ++i) {
      State& s = state[i];
      const uint16_t port = ports[i];
      // Turned away, or its server went: the client will not try again by
      // itself. Not when the deadline comes sooner than the next try would:
      // a client that connects and closes (the run ending) before the
      // server has accepted it makes a DPDK 22.11 memif server panic in its
      // interrupt thread (epoll_ctl on a closed descriptor; seen with
      // dpdk-testpmd), and a slow one may not have accepted yet.
      if (s.started && s.reconnects && now - s.started_at >= s.reconnect_after &&
          deadline - now > std::min(2 * s.reconnect_after, kMemifReconnectMax) && !link_up(port)) {
        rte_eth_dev_stop(port);
        s.started = false;
        s.reconnect_after = std::min(2 * s.reconnect_after, kMemifReconnectMax);
      }
      if (!s.started) {
        s.last_rc = rte_eth_dev_start(port);
        s.started = s.last_rc == 0;
        if (s.started) {
          s.started_at = now;
          // Frames for any MAC address: psgate forwards them unchanged.
          rte_eth_promiscuous_enable(port);
        }
      }
      if (down == ports.size() && (!s.started || !link_up(port))) down = i;
    }
    if (down == ports.size()) return true;
    if (Clock::now() >= deadline) {
      const uint16_t port = ports[down];
      if (!state[down].started) {
        return Result<bool>::failure(port_label(port) + ": cannot start: " + std::strerror(-state[down].last_rc) +
                                     " (is the peer up? a memif client needs its server listening)");
      }
      return Result<bool>::failure(port_label(port) + ": link still down after " +
                                   std::to_string(timeout_ns / 1'000'000) + " ms (is the peer running?)");
    }
    if (nap_or_signal(stop)) return false;
  }
}

}  // namespace psgate::gen
