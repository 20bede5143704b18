// SPDX-License-Identifier: BSD-3-Clause
// RX: poll both ports, find each frame's stamp, account it on its flow.
// A frame of another run (its run tag, stamp.h) is counted on the port it
// came in by, before its stream and flow are looked at: they may well exist
// here too, and would count it as this run's.
//
// Each round polls a port until a burst comes back short of kRxBurst (the
// ring is empty), at most rx_max_bursts_ bursts: in the single loop one TX
// round may send a burst per job, and RX must take back at least that much
// per round or the ring facing psgate fills, psgate's queues back up and it
// drops at them (queue_full), which would then look like network loss. A round that stops at the cap
// after a full burst is counted (rx_backlog): RX was behind.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "engine.h"

namespace psgate::gen {

uint16_t Engine::rx_poll(unsigned side) {
  rte_mbuf* bufs[kRxBurst];
  const uint16_t n = rte_eth_rx_burst(port_[side], 0, bufs, kRxBurst);
  if (n == 0) return 0;
  const uint64_t now = rte_rdtsc();
  for (uint16_t i = 0; i < n; ++i) {
    const rte_mbuf* m = bufs[i];
    Stamp st;
    if (!find_stamp(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, &st)) {
      side_[side].rx_foreign.inc();
      continue;
    }
    uint64_t cycles = 0;
    const StampAge age = stamp_age(now, st.tsc, epoch_tsc_, max_skew_cycles_, &cycles);
    const StampOwner owner = stamp_owner(st.run, run_tag_, age);
    if (owner == StampOwner::kOtherRun) {
      side_[side].rx_other_run.inc();
      continue;
    }
    if (st.stream >= streams_ || !rx_[st.stream].active || st.flow >= rx_[st.stream].flows.size()) {
      side_[side].rx_foreign.inc();
      continue;
    }
    StreamRx& s = rx_[st.stream];
    if (owner == StampOwner::kStale) {  // an earlier run's frame (stamp.h): not this stream's
      ++s.rx_stale;
      continue;
    }
    // With one port for both sides every arrival is on the right one.
    s.wrong_port += !same_port_ && side != s.side;
    if (s.packets.get() == 0) s.first_tsc = now;
    s.last_tsc = now;
    s.packets.inc();
    s.bytes.add(m->pkt_len);
    FlowRx& flow = s.flows[st.flow];
    flow.bytes += m->pkt_len;
    const Arrival a = record_arrival(flow, st.seq);
    if (a == Arrival::kDuplicate) {
      ++s.duplicates;
      continue;  // no latency sample: it may be a copy of any earlier one
    }
    // A late arrival (older than the window) may be an original or an old
    // duplicate: counted apart, never as received, so it cannot hide loss.
    s.reordered += a == Arrival::kReordered;
    s.late += a == Arrival::kLate;
    s.unique.add(a != Arrival::kLate);
    if (age == StampAge::kSkewed) {  // this run's frame, but no plausible latency
      ++s.latency_invalid;
      bump(flow.lat_invalid);
      continue;
    }
    const uint64_t ns = static_cast<uint64_t>((static_cast<unsigned __int128>(cycles) * ns_per_cycle_q32_) >> 32);
    s.latency.record(ns);
    record_flow_latency(flow, ns);
  }
  rte_pktmbuf_free_bulk(bufs, n);
  return n;
}

void Engine::rx_drain(unsigned side) {
  for (unsigned k = 0; k < rx_max_bursts_; ++k) {
    if (rx_poll(side) < kRxBurst) return;
  }
  side_[side].rx_backlog.inc();
}

void Engine::rx_round() {
  rx_drain(kHostSide);
  if (!same_port_) rx_drain(kWireSide);
}

int Engine::rx_main(void* arg) {
  Engine& e = *static_cast<Engine*>(arg);
  e.loop_epochs_.go_online(kRxLoop);
  while (!e.stop_rx_.load(std::memory_order_acquire)) {
    e.loop_epochs_.report(kRxLoop);
    e.rx_round();
  }
  e.loop_epochs_.go_offline(kRxLoop);
  return 0;
}

}  // namespace psgate::gen
