// SPDX-License-Identifier: BSD-3-Clause
// The generator's data path: per-stream TX and RX state and the lcore loops.
//
//   host-side port ──TX pull──▶ psgate host port ... psgate wire port ──▶ RX pull ── wire-side port
//   wire-side port ──TX push──▶ psgate wire port ... psgate host port ──▶ RX push ── host-side port
//
// A stream is one (job, direction); stream id = job index * 2 + direction, as
// in the stamp. TX state (pacers, per-flow next sequence numbers, templates)
// belongs to the TX lcore, RX state (per-flow FlowRx, latency histograms) to
// the RX lcore; with one lcore both run in one loop. The main lcore only reads
// the Counter fields while running (relaxed atomics, see psgate/counters.h)
// and everything else after the loops have returned.
#pragma once

#include <rte_mbuf.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <vector>

#include "frame.h"
#include "job_driver.h"
#include "profile.h"
#include "psgate/counters.h"
#include "psgate/latency_histogram.h"
#include "psgate/loop_epochs.h"
#include "psgate/result.h"
#include "report.h"
#include "rx_accounting.h"
#include "tx_sequence.h"

namespace psgate::gen {

enum Side : unsigned { kHostSide = 0, kWireSide = 1 };
// Pull frames enter psgate's host port, so the generator sends them on its
// host-side port and receives them on its wire-side port; push the reverse.
inline constexpr unsigned tx_side(unsigned dir) { return dir == kPull ? kHostSide : kWireSide; }
inline constexpr unsigned rx_side(unsigned dir) { return tx_side(dir) ^ 1u; }

struct alignas(64) StreamTx {
  bool active = false;
  uint16_t port = 0;
  uint16_t stream = 0;
  uint64_t flows = 0;
  FlowMap map;
  TxSequence seq;                        // pattern position, flow cursor, per-flow sequence numbers
  std::vector<FrameTemplate> templates;  // one per distinct frame size
  Counter tx_packets, tx_bytes, tx_dropped;
  Counter alloc_failed;  // frames admitted but not built: no mbuf (never sent)
};

struct alignas(64) StreamRx {
  bool active = false;
  unsigned side = 0;  // where this stream should arrive
  std::vector<FlowRx> flows;
  Counter packets, bytes, unique;
  uint64_t reordered = 0, duplicates = 0, late = 0, wrong_port = 0, latency_invalid = 0, rx_stale = 0;
  uint64_t first_tsc = 0, last_tsc = 0;
  LatencyHistogram latency;  // ns
};

struct alignas(64) SideCounters {
  Counter rx_foreign;
  Counter rx_other_run;  // stamped frames of another run sent while this one runs (stamp.h: StampOwner)
  Counter alloc_failed;
  Counter rx_backlog;  // RX rounds that stopped at the burst cap with frames still waiting
};

class Engine {
 public:
  // Allocates every table (the loops allocate nothing but mbufs).
  static Result<std::unique_ptr<Engine>> create(const Profile& profile, uint16_t host_port, uint16_t wire_port,
                                                rte_mempool* pool, uint64_t tsc_hz);

  // Lcore entry points (argument: the Engine).
  static int tx_main(void* engine);
  static int rx_main(void* engine);
  static int both_main(void* engine);

  // The TX and RX loops (or the one loop doing both) report here at the
  // top of every round: a memif peer that goes away has its memory
  // unmapped only once no burst that began before is still running
  // (memif_guard.cc; main sets g_teardown_guard while the loops run).
  LoopEpochs& loop_epochs() { return loop_epochs_; }
  static constexpr unsigned kTxLoop = 0, kRxLoop = 1;

  void stop_tx() { stop_tx_.store(true, std::memory_order_release); }
  bool tx_finished() const { return tx_finished_.load(std::memory_order_acquire); }
  void stop_rx() { stop_rx_.store(true, std::memory_order_release); }

  LiveTotals live() const;
  // After the loops returned.
  RunResult result() const;
  // One CSV record per flow and direction (flow_report.h); false on a write error.
  bool write_flows_csv(std::FILE* out) const;

 private:
  Engine(const Profile& profile, uint16_t host_port, uint16_t wire_port, rte_mempool* pool, uint64_t tsc_hz);
  void build_streams(uint64_t now);  // allocates; may throw std::bad_alloc
  void tx_begin();
  void tx_round(uint64_t now);
  void tx_job(size_t job, uint64_t now);
  void tx_end();
  void rx_round();
  void rx_drain(unsigned side);
  uint16_t rx_poll(unsigned side);

  const Profile& profile_;
  uint16_t port_[2];
  bool same_port_;
  rte_mempool* pool_;
  uint64_t tsc_hz_;
  uint16_t run_tag_;           // every frame carries it; another tag is another run's frame (stamp.h)
  uint64_t epoch_tsc_;         // before any frame is sent: no plausible TX TSC is older
  uint64_t max_skew_cycles_;   // how far another core's TSC may run ahead (1 ms): stamp_age
  uint64_t ns_per_cycle_q32_;  // ns = cycles * this >> 32

  std::vector<JobDriver> drivers_;
  std::unique_ptr<StreamTx[]> tx_;
  std::unique_ptr<StreamRx[]> rx_;
  size_t streams_ = 0;
  size_t rr_ = 0;               // first job of the next TX round
  unsigned rx_max_bursts_ = 2;  // per port and RX round: rx_bursts_per_round()
  SideCounters side_[2];

  std::atomic<bool> stop_tx_{false}, stop_rx_{false}, tx_finished_{false};
  LoopEpochs loop_epochs_{2};
  uint64_t tx_start_tsc_ = 0, tx_end_tsc_ = 0;
};

}  // namespace psgate::gen
