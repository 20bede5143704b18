// SPDX-License-Identifier: BSD-3-Clause
#include "pipeline_harness.h"

#include <time.h>

#include <rte_cycles.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "dataplane/lcore_context.h"
#include "psgate/packet_meta.h"

namespace psgate::testing {

PipelineHarness::PipelineHarness(const std::string& body, bool start_lcores, const std::string& control_extra,
                                 unsigned rx_queues)
    : rx_queues_(rx_queues) {
  if (rx_queues_ < 1 || rx_queues_ > kMaxRxQueues) {
    error_ = "rx_queues out of range";
    return;
  }
  static std::atomic<unsigned> instances{0};
  const std::string tag = "h" + std::to_string(instances.fetch_add(1));
  std::string devices[2];
  for (unsigned p = 0; p < 2; ++p) {
    const std::string base = tag + (p == 0 ? "wire" : "host");
    for (unsigned q = 0; q < rx_queues_; ++q) {
      rx_[p][q] = rte_ring_create((base + "_rx" + std::to_string(q)).c_str(), 4096, SOCKET_ID_ANY,
                                  RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (!rx_[p][q]) {
        error_ = "cannot create test rings";
        return;
      }
    }
    tx_[p] = rte_ring_create((base + "_tx").c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (!tx_[p]) {
      error_ = "cannot create test rings";
      return;
    }
    const int port = rte_eth_from_rings(("net_ring_" + base).c_str(), rx_[p], rx_queues_, &tx_[p], 1, SOCKET_ID_ANY);
    char name[RTE_ETH_NAME_MAX_LEN];
    if (port < 0 || rte_eth_dev_get_name_by_port(static_cast<uint16_t>(port), name) != 0) {
      error_ = "rte_eth_from_rings failed for " + base;
      return;
    }
    devices[p] = name;  // the ring PMD may decorate the name: use what it registered
    port_id_[p] = static_cast<uint16_t>(port);
  }
  pool_ = rte_pktmbuf_pool_create((tag + "_gen").c_str(), 16383, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  if (!pool_) {
    error_ = "cannot create the generator pool";
    return;
  }
  const std::string toml = "[eal]\nargs = []\n[ports.wire]\ndevice = \"" + devices[0] +
                           "\"\n[ports.host]\ndevice = \"" + devices[1] + "\"\n[control]\nsocket = \"/tmp/unused-" +
                           tag + ".sock\"\n" + control_extra + body;
  auto config = parse_config(toml, "harness.toml");
  if (!config) {
    error_ = config.error();
    return;
  }
  auto dp = Dataplane::create(*config);
  if (!dp) {
    error_ = dp.error();
    return;
  }
  dataplane_ = std::move(*dp);
  auto cp = ControlPlane::create(*dataplane_, *config);
  if (!cp) {
    error_ = cp.error();
    return;
  }
  control_ = std::move(*cp);
  if (auto started = control_->start(); !started) {
    error_ = started.error();
    return;
  }
  if (start_lcores) {
    if (auto launched = dataplane_->start(); !launched) error_ = launched.error();
  }
}

PipelineHarness::~PipelineHarness() {
  stop();
  for (unsigned p = 0; p < 2; ++p) {
    if (scribbler_[p]) rte_eth_remove_tx_callback(port_id_[p], 0, scribbler_[p]);
    if (refuser_[p]) rte_eth_remove_tx_callback(port_id_[p], 0, refuser_[p]);
    if (blocker_[p]) rte_eth_remove_tx_callback(port_id_[p], 0, blocker_[p]);
    if (busier_[p]) rte_eth_remove_tx_callback(port_id_[p], 0, busier_[p]);
  }
  control_.reset();
  dataplane_.reset();  // closes the ring ports
  std::vector<rte_ring*> rings = {tx_[0], tx_[1]};
  for (unsigned p = 0; p < 2; ++p) rings.insert(rings.end(), rx_[p], rx_[p] + kMaxRxQueues);
  for (rte_ring* r : rings) {
    if (!r) continue;
    rte_mbuf* m;
    while (rte_ring_dequeue(r, reinterpret_cast<void**>(&m)) == 0) rte_pktmbuf_free(m);
    rte_ring_free(r);
  }
  rte_mempool_free(pool_);
}

rte_mbuf* PipelineHarness::mbuf_of(const std::vector<uint8_t>& frame) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (m == nullptr) return nullptr;
  void* data = frame.size() <= UINT16_MAX ? rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())) : nullptr;
  if (data == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  std::memcpy(data, frame.data(), frame.size());
  return m;
}

unsigned PipelineHarness::inject(unsigned port, rte_mbuf** pkts, unsigned n, unsigned queue) {
  if (queue >= rx_queues_) return 0;
  return rte_ring_sp_enqueue_burst(rx_[port][queue], reinterpret_cast<void* const*>(pkts), n, nullptr);
}

unsigned PipelineHarness::collect(unsigned port, rte_mbuf** pkts, unsigned n) {
  return rte_ring_sc_dequeue_burst(tx_[port], reinterpret_cast<void**>(pkts), n, nullptr);
}

bool PipelineHarness::hold_tx(unsigned port, unsigned room) {
  const unsigned free_now = rte_ring_free_count(tx_[port]);
  if (held_[port] != 0 || rte_ring_count(tx_[port]) != 0 || room > free_now) return false;
  for (unsigned k = 0; k < free_now - room; ++k) {
    rte_mbuf* m = rte_pktmbuf_alloc(pool_);
    if (m == nullptr || rte_ring_sp_enqueue(tx_[port], m) != 0) {
      rte_pktmbuf_free(m);
      return false;
    }
    ++held_[port];
  }
  return true;
}

namespace {

// What psgate may read of a packet once it has handed it to the port: nothing.
uint16_t scribble(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void*) {
  for (uint16_t i = 0; i < n; ++i) packet_meta(pkts[i])->rx_tsc = 0;
  return n;
}

// The port's tx_burst is handed the packets before the first from UDP
// source port *sport (plain IPv4: type 0x0800, IHL 5, protocol 17).
uint16_t refuse(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* sport) {
  const uint16_t refused = *static_cast<const uint16_t*>(sport);
  for (uint16_t i = 0; i < n; ++i) {
    const uint8_t* f = rte_pktmbuf_mtod(pkts[i], const uint8_t*);
    if (pkts[i]->data_len >= 38 && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 && f[23] == 17 &&
        (f[34] << 8 | f[35]) == refused)
      return i;
  }
  return n;
}

uint16_t block(uint16_t, uint16_t, rte_mbuf**, uint16_t n, void* arg) {
  auto* b = static_cast<PipelineHarness::TxBlock*>(arg);
  b->entered.store(true, std::memory_order_release);
  while (b->hold.load(std::memory_order_acquire)) {
    const timespec pause{0, 1'000'000};
    nanosleep(&pause, nullptr);
  }
  return n;
}

// PipelineHarness::TxBusy's port: the number of packets it takes of `n`.
uint16_t busy(uint16_t, uint16_t, rte_mbuf** pkts, uint16_t n, void* arg) {
  auto* b = static_cast<PipelineHarness::TxBusy*>(arg);
  if (n == 0) return 0;
  const uint64_t now = rte_rdtsc();
  if (const unsigned armed = b->armed.load(std::memory_order_acquire); armed != b->started) {
    b->started = armed;
    b->busy = true;
    b->head = pkts[0];
    b->busy_ticks = b->busy_ns.load(std::memory_order_relaxed) * rte_get_tsc_hz() / 1'000'000'000;
    b->counted_ticks = 0;
    b->last_tsc = now;
    return 0;
  }
  if (b->busy) {
    const uint64_t away = kLcoreAwayNs * rte_get_tsc_hz() / 1'000'000'000;
    b->counted_ticks += std::min(now - b->last_tsc, away);
    b->last_tsc = now;
    if (b->counted_ticks < b->busy_ticks || pkts[0] == b->head) return 0;
    b->busy = false;
    b->room_next = true;  // taken now: none at the next call (the head's, right after the probe)
    b->freed_at_probe.fetch_add(1, std::memory_order_release);
    return 1;
  }
  b->room_next = !b->room_next;
  return b->room_next ? 1 : 0;
}

}  // namespace

bool PipelineHarness::busy_tx(unsigned port, TxBusy* b) {
  if (busier_[port] == nullptr) busier_[port] = rte_eth_add_tx_callback(port_id_[port], 0, busy, b);
  return busier_[port] != nullptr;
}

bool PipelineHarness::block_tx(unsigned port, TxBlock* b) {
  if (blocker_[port] == nullptr) blocker_[port] = rte_eth_add_tx_callback(port_id_[port], 0, block, b);
  return blocker_[port] != nullptr;
}

bool PipelineHarness::refuse_on_tx(unsigned port, uint16_t sport) {
  refused_sport_[port] = sport;
  if (refuser_[port] == nullptr)
    refuser_[port] = rte_eth_add_tx_callback(port_id_[port], 0, refuse, &refused_sport_[port]);
  return refuser_[port] != nullptr;
}

bool PipelineHarness::scribble_on_tx(unsigned port) {
  if (scribbler_[port] == nullptr) scribbler_[port] = rte_eth_add_tx_callback(port_id_[port], 0, scribble, nullptr);
  return scribbler_[port] != nullptr;
}

void PipelineHarness::release_tx(unsigned port) {
  for (rte_mbuf* m; held_[port] != 0 && rte_ring_sc_dequeue(tx_[port], reinterpret_cast<void**>(&m)) == 0;) {
    rte_pktmbuf_free(m);
    --held_[port];
  }
}

}  // namespace psgate::testing
