// SPDX-License-Identifier: BSD-3-Clause
// Port start-up: everything a production NIC and a virtual device both need.
#include "dataplane/ports.h"

#include <linux/ethtool.h>
#include <linux/if_packet.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <rte_ethdev.h>
#include <rte_kvargs.h>
#include <rte_log.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "psgate/dataplane.h"  // kStartStopped
#include "psgate/device_rules.h"
#include "psgate/packet_parser.h"

namespace psgate {

std::string device_name(const std::string& device) { return device.substr(0, device.find(',')); }

Result<uint16_t> find_port(const std::string& role, const std::string& device) {
  uint16_t port_id = 0;
  const std::string name = device_name(device);
  if (rte_eth_dev_get_port_by_name(name.c_str(), &port_id) != 0) {
    // A virtual device that was not created: its driver said why in EAL's
    // log; the commonest reason, a kernel interface that is not there, is
    // named here (a PCI hint would send the operator the wrong way).
    if (name.rfind("net_", 0) == 0) {
      const std::string iface = devarg_text(device, "iface");
      if (!iface.empty() && if_nametoindex(iface.c_str()) == 0)
        return Result<uint16_t>::failure("port " + role + ": device '" + name + "' was not created: interface '" +
                                         iface + "' does not exist (in this network namespace)");
      // net_pcap opens its captures then: one that cannot be read is named
      // too (tx_pcap is created, so only rx_pcap is looked at).
      const std::string capture = name.rfind("net_pcap", 0) == 0 ? devarg_text(device, "rx_pcap") : "";
      if (!capture.empty() && ::access(capture.c_str(), R_OK) != 0)
        return Result<uint16_t>::failure("port " + role + ": device '" + name + "' was not created: rx_pcap '" +
                                         capture + "': " + std::strerror(errno));
      // The driver's reasons are logged at ERR: a lower EAL log level in
      // eal.args hides them, and "see above" would send the operator to nothing.
      const std::string where = rte_log_get_global_level() < RTE_LOG_ERR
                                    ? "the driver's messages saying why are hidden by the EAL log level (eal.args "
                                      "--log-level below 4)"
                                    : "see the driver's messages above for why";
      return Result<uint16_t>::failure("port " + role + ": virtual device '" + name + "' was not created: " + where +
                                       " (its arguments in ports." + role + ".device)");
    }
    return Result<uint16_t>::failure(
        "port " + role + ": device '" + name +
        "' not found: a PCI device must be bound to a DPDK-capable driver (vfio-pci: dpdk-devbind.py --status; a "
        "binding is lost at reboot unless made persistent), its PMD installed (librte-net-*), and not excluded by "
        "--no-pci or another -a in eal.args; a virtual device needs its --vdev name");
  }
  return port_id;
}

namespace {

// ethdev's own reading of a device's limit (eth_dev_get_overhead_len): the
// L2 overhead is max_rx_pktlen - max_mtu when the driver states both, else
// the 18 bytes of an Ethernet header and FCS.
uint32_t reported_mtu_limit(const rte_eth_dev_info& info) {
  const uint32_t overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                ? info.max_rx_pktlen - info.max_mtu
                                : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  const uint32_t by_len = info.max_rx_pktlen > overhead ? info.max_rx_pktlen - overhead : 0;
  return std::min<uint32_t>(info.max_mtu, by_len);
}

}  // namespace

std::string devarg_text(const std::string& device, const char* key) {
  const size_t comma = device.find(',');
  if (comma == std::string::npos) return "";
  rte_kvargs* kv = rte_kvargs_parse(device.c_str() + comma + 1, nullptr);
  if (kv == nullptr) return "";
  const char* v = rte_kvargs_get(kv, key);
  std::string value = v ? v : "";
  rte_kvargs_free(kv);
  return value;
}

namespace {

// One devarg of a vdev string ("net_af_packet0,iface=v0,framesz=4096"), or
// `fallback` when absent or not a number.
uint32_t devarg_u32(const std::string& device, const char* key, uint32_t fallback) {
  const std::string v = devarg_text(device, key);
  if (v.empty()) return fallback;
  char* end = nullptr;
  const unsigned long n = std::strtoul(v.c_str(), &end, 0);
  return end != v.c_str() && *end == '\0' && n > 0 && n <= UINT32_MAX ? static_cast<uint32_t>(n) : fallback;
}

}  // namespace

Result<PortCapacity> port_capacity(const std::string& role, uint16_t port_id, const PortSpec& spec) {
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0)
    return Result<PortCapacity>::failure("port " + role + ": cannot read device info: " + std::strerror(-rc));
  PortCapacity cap;
  cap.name = device_name(spec.device);
  cap.mtu_limit = reported_mtu_limit(info);
  cap.limit_source =
      "its max_rx_pktlen " + std::to_string(info.max_rx_pktlen) + " / max_mtu " + std::to_string(info.max_mtu);
  cap.scatter_offload = (info.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER) != 0;
  cap.multi_seg_tx = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0;
  // ethdev presets both limits to 65535; a driver that fills tx_desc_lim
  // without them leaves 0, which states no limit.
  const uint16_t per_mtu = info.tx_desc_lim.nb_mtu_seg_max, per_packet = info.tx_desc_lim.nb_seg_max;
  cap.tx_max_segs = per_mtu == 0 ? per_packet : per_packet == 0 ? per_mtu : std::min(per_mtu, per_packet);
  const std::string driver = info.driver_name ? info.driver_name : "";
  // Two virtual drivers of DPDK 22.11 report the 1518-byte default while
  // they carry more; their real limits are stated here.
  const uint32_t tag_room = RTE_ETHER_HDR_LEN + 4 * kMaxVlanTags;
  if (driver == "net_memif") {
    // DPDK 22.11's memif client connects when the port starts and never
    // again: after its server goes away and comes back, the port stays down
    // until psgate restarts. A server (the default role) takes its client
    // back by itself.
    // "slave" is 22.11's deprecated name for the client role.
    if (const std::string r = devarg_text(spec.device, "role"); r == "client" || r == "slave")
      spdlog::warn(
          "port {} ({}): memif role=client does not reconnect after its server restarts (DPDK 22.11): the "
          "port would stay down until psgate restarts; prefer role=server on psgate's side",
          role, cap.name);
    // A frame must fit one memif buffer (`bsize`, 2048 by default). DPDK
    // 22.11's memif TX never clears the NEXT flag of a packet's first
    // descriptor and, chaining, can take a slot past the free ones
    // (rte_eth_memif.c, eth_memif_tx): frames that span buffers arrive cut,
    // glued to the next ones, or many times over (seen with 9014-byte frames
    // between two psgates). Within one buffer the receiver may still chain
    // mbufs, which is sound. The buffers are the memif client's: with psgate
    // the server, the peer's bsize must be as large.
    const uint32_t bsize = devarg_u32(spec.device, "bsize", 2048);
    cap.chains_by_itself = true;
    cap.mtu_limit = bsize > tag_room ? bsize - tag_room : 0;
    cap.limit_source = "its bsize " + std::to_string(bsize) +
                       ": a frame must fit one memif buffer (DPDK 22.11's memif corrupts frames that span buffers); "
                       "add bsize=" +
                       std::to_string(static_cast<uint32_t>(spec.mtu) + tag_room) +
                       " or more to the device, and the same to its peer's";
  } else if (driver == "net_af_packet") {
    // A received frame is copied whole into ONE mbuf, unchecked: the mbufs
    // must hold the largest frame the ring can deliver (framesz - 52). The
    // driver's queue set-up asks for more, framesz - 32 (its TPACKET2_HDRLEN
    // less a sockaddr_ll), and refuses a smaller data room with ENOMEM: that
    // is the room asked for (e.g. framesz 2096: 2064, not 2044 rounded to
    // 2048).
    const uint32_t frame = devarg_u32(spec.device, "framesz", 2048);
    const uint32_t data = frame > TPACKET2_HDRLEN ? frame - static_cast<uint32_t>(TPACKET2_HDRLEN) : 0;
    constexpr uint32_t kAfPacketSetupGap = TPACKET2_HDRLEN - sizeof(sockaddr_ll);
    cap.min_data_room = frame > kAfPacketSetupGap ? frame - kAfPacketSetupGap : 0;
    cap.mtu_limit = data > tag_room ? data - tag_room : 0;
    cap.limit_source = "its framesz " + std::to_string(frame) + " (raise framesz and blocksz for larger frames)";
    cap.one_dot1q_tag_room = true;
  } else if (driver == "net_pcap") {
    // The pcap driver chains a capture larger than one mbuf by itself, except
    // when it replays forever: infinite_rx copies only the first segment of
    // each preloaded frame and still reports the whole pkt_len (DPDK 22.11),
    // so there every frame must fit one mbuf.
    cap.chains_by_itself = devarg_u32(spec.device, "infinite_rx", 0) == 0;
  }
  return cap;
}

