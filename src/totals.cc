// Counter reader: sums every lcore's counters (control path, any thread).
#include <rte_ethdev.h>

#include "psgate/dataplane_impl.h"

namespace psgate {

Totals Dataplane::read_totals(bool with_histograms) const {
  const Impl& d = *impl_;
  Totals t;
  t.class_count = d.config.class_count;
  t.classes.resize(kPortCount * t.class_count);
  t.jobs.resize(d.config.max_jobs);
  for (const auto& lc : d.counters) {
    for (unsigned p = 0; p < kPortCount; ++p) {
      const PortCounters& pc = lc->ports[p];
      PortTotals& pt = t.ports[p];
      pt.rx_packets += pc.rx_packets.get();
      pt.rx_bytes += pc.rx_bytes.get();
      pt.rx_malformed += pc.rx_malformed.get();
      pt.rx_network_control += pc.rx_network_control.get();
      pt.rx_unclassified += pc.rx_unclassified.get();
      pt.tx_packets += pc.tx_packets.get();
      pt.tx_bytes += pc.tx_bytes.get();
      for (unsigned r = 0; r < kDropReasonCount; ++r) pt.drops[r] += pc.drops[r].get();
      pt.rerank_migrations += pc.rerank_migrations.get();
      pt.rerank_deferred += pc.rerank_deferred.get();
      for (unsigned c = 0; c < t.class_count; ++c) {
        const ClassCounters& cc = lc->classes[p * t.class_count + c];
        ClassTotals& ct = t.classes[p * t.class_count + c];
        ct.enqueued_packets += cc.enqueued_packets.get();
        ct.enqueued_bytes += cc.enqueued_bytes.get();
        ct.dequeued_packets += cc.dequeued_packets.get();
        ct.dequeued_bytes += cc.dequeued_bytes.get();
        ct.drop_queue_full += cc.drop_queue_full.get();
        ct.drop_ring_full += cc.drop_ring_full.get();
        ct.ecn_marked += cc.ecn_marked.get();
        ct.dscp_remarked += cc.dscp_remarked.get();
        ct.migrated_in += cc.migrated_in.get();
        ct.migrated_out += cc.migrated_out.get();
        if (with_histograms) ct.sojourn.merge(lc->sojourn[p * t.class_count + c]);
      }
    }
    t.flow_cache.hits += lc->flow_cache.hits.get();
    t.flow_cache.misses += lc->flow_cache.misses.get();
    t.flow_cache.evictions += lc->flow_cache.evictions.get();
    for (size_t j = 0; j < t.jobs.size(); ++j) {
      const JobCounters& jc = lc->jobs[j];
      JobTotals& jt = t.jobs[j];
      for (unsigned dir = 0; dir < 2; ++dir) {
        jt.admitted_packets[dir] += jc.admitted_packets[dir].get();
        jt.admitted_bytes[dir] += jc.admitted_bytes[dir].get();
        jt.sent_packets[dir] += jc.sent_packets[dir].get();
        jt.sent_bytes[dir] += jc.sent_bytes[dir].get();
      }
      jt.policed += jc.policed.get();
      jt.drops += jc.drops.get();
    }
  }
  // The link mutex keeps a port from being detached or probed again
  // (link_watch.cc) while its driver counters are read.
  std::lock_guard lock(impl_->link_mutex);
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortWatch& w = d.links[p];
    t.ports[p].link = PortLink{w.up, w.since_unix_ns, w.changes, w.detail};
    rte_eth_stats st{};
    if (!w.detached && rte_eth_stats_get(d.shared.port_ids[p], &st) == 0) {
      t.ports[p].nic_imissed = st.imissed;
      t.ports[p].nic_ierrors = st.ierrors;
      t.ports[p].nic_rx_nombuf = st.rx_nombuf;
      t.ports[p].nic_oerrors = st.oerrors;
    }
  }
  return t;
}

}  // namespace psgate
