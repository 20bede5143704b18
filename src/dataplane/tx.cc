// SPDX-License-Identifier: BSD-3-Clause
// TX: the NIC takes a burst; what left is counted per port and per job.
// Fast path: no allocation, no locks, no logging.
#include "dataplane/tx.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include "psgate/mbuf_rewrite.h"
#include "psgate/packet_meta.h"

namespace psgate {

// The mbufs' metadata is read before tx_burst because a driver may free a
// transmitted mbuf at once.
unsigned tx_burst_counted(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts, unsigned count) {
  uint32_t slot[kMaxBurst];
  uint32_t len[kMaxBurst];
  uint32_t worker[kMaxBurst];
  const bool measure = !egress.telemetry.empty();
  for (unsigned i = 0; i < count; ++i) {
    const PacketMeta* meta = packet_meta(pkts[i]);
    slot[i] = meta->job_slot;
    len[i] = pkts[i]->pkt_len;
    // The worker a pull packet goes to: the low 32 bits of its destination
    // address (IPv4 at offset 16 of the header, IPv6's last word at 36).
    if (measure && slot[i] != kNoJob && meta->ip_version != 0) {
      worker[i] = read_u32_at(pkts[i], meta->l3_offset + (meta->ip_version == 4 ? 16u : 36u));
    } else {
      worker[i] = 0;
    }
  }
  const unsigned sent = rte_eth_tx_burst(egress.port_id, egress.tx_queue, pkts, static_cast<uint16_t>(count));
  uint64_t bytes = 0;
  const unsigned dir = direction_of_egress(egress.index);
  const uint64_t now = measure && sent ? rte_rdtsc() : 0;
  // Per job, by runs of consecutive packets of the same job (all sent at `now`).
  for (unsigned i = 0; i < sent;) {
    const uint32_t job = slot[i];
    const unsigned first = i;
    uint64_t run_bytes = 0;
    do {
      run_bytes += len[i++];
    } while (i < sent && slot[i] == job);
    bytes += run_bytes;
    if (job == kNoJob) continue;
    JobCounters& jc = counters.jobs[job];
    jc.sent_packets[dir].add(i - first);
    jc.sent_bytes[dir].add(run_bytes);
    if (!measure) continue;
    JobBurstState& tel = egress.telemetry[job];
    telemetry_on_tx(tel, now, run_bytes, egress.burst_gap_ticks);  // burst edges first, then this run's workers
    for (unsigned k = first; k < i; ++k) telemetry_saw_worker(tel, worker[k], now);
  }
  PortCounters& pc = counters.ports[egress.index];
  pc.tx_packets.add(sent);
  pc.tx_bytes.add(bytes);
  return sent;
}

}  // namespace psgate
