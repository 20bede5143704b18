// SPDX-License-Identifier: BSD-3-Clause
// Link watching (control path): which ports the data lcores may touch.
//
// Sources, per port:
//  - the driver's link status, from an LSC event where the device raises them
//    (RTE_ETH_DEV_INTR_LSC: start_port enables the interrupt) and polled every
//    100 ms by the control thread in any case (memif, pcap, ring: no events);
//  - net_af_packet and net_af_xdp report "up" whatever happens to their
//    interface, so psgate
//    watches the kernel interface instead: present, the one the driver's
//    socket is bound to (same ifindex), IFF_UP and IFF_RUNNING. An interface
//    that was deleted (or deleted and created again) leaves the driver's
//    socket bound to nothing: the port is detached (stopped, closed, removed)
//    and probed again once an interface of that name is up.
//
// A port going down is published (LinkShared::set_up) and then quiesced: the
// data lcores stop polling it, drop what was queued for it (link_down), and
// poll_links() returns only once none of them is inside a burst on it, which
// is what makes detaching it safe. A port coming up is set up first and
// published last (release), so an lcore that sees it up sees its new port id.
#include <net/if.h>
#include <rte_bus_vdev.h>
#include <rte_dev.h>
#include <rte_ethdev.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "dataplane/dataplane_impl.h"
#include "dataplane/ports.h"

namespace psgate {

namespace {

uint64_t steady_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct IfaceState {
  unsigned ifindex = 0;  // 0: no such interface
  bool running = false;  // IFF_UP and IFF_RUNNING (a veth is running while its peer is up)
  uint32_t mtu = 0;      // 0: not known
  // Not looked at (the errno): the process had no descriptor for the
  // socket the lookups need (EMFILE, ENFILE: control clients took them
  // all). Nothing is known of the interface, least of all that it is gone.
  int unknown_errno = 0;
};

IfaceState iface_state(const std::string& name) {
  IfaceState st;
  // One socket for every lookup, opened first: if_nametoindex opens its own
  // and, out of descriptors, says 0 with errno ENOENT, which read as "gone".
  const int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    st.unknown_errno = errno;
    return st;
  }
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
  if (ioctl(s, SIOCGIFINDEX, &ifr) == 0 && ifr.ifr_ifindex > 0) {
    st.ifindex = static_cast<unsigned>(ifr.ifr_ifindex);
    if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) st.running = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
    if (ioctl(s, SIOCGIFMTU, &ifr) == 0 && ifr.ifr_mtu > 0) st.mtu = static_cast<uint32_t>(ifr.ifr_mtu);
  } else if (errno != ENODEV) {
    st.unknown_errno = errno;  // not "no such device": nothing is known
  }
  close(s);
  return st;
}

const PortSpec& port_spec(const Dataplane::Impl& d, unsigned p) { return p == 0 ? d.config.wire : d.config.host; }

// The largest frame port p may send: its interface's MTU while that is
// below the configured one (`short_mtu`), else the configured one.
void set_short_mtu(Dataplane::Impl& d, unsigned p, uint32_t short_mtu) {
  d.links[p].short_mtu = short_mtu;
  d.shared.max_untagged_frame[p].store(max_frame_bytes(short_mtu ? short_mtu : port_spec(d, p).mtu, 0),
                                       std::memory_order_relaxed);
}

// A kernel interface's MTU set below ports.<p>.mtu under psgate (psgate sets
// it at start): the kernel would drop the larger frames psgate hands it,
// unseen and uncounted (af_packet logs each to the console, which slowed the
// lcore to a crawl). They are dropped as oversize instead, counted (at RX,
// and where they leave if they were queued before: tx.cc), and health says
// so, until the MTU is back.
void note_iface_mtu(Dataplane::Impl& d, unsigned p, uint32_t iface_mtu) {
  PortWatch& w = d.links[p];
  const uint32_t configured = port_spec(d, p).mtu;
  const uint32_t short_mtu = iface_mtu != 0 && iface_mtu < configured ? iface_mtu : 0;
  if (short_mtu == w.short_mtu) return;
  set_short_mtu(d, p, short_mtu);
  if (short_mtu) {
    spdlog::warn(
        "port {}: interface {} has MTU {}, below ports.{}.mtu = {}: larger frames for it are dropped as "
        "oversize until its MTU is raised again",
        kPortNames[p], w.iface, short_mtu, kPortNames[p], configured);
  } else {
    spdlog::info("port {}: interface {} carries ports.{}.mtu = {} again", kPortNames[p], w.iface, kPortNames[p],
                 configured);
  }
}

