// SPDX-License-Identifier: BSD-3-Clause
// TX (tx.cc): hands a burst to the NIC and counts what left, per port and
// per job, feeding the pull-burst telemetry on the way. Called once or twice
// per scheduler burst (retry of pending packets, then the new burst).
#pragma once

#include "dataplane/lcore_context.h"
#include "psgate/packet_meta.h"  // kNoJob

namespace psgate {

// Whether tx_burst_counted also counts the burst's packets as admitted per
// job (JobCounters::admitted_*): only for a burst the RX stage hands
// straight to the port (sched_cut_through), which reaches tx ordered by
// class, so a job's packets form one run there even when they arrived
// interleaved with other jobs'. Every other burst was counted at admission.
enum class CountAdmitted : bool { kNo = false, kYes = true };

// Adds a run of one job's admitted packets (`job_slot`; kNoJob: none) to its
// counters: the one place admission is counted, whether at tx (the
// cut-through) or at the hand-off (rx_stage.cc).
inline void add_admitted_run(LcoreCounters& counters, unsigned dir, uint32_t job_slot, uint64_t packets,
                             uint64_t bytes) {
  if (job_slot == kNoJob) return;
  JobCounters& jc = counters.jobs[job_slot];
  jc.admitted_packets[dir].add(packets);
  jc.admitted_bytes[dir].add(bytes);
}

// What tx_burst_counted did with a burst: the frames the port took (`sent`)
// and, apart from them, the frames it dropped as oversize (counted and freed)
// while the port's kernel interface has a lower MTU than configured
// (EgressPort::max_untagged_frame). Only `sent` says anything about the
// device: an oversize drop must not end a stall, restart the wait for a
// refused burst or count as the probe's packets taken (sched_stage.cc).
// pkts[0, gone()) are out of the caller's hands either way.
struct TxOutcome {
  unsigned sent;
  unsigned oversize;
  unsigned gone() const { return sent + oversize; }
};

// Transmits `count` (at most kMaxBurst) mbufs starting at `pkts` on
// `egress`; counts what left, which the telemetry takes as sent at `now`
// (the loop iteration's clock), and the oversize drops (moved to the front of
// the burst, ahead of what the port took): pkts[0, gone()) are gone, the
// rest, in order, are still the caller's.
TxOutcome tx_burst_counted(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts, unsigned count, uint64_t now,
                           CountAdmitted admitted = CountAdmitted::kNo);

}  // namespace psgate
