// Port start-up: everything a production NIC and a virtual device both need.
#include "psgate/ports.h"

#include <rte_ethdev.h>
#include <spdlog/spdlog.h>

#include <cstring>

namespace psgate {

std::string device_name(const std::string& device) { return device.substr(0, device.find(',')); }

Result<uint16_t> find_port(const std::string& role, const std::string& device) {
  uint16_t port_id = 0;
  const std::string name = device_name(device);
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    return Result<uint16_t>::failure("port " + role + ": device '" + name +
                                     "' not found (a PCI device needs EAL to probe it: check --no-pci / -a in eal.args)");
  }
  return port_id;
}

Result<bool> start_port(const std::string& role, uint16_t port_id, const PortSpec& spec, unsigned nb_rxq,
                        unsigned nb_txq, rte_mempool* pool) {
  auto fail = [&](const std::string& what, int rc) {
    return Result<bool>::failure("port " + role + ": " + what + ": " + std::strerror(rc < 0 ? -rc : rc));
  };
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0) return fail("cannot read device info", rc);
  if (nb_rxq > info.max_rx_queues || nb_txq > info.max_tx_queues) {
    return Result<bool>::failure("port " + role + ": needs " + std::to_string(nb_rxq) + " RX / " +
                                 std::to_string(nb_txq) + " TX queues, device has " +
                                 std::to_string(info.max_rx_queues) + " / " + std::to_string(info.max_tx_queues));
  }
  rte_eth_conf conf{};
  if (nb_rxq > 1) {
    // Flows must stay on one RX lcore, or a flow could be reordered between
    // lcores: RSS hashes the 5-tuple to a queue.
    const uint64_t wanted = RTE_ETH_RSS_IP | RTE_ETH_RSS_TCP | RTE_ETH_RSS_UDP;
    if ((info.flow_type_rss_offloads & wanted) == 0) {
      spdlog::warn("port {}: device has no RSS; its {} RX queues are filled by the device's own rule", role, nb_rxq);
    } else {
      conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
      conf.rx_adv_conf.rss_conf.rss_hf = wanted & info.flow_type_rss_offloads;
    }
  }
  // Link changes as events where the device can raise them (link_watch.cc
  // polls the others).
  if (info.dev_flags && (*info.dev_flags & RTE_ETH_DEV_INTR_LSC)) conf.intr_conf.lsc = 1;
  if (int rc = rte_eth_dev_configure(port_id, nb_rxq, nb_txq, &conf); rc != 0) return fail("configure failed", rc);
  uint16_t rx_desc = static_cast<uint16_t>(spec.rx_desc);
  uint16_t tx_desc = static_cast<uint16_t>(spec.tx_desc);
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc); rc != 0)
    return fail("descriptor counts rejected", rc);
  const int socket = rte_eth_dev_socket_id(port_id);
  for (unsigned q = 0; q < nb_rxq; ++q) {
    if (int rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, socket, nullptr, pool); rc != 0)
      return fail("RX queue " + std::to_string(q) + " setup failed", rc);
  }
  for (unsigned q = 0; q < nb_txq; ++q) {
    if (int rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, socket, nullptr); rc != 0)
      return fail("TX queue " + std::to_string(q) + " setup failed", rc);
  }
  if (int rc = rte_eth_dev_start(port_id); rc != 0) return fail("start failed", rc);
  // A bump in the wire forwards frames for every MAC address.
  if (int rc = rte_eth_promiscuous_enable(port_id); rc != 0 && rc != -ENOTSUP) {
    spdlog::warn("port {}: cannot enable promiscuous mode: {}", role, std::strerror(-rc));
  }
  return true;
}

}  // namespace psgate
