// SPDX-License-Identifier: BSD-3-Clause
// Counter reader: sums every lcore's counters (control path, any thread).
#include <rte_ethdev.h>
#include <rte_mempool.h>

#include <atomic>

#include "dataplane/dataplane_impl.h"

namespace psgate {

Totals Dataplane::read_totals(bool with_histograms) const {
  const Impl& d = *impl_;
  Totals t;
  t.class_count = d.config.class_count;
  t.classes.resize(kPortCount * t.class_count);
  t.jobs.resize(d.config.max_jobs);
  for (const auto& lc : d.counters) {
    for (unsigned p = 0; p < kPortCount; ++p) {
      add_counters(t.ports[p], lc->ports[p]);
      for (unsigned c = 0; c < t.class_count; ++c) {
        ClassTotals& ct = t.classes[p * t.class_count + c];
        add_counters(ct, lc->cls(p, c));
        if (with_histograms) ct.sojourn.merge(lc->hist(p, c));
      }
    }
    add_counters(t.flow_cache, lc->flow_cache);
    for (size_t j = 0; j < t.jobs.size(); ++j) add_counters(t.jobs[j], lc->jobs[j]);
  }
  // Received again, last: a packet counted sent or dropped above was counted
  // received before, by its RX lcore (rx_poll counts a burst first; a
  // scheduler lcore sees it only after the ring hand-off), so a live read
  // never shows more packets out than in. Read once, lcore by lcore, received
  // first, a busy pipelined gateway showed thousands more (in_flight < 0).
  std::atomic_thread_fence(std::memory_order_acquire);
  for (unsigned p = 0; p < kPortCount; ++p) {
    uint64_t packets = 0, bytes = 0;
    for (const auto& lc : d.counters) {
      packets += lc->ports[p].rx_packets.get();
      bytes += lc->ports[p].rx_bytes.get();
    }
    t.ports[p].rx_packets = packets;
    t.ports[p].rx_bytes = bytes;
  }
  if (d.pool) {
    t.mbufs = d.pool->size;
    t.mbufs_in_use = rte_mempool_in_use_count(d.pool);
  }
  // The link mutex keeps a port from being detached or probed again
  // (link_watch.cc) while its driver counters are read.
  std::lock_guard lock(impl_->link_mutex);
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortWatch& w = d.links[p];
    t.ports[p].link = PortLink{w.up, w.since_unix_ns, w.changes, w.detail};
    // Devices detached before (af_packet's interface replaced) and the live one.
    t.ports[p].nic = w.nic_detached;
    rte_eth_stats st{};
    if (!w.detached && rte_eth_stats_get(d.shared.port_ids[p], &st) == 0) {
#define PSGATE_NIC_FROM_ETH_STATS(field, ...) t.ports[p].nic.field += st.field;
      PSGATE_NIC_COUNTERS(PSGATE_NIC_FROM_ETH_STATS)
#undef PSGATE_NIC_FROM_ETH_STATS
    }
  }
  return t;
}

int64_t Dataplane::job_in_flight(uint32_t slot) const {
  JobTotals t;
  for (const auto& lc : impl_->counters)
    if (slot < lc->jobs.size()) add_counters(t, lc->jobs[slot]);
  const uint64_t admitted = t.admitted_packets[kPush] + t.admitted_packets[kPull];
  const uint64_t left = t.sent_packets[kPush] + t.sent_packets[kPull] + t.drops;
  return static_cast<int64_t>(admitted - left);
}

}  // namespace psgate
