// SPDX-License-Identifier: BSD-3-Clause
// What a virtual device's arguments fix that a program reading it must
// respect, asked by psgate's port start (dataplane/ports.cc) and
// psgate-gen's (perf/gen/gen_ports.cc) alike, so that both refuse the same
// devices with the same remedy.
#pragma once

#include <string>
#include <string_view>

namespace psgate {

// A driver whose RX queues are fixed by its device arguments, each queue
// with traffic of its own, so that a queue left unread loses its frames
// with no counter saying so:
//   net_af_packet  qpairs: a socket per queue, the kernel's fanout spreads
//                  flows over all of them;
//   net_pcap       one queue per rx_pcap / rx_iface / rx_iface_in: a
//                  capture or interface each;
//   net_af_xdp     queue_count: an XDP socket per queue, each bound to a
//                  queue of the interface's own, over which the interface
//                  spreads flows; the frames of a queue with no socket go
//                  to the kernel.
// "" when `driver` is none of them or `read` RX queues of the device's
// `rx_queues` leave none unread; else why its queues are fixed and the
// remedy (the argument, and the value to give):
// "its qpairs: the kernel spreads flows over every queue's socket; give qpairs=1".
std::string unread_fixed_rx_queues(std::string_view driver, unsigned rx_queues, unsigned read);

}  // namespace psgate