namespace {

// The kernel interface's receive offloads that change frames before psgate
// sees them. A bump in the wire forwards frames as they came, so they are
// turned off, as the MTU is set, and put back at exit:
// - on an af_packet port's interface, those that merge frames (GRO, LRO):
//   the socket then hands psgate TCP segments merged far past the MTU
//   (physical NICs ship with GRO on), each dropped as oversize, and a
//   connection through psgate stalls;
// - on an af_xdp port's interface, VLAN tag stripping (rx-vlan-offload, on by
//   default on ixgbe, i40e, ice, mlx5): the NIC takes the tag off before XDP
//   runs and AF_XDP hands over no trace of it, so every tagged frame left
//   untagged, its VLAN and priority bits lost. (af_packet puts a stripped
//   tag back itself.)
// Records in `change` which it turned off. `again`: a look while psgate
// runs (keep_kernel_iface_settings): an offload found on was turned on
// under psgate, said as a warning.
void kernel_offloads_off(const std::string& role, const std::string& iface, bool merging, bool vlan_strip,
                         KernelIfaceChange& change, bool again = false) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    spdlog::warn("port {}: cannot check the receive offloads of {} ({}): {}", role, iface, std::strerror(errno),
                 merging ? "merged TCP segments would be dropped as oversize" : "tags it strips would be lost");
    return;
  }
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
  auto call = [&](ethtool_value& v) {
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    return ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
  };
  // `mask`: the offload's bit in a flags word, or ~0u for an on/off value.
  auto turn_off = [&](const char* name, uint32_t get, uint32_t set, uint32_t mask, const char* ethtool,
                      const char* harm, bool& was_on) {
    ethtool_value now{get, 0};
    if (!call(now) || (now.data & mask) == 0) return;
    ethtool_value off{set, mask == ~0u ? 0 : now.data & ~mask};
    if (call(off)) {
      was_on = true;
      if (again)
        spdlog::warn(
            "port {}: {} was turned on on {} while psgate ran (NetworkManager, an ethtool): turned off "
            "again ({})",
            role, name, iface, harm);
      else spdlog::info("port {}: {} turned off on {} ({}; on again at exit)", role, name, iface, harm);
    } else if (!again) {  // said at start; not again every second (a setting the driver fixes on)
      spdlog::warn("port {}: {} is on on {} and could not be turned off ({}): {}; ethtool -K {} {} off", role, name,
                   iface, std::strerror(errno), harm, iface, ethtool);
    }
  };
  if (merging) {
    const char* harm = "frames it merges would exceed the MTU and be dropped as oversize";
    turn_off("GRO", ETHTOOL_GGRO, ETHTOOL_SGRO, ~0u, "gro", harm, change.gro);
    turn_off("LRO", ETHTOOL_GFLAGS, ETHTOOL_SFLAGS, ETH_FLAG_LRO, "lro", harm, change.lro);
  }
  if (vlan_strip) {
    turn_off("VLAN tag stripping", ETHTOOL_GFLAGS, ETHTOOL_SFLAGS, ETH_FLAG_RXVLAN, "rxvlan",
             "the tags it strips before XDP would be lost to the frames psgate forwards", change.rxvlan);
  }
  ::close(fd);
}

