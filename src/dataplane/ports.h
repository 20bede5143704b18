// SPDX-License-Identifier: BSD-3-Clause
// Ethernet port lookup and start-up (control path).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <rte_mempool.h>

#include "psgate/config.h"
#include "psgate/frame_plan.h"
#include "psgate/result.h"

namespace psgate {

// The ethdev name of a configured device: "net_pcap0,rx_pcap=a" -> "net_pcap0".
std::string device_name(const std::string& device);
// The value of `key=` in a vdev string ("net_af_packet0,iface=gwps,qpairs=1"),
// read with DPDK's own devargs parser; "" when absent.
std::string devarg_text(const std::string& device, const char* key);

// Finds the port EAL created for `device` (probed through --vdev or -a).
Result<uint16_t> find_port(const std::string& role, const std::string& device);

// What the device can carry (MTU limit, chaining, multi-segment TX), from
// its device info and what psgate knows of its driver.
Result<PortCapacity> port_capacity(const std::string& role, uint16_t port_id, const PortSpec& spec);

// What start_port changed on an af_packet port's kernel interface, to be put
// back when psgate stops: the interface is the host's, and stays in use
// (by the kernel, by a psgate started later) after this one exits.
struct KernelIfaceChange {
  std::string role;      // the port's: "wire" or "host"
  std::string iface;     // the kernel interface
  unsigned ifindex = 0;  // which one of that name: a re-created interface is another
  uint32_t mtu = 0;      // its MTU before psgate set it; 0: left as it was
  bool gro = false;      // GRO turned off by psgate
  bool lro = false;      // LRO turned off by psgate
  bool rxvlan = false;   // VLAN tag stripping turned off by psgate (af_xdp)
  bool promisc = false;  // promiscuous mode turned on by psgate
};
// Puts back what `changes` record (an interface that is gone, or another
// of the same name, is skipped).
void restore_kernel_ifaces(const std::vector<KernelIfaceChange>& changes);

// What psgate set on a kernel interface at start, looked at again while it
// runs (link_watch.cc, once a second): GRO and LRO off on an af_packet
// port's interface, VLAN stripping off on an af_xdp one's, promiscuous mode
// on for af_packet. Something that turned one back (NetworkManager, a
// script's ethtool) would have merged frames dropped as oversize, tags lost
// or frames never received, with nothing said: each is set again and
// warned of. Nothing is recorded for the restore at exit, which puts back
// what psgate found at start (KernelIfaceChange): a setting it found as it
// wanted is the operator's, whichever program changed it meanwhile.
void keep_kernel_iface_settings(const std::string& role, const std::string& iface, bool af_packet);

// Configures the MTU and the offloads of `frames`, nb_rxq RX queues (RSS
// across them when the device supports it) and nb_txq TX queues,
// promiscuous mode, and starts the port. `config_error`, if given, is set
// when the failure is the configuration's (more queues than the device has
// for lcores.data): its message then names the key, and a restart cannot
// mend it. What it changes on a kernel interface is recorded in `changes`
// as it is changed (a start that fails later leaves it recorded), one
// record per interface: a port started again after its interface came back
// keeps the MTU first found, and adds what it turned off on the new one.
// `stop_asked`, if given, is asked before each queue's setup and before the
// start: true fails it with Dataplane::kStartStopped and where it stopped.
Result<bool> start_port(const std::string& role, uint16_t port_id, const PortSpec& spec, const FramePlan& frames,
                        unsigned nb_rxq, unsigned nb_txq, rte_mempool* pool, std::vector<KernelIfaceChange>& changes,
                        bool* config_error = nullptr, const std::function<bool()>& stop_asked = {});

}  // namespace psgate
