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
  return "";
}

}  // namespace psgate
