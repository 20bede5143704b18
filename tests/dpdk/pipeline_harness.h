// SPDX-License-Identifier: BSD-3-Clause
// The real psgate data plane and control plane in-process, on ring-backed
// ports the test feeds and drains itself: a test controls exactly what enters
// and sees exactly what leaves, in order.
#pragma once

#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "psgate/config.h"
#include "psgate/control_plane.h"
#include "psgate/dataplane.h"

namespace psgate::testing {

class PipelineHarness {
 public:
  // `config_body` is TOML for everything but [eal], [ports.*] and [control],
  // which the harness writes (ring ports named after a per-instance tag).
  // With `start_lcores` false the data plane is built but never started: the
  // test drives it with dataplane().run_once() (every lcore's loop once, in
  // turn), so every
  // packet's fate is decided synchronously, between the test's own steps.
  // `control_extra` is TOML added to the [control] table (e.g. a state file).
  // `rx_queues`: RX queues per port (as the data lcores ask: n - 2 from 3
  // data lcores, n - 1 hybrid; lcore_modes.h rx_queues_for), each its own
  // ring (inject's `queue`).
  explicit PipelineHarness(const std::string& config_body, bool start_lcores = true,
                           const std::string& control_extra = "", unsigned rx_queues = 1);
  ~PipelineHarness();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }

  // One mbuf from the harness's pool holding `frame` in a single segment, or
  // null when the pool is empty or the frame does not fit one segment.
  rte_mbuf* mbuf_of(const std::vector<uint8_t>& frame);
  // Packets into a port's RX queue (as if they arrived from the wire or the host).
  unsigned inject(unsigned port, rte_mbuf** pkts, unsigned n, unsigned queue = 0);
  // Packets the data plane transmitted on a port.
  unsigned collect(unsigned port, rte_mbuf** pkts, unsigned n);
  // A port whose TX ring takes only `room` more packets (the rest of the ring
  // holds placeholder mbufs), until release_tx takes the placeholders out
  // again, before collect would see them.
  bool hold_tx(unsigned port, unsigned room);
  void release_tx(unsigned port);
  // Every packet handed to the port has its arrival time (PacketMeta's
  // rx_tsc) overwritten with 0 as the port takes it, as a driver that frees
  // a sent mbuf at once, and an RX lcore that reuses it, would leave it:
  // whatever psgate still reads of a packet after sending it reads garbage
  // (a sojourn of seconds). Sojourn is recorded before sending, so nothing
  // else changes.
  bool scribble_on_tx(unsigned port);
  // The port refuses, for good, every plain IPv4 packet (no options) from
  // UDP source port `sport`: its tx_burst stops at the first such packet of
  // a burst, as a driver does at a packet it cannot send.
  bool refuse_on_tx(unsigned port, uint16_t sport);
  // The port's tx_burst holds the lcore that calls it while block->hold is
  // true (a driver call that takes its time), setting block->entered first.
  // `block` must outlive every lcore that may still call it.
  struct TxBlock {
    std::atomic<bool> hold{true};
    std::atomic<bool> entered{false};
  };
  bool block_tx(unsigned port, TxBlock* block);
  // The port is busy, then frees room slowly, on the clock of the lcore that
  // transmits on it rather than the test thread's: each busy_ns.store()
  // then armed.fetch_add() makes the port refuse everything from the next
  // burst it is offered (whose first packet is the "head") for busy_ns of
  // that lcore's calls, counted as sched_transmit counts a wait (a gap of
  // more than kLcoreAwayNs between two calls counts kLcoreAwayNs, so an
  // lcore kept off its CPU makes the port no busier in psgate's eyes). Once
  // that time is counted, the first call that does not start at the head
  // (psgate's probe of the packets behind it) finds room for one packet
  // (freed_at_probe counts those); from then on, room for one packet at
  // every other call, as a TX ring drained more slowly than it is offered
  // packets. `busy` must outlive every lcore that may still call it.
  struct TxBusy {
    std::atomic<uint64_t> busy_ns{0};
    std::atomic<unsigned> armed{0};           // busy times the test started
    std::atomic<unsigned> freed_at_probe{0};  // busy times that ended at a probe
    // The transmitting lcore's own.
    unsigned started = 0;
    bool busy = false;
    bool room_next = false;
    rte_mbuf* head = nullptr;
    uint64_t busy_ticks = 0, counted_ticks = 0, last_tsc = 0;
  };
  bool busy_tx(unsigned port, TxBusy* busy);

  Dataplane& dataplane() { return *dataplane_; }
  ControlPlane& control() { return *control_; }
  unsigned rx_queues() const { return rx_queues_; }
  rte_mempool* pool() { return pool_; }
  // False when a data lcore did not return (Dataplane::stop_and_drain).
  bool stop() { return !dataplane_ || dataplane_->stop_and_drain(); }

 private:
  std::string error_;
  static constexpr unsigned kMaxRxQueues = 4;
  rte_ring* rx_[2][kMaxRxQueues] = {};
  unsigned rx_queues_ = 1;
  rte_ring* tx_[2] = {};
  unsigned held_[2] = {};  // placeholders at the front of tx_ (hold_tx)
  uint16_t port_id_[2] = {};
  const rte_eth_rxtx_callback* scribbler_[2] = {};  // scribble_on_tx
  const rte_eth_rxtx_callback* refuser_[2] = {};    // refuse_on_tx
  const rte_eth_rxtx_callback* blocker_[2] = {};    // block_tx
  const rte_eth_rxtx_callback* busier_[2] = {};     // busy_tx
  uint16_t refused_sport_[2] = {};
  rte_mempool* pool_ = nullptr;
  std::unique_ptr<Dataplane> dataplane_;
  std::unique_ptr<ControlPlane> control_;
};

}  // namespace psgate::testing