// The kernel interface's MTU, or 0 when it cannot be read.
uint32_t kernel_mtu(const std::string& iface) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
  const bool ok = ::ioctl(fd, SIOCGIFMTU, &ifr) == 0;
  ::close(fd);
  return ok && ifr.ifr_mtu > 0 ? static_cast<uint32_t>(ifr.ifr_mtu) : 0;
}

// Whether a kernel interface is in promiscuous mode (IFF_PROMISC; false when
// it cannot be read).
bool kernel_promiscuous(const std::string& iface) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ifreq ifr{};
  std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
  const bool ok = ::ioctl(fd, SIOCGIFFLAGS, &ifr) == 0;
  ::close(fd);
  return ok && (ifr.ifr_flags & IFF_PROMISC) != 0;
}

// Sets or clears IFF_PROMISC on the interface `ifr` names (read, then
// written: the other flags as they are). False, errno set, when it cannot.
bool set_promiscuous(int fd, ifreq& ifr, bool on) {
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) return false;
  ifr.ifr_flags = static_cast<short>(on ? ifr.ifr_flags | IFF_PROMISC : ifr.ifr_flags & ~IFF_PROMISC);
  return ::ioctl(fd, SIOCSIFFLAGS, &ifr) == 0;
}

// The interface's record in `changes`, made at its first change: a later
// failing step of a start leaves what was changed before it recorded. An
// interface re-created under psgate (af_packet probes it again) is another:
// its record starts afresh from what psgate found on it, as the first one's
// settings went with it (GRO psgate turned off there is no reason to turn
// GRO on here).
KernelIfaceChange& iface_record(std::vector<KernelIfaceChange>& changes, const std::string& role,
                                const std::string& iface) {
  const unsigned ifindex = if_nametoindex(iface.c_str());
  auto it = std::find_if(changes.begin(), changes.end(), [&](const KernelIfaceChange& c) { return c.iface == iface; });
  if (it == changes.end()) it = changes.insert(changes.end(), KernelIfaceChange{role, iface});
  // (An index that could not be read, 0, out of descriptors: taken for the same one.)
  if (ifindex != 0 && it->ifindex != 0 && it->ifindex != ifindex) *it = KernelIfaceChange{role, iface, ifindex};
  if (it->ifindex == 0) it->ifindex = ifindex;
  return *it;
}

}  // namespace

