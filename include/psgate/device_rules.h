// SPDX-License-Identifier: BSD-3-Clause
// What a virtual device's arguments fix that a program reading it must
// respect, asked by psgate's port start (dataplane/ports.cc) and
// psgate-gen's (perf/gen/gen_ports.cc) alike, so that both refuse (or warn
// of) the same devices with the same remedy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

struct rte_mempool;

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

// af_xdp reads the interface's queues start_queue .. start_queue +
// queue_count - 1, and the frames the interface spreads over its other
// combined channels go to the kernel, not to the reader: on a tap with 2
// queues, queue_count=1 read 1,000 of 2,000 frames. Not refused, as flow
// steering (ethtool -N) may send every frame to the queues read: "" when
// `combined` (the interface's combined channels, 0 when it reports none)
// leaves no queue unread, else a warning with the remedy, naming `iface`.
std::string xdp_channels_unread(std::string_view iface, unsigned combined, unsigned start_queue, unsigned queue_count);
// The interface's combined channels as `ethtool -l` reports them (what
// af_xdp's probe reads), 0 when it reports none or cannot be asked.
unsigned interface_combined_channels(const std::string& iface);
// The last `key=` of a device's arguments ("iface=eth1,start_queue=2"),
// "" when absent.
std::string device_arg(std::string_view args, const char* key);

// DPDK 22.11's net_null makes every frame `size` bytes (64 by default),
// read from its arguments with strtoul, the last one given winning: size 0
// (or what strtoul reads as 0: "abc", 2^32) fails every queue's setup
// with only ENOMEM; a size above the mbufs' `data_room` has its RX write
// past the buffer (copy=1: the heap corrupted, psgate killed by SIGSEGV
// at 70,000) or hand over mbufs longer than their buffer (each one
// dropped as bad_mbuf: nothing is forwarded). "" when `args` (the device's
// arguments, "size=0,copy=1") raise neither, else what is wrong and the
// remedy: "size=0 makes frames of 0 bytes, ...; give size=64 (the
// default) up to 2048 (the packet data an mbuf holds)".
// An RX side switched off (no-rx=1) reads no frames: only size 0 counts.
std::string null_size_refused(std::string_view args, uint32_t data_room);

// The packet data one mbuf of `pool` holds after its headroom, where a
// driver writes a received frame.
uint32_t mbuf_data_room(const rte_mempool* pool);

}  // namespace psgate
