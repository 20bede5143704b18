// SPDX-License-Identifier: BSD-3-Clause
// The run's results as plain numbers, and their two renderings: JSON (for the
// benchmark suite) and a readable table. Pure: the engine fills RunResult.
//
// Units: bytes are frame bytes without FCS (as DPDK and psgate count them);
// *_bps rates are bits of those bytes per second, *_l1_bps add 24 bytes per
// frame (FCS, preamble, inter-frame gap: what a line carries). TX rates are
// over the TX time; RX rates over the time from a stream's first to its last
// arrival.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "profile.h"
#include "psgate/latency_histogram.h"

namespace psgate::gen {

struct StreamResult {
  uint64_t tx_packets = 0, tx_bytes = 0;
  uint64_t tx_dropped = 0;                // refused by a full TX ring after the retries: never sent
  uint64_t alloc_failed = 0;              // admitted but not built for want of an mbuf: never sent
  uint64_t rx_packets = 0, rx_bytes = 0;  // every arrival, duplicates included
  uint64_t rx_unique = 0;                 // distinct sequence numbers sent and received (per flow at most its sent)
  uint64_t rx_excess = 0;                 // distinct sequence numbers received beyond those sent on their flow
  uint64_t reordered = 0;                 // within the window, below the flow's highest
  uint64_t duplicates = 0;                // within the window, seen before
  uint64_t late = 0;                      // older than the window: late original or old duplicate, undecidable
  uint64_t wrong_port = 0;                // arrived on the port this direction should not leave psgate by
  uint64_t flows = 0, flows_seen = 0, flows_with_loss = 0, flows_reordered = 0, flows_with_duplicates = 0;
  uint64_t flows_with_late = 0;
  uint64_t max_flow_loss = 0;
  double rx_seconds = 0;         // first to last arrival
  LatencyHistogram latency;      // ns, duplicates excluded
  uint64_t latency_invalid = 0;  // this run's arrivals with a skewed TX TSC (stamp.h): not in `latency`
  uint64_t rx_stale = 0;         // frames of an earlier run (stamp.h): in no other RX counter

  // Sent and never received: never negative, late arrivals never reduce it
  // (the true loss lies between lost() - late and lost()).
  uint64_t lost() const { return tx_packets > rx_unique ? tx_packets - rx_unique : 0; }
  void merge(const StreamResult& o);
};

struct JobResult {
  const JobProfile* job = nullptr;
  uint64_t iterations = 0;
  bool has[2] = {false, false};
  StreamResult dir[2];  // kPush, kPull
};

struct PortResult {
  std::string role;  // "host-side", "wire-side"
  std::string name;  // DPDK device name
  uint16_t port_id = 0;
  uint64_t rx_foreign = 0;    // frames without a valid stamp
  uint64_t rx_other_run = 0;  // stamped frames of another run, sent while this one ran (stamp.h): in no other counter
  uint64_t alloc_failed = 0;
  uint64_t rx_backlog = 0;  // RX rounds that stopped at the poll cap with frames still waiting
  uint64_t nic_ipackets = 0, nic_opackets = 0, nic_imissed = 0, nic_oerrors = 0, nic_rx_nombuf = 0;
  // The link while frames went (from the first TX round to the report):
  // times it was seen to go down (polled every 100 ms at most), and whether
  // it was up at the end. A peer that went away makes TX refuse frames
  // (tx_dropped) and loses those it held: not the generator's rings, nor the
  // network's loss.
  uint64_t link_down_events = 0;
  bool link_up_at_end = true;
};

struct RunResult {
  std::string lcore_mode;  // "single" or "tx+rx"
  uint64_t tsc_hz = 0;
  double tx_seconds = 0;  // TX start to TX stop
  double drain_seconds = 0;
  bool interrupted = false;          // a stop signal ended the run (or the wait for the links)
  bool links_up = true;              // false: stopped while waiting for the links, nothing sent
  unsigned rx_bursts_per_round = 0;  // poll cap per port and RX round
  std::vector<PortResult> ports;
  std::vector<JobResult> jobs;
  uint64_t rx_foreign = 0;
  uint64_t rx_other_run = 0;  // over the ports
  uint16_t run_tag = 0;       // this run's tag, in every frame it sent (stamp.h)
};

// Trouble on the generator's own side, summed over its ports and streams.
// RX: frames its ports dropped (imissed, rx_nombuf) are in `lost` but were
// lost by the generator; RX rounds that stopped at the poll cap with frames
// still waiting mean RX was behind, and a peer that found the generator's RX
// ring full lost frames (psgate holds them and drops at its class queues,
// queue_full; testpmd io drops at its TX), which also shows as `lost`. TX: frames refused or not built were never sent
// and are not in `lost`; they only mean the offered rate fell short.
struct GeneratorSide {
  uint64_t rx_backlog_rounds = 0, rx_imissed = 0, rx_nombuf = 0;
  uint64_t tx_dropped = 0, alloc_failed = 0;
  uint64_t lost = 0;
  uint64_t link_down_events = 0;  // over the ports: a peer that went away during the run
  // Loss was seen and the generator's RX dropped frames or fell behind.
  bool loss_may_be_own() const { return lost != 0 && rx_backlog_rounds + rx_imissed + rx_nombuf != 0; }
};
GeneratorSide generator_side(const RunResult& r);

// What the main lcore reads while the loops run (Engine::live()).
struct LiveTotals {
  uint64_t tx_packets = 0, tx_bytes = 0, tx_dropped = 0, rx_packets = 0, rx_unique = 0, rx_foreign = 0;
  uint64_t alloc_failed = 0;
  uint64_t rx_other_run = 0;
  uint64_t pending = 0;  // sum over streams of sent - received (late arrivals not received): in flight or lost
};

// One progress line (with its newline) for the interval ending `t` seconds
// into the run, `secs` after the previous one. perf/bench/benchlib.py parses
// it with ^\s*([\d.]+)s\s+tx\s+([\d.]+)\s+(\w*pps)\s+.*?rx\s+([\d.]+)\s+(\w*pps):
// new fields go at the end.
std::string format_progress(const LiveTotals& prev, const LiveTotals& cur, double secs, double t);

// One warning a port that received frames of another generator run
// (without "psgate-gen: " and the newline); none when no port did. main
// prints them on stderr; the table gives the figures.
std::vector<std::string> other_run_warnings(const RunResult& r);

nlohmann::json to_json(const RunResult& r);
std::string format_table(const RunResult& r);
// "1.23 Mpps", "9.87 Gbit/s"
std::string si(double value, const char* unit);

}  // namespace psgate::gen
