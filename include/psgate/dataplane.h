// SPDX-License-Identifier: BSD-3-Clause
// The data plane as a whole: builds ports, pools, rings, schedulers and lcore
// roles from a validated config (after EAL init), runs the lcores, and stops
// them gracefully.
//
// Lcore roles from [lcores] data (N lcores):
//   N = 1   one run-to-completion lcore: RX both ports, schedule and TX both
//   N = 2   two run-to-completion lcores, a direction each: lcore k RX port k,
//           schedule and TX the other (lcores.mode "pipelined": one RX lcore,
//           one scheduler/TX lcore for both egress ports)
//   N >= 3  N-2 RX lcores (RX queue k of each port, RSS spreads flows), and one
//           scheduler/TX lcore per egress port (wire, then host)
//           (lcores.mode "hybrid": lcores 1 and 2 run a direction each on RX
//           queue 0, as N = 2 does, and each also takes the rings the other
//           N-2, RX lcores fill for its egress port; those receive queues
//           1..N-2 of both ports)
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "psgate/config.h"
#include "psgate/counters.h"
#include "psgate/job_telemetry.h"
#include "psgate/result.h"
#include "psgate/snapshot.h"
#include "psgate/totals.h"

namespace psgate {

class Dataplane {
 public:
  // EAL must be initialised with the lcores and devices of `config`.
  // `stop_asked` (psgate's main: a SIGTERM or SIGINT pending) is asked
  // between the steps that can take seconds: before the mbuf pool (a large
  // one on --no-huge takes seconds to fill) and each smaller try of an
  // "auto" one, before each port, each of its queues (net_pcap with
  // infinite_rx loads its whole capture in the RX queue's setup) and its
  // start. True ends the start there: what was set up is released (ports
  // closed, kernel interfaces put back, the pool freed) and create fails
  // with an error that starts with kStartStopped and says where.
  static Result<std::unique_ptr<Dataplane>> create(const ConfigSpec& config,
                                                   const std::function<bool()>& stop_asked = {});
  static constexpr const char* kStartStopped = "start stopped";
  // Stops lcores still launched first (kDestroyWaitNs below).
  ~Dataplane();

  // Launches the data lcores; fails (nothing or part of them launched: stop
  // with stop_and_drain) when one is no lcore EAL can launch work on.
  Result<bool> start();
  // Instead of start(): one pass of the run-to-completion loop on the calling
  // thread (receive a burst on each port, schedule, transmit), for in-process
  // tests and the packet-path fuzzer, which need every packet's fate
  // synchronously; with two lcores a direction each, each one's pass in
  // turn. Pipelined, one pass of each lcore's loop in turn: every RX lcore's
  // hand-off to the rings, then every scheduler's take from them. Returns
  // false (and does nothing) once the data plane was started.
  bool run_once();
  // Stop receiving; lcores drain their queues until empty or until the drain
  // timeout, then exit. Waits for every data lcore to return, for at most
  // the drain timeout and kStuckLcoreGraceNs more of the lcore's own time
  // (not counting time it was given no CPU, up to kStarvedStopExtraNs more
  // by the clock): false (logged, naming
  // the lcores) when one did not, e.g. stuck inside a driver's TX call that
  // never returns. The data plane must then not be torn down (the lcore may
  // still be in a port's memory): the caller reports and exits; a
  // destructor run anyway waits for the lcore again, and aborts past
  // kDestroyWaitNs.
  // `cut_short`, asked every millisecond while the lcores drain: true ends
  // the drain at once (an operator's second stop signal), what is still
  // queued counted as shutdown_flush as at the timeout.
  bool stop_and_drain(const std::function<bool()>& cut_short = {});
  static constexpr uint64_t kStuckLcoreGraceNs = 2'000'000'000;
  // How much later than by the clock the stop gives up, at most, on an
  // lcore that was given no CPU while it drained (lcore_stall.h): within
  // the shipped unit's TimeoutStopSec (30 s) at the default drain timeout.
  static constexpr uint64_t kStarvedStopExtraNs = 10'000'000'000;
  // Destroying a data plane whose lcores still run (a stop above that gave
  // up, or none) stops them first, retrying for up to this long; past it the
  // process aborts rather than free what they use.
  static constexpr uint64_t kDestroyWaitNs = 60'000'000'000;

  // Sums every lcore's counters (safe while running; histograms only when stopped
  // are exact, while running they may be mid-update by a few samples).
  Totals read_totals(bool with_histograms) const;
  // A job slot's packets admitted and not yet sent or dropped (queued, in a
  // ring, pending at a port), summed over every lcore (any thread; while
  // lcores still admit to the slot the figure is already stale).
  int64_t job_in_flight(uint32_t slot) const;
  const Snapshot& snapshot() const;
  // Pull-burst telemetry of a job slot (any thread).
  JobTelemetry job_telemetry(uint32_t slot) const;
  uint64_t tsc_hz() const;
  SnapshotPublisher& publisher();
  const ConfigSpec& config() const;
  std::string describe_lcores() const;

  // Control thread, every 100 ms: reads every port's link (driver status, or
  // the kernel interface of an af_packet port), publishes changes to the data
  // lcores and, for a port going down, waits until no lcore touches it any
  // more; detaches an af_packet port whose interface is gone and probes it
  // again when the interface is back.
  void poll_links();
  std::array<PortLink, kPortCount> links() const;
  // Per egress port: whether its device has refused every packet for the
  // stall timeout and not taken one since (a peer that stopped reading, a
  // NIC that refuses all): its traffic is counted as tx_failed meanwhile.
  std::array<bool, kPortCount> ports_stalled() const;
  // Tests only: what poll_links does when an af_packet or af_xdp port's
  // kernel interface reports `iface_mtu` (below ports.<p>.mtu: the port is
  // short, its larger frames oversize, at RX and where they leave; 0 or the
  // configured MTU: not short), for ports that have no kernel interface
  // (ring vdevs), whose polls leave it as set here.
  void note_iface_mtu_for_testing(unsigned port, uint32_t iface_mtu);

  // Control thread, every tick: which data lcores have not finished a loop
  // iteration for kLcoreStuckNs (stuck in a driver call); logged when the
  // set changes. stuck_lcores(): their lcore ids, as of the last watch;
  // any_lcore_stuck(): whether there are any (no copy: every tick asks).
  void watch_lcores(uint64_t now_ns);
  std::vector<unsigned> stuck_lcores() const;
  bool any_lcore_stuck() const;
  static constexpr uint64_t kLcoreStuckNs = 1'000'000'000;

  struct Impl;

 private:
  explicit Dataplane(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace psgate
