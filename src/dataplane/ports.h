// SPDX-License-Identifier: BSD-3-Clause
// Ethernet port lookup and start-up (control path).
#pragma once

#include <cstdint>
#include <string>

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

// Configures the MTU and the offloads of `frames`, nb_rxq RX queues (RSS
// across them when the device supports it) and nb_txq TX queues,
// promiscuous mode, and starts the port. `config_error`, if given, is set
// when the failure is the configuration's (more queues than the device has
// for lcores.data): its message then names the key, and a restart cannot
// mend it.
Result<bool> start_port(const std::string& role, uint16_t port_id, const PortSpec& spec, const FramePlan& frames,
                        unsigned nb_rxq, unsigned nb_txq, rte_mempool* pool, bool* config_error = nullptr);

}  // namespace psgate