// A link's state: a change, after `held_back` earlier ones not logged, or
// (`catch_up`) what `held_back` changes not logged left.
void log_link(unsigned p, bool up, const std::string& detail, uint64_t held_back, bool catch_up = false) {
  std::string changes;
  if (catch_up) {
    changes = " (the state " + std::to_string(held_back) + " link changes not logged left)";
  } else if (held_back) {
    changes = " (" + std::to_string(held_back) + " earlier link changes not logged)";
  }
  if (up) {
    spdlog::info("port {}: link up{}", kPortNames[p], changes);
  } else {
    spdlog::warn("port {}: link down ({}): not polled, its traffic dropped as link_down{}", kPortNames[p], detail,
                 changes);
  }
}

// Publishes a change; a port going down is quiesced before this returns.
// Returns false when the lcores did not all report in time (the port may
// still be in use).
bool publish(Dataplane::Impl& d, unsigned p, bool up, const std::string& detail) {
  PortWatch& w = d.links[p];
  bool quiet = true;
  if (w.up != up) {
    d.shared.link->set_up(p, up);
    w.up = up;
    w.since_unix_ns = realtime_ns();
    ++w.changes;
    w.detail = up ? "" : detail;
    if (w.change_logged.admit(steady_ns())) log_link(p, up, detail, w.change_logged.held_back());
  } else {
    if (!up) w.detail = detail;
    // Changes held back: the state they left, once a line is due (this is
    // called at every poll, 10 times a second).
    if (w.change_logged.catch_up(steady_ns())) log_link(p, up, w.detail, w.change_logged.held_back(), true);
  }
  if (up) {
    w.quiesced = false;
  } else if (!w.quiesced) {
    // Once per going down (again each tick until it succeeds): a port that
    // stays down is quiet already. A stuck lcore (lcore_watch.cc) answers
    // no handshake: waiting the full 5 s for it at every tick held
    // link_mutex, and the control thread spinning, for 5 s of every 5.1.
    using namespace std::chrono_literals;
    const bool stuck = d.watch.any_stuck.load(std::memory_order_relaxed);
    w.quiesced = d.shared.link->quiesce(stuck ? std::chrono::steady_clock::duration(10ms)
                                              : std::chrono::steady_clock::duration(5s));
  }
  quiet = up || w.quiesced;
  return quiet;
}

void detach(Dataplane::Impl& d, unsigned p) {
  PortWatch& w = d.links[p];
  const uint16_t port = d.shared.port_ids[p];
  // What this device counted goes with it: kept, for the totals.
  if (rte_eth_stats st{}; rte_eth_stats_get(port, &st) == 0) {
#define PSGATE_NIC_KEEP(field, ...) w.nic_detached.field += st.field;
    PSGATE_NIC_COUNTERS(PSGATE_NIC_KEEP)
#undef PSGATE_NIC_KEEP
  }
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  const std::string name = device_name(port_spec(d, p).device);
  if (int rc = rte_eal_hotplug_remove("vdev", name.c_str()); rc != 0)
    spdlog::warn("port {}: cannot remove device {}: {}", kPortNames[p], name, std::strerror(-rc));
  w.detached = true;
  w.warned = false;
  spdlog::info("port {}: device {} detached until interface {} is back", kPortNames[p], name, w.iface);
}

