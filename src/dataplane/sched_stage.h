// SPDX-License-Identifier: BSD-3-Clause
// Scheduler stage (sched_stage.cc): class FIFOs in, shaped strict-priority
// order out, DSCP/CE rewritten on the way to TX (tx.h).
#pragma once

#include <cstdint>

#include "dataplane/lcore_context.h"

namespace psgate {

// The tail of both data paths' policing of network control (class 0 over
// its port's limit, ControlLimit::police: rx_stage.cc's mixed burst,
// sched_stage.cc's class 0 ring take): the `n` packets it dropped counted as
// control_policed on the port and freed in one bulk. Called only when it
// dropped some. (An array and count of the caller's own: held in a struct,
// the count went to memory at each drop.)
inline void drop_policed_control(const EgressPort& egress, LcoreCounters& counters, rte_mbuf** dropped, unsigned n) {
  counters.ports[egress.index].drops[kDropControlPoliced].add(n);
  rte_pktmbuf_free_bulk(dropped, n);
}

// Enqueues packets into their class FIFOs (ECN/DSCP marks, re-rank settling).
void sched_accept_burst(DataplaneShared& shared, EgressPort& egress, LcoreCounters& counters, rte_mbuf* const* pkts,
                        unsigned n);
// Run-to-completion only (the caller owns `egress`): when the port's
// scheduler holds nothing and would send this burst on unchanged
// (PortScheduler::passes_through), transmits it at once in the order strict
// priority gives, with every counter, mark and sojourn record the FIFO path
// would have made, the jobs' admitted counters included (the RX stage leaves
// those to it, tx.h: CountAdmitted), and returns true. Otherwise does nothing
// and returns false: the caller counts the burst admitted
// (rx_stage.cc) and enqueues with sched_accept_burst. `cls` is each packet's
// class (an array of kMaxBurst, read whole), `present` the mask of those classes, `bytes` the packets' pkt_len
// sum; `rx_tsc` the burst's arrival time (PacketMeta::rx_tsc).
bool sched_cut_through(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts, const uint8_t* cls, unsigned n,
                       uint64_t present, uint64_t bytes, uint64_t rx_tsc);
// Takes up to a burst from every RX lcore ring that has news and requests
// the packets' mbuf lines; sched_accept_pulled then takes them in.
void sched_pull_rings(const DataplaneShared& shared, SchedContext& ctx);
// Puts what sched_pull_rings took into the class FIFOs. With `pass_idle`, a
// port whose scheduler holds nothing and would send the packets on unchanged
// (PortScheduler::passes_through) gets them at once instead, in the order its
// FIFOs would give them (strict priority, arrival order within a class), with
// every counter, mark and sojourn record the FIFO path makes; the rest of a
// burst the port takes only in part waits pending, and the bursts not yet
// tried go into the FIFOs. `now`: the loop iteration's clock.
void sched_accept_pulled(DataplaneShared& shared, SchedContext& ctx, uint64_t now, bool pass_idle);
// Both at once: moves every ready packet from the rings into the class FIFOs.
void sched_drain_rings(DataplaneShared& shared, SchedContext& ctx);
// Retries pending packets, then dequeues and transmits at most one burst.
// Returns how many packets it dequeued (0 while earlier ones still wait).
unsigned sched_transmit(DataplaneShared& shared, EgressPort& egress, LcoreCounters& counters, uint64_t now);
// Counts and frees whatever is still queued or pending: at the drain timeout
// (pending as tx_failed, queued as shutdown_flush), or when the link is down
// (both as link_down).
void sched_flush(EgressPort& egress, LcoreCounters& counters, DropReason pending_reason = kDropTxFailed,
                 DropReason queued_reason = kDropShutdown);
bool sched_idle(const EgressPort& egress);
// Applies changed shaper/class parameters of a new snapshot (control changes only).
void sched_apply_params(EgressPort& egress, const PortLive& params, uint64_t now);
// Marks the jobs new to their slot in a new snapshot (settle_job_class keeps
// them behind the default class's earlier packets). `no_rings`: this lcore
// also receives (run-to-completion), so the default queue holds exactly the
// packets classified before the snapshot: the hold's mark is its tail now.
void sched_sync_slots(EgressPort& egress, const Snapshot& snap, bool no_rings);
// Ends the holds of sched_sync_slots that are over, moving the held jobs'
// packets to their classes (once per loop iteration while any is held).
void sched_release_holds(const DataplaneShared& shared, const SchedContext& ctx, EgressPort& egress,
                         LcoreCounters& counters);

}  // namespace psgate
