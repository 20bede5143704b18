// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/device_rules.h"

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <rte_kvargs.h>
#include <rte_mbuf.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>

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

std::string xdp_channels_unread(std::string_view iface, unsigned combined, unsigned start_queue, unsigned queue_count) {
  if (combined == 0 || (start_queue == 0 && queue_count >= combined)) return "";
  const std::string name(iface);
  const std::string read = queue_count == 1 ? "queue " + std::to_string(start_queue)
                                            : "queues " + std::to_string(start_queue) + " to " +
                                                  std::to_string(start_queue + queue_count - 1);
  return name + " spreads flows over " + std::to_string(combined) + " combined channels and af_xdp reads " + read +
         " of them (start_queue " + std::to_string(start_queue) + ", queue_count " + std::to_string(queue_count) +
         "): the frames of the others go to the kernel instead of this port; give it " + std::to_string(queue_count) +
         " (ethtool -L " + name + " combined " + std::to_string(queue_count) +
         (start_queue != 0 ? ", and start_queue=0" : "") + ") or steer every frame to " + read + " (ethtool -N)";
}

unsigned interface_combined_channels(const std::string& iface) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
  ethtool_channels channels{};
  channels.cmd = ETHTOOL_GCHANNELS;
  ifr.ifr_data = reinterpret_cast<char*>(&channels);
  const bool ok = ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
  ::close(fd);
  return ok ? channels.combined_count : 0;
}

namespace {

// As net_null's get_packet_*_arg read a value: strtoul, cut to unsigned int.
unsigned null_value(const char* v) { return v ? static_cast<unsigned>(std::strtoul(v, nullptr, 0)) : 0; }

struct LastValue {
  bool given = false;
  std::string text;
};

// rte_kvargs_process calls it for every `key=` in order: the last one stays,
// as in net_null, where each call overwrites the one before.
int keep_last(const char*, const char* value, void* opaque) {
  auto* last = static_cast<LastValue*>(opaque);
  last->given = true;
  last->text = value ? value : "";
  return 0;
}

LastValue last_value(rte_kvargs* kv, const char* key) {
  LastValue last;
  rte_kvargs_process(kv, key, keep_last, &last);
  return last;
}

}  // namespace

std::string device_arg(std::string_view args, const char* key) {
  if (args.empty()) return "";
  rte_kvargs* kv = rte_kvargs_parse(std::string(args).c_str(), nullptr);
  if (kv == nullptr) return "";
  const LastValue value = last_value(kv, key);
  rte_kvargs_free(kv);
  return value.text;
}

std::string null_size_refused(std::string_view args, uint32_t data_room) {
  if (args.empty()) return "";
  rte_kvargs* kv = rte_kvargs_parse(std::string(args).c_str(), nullptr);
  if (kv == nullptr) return "";  // net_null's own parse refuses it at probe
  const LastValue size = last_value(kv, "size");
  const bool copy = null_value(last_value(kv, "copy").text.c_str()) != 0;
  const bool no_rx = null_value(last_value(kv, "no-rx").text.c_str()) != 0;
  rte_kvargs_free(kv);
  if (!size.given) return "";
  const unsigned bytes = null_value(size.text.c_str());
  // UINT_MAX: net_null refused the device at probe already.
  if (bytes == UINT_MAX) return "";
  const std::string room = std::to_string(data_room);
  if (bytes == 0) {
    return "size=" + size.text + (size.text == "0" ? "" : ", which net_null reads as 0,") +
           " makes frames of 0 bytes, for which net_null can set up no queue (\"Cannot allocate memory\"); give "
           "size=64 (the default) up to " +
           room + " (the packet data an mbuf holds)";
  }
  if (bytes > data_room && !no_rx) {
    return "size=" + size.text + " makes frames larger than the " + room +
           " bytes of packet data an mbuf holds: net_null would " +
           (copy ? "copy each one past the end of its mbuf, into the memory after it"
                 : "hand over mbufs longer than their buffers, every one dropped as bad_mbuf") +
           "; give size=" + room + " or less";
  }
  return "";
}

uint32_t mbuf_data_room(const rte_mempool* pool) {
  const uint32_t room = rte_pktmbuf_data_room_size(const_cast<rte_mempool*>(pool));
  return room > RTE_PKTMBUF_HEADROOM ? room - RTE_PKTMBUF_HEADROOM : 0;
}

}  // namespace psgate
