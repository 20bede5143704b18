// SPDX-License-Identifier: BSD-3-Clause
// Port start-up for psgate-gen: one RX and one TX queue per port, and a wait
// for the links that tolerates the peer coming up later (a memif client whose
// server is not listening yet cannot start, or is turned away while the
// server's port is not started; both are retried until the timeout).
#pragma once

#include <rte_mempool.h>
#include <signal.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "psgate/result.h"

namespace psgate::gen {

// "0" or "net_memif0": a port id or the DPDK device name.
Result<uint16_t> resolve_port(const std::string& spec);

// The network devices (--vdev=net_...) of `eal_args` that EAL did not make
// a port of, their driver having refused them (a capture it cannot read):
// EAL logs it and goes on, and the port ids of the rest shift, so that the
// run would use other devices than the ones given. Comma-separated, or "".
std::string vdevs_not_created(const std::vector<std::string>& eal_args);

// The memif devices among the --vdev arguments whose buffers (`bsize`, 2048
// by default) are smaller than `frame_bytes`, each with its bsize;
// comma-separated, or "". DPDK 22.11's memif corrupts a frame that spans
// buffers (cut, glued to the next, repeated), and a memif client's buffers
// serve both directions: psgate's replies too.
std::string memif_buffers_too_small(const std::vector<std::string>& eal_args, uint32_t frame_bytes);

Result<bool> configure_port(uint16_t port, rte_mempool* pool);

// Whether the port's link is up now (without waiting).
bool link_up(uint16_t port);

// The ports' links through the run, polled by the main lcore: how often
// each went down (a peer killed or stopped mid-run), and how it ended.
class LinkWatch {
 public:
  explicit LinkWatch(const std::vector<uint16_t>& ports) {
    for (uint16_t p : ports) links_.push_back({p, true, 0});
  }
  void poll() {
    for (Link& l : links_) {
      const bool up = link_up(l.port);
      l.downs += l.up && !up;
      l.up = up;
    }
  }
  uint64_t down_events(uint16_t port) const { return find(port).downs; }
  bool up(uint16_t port) const { return find(port).up; }

 private:
  struct Link {
    uint16_t port;
    bool up;  // as last polled; all up when TX starts
    uint64_t downs;
  };
  const Link& find(uint16_t port) const {
    static const Link kUnwatched{0, true, 0};
    for (const Link& l : links_)
      if (l.port == port) return l;
    return kUnwatched;
  }
  std::vector<Link> links_;
};

// Starts every port (retrying while a start fails) and waits for all their
// links, until `deadline` (an error, which names `timeout_ns`, the
// --link-timeout the deadline was set from: one for all the ports) or a
// signal of `stop` (taken; returns false). True: every link is up.
//
// All ports start at once, not each after the previous one's link: a peer
// may bring one link up only after another (a second psgate-gen or any
// memif server that starts its ports in turn). A memif client whose link
// is still down kMemifReconnectAfter after its start is stopped and started
// again (the wait doubles each time, up to kMemifReconnectMax, so that a
// server too busy to finish a handshake in a second gets longer): DPDK
// 22.11's client connects once, when it starts, and a server that turned
// it away (listening, its port not started yet: "ID not found", as psgate's
// ports are between its probe and its start) leaves it down for good.
inline constexpr std::chrono::milliseconds kMemifReconnectAfter{1000};
inline constexpr std::chrono::milliseconds kMemifReconnectMax{4000};
Result<bool> start_and_wait_links(const std::vector<uint16_t>& ports, std::chrono::steady_clock::time_point deadline,
                                  uint64_t timeout_ns, const sigset_t& stop);

}  // namespace psgate::gen