// Probes the detached device again; `why` says what failed (returns false).
bool reattach(Dataplane::Impl& d, unsigned p, std::string& why) {
  PortWatch& w = d.links[p];
  const std::string& device = port_spec(d, p).device;
  const std::string name = device_name(device);
  const size_t comma = device.find(',');
  const std::string args = comma == std::string::npos ? "" : device.substr(comma + 1);
  auto fail = [&](const std::string& reason) {
    if (!w.warned) spdlog::warn("port {}: cannot probe {} again yet: {}", kPortNames[p], name, reason);
    w.warned = true;
    why = reason;
    return false;
  };
  if (int rc = rte_eal_hotplug_add("vdev", name.c_str(), args.c_str()); rc != 0)
    return fail(std::string("probe failed: ") + std::strerror(-rc));
  auto port = find_port(kPortNames[p], device);
  if (!port.ok()) return fail(port.error());
  auto started = start_port(kPortNames[p], *port, port_spec(d, p), d.frames, d.n_rx, 1, d.pool, d.iface_changes);
  if (!started.ok()) {
    rte_eth_dev_close(*port);
    rte_eal_hotplug_remove("vdev", name.c_str());
    return fail(started.error());
  }
  // Plain stores: no lcore reads these while the port is down; publish()'s
  // release store of "up" orders them before any lcore's next use.
  d.shared.port_ids[p] = *port;
  d.egress[p]->port_id = *port;
  const IfaceState st = iface_state(w.iface);
  w.ifindex = st.ifindex;
  note_iface_mtu(d, p, st.mtu);  // start_port set it; a failed set leaves it short
  w.detached = false;
  spdlog::info("port {}: device {} probed again (port id {})", kPortNames[p], name, *port);
  return true;
}

void poll_port(Dataplane::Impl& d, unsigned p) {
  PortWatch& w = d.links[p];
  if (w.kind == PortWatch::kEthdev) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(d.shared.port_ids[p], &link) != 0) return;
    const bool up = link.link_status == RTE_ETH_LINK_UP;
    const bool memif = port_spec(d, p).device.rfind("net_memif", 0) == 0;
    publish(d, p, up, memif ? "no memif peer" : "driver reports link down");
    return;
  }
  const IfaceState st = iface_state(w.iface);
  if (st.unknown_errno) {
    // Judged at the next poll that can look: taken for "gone", a running
    // port was detached and its traffic stopped until the clients left.
    if (w.unknown_logged.admit(steady_ns()))
      spdlog::warn("port {}: cannot look at interface {} ({}); its link state is kept as it was ({} since start{})",
                   kPortNames[p], w.iface, std::strerror(st.unknown_errno), w.unknown_logged.total(),
                   w.unknown_logged.held_back_note());
    return;
  }
  // Not known when the port was probed (no descriptor to look with then):
  // the interface found now is the one, not a replacement to detach for.
  if (w.ifindex == 0 && !w.detached) w.ifindex = st.ifindex;
  if (w.detached) {
    // Health says why it is down now, not why it went: the interface may be
    // back and down, or up with a device that cannot be probed yet.
    std::string why;
    if (st.ifindex == 0) {
      why = "interface " + w.iface + " gone";
    } else if (!st.running) {
      why = "interface " + w.iface + " down";
    } else if (reattach(d, p, why)) {
      publish(d, p, true, "");
      return;
    } else {
      why = "interface " + w.iface + " is back, but " + device_name(port_spec(d, p).device) +
            " cannot be probed again yet: " + why;
    }
    publish(d, p, false, why);
    return;
  }
  if (st.ifindex != w.ifindex) {
    // Not this interface's MTU any more: the port is down, its frames are
    // link_down, not oversize (a new interface is judged when probed).
    if (w.short_mtu) set_short_mtu(d, p, 0);
    std::string why = st.ifindex == 0 ? "interface " + w.iface + " gone" : "interface " + w.iface + " replaced";
    // af_xdp is not detached and probed again: DPDK 22.11's close leaves the
    // mbufs of its fill ring out of the pool (about 2,048 a time), so a few
    // cycles would starve both ports. It stays down, saying so.
    if (!w.reprobe) why += " (af_xdp ports are not probed again: restart psgate to use it)";
    if (publish(d, p, false, why) && w.reprobe) detach(d, p);
    return;
  }
  note_iface_mtu(d, p, st.mtu);
  publish(d, p, st.running, "interface " + w.iface + " down");
  // What psgate set on the interface at start, once a second: another
  // program may have set it back (keep_kernel_iface_settings).
  if (const uint64_t now = steady_ns(); now >= w.next_settings_look_ns) {
    w.next_settings_look_ns = now + kSettingsLookNs;
    keep_kernel_iface_settings(kPortNames[p], w.iface, /*af_packet=*/w.reprobe);
  }
}

