// SPDX-License-Identifier: BSD-3-Clause
// TX: the NIC takes a burst; what left is counted per port and per job.
// Fast path: no allocation, no locks, no logging.
#include "dataplane/tx.h"

#include <rte_ethdev.h>

#include <type_traits>

#include "psgate/packet_meta.h"
#include "psgate/rx_guard.h"  // frame_over_mtu

namespace psgate {

namespace {

// Consecutive packets of one job: [first, end) of the burst, their bytes.
struct JobRun {
  uint32_t job;
  uint32_t first;
  uint32_t end;
  uint64_t bytes;
};

// Frames larger than the port carries now, while its kernel interface's MTU
// is below the configured one (EgressPort::max_untagged_frame): queued
// before the MTU went down, they passed the RX stage's check. The kernel
// would drop them unseen while psgate counted them sent; they are dropped
// here as oversize, counted per port and per job, and freed. They go to the
// front of the burst (the caller's no more: TxOutcome::gone); the rest keep
// their order behind them. Returns how many.
[[gnu::noinline]] unsigned drop_oversize_leaving(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts,
                                                 unsigned count, uint32_t max_untagged_frame, CountAdmitted admitted) {
  rte_mbuf* dropped[kMaxBurst];
  unsigned n_dropped = 0;
  const unsigned dir = direction_of_egress(egress.index);
  unsigned keep = count;  // pkts[keep, count): the frames kept so far, in order
  for (unsigned i = count; i-- > 0;) {
    rte_mbuf* m = pkts[i];
    if (!frame_over_mtu(m, max_untagged_frame, egress.one_dot1q_tag_room)) {
      pkts[--keep] = m;
      continue;
    }
    if (const uint32_t slot = packet_meta(m)->job_slot; slot != kNoJob) {
      // A cut-through burst is counted admitted here (tx.h): a drop after
      // admission, as a full class queue's.
      if (admitted == CountAdmitted::kYes) add_admitted_run(counters, dir, slot, 1, m->pkt_len);
      counters.jobs[slot].drops.inc();
    }
    dropped[n_dropped++] = m;
  }
  if (n_dropped == 0) return 0;
  for (unsigned i = 0; i < n_dropped; ++i) pkts[i] = dropped[i];  // gone: never read again
  counters.ports[egress.index].drops[kDropOversize].add(n_dropped);
  rte_pktmbuf_free_bulk(dropped, n_dropped);
  return n_dropped;
}

}  // namespace

// The mbufs' metadata is read before tx_burst because a driver may free a
// transmitted mbuf at once: one pass gathers the runs of consecutive packets
// of one job (per-job counters are added once per run) and, at the wire
// egress, each pull packet's worker.
TxOutcome tx_burst_counted(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts, unsigned count, uint64_t now,
                           CountAdmitted admitted) {
  // Once per burst: is the port short at all (almost never)?
  unsigned gone = 0;
  const uint32_t max_untagged_frame = egress.max_untagged_frame->load(std::memory_order_relaxed);
  if (max_untagged_frame < egress.configured_max_frame) [[unlikely]] {
    gone = drop_oversize_leaving(egress, counters, pkts, count, max_untagged_frame, admitted);
    pkts += gone;
    count -= gone;
  }
  uint32_t worker[kMaxBurst];
  JobRun runs[kMaxBurst];
  unsigned n_runs = 0;
  const bool measure = !egress.telemetry.empty();
  // The loop twice: with the worker reads (wire egress) and without (host
  // egress, whose packets no telemetry follows), so neither tests per packet
  // which one it is.
  auto gather = [&]<bool kMeasure>(std::bool_constant<kMeasure>) {
    // Not a slot's value, but kNoJob's: a burst that starts with unclassified
    // packets continues this empty run (first 0, no bytes yet), which is right.
    uint32_t job = kNoJob;
    uint32_t first = 0;
    uint64_t bytes = 0;
    for (unsigned i = 0; i < count; ++i) {
      const PacketMeta* meta = packet_meta(pkts[i]);
      const uint32_t slot = meta->job_slot;
      if (slot != job) {
        if (i != 0) runs[n_runs++] = JobRun{job, first, i, bytes};
        job = slot;
        first = i;
        bytes = 0;
      }
      bytes += pkts[i]->pkt_len;
      if constexpr (kMeasure) worker[i] = packet_worker(pkts[i]);  // the worker a pull packet goes to
    }
    if (count != 0) runs[n_runs++] = JobRun{job, first, count, bytes};
  };
  if (measure) {
    gather(std::true_type{});
  } else {
    gather(std::false_type{});
  }
  const unsigned dir = direction_of_egress(egress.index);  // a packet's direction is its ingress port's
  if (admitted == CountAdmitted::kYes) {
    // Before the port takes them: all of them were admitted, sent or not.
    for (unsigned r = 0; r < n_runs; ++r)
      add_admitted_run(counters, dir, runs[r].job, runs[r].end - runs[r].first, runs[r].bytes);
  }
  const unsigned sent = rte_eth_tx_burst(egress.port_id, egress.tx_queue, pkts, static_cast<uint16_t>(count));
  uint64_t bytes = 0;
  for (unsigned r = 0; r < n_runs; ++r) {
    JobRun run = runs[r];
    if (run.first >= sent) break;
    if (run.end > sent) {
      // The port took part of this run: count what it took, the run less
      // what is still here (what it took may be freed already).
      for (unsigned k = sent; k < run.end; ++k) run.bytes -= pkts[k]->pkt_len;
      run.end = sent;
    }
    bytes += run.bytes;
    if (run.job == kNoJob) continue;
    JobCounters& jc = counters.jobs[run.job];
    jc.sent_packets[dir].add(run.end - run.first);
    jc.sent_bytes[dir].add(run.bytes);
    if (!measure) continue;
    JobBurstState& tel = egress.telemetry[run.job];
    telemetry_on_tx(tel, now, run.bytes, egress.burst_gap_ticks);  // burst edges first, then this run's workers
    // Packets of a run all leave at `now`: a worker's later packets in it
    // change nothing, and a flow's segments come in trains.
    telemetry_saw_worker(tel, worker[run.first], now);
    for (unsigned k = run.first + 1; k < run.end; ++k) {
      if (worker[k] != worker[k - 1]) telemetry_saw_worker(tel, worker[k], now);
    }
  }
  PortCounters& pc = counters.ports[egress.index];
  pc.tx_packets.add(sent);
  pc.tx_bytes.add(bytes);
  return TxOutcome{sent, gone};
}

}  // namespace psgate