void keep_kernel_iface_settings(const std::string& role, const std::string& iface, bool af_packet) {
  KernelIfaceChange turned_off{role, iface};  // what was found turned back (nothing is recorded)
  kernel_offloads_off(role, iface, af_packet, !af_packet, turned_off, /*again=*/true);
  // af_packet's promiscuous mode is the interface's own flag: off, frames
  // for other MAC addresses never reach psgate (a bump forwards them all).
  if (af_packet && !kernel_promiscuous(iface)) {
    const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", iface.c_str());
    const bool ok = fd >= 0 && set_promiscuous(fd, ifr, true);
    const int err = errno;
    if (fd >= 0) ::close(fd);
    if (ok) {
      spdlog::warn(
          "port {}: promiscuous mode was turned off on {} while psgate ran: turned on again (frames for "
          "other MAC addresses would not reach psgate)",
          role, iface);
    } else if (static std::set<std::string> warned; warned.insert(iface).second) {  // once, not every second
      spdlog::warn(
          "port {}: promiscuous mode is off on {} and could not be turned on ({}): frames for other MAC "
          "addresses do not reach psgate; ip link set {} promisc on",
          role, iface, std::strerror(err), iface);
    }
  }
}

void restore_kernel_ifaces(const std::vector<KernelIfaceChange>& changes) {
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  for (const KernelIfaceChange& c : changes) {
    // Gone, or another of that name since: nothing of this one's to put back
    // (one whose index could never be read is taken by its name).
    const unsigned now = if_nametoindex(c.iface.c_str());
    if (now == 0 || (c.ifindex != 0 && now != c.ifindex)) continue;
    ifreq ifr{};
    std::snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", c.iface.c_str());
    std::string put_back, failed;
    auto note = [&](bool ok, const std::string& what) {
      std::string& list = ok ? put_back : failed;
      list += (list.empty() ? "" : ", ") + what;
    };
    if (c.mtu != 0) {
      ifr.ifr_mtu = static_cast<int>(c.mtu);
      note(::ioctl(fd, SIOCSIFMTU, &ifr) == 0, "MTU " + std::to_string(c.mtu));
    }
    if (c.gro) {
      ethtool_value on{ETHTOOL_SGRO, 1};
      ifr.ifr_data = reinterpret_cast<char*>(&on);
      note(::ioctl(fd, SIOCETHTOOL, &ifr) == 0, "GRO on");
    }
    // A bit of the interface's ethtool flags word set again (read, then written).
    auto flag_on = [&](uint32_t flag) {
      ethtool_value flags{ETHTOOL_GFLAGS, 0};
      ifr.ifr_data = reinterpret_cast<char*>(&flags);
      if (::ioctl(fd, SIOCETHTOOL, &ifr) != 0) return false;
      ethtool_value on{ETHTOOL_SFLAGS, flags.data | flag};
      ifr.ifr_data = reinterpret_cast<char*>(&on);
      return ::ioctl(fd, SIOCETHTOOL, &ifr) == 0;
    };
    if (c.lro) note(flag_on(ETH_FLAG_LRO), "LRO on");
    if (c.rxvlan) note(flag_on(ETH_FLAG_RXVLAN), "VLAN tag stripping on");
    if (c.promisc) note(set_promiscuous(fd, ifr, false), "promiscuous mode off");
    if (!put_back.empty()) spdlog::info("port {}: {} as before psgate: {}", c.role, c.iface, put_back);
    if (!failed.empty())
      spdlog::warn("port {}: could not put back on {}: {} ({})", c.role, c.iface, failed, std::strerror(errno));
  }
  ::close(fd);
}