// Interrupt thread: a link change the device announced is acted on at once
// instead of at the next poll. Same mutex as the control thread's poll.
int on_lsc_event(uint16_t port_id, rte_eth_event_type, void* arg, void*) {
  auto* d = static_cast<Dataplane::Impl*>(arg);
  std::lock_guard lock(d->link_mutex);
  for (unsigned p = 0; p < kPortCount; ++p)
    if (d->shared.port_ids[p] == port_id) poll_port(*d, p);
  return 0;
}

}  // namespace

void links_init(Dataplane::Impl& d) {
  const uint64_t now = realtime_ns();
  for (unsigned p = 0; p < kPortCount; ++p) {
    PortWatch& w = d.links[p];
    w.since_unix_ns = now;
    const std::string& device = port_spec(d, p).device;
    // af_xdp as af_packet: DPDK 22.11's reports "up" from its start on
    // whatever its interface does, and its socket stays bound to a deleted
    // interface's index.
    if (device.rfind("net_af_packet", 0) == 0 || device.rfind("net_af_xdp", 0) == 0) {
      w.kind = PortWatch::kKernelIface;
      w.reprobe = device.rfind("net_af_packet", 0) == 0;
      w.iface = devarg_text(device, "iface");
      w.ifindex = iface_state(w.iface).ifindex;
    }
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(d.shared.port_ids[p], &info) == 0 && info.dev_flags &&
        (*info.dev_flags & RTE_ETH_DEV_INTR_LSC)) {
      w.lsc = rte_eth_dev_callback_register(d.shared.port_ids[p], RTE_ETH_EVENT_INTR_LSC, on_lsc_event, &d) == 0;
    }
  }
  // The state at start (a memif server without its peer is down) is where
  // counting starts, not a change.
  std::lock_guard lock(d.link_mutex);
  for (unsigned p = 0; p < kPortCount; ++p) {
    poll_port(d, p);
    d.links[p].changes = 0;
    d.links[p].since_unix_ns = now;
  }
}

void links_shutdown(Dataplane::Impl& d) {
  for (unsigned p = 0; p < kPortCount; ++p) {
    if (d.links[p].lsc) {
      // -EAGAIN while the callback runs (on the interrupt thread): it would
      // go on using `d`, which the caller frees next. Retried until it is
      // out (a callback takes the link mutex briefly; bounded at 1 s).
      int rc = -EAGAIN;
      for (int tries = 0; tries < 1000 && rc == -EAGAIN; ++tries) {
        rc = rte_eth_dev_callback_unregister(d.shared.port_ids[p], RTE_ETH_EVENT_INTR_LSC, on_lsc_event, &d);
        if (rc == -EAGAIN) {
          timespec pause{0, 1'000'000};
          nanosleep(&pause, nullptr);
        }
      }
      if (rc == -EAGAIN)
        spdlog::error("port {}: its link-change callback was still running after 1 s at shutdown", kPortNames[p]);
    }
    d.links[p].lsc = false;
  }
}

void Dataplane::poll_links() {
  std::lock_guard lock(impl_->link_mutex);
  for (unsigned p = 0; p < kPortCount; ++p) poll_port(*impl_, p);
}

std::array<bool, kPortCount> Dataplane::ports_stalled() const {
  std::array<bool, kPortCount> out{};
  for (unsigned p = 0; p < kPortCount; ++p)
    out[p] = p < impl_->egress.size() && impl_->egress[p] &&
             impl_->egress[p]->stalled_since_tsc.load(std::memory_order_relaxed) != 0;
  return out;
}

void Dataplane::note_iface_mtu_for_testing(unsigned port, uint32_t iface_mtu) {
  std::lock_guard lock(impl_->link_mutex);
  if (port < kPortCount) note_iface_mtu(*impl_, port, iface_mtu);
}

std::array<PortLink, kPortCount> Dataplane::links() const {
  std::lock_guard lock(impl_->link_mutex);
  std::array<PortLink, kPortCount> out;
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortWatch& w = impl_->links[p];
    out[p] = PortLink{w.up, w.since_unix_ns, w.changes, w.detail, w.short_mtu};
  }
  return out;
}

}  // namespace psgate
