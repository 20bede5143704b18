// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/device_rules.h"

namespace psgate {

std::string unread_fixed_rx_queues(std::string_view driver, unsigned rx_queues, unsigned read) {
  if (read >= rx_queues) return "";
  const std::string n = std::to_string(read);
  if (driver == "net_af_packet")
    return "its qpairs: the kernel spreads flows over every queue's socket; give qpairs=" + n;
  if (driver == "net_pcap")
    return "one per rx_pcap, rx_iface or rx_iface_in, each a capture or interface of its own; give " + n +
           " rx_pcap, rx_iface or rx_iface_in";
  // DPDK 22.11's af_xdp (rte_eth_af_xdp.c) makes queue i's XDP socket on
  // the interface's queue start_queue + i (xsk_socket__create), and its XDP
  // program redirects a frame to the socket of the queue it arrived on
  // (the xsks_map, keyed by rx_queue_index), passing it to the kernel when
  // that queue has none. Shown on a tap with 2 queues (combined channels
  // 2) in a namespace, frames written round-robin onto its queues:
  // queue_count=2 with one RX lcore, psgate received 1,000 of 2,000 and
  // counted nothing else (exit 0, conservation OK); psgate-gen 796 of 1,594,
  // its RX "kept up". queue_count=1 on that tap lost the same half: the
  // interface's channels must be no more than its queue_count, hence the
  // ethtool in the remedy. Not shown on a NIC (none here).
  if (driver == "net_af_xdp")
    return "its queue_count: an XDP socket per queue, each bound to a queue of the interface's own, over which the "
           "interface spreads flows, and the frames of a queue without its socket go to the kernel; give "
           "queue_count=" +
           n + " (and the interface as many combined channels: ethtool -L IFACE combined " + n + ")";
  return "";
}

}  // namespace psgate