Result<bool> start_port(const std::string& role, uint16_t port_id, const PortSpec& spec, const FramePlan& frames,
                        unsigned nb_rxq, unsigned nb_txq, rte_mempool* pool, std::vector<KernelIfaceChange>& changes,
                        bool* config_error, const std::function<bool()>& stop_asked) {
  auto fail = [&](const std::string& what, int rc) {
    return Result<bool>::failure("port " + role + ": " + what + ": " + std::strerror(rc < 0 ? -rc : rc));
  };
  // Whether a stop was asked before `step`, one that may take long (a
  // queue's setup: net_pcap's RX queue loads a whole capture; the start).
  std::string stop_point;
  auto stop_before = [&](std::string step) {
    if (!stop_asked || !stop_asked()) return false;
    stop_point = std::move(step);
    return true;
  };
  auto stopped = [&] {
    return Result<bool>::failure(std::string(Dataplane::kStartStopped) + " at port " + role + ", before " + stop_point);
  };
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port_id, &info); rc != 0) return fail("cannot read device info", rc);
  if (nb_rxq > info.max_rx_queues || nb_txq > info.max_tx_queues) {
    if (config_error) *config_error = true;
    return Result<bool>::failure("lcores.data: port " + role + " needs " + std::to_string(nb_rxq) + " RX / " +
                                 std::to_string(nb_txq) + " TX queues for these data lcores, its device has " +
                                 std::to_string(info.max_rx_queues) + " / " + std::to_string(info.max_tx_queues) +
                                 ": list fewer data lcores, or give the device more queues (af_packet: qpairs)");
  }
  // A device whose RX queues are fixed by its arguments, each with traffic
  // of its own (device_rules.h: af_packet's qpairs, net_pcap's captures,
  // af_xdp's queue_count), must have no queue psgate leaves unread: the
  // frames of the others were lost with no counter saying so (1 RX lcore on
  // af_packet qpairs=2: a quarter of 2,000 flows' frames never reached
  // psgate; on af_xdp queue_count=2, half the frames of a 2-queue tap).
  if (const std::string why =
          unread_fixed_rx_queues(info.driver_name ? info.driver_name : "", info.max_rx_queues, nb_rxq);
      !why.empty()) {
    if (config_error) *config_error = true;
    return Result<bool>::failure("ports." + role + ".device: " + device_name(spec.device) + " has " +
                                 std::to_string(info.max_rx_queues) + " RX queues (" + why +
                                 "), and these data lcores read " + std::to_string(nb_rxq) +
                                 " of them (lcores.data): the frames of the others would be lost unseen");
  }
  // net_null's size is the length of every frame it makes: one it cannot
  // make fails the queues' setup with only ENOMEM, or writes past the mbufs.
  if (std::string_view(info.driver_name ? info.driver_name : "") == "net_null") {
    const size_t comma = spec.device.find(',');
    const std::string args = comma == std::string::npos ? "" : spec.device.substr(comma + 1);
    if (const std::string why = null_size_refused(args, mbuf_data_room(pool)); !why.empty()) {
      if (config_error) *config_error = true;
      return Result<bool>::failure("ports." + role + ".device: " + device_name(spec.device) + ": " + why +
                                   " (the mbufs follow ports." + role + ".mtu)");
    }
  }
  // DPDK 22.11's af_xdp refuses a configuration with fewer TX than RX
  // queues (one socket per queue pair), which every pipelined plan with
  // two RX lcores or more asks for: a plain "configure failed" said nothing
  // of the lcores that cause it.
  if (std::string_view(info.driver_name) == "net_af_xdp" && nb_rxq != nb_txq) {
    if (config_error) *config_error = true;
    return Result<bool>::failure(
        "lcores.data: port " + role + " is af_xdp, which needs as many TX as RX queues, and " +
        "these data lcores give it " + std::to_string(nb_rxq) + " RX / " + std::to_string(nb_txq) +
        " TX queues: list at most 3 data lcores (one RX lcore; lcores.mode \"hybrid\" always takes 2 or "
        "more) with af_xdp ports");
  }
  rte_eth_conf conf{};
  const unsigned index = role == "wire" ? 0 : 1;
  // ethdev validates rxmode.mtu against the reported limit; a driver whose
  // real limit is larger (ports.cc: port_capacity) keeps its default there,
  // and psgate enforces the MTU itself (oversize drops).
  const uint32_t reported = reported_mtu_limit(info);
  const bool device_takes_mtu = spec.mtu <= reported;
  conf.rxmode.mtu = static_cast<uint16_t>(device_takes_mtu ? spec.mtu : 0);
  if (frames.scatter[index]) conf.rxmode.offloads |= RTE_ETH_RX_OFFLOAD_SCATTER;
  if (frames.multi_seg_tx[index]) conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
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
  // af_packet's interface is the kernel's: what is changed on it below is
  // recorded (once per interface) and put back at exit.
  const bool af_packet = std::string_view(info.driver_name ? info.driver_name : "") == "net_af_packet";
  // (af_xdp's too, for its receive offloads alone.)
  const bool af_xdp = std::string_view(info.driver_name ? info.driver_name : "") == "net_af_xdp";
  const std::string iface = af_packet || af_xdp ? devarg_text(spec.device, "iface") : "";
  // The interface's channels af_xdp does not read pass their frames to the
  // kernel (device_rules.h): said, not refused, as flow steering may send
  // every frame to the queues read.
  if (af_xdp && !iface.empty()) {
    if (const std::string why = xdp_channels_unread(iface, interface_combined_channels(iface),
                                                    devarg_u32(spec.device, "start_queue", 0), info.max_rx_queues);
        !why.empty())
      spdlog::warn("port {}: {}", role, why);
  }
  // Into the interface's record (iface_record).
  auto record = [&](auto&& change) { change(iface_record(changes, role, iface)); };
  const uint32_t mtu_before = af_packet ? kernel_mtu(iface) : 0;
  // Read before the start, where ethdev applies its own promiscuous setting
  // (off at a first start, which clears an operator's IFF_PROMISC): one the
  // operator had set is theirs, and stays at exit.
  const bool promisc_before = af_packet && kernel_promiscuous(iface);
  if (device_takes_mtu) {
    // Drivers with an mtu_set apply it now (af_packet: the interface's MTU);
    // the others read the configured rxmode.mtu when they start.
    if (int rc = rte_eth_dev_set_mtu(port_id, static_cast<uint16_t>(spec.mtu)); rc != 0 && rc != -ENOTSUP) {
      // Not marked as the configuration's: the size was checked against the
      // device's limit already (port_capacity), and a removed or resetting
      // device, or a VF whose PF is not ready, fails here too (a restart
      // mends those).
      return Result<bool>::failure("ports." + role + ".mtu: the device refuses MTU " + std::to_string(spec.mtu) + ": " +
                                   std::strerror(-rc));
    }
    if (af_packet && mtu_before != 0 && kernel_mtu(iface) != mtu_before)
      record([&](KernelIfaceChange& c) { c.mtu = c.mtu ? c.mtu : mtu_before; });
  } else {
    spdlog::info(
        "port {}: the device reports MTU {} at most but carries {}: psgate enforces mtu {} itself; "
        "the interface's own MTU is the operator's to set",
        role, reported, spec.mtu, spec.mtu);
  }
  spdlog::info("port {} ({}): {}", role, device_name(spec.device), frames.describe(index));
  uint16_t rx_desc = static_cast<uint16_t>(spec.rx_desc);
  uint16_t tx_desc = static_cast<uint16_t>(spec.tx_desc);
  if (int rc = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &rx_desc, &tx_desc); rc != 0)
    return fail("descriptor counts rejected", rc);
  const int socket = rte_eth_dev_socket_id(port_id);
  for (unsigned q = 0; q < nb_rxq; ++q) {
    if (q != 0 && stop_before("its RX queue " + std::to_string(q))) return stopped();
    if (int rc = rte_eth_rx_queue_setup(port_id, q, rx_desc, socket, nullptr, pool); rc != 0) {
      // net_pcap with infinite_rx loads the whole capture here, one mbuf a
      // record held for good, and refuses it if a record needs two mbufs or
      // the pool runs out.
      if (rc == -EINVAL && std::string(info.driver_name ? info.driver_name : "") == "net_pcap" &&
          devarg_u32(spec.device, "infinite_rx", 0) != 0) {
        if (config_error) *config_error = true;
        return Result<bool>::failure(
            "port " + role + ": net_pcap with infinite_rx=1 could not load its rx_pcap (it keeps every record in an " +
            "mbuf of its own): either a record is larger than " + std::to_string(frames.data_room) +
            " B, the mbufs that ports." + role + ".mtu " + std::to_string(spec.mtu) +
            " asks for (raise the mtu, or leave the larger records out of the capture), or the capture has more " +
            "records than the mbuf pool has free (raise dataplane.mbufs: the start logs the pool as \"mbuf pool\")");
      }
      // af_xdp makes its XDP socket here, and DPDK 22.11 says EINVAL
      // whatever failed: only libxdp's stderr said why. The likely causes
      // are named; some pass (a queue a dying process still holds), so it
      // stays a failed start (exit 1, restarted), not a config error.
      if (rc == -EINVAL && af_xdp) {
        return Result<bool>::failure(
            "port " + role + ": RX queue " + std::to_string(q) + " setup failed: " + std::strerror(EINVAL) +
            ": the AF_XDP socket on " + iface + " was refused (libxdp's lines above say why): its driver may " +
            "lack the XDP support af_xdp needs (macvlan and some virtual devices have none: use net_af_packet " +
            "for " + iface + "), another XDP program or socket may hold it (ip link show " + iface +
            "), or the locked-memory limit may be too low (LimitMEMLOCK=)");
      }
      return fail("RX queue " + std::to_string(q) + " setup failed", rc);
    }
  }
  for (unsigned q = 0; q < nb_txq; ++q) {
    if (stop_before("its TX queue " + std::to_string(q))) return stopped();
    if (int rc = rte_eth_tx_queue_setup(port_id, q, tx_desc, socket, nullptr); rc != 0)
      return fail("TX queue " + std::to_string(q) + " setup failed", rc);
  }
  // Once per interface, not at every probe of a re-created one.
  static std::set<std::string> defrag_warned;
  if (af_packet && defrag_warned.insert(iface).second) {
    // DPDK 22.11's af_packet joins its sockets to a fanout group with
    // PACKET_FANOUT_FLAG_DEFRAG, fixed in the driver: said once, as what an
    // operator sees would otherwise be inexplicable (docs/operations.md).
    spdlog::warn(
        "port {}: af_packet (DPDK 22.11) has the kernel reassemble IPv4 fragments on {} before psgate sees them: "
        "a fragmented datagram arrives as one frame (dropped as oversize above the MTU), and one that never "
        "completes is dropped by the kernel (nstat IpReasmFails); use af_xdp or the NIC's driver where IPv4 "
        "fragments must pass",
        role, iface);
  }
  if ((af_packet || af_xdp) && !iface.empty()) {
    KernelIfaceChange turned_off{role, iface};
    kernel_offloads_off(role, iface, af_packet, af_xdp, turned_off);
    if (turned_off.gro || turned_off.lro || turned_off.rxvlan) {
      record([&](KernelIfaceChange& c) {
        c.gro = c.gro || turned_off.gro;
        c.lro = c.lro || turned_off.lro;
        c.rxvlan = c.rxvlan || turned_off.rxvlan;
      });
    }
  }
  if (stop_before("its start")) return stopped();
  if (int rc = rte_eth_dev_start(port_id); rc != 0) return fail("start failed", rc);
  // A bump in the wire forwards frames for every MAC address. af_packet sets
  // the interface's own flag, which stays after psgate: put back at exit.
  if (int rc = rte_eth_promiscuous_enable(port_id); rc != 0 && rc != -ENOTSUP) {
    spdlog::warn("port {}: cannot enable promiscuous mode: {}", role, std::strerror(-rc));
  }
  if (af_packet && !promisc_before && kernel_promiscuous(iface)) record([](KernelIfaceChange& c) { c.promisc = true; });
  return true;
}

}  // namespace psgate
