// SPDX-License-Identifier: BSD-3-Clause
// TX: every round, each job in turn (starting one further each round, so no
// job always goes first into a filling ring) sends one burst of up to
// `burst` frames of one direction, as far as its JobDriver admits.
//
// Per frame: copy the template into a fresh mbuf, patch worker end, stamp and
// checksums. A full TX ring is retried `tx_retries` times; frames still
// refused are freed and counted tx_dropped, and their flows' sequence numbers
// are rewound, so a refused frame is never counted as lost in the network.
#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstring>

#include "engine.h"

namespace psgate::gen {

void Engine::tx_begin() {
  tx_start_tsc_ = rte_rdtsc();
  for (JobDriver& d : drivers_) d.start(tx_start_tsc_);
}

void Engine::tx_end() {
  tx_end_tsc_ = rte_rdtsc();
  tx_finished_.store(true, std::memory_order_release);
}

void Engine::tx_round(uint64_t now) {
  const size_t jobs = drivers_.size();
  for (size_t k = 0; k < jobs; ++k) {
    size_t j = rr_ + k;
    if (j >= jobs) j -= jobs;
    // Between two jobs' bursts: a round of thousands of jobs must not hold
    // a memif teardown (memif_guard.cc) for its whole length.
    loop_epochs_.report(kTxLoop);
    tx_job(j, now);
  }
  if (++rr_ >= jobs) rr_ = 0;
}

void Engine::tx_job(size_t j, uint64_t now) {
  JobDriver& driver = drivers_[j];
  const int dir = driver.begin(now);
  if (dir < 0) return;
  StreamTx& s = tx_[j * 2 + static_cast<unsigned>(dir)];

  unsigned n = 0;
  uint64_t admitted_bytes = 0;
  for (size_t pos = s.seq.pattern_pos(); n < profile_.tx_burst; ++n) {
    const uint16_t len = s.templates[s.seq.template_at(pos)].layout.len;
    if (!driver.admit(len)) break;
    admitted_bytes += len;
    pos = s.seq.next_pos(pos);
  }
  if (n == 0) return;

  rte_mbuf* bufs[64];
  if (rte_pktmbuf_alloc_bulk(pool_, bufs, n) != 0) {
    driver.refund(admitted_bytes);
    side_[tx_side(static_cast<unsigned>(dir))].alloc_failed.add(n);
    s.alloc_failed.add(n);
    return;
  }
  for (unsigned i = 0; i < n; ++i) {
    const TxSequence::Frame f = s.seq.take();
    const FrameTemplate& t = s.templates[f.tmpl];
    rte_mbuf* m = bufs[i];
    uint8_t* data = rte_pktmbuf_mtod(m, uint8_t*);
    std::memcpy(data, t.bytes.data(), t.layout.len);
    m->data_len = t.layout.len;
    m->pkt_len = t.layout.len;
    const Stamp stamp{run_tag_, s.stream, f.flow, f.seq, rte_rdtsc()};
    patch_frame(data, t.layout, s.map.at(f.flow), stamp);
  }

  unsigned sent = 0;
  // Retries end with a stop too: up to a million of them for each of
  // thousands of jobs against a peer that takes nothing would keep the
  // round, and so the stop, waiting for minutes.
  for (uint32_t attempt = 0;
       sent < n && attempt <= profile_.tx_retries && (attempt == 0 || !stop_tx_.load(std::memory_order_relaxed));
       ++attempt) {
    sent += rte_eth_tx_burst(s.port, 0, bufs + sent, static_cast<uint16_t>(n - sent));
  }
  uint64_t sent_bytes = admitted_bytes;
  if (sent < n) {
    // Undo the refused frames (tx_sequence.h): the next burst sends them again.
    uint64_t refused_bytes = 0;
    for (unsigned i = sent; i < n; ++i) refused_bytes += bufs[i]->pkt_len;
    s.seq.rewind(n - sent);
    rte_pktmbuf_free_bulk(bufs + sent, n - sent);
    driver.refund(refused_bytes);
    sent_bytes -= refused_bytes;
    s.tx_dropped.add(n - sent);
  }
  s.tx_packets.add(sent);
  s.tx_bytes.add(sent_bytes);
}

int Engine::tx_main(void* arg) {
  Engine& e = *static_cast<Engine*>(arg);
  e.loop_epochs_.go_online(kTxLoop);
  e.tx_begin();
  while (!e.stop_tx_.load(std::memory_order_acquire)) e.tx_round(rte_rdtsc());
  e.tx_end();
  e.loop_epochs_.go_offline(kTxLoop);
  return 0;
}

int Engine::both_main(void* arg) {
  Engine& e = *static_cast<Engine*>(arg);
  e.loop_epochs_.go_online(kTxLoop);
  e.tx_begin();
  bool sending = true;
  while (!e.stop_rx_.load(std::memory_order_acquire)) {
    if (sending) {
      if (e.stop_tx_.load(std::memory_order_acquire)) {
        e.tx_end();
        sending = false;
      } else {
        e.tx_round(rte_rdtsc());
      }
    }
    e.loop_epochs_.report(kTxLoop);
    e.rx_round();
  }
  if (sending) e.tx_end();
  e.loop_epochs_.go_offline(kTxLoop);
  return 0;
}

}  // namespace psgate::gen
