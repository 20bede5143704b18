// SPDX-License-Identifier: BSD-3-Clause
// Scheduler stage: class FIFOs in, shaped strict-priority order out.
// Fast path: no allocation, no locks, no logging.
#include "dataplane/sched_stage.h"

#include <rte_prefetch.h>

#include <algorithm>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "dataplane/run_total.h"
#include "dataplane/tx.h"
#include "psgate/mbuf_rewrite.h"
#include "psgate/packet_meta.h"

namespace psgate {

namespace {

inline JobCounters* job_counters(LcoreCounters& counters, uint32_t slot) {
  return slot == kNoJob ? nullptr : &counters.jobs[slot];
}

inline uint64_t ticks_to_ns(const DataplaneShared& shared, uint64_t ticks) {
  return sojourn_ticks_to_ns(ticks, shared.ns_per_tick_q32, shared.tsc_hz);
}

// Counts the packets the NIC has not taken under `reason` and frees them.
// They already left their class FIFO (counted as dequeued there).
void drop_pending(EgressPort& egress, LcoreCounters& counters, DropReason reason) {
  if (egress.pending_count == 0) return;
  rte_mbuf** pkts = egress.pending.data() + egress.pending_head;
  for (unsigned i = 0; i < egress.pending_count; ++i) {
    if (JobCounters* jc = job_counters(counters, packet_meta(pkts[i])->job_slot)) jc->drops.inc();
  }
  counters.ports[egress.index].drops[reason].add(egress.pending_count);
  rte_pktmbuf_free_bulk(pkts, egress.pending_count);
  egress.pending_count = 0;
  egress.pending_head = 0;
}

// DSCP of the class a packet leaves from, and CE as decided on its arrival,
// for the classes that rewrite (callers run it in a separate pass, only on
// ports whose classes rewrite something).
inline void rewrite_leaving(EgressPort& egress, LcoreCounters& counters, rte_mbuf* m, unsigned cls) {
  const PacketMeta* meta = packet_meta(m);
  if (!(egress.rewrite_classes >> cls & 1) || meta->ip_version == 0) return;
  const unsigned changed = rewrite_traffic_class_mbuf(m, meta->l3_offset, static_cast<L3Kind>(meta->ip_version),
                                                      egress.actions[cls].dscp, meta->mark_ce);
  ClassCounters& cc = counters.cls(egress.index, cls);
  if (changed & kRewroteDscp) cc.dscp_remarked.inc();
  if (changed & kMarkedCe) cc.ecn_marked.inc();
}

// The only writer of egress.stalled: health reads when the stall began.
inline void set_stalled(EgressPort& egress, bool stalled, uint64_t now) {
  if (egress.stalled == stalled) return;
  egress.stalled = stalled;
  egress.stalled_since_tsc.store(stalled ? (now | 1) : 0, std::memory_order_relaxed);
}

// After a tx_burst of the `n` packets at the front of egress.pending: what the
// port did not take (and tx did not drop as oversize) stays pending, retried
// before anything new is dequeued. Only what the port took ends a stall.
void keep_unsent(EgressPort& egress, LcoreCounters& counters, unsigned n, TxOutcome tx, uint64_t now) {
  egress.pending_head = tx.gone();
  egress.pending_count = n - tx.gone();
  egress.head_refusals = 0;  // a new head (send_past_refused_head)
  egress.probe_at = 1;
  if (tx.sent) set_stalled(egress, false, now);
  if (egress.pending_count == 0) return;
  egress.pending_since_tsc = now;
  egress.offered_tsc = now;
  if (egress.stalled) [[unlikely]] {
    // Stalled, and the port took nothing. A dead NIC refuses the packets
    // behind the head too; a port stalled by one packet it refuses (and
    // nothing else to send for the stall time) takes them: offered once,
    // they end the stall, and the head is retried as any refused head is
    // (send_past_refused_head: one packet out of order, as its probe).
    rte_mbuf** p = egress.pending.data() + egress.pending_head;
    if (egress.pending_count >= 2) {
      const TxOutcome behind = tx_burst_counted(egress, counters, p + 1, egress.pending_count - 1, now);
      if (const unsigned gone = behind.gone()) {
        std::memmove(p + 1, p + 1 + gone, (egress.pending_count - 1 - gone) * sizeof(*p));
        egress.pending_count -= gone;
      }
      if (behind.sent) {
        set_stalled(egress, false, now);
        return;
      }
    }
    drop_pending(egress, counters, kDropTxFailed);
  }
}

// Packets of class `c` that pass through its empty FIFO at once (the
// cut-throughs): counted in and out, so enqueued - dequeued stays the depth.
inline void count_through_fifo(LcoreCounters& counters, unsigned port, unsigned c, uint64_t packets, uint64_t bytes) {
  ClassCounters& cc = counters.cls(port, c);
  cc.enqueued_packets.add(packets);
  cc.enqueued_bytes.add(bytes);
  cc.dequeued_packets.add(packets);
  cc.dequeued_bytes.add(bytes);
}

// CE on a run of class `c` arriving at its empty FIFO, decided on the depth
// each would have found: the packets of the run ahead of it.
inline void mark_ce_in_run(const EgressPort& egress, unsigned c, rte_mbuf* const* run, unsigned count) {
  const uint32_t threshold = egress.actions[c].ecn_threshold;
  if (threshold != 0) {
    for (unsigned k = threshold; k < count; ++k) packet_meta(run[k])->mark_ce = 1;
  }
}

}  // namespace

// A job's packets all sit in one class. When a packet arrives for another
// class (the job was re-ranked) while some are still queued, they move with
// it, in order, so the new packet queues behind them: no reordering, no drop.
// If the new class has no room for them, the job stays where it is until its
// old queue drains.
//
// A job new to its slot (jobs.add) may take over flows that were
// unclassified until now, whose earlier packets wait in the default class:
// its packets join them there until those have left, and then move on as a
// re-rank does. Without it a flow's first classified packets would overtake
// its last unclassified ones. sched_release_holds takes the mark (the
// default queue's tail) once everything the RX lcores classified before the
// job arrived is in that queue; until then the job is held. The wait ends
// when the head passes the mark or the queue is empty (everything after the
// mark joined behind the job), and lasts at most dataplane.takeover_hold
// from the job's arrival in the snapshot (sched_sync_slots): a default class
// starved by higher ones must not hold a new job with it (its flows' earlier
// packets wait there anyway; a new flow of the job would wait for nothing).
// sched_release_holds also ends the hold when the job sends nothing more.
[[gnu::noinline]] static bool held_in_default(EgressPort& egress, uint32_t slot) {
  EgressPort::JobQueue& jq = egress.job_queue[slot];
  EgressPort::Pin& pin = egress.pins[slot];
  const unsigned d = egress.default_class;
  const uint64_t now = rte_rdtsc();
  // The class the hold ends in (pin.target) is the one this lcore's
  // snapshot gives the job (sched_sync_slots sets it at every snapshot), not
  // an arriving packet's: one classified under an older snapshot would take
  // the job back to the class it was re-ranked out of.
  if (now >= pin.until_tsc) {
    jq.pin = 0;
    return false;
  }
  if (jq.pin == EgressPort::kPinArmed) return true;
  // Still ahead: the head has not reached the mark (a migration out of the
  // class moves the tail back, so the mark may lie past it: the empty queue
  // then ends the wait).
  const uint32_t ahead = pin.mark - egress.sched.head_position(d);
  if (egress.sched.depth(d) != 0 && ahead != 0 && ahead <= egress.sched.capacity(d)) return true;
  jq.pin = 0;
  return false;
}

// `arriving`: whether a packet of the job is to be queued in `cls` behind
// the moved ones (1), or none is (0: a hold ending on its own).
inline unsigned settle_job_class(EgressPort& egress, LcoreCounters& counters, uint32_t slot, unsigned cls,
                                 unsigned arriving = 1) {
  EgressPort::JobQueue& jq = egress.job_queue[slot];
  if (jq.pin != 0) [[unlikely]] {
    if (held_in_default(egress, slot)) {
      // Its packets queued elsewhere (the slot's previous job's) stay where
      // they are; the count covers both, as for any job.
      jq.cls = static_cast<uint8_t>(egress.default_class);
      return egress.default_class;
    }
  }
  if (jq.queued == 0 || jq.cls == cls) {
    jq.cls = static_cast<uint8_t>(cls);
    return cls;
  }
  uint32_t moved = 0;
  PortCounters& pc = counters.ports[egress.index];
  // All jq.queued of them are in jq.cls: whether the new class has room is
  // known without migrate's scan of the old queue, which would otherwise run
  // for every packet of the job until that queue drains (O(depth) each).
  // Room for them and for the packet that brought the re-rank, which is
  // queued behind them: moved into exactly the room they need, that packet
  // would be dropped as queue_full, where staying queues it in the old class.
  const bool room = egress.sched.depth(cls) + jq.queued + arriving <= egress.sched.capacity(cls);
  if (room && egress.sched.migrate(jq.cls, cls, slot, moved)) {
    counters.cls(egress.index, jq.cls).migrated_out.add(moved);
    counters.cls(egress.index, cls).migrated_in.add(moved);
    pc.rerank_migrations.inc();
    jq.cls = static_cast<uint8_t>(cls);
    return cls;
  }
  pc.rerank_deferred.inc();
  return jq.cls;
}

void sched_accept_burst(DataplaneShared&, EgressPort& egress, LcoreCounters& counters, rte_mbuf* const* pkts,
                        unsigned n) {
  // Local copies of what the loop reads: stores through the mbufs' metadata
  // would otherwise make the compiler reload each vector's data pointer.
  EgressPort::JobQueue* const job_queue = egress.job_queue.data();
  const ClassActions* const actions = egress.actions.data();
  const unsigned port = egress.index;
  RunTotal run;
  auto flush_class = [&](const RunTotal& r) {
    ClassCounters& cc = counters.cls(port, r.key);
    cc.enqueued_packets.add(r.packets);
    cc.enqueued_bytes.add(r.bytes);
  };
  // Packets a full class queue turned away: counted as they come, freed
  // together at the end (one mempool operation instead of one per packet,
  // which matters when a shaper holds back most of an overload).
  rte_mbuf* dropped[kMaxBurst];
  unsigned n_dropped = 0;
  if (!egress.link_up) [[unlikely]] {
    // Nowhere to send them: count per port and per job, free in bulk.
    for (unsigned i = 0; i < n; ++i) {
      if (JobCounters* jc = job_counters(counters, packet_meta(pkts[i])->job_slot)) jc->drops.inc();
      dropped[i] = pkts[i];
    }
    counters.ports[port].drops[kDropLinkDown].add(n);
    rte_pktmbuf_free_bulk(dropped, n);
    return;
  }
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = pkts[i];
    PacketMeta* meta = packet_meta(m);
    const uint32_t slot = meta->job_slot;
    unsigned cls = meta->cls;
    if (slot != kNoJob) {
      cls = settle_job_class(egress, counters, slot, cls);
      meta->cls = static_cast<uint8_t>(cls);
    }
    const uint32_t len = m->pkt_len;
    uint32_t depth_before;
    if (!egress.sched.enqueue(cls, m, len, slot, depth_before)) {
      counters.cls(port, cls).drop_queue_full.inc();
      if (JobCounters* jc = job_counters(counters, slot)) jc->drops.inc();
      dropped[n_dropped++] = m;
      continue;
    }
    run_add(run, cls, len, flush_class);
    if (slot != kNoJob) ++job_queue[slot].queued;

    // CE is decided on the depth the packet found on arrival (as RED and
    // DCTCP's switches do: a queue of T packets ahead marks at threshold T)
    // and written when it leaves (sched_transmit), with the DSCP of the class
    // it actually leaves from: a re-rank may still move it.
    // (RX cleared the mark.)
    const uint32_t threshold = actions[cls].ecn_threshold;
    if (threshold != 0 && depth_before >= threshold) meta->mark_ce = 1;
  }
  if (run.packets) flush_class(run);
  if (n_dropped) {
    counters.ports[port].drops[kDropQueueFull].add(n_dropped);
    rte_pktmbuf_free_bulk(dropped, n_dropped);
  }
}

namespace {

// Pipelined: the network-control packets just taken from an RX lcore's class
// 0 ring over the port's limit are dropped (control_limit.h); returns how
// many are kept, at the front of `pkts` in their order. `now` is read for the
// first such take of a pull (0 until then).
[[gnu::noinline]] unsigned police_control_pulled(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts,
                                                 unsigned n, uint64_t& now) {
  if (now == 0) now = rte_rdtsc();
  rte_mbuf* dropped[kMaxBurst];
  unsigned n_dropped = 0;
  const unsigned kept = egress.control.police(
      pkts, n, now, [](const rte_mbuf* m) { return m->pkt_len; }, dropped, n_dropped);
  if (n_dropped) drop_policed_control(egress, counters, dropped, n_dropped);
  return kept;
}

}  // namespace

void sched_pull_rings(const DataplaneShared& shared, SchedContext& ctx) {
  const unsigned classes = shared.class_count;
  uint64_t now = 0;  // read once, for the first class 0 take that is policed
  rte_mbuf** const pulled = ctx.pulled.data();
  uint32_t total = 0;
  unsigned runs = 0;
  for (EgressPort* egress : ctx.egress) {
    const uint32_t port_start = total;
    for (size_t r = 0; r < ctx.rx_rings.size(); ++r) {
      const RingPosts& posts = (*ctx.rx_posts[r])[egress->index];
      const size_t base = (r * kPortCount + egress->index) * classes;
      rte_ring* const* port_rings = ctx.rx_rings[r]->data() + egress->index * classes;
      uint32_t* consumed = ctx.consumed.data() + base;
      for (unsigned cls = 0; cls < classes; ++cls) {
        // Relaxed: this only says whether to look; the dequeue acquires the
        // ring's own prod.tail before it reads the slots.
        if (posts.tail[cls].load(std::memory_order_relaxed) == consumed[cls]) continue;
        unsigned n =
            rte_ring_sc_dequeue_burst(port_rings[cls], reinterpret_cast<void**>(pulled + total), shared.burst, nullptr);
        if (n == 0) continue;
        consumed[cls] += n;  // as the ring's cons.head (single consumer)
        if (cls == 0 && egress->control.on) [[unlikely]] {
          n = police_control_pulled(*egress, *ctx.counters, pulled + total, n, now);
          if (n == 0) continue;
        }
        // The mbufs were last written on the RX lcore's CPU: request the two
        // lines accept reads (length, metadata) now, used after transmit.
        for (unsigned i = 0; i < n; ++i) {
          rte_prefetch0(pulled[total + i]);
          rte_prefetch0(packet_meta(pulled[total + i]));
        }
        ctx.pulled_runs[runs++] = {egress, total, n, cls};
        total += n;
      }
    }
    ctx.pulled_for[egress->index] = total - port_start;
  }
  ctx.n_pulled_runs = runs;
}

namespace {

// The pass-through of sched_accept_pulled for one port's runs, [first, end)
// of ctx.pulled_runs (classes `present`, `total` packets). Returns false, having
// done nothing, when the FIFO path must take them.
//
// With nothing queued, the FIFOs would take the runs in the order pulled and
// strict priority would give them back class by class, each class's packets
// in the order pulled: this sends them in that order. One case differs, a job
// whose class changed while the take was under way: its packets pulled from
// the old class's ring leave there (with that class's DSCP), where the FIFO
// path would have moved them into the new class ahead of the job's new
// packets (settle_job_class). Either way a flow keeps its order: an RX lcore
// moves a job to another ring only once the scheduler has taken its last
// packet from the old one (RxContext::RingStick), and the old ring's packets
// are either in an earlier take or, when the new class is lower, earlier in
// this one. Different RX lcores carry different flows.
bool pass_pulled(DataplaneShared& shared, SchedContext& ctx, EgressPort& egress, unsigned first, unsigned end,
                 uint64_t present, uint32_t total, uint64_t now) {
  if (!egress.link_up || egress.pending_count != 0 || !egress.sched.passes_through(present, total)) return false;
  LcoreCounters& counters = *ctx.counters;
  const SchedContext::PulledRun* runs = ctx.pulled_runs.data();
  rte_mbuf* const* pulled = ctx.pulled.data();
  rte_mbuf** out = ctx.ordered.data();
  struct Segment {  // one class's packets in `out`: [previous end, end)
    uint32_t end;
    uint32_t cls;
  };
  Segment seg[64];  // classes fit a uint64_t mask
  unsigned n_seg = 0;
  uint32_t at = 0;
  for (uint64_t p = present; p != 0; p &= p - 1) {
    const unsigned c = static_cast<unsigned>(__builtin_ctzll(p));
    const uint32_t seg_start = at;
    for (unsigned r = first; r < end; ++r) {
      if (runs[r].cls != c) continue;
      rte_mbuf* const* in = pulled + runs[r].start;
      for (uint32_t i = 0; i < runs[r].n; ++i) out[at++] = in[i];
    }
    mark_ce_in_run(egress, c, out + seg_start, at - seg_start);  // the class's packets of this take
    seg[n_seg++] = {at, c};
  }
  // Packets [from, to) of `out` leave (or wait pending): through their class
  // FIFO as far as the counters are concerned (enqueued and dequeued at
  // once), their sojourn recorded as sched_transmit records it (one record
  // per run of one RX burst: one timestamp), DSCP and CE written. Done
  // before the port is handed them, never after: a driver may free a sent
  // mbuf at once, and keep_unsent may drop the rest (tx.cc reads first too).
  const unsigned port = egress.index;
  unsigned si = 0;  // the segment of `from`
  auto leave = [&](uint32_t from, uint32_t to) {
    while (from < to) {
      while (from >= seg[si].end) ++si;
      const unsigned c = seg[si].cls;
      const uint32_t stop = std::min(seg[si].end, to);
      LatencyHistogram& hist = counters.hist(port, c);
      uint64_t bytes = 0;
      uint64_t soj_tsc = packet_meta(out[from])->rx_tsc;
      uint64_t soj_count = 0;
      for (uint32_t k = from; k < stop; ++k) {
        bytes += out[k]->pkt_len;
        const uint64_t t = packet_meta(out[k])->rx_tsc;
        if (t != soj_tsc) {
          hist.record(ticks_to_ns(shared, now - soj_tsc), soj_count);
          soj_tsc = t;
          soj_count = 0;
        }
        ++soj_count;
      }
      hist.record(ticks_to_ns(shared, now - soj_tsc), soj_count);
      count_through_fifo(counters, port, c, stop - from, bytes);
      if (egress.rewrite_classes >> c & 1) {
        for (uint32_t k = from; k < stop; ++k) rewrite_leaving(egress, counters, out[k], c);
      }
      from = stop;
    }
  };
  // In bursts, as sched_transmit dequeues and sends them. A burst the port
  // does not take whole keeps its rest pending (retried before anything
  // else, keep_unsent's rule), and ends the pass.
  uint32_t done = 0;  // sent or pending: out of the FIFOs' reckoning
  while (done < total) {
    const unsigned n = std::min<uint32_t>(total - done, shared.burst);
    rte_mbuf** burst = out + done;
    leave(done, done + n);
    const TxOutcome took = tx_burst_counted(egress, counters, burst, n, now);
    done += n;
    if (took.gone() < n) {
      std::copy(burst + took.gone(), burst + n, egress.pending.data() + took.gone());  // where keep_unsent keeps them
      keep_unsent(egress, counters, n, took, now);
      break;
    }
    if (took.sent) set_stalled(egress, false, now);
  }
  // The bursts not tried wait in their class FIFOs, behind the pending rest
  // and ahead of anything later of their class, for the FIFO path
  // (transmit_pulled sends as many bursts as are left).
  uint32_t start = 0;
  for (unsigned s = 0; s < n_seg; start = seg[s].end, ++s) {
    for (uint32_t from = std::max(start, done); from < seg[s].end; from += shared.burst) {
      sched_accept_burst(shared, egress, counters, out + from, std::min<uint32_t>(seg[s].end - from, shared.burst));
    }
  }
  ctx.pulled_for[port] = total - done;
  return true;
}

}  // namespace

void sched_accept_pulled(DataplaneShared& shared, SchedContext& ctx, uint64_t now, bool pass_idle) {
  // Port by port (sched_pull_rings takes each port's runs together), each
  // port's in the order the rings were read: a re-ranked job's packets from
  // its old ring, read before the RX lcore switched it
  // (RxContext::RingStick), are accepted before any from its new ring.
  const SchedContext::PulledRun* runs = ctx.pulled_runs.data();
  for (unsigned i = 0; i < ctx.n_pulled_runs;) {
    EgressPort& egress = *runs[i].egress;
    unsigned end = i;
    uint64_t present = 0;
    for (; end < ctx.n_pulled_runs && runs[end].egress == &egress; ++end) present |= uint64_t{1} << runs[end].cls;
    if (!pass_idle || !pass_pulled(shared, ctx, egress, i, end, present, ctx.pulled_for[egress.index], now)) {
      for (; i < end; ++i)
        sched_accept_burst(shared, egress, *ctx.counters, ctx.pulled.data() + runs[i].start, runs[i].n);
    }
    i = end;
  }
  ctx.n_pulled_runs = 0;
}

void sched_drain_rings(DataplaneShared& shared, SchedContext& ctx) {
  sched_pull_rings(shared, ctx);
  sched_accept_pulled(shared, ctx, 0, false);
}

namespace {

// Up to `max` packets from the port's scheduler into `out`: counted as
// dequeued by class, their job's queue count lowered, their sojourn recorded
// and their class's rewrite done. Returns how many.
[[gnu::always_inline]] inline unsigned dequeue_into(const DataplaneShared& shared, EgressPort& egress,
                                                    LcoreCounters& counters, uint64_t now, rte_mbuf** out,
                                                    unsigned max) {
  ScheduledItem<rte_mbuf*> items[kMaxBurst];
  const unsigned n = egress.sched.dequeue(now, items, max);
  if (n == 0) return 0;
  RunTotal run;
  auto flush_class = [&](const RunTotal& r) {
    ClassCounters& cc = counters.cls(egress.index, r.key);
    cc.dequeued_packets.add(r.packets);
    cc.dequeued_bytes.add(r.bytes);
  };
  // Sojourn times, one histogram record per run of packets of one class that
  // arrived in the same RX burst (same timestamp).
  uint64_t soj_tsc = 0;
  unsigned soj_cls = 0, soj_count = 0;
  auto flush_sojourn = [&] {
    counters.hist(egress.index, soj_cls).record(ticks_to_ns(shared, now - soj_tsc), soj_count);
  };
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = items[i].item;
    out[i] = m;
    run_add(run, items[i].cls, items[i].len, flush_class);
    const PacketMeta* meta = packet_meta(m);
    if (meta->job_slot != kNoJob) --egress.job_queue[meta->job_slot].queued;
    if (meta->rx_tsc != soj_tsc || items[i].cls != soj_cls) {
      if (soj_count) flush_sojourn();
      soj_tsc = meta->rx_tsc;
      soj_cls = items[i].cls;
      soj_count = 0;
    }
    ++soj_count;
  }
  flush_class(run);
  flush_sojourn();
  if (egress.rewrite_classes) {
    for (unsigned i = 0; i < n; ++i) rewrite_leaving(egress, counters, items[i].item, items[i].cls);
  }
  return n;
}

// A port that has taken nothing for tx_probe_ticks is either busy (its TX
// ring full, a PAUSE from the peer, a descheduled memif or virtio peer) or
// refusing the packet at the head of `pending` for good: a driver stops a
// burst at a packet it cannot send, and would stop every retry there. Once
// a loop iteration, the port is offered the packets behind the head, from
// egress.probe_at on (advancing past packets refused in turn); a busy port
// takes none. When it takes some, it has room: the head is offered again at
// once. A busy port that just freed room takes it (it leaves behind the
// probe's packets: one packet out of order, only after tx_probe_ticks of
// taking nothing); a head refused right after the port took others, for
// the kMaxHeadRefusals-th time, is counted as tx_failed and freed, and the
// port goes on, where it would have stalled for tx_stall_ticks and lost
// every packet pending. (Twice, not once: room freed between the retry and
// the probe, and filled by the probe, must not cost a packet.) `pending` is
// topped up from the scheduler first, so that a head with nothing behind it
// finds company. Returns the packets the port took.
constexpr uint8_t kMaxHeadRefusals = 2;

unsigned send_past_refused_head(const DataplaneShared& shared, EgressPort& egress, LcoreCounters& counters,
                                uint64_t now) {
  rte_mbuf** p = egress.pending.data();
  if (egress.pending_head != 0) {
    std::memmove(p, p + egress.pending_head, egress.pending_count * sizeof(*p));
    egress.pending_head = 0;
  }
  if (egress.pending_count < shared.burst)
    egress.pending_count +=
        dequeue_into(shared, egress, counters, now, p + egress.pending_count, shared.burst - egress.pending_count);
  unsigned count = egress.pending_count;
  if (count < 2) return 0;
  const unsigned k = egress.probe_at >= 1 && egress.probe_at < count ? egress.probe_at : 1;
  const TxOutcome behind = tx_burst_counted(egress, counters, p + k, count - k, now);
  if (const unsigned gone = behind.gone()) {
    std::memmove(p + k, p + k + gone, (count - k - gone) * sizeof(*p));
    count -= gone;
  }
  if (behind.sent == 0) {
    // Frames dropped as oversize are not the port taking any: still busy.
    egress.pending_count = count;
    egress.probe_at = static_cast<uint8_t>(k + 1 < count ? k + 1 : 1);
    return 0;
  }
  const TxOutcome head = tx_burst_counted(egress, counters, p, 1, now);
  bool head_gone = head.gone() != 0;
  if (!head_gone && ++egress.head_refusals >= kMaxHeadRefusals) {
    if (JobCounters* jc = job_counters(counters, packet_meta(p[0])->job_slot)) jc->drops.inc();
    counters.ports[egress.index].drops[kDropTxFailed].inc();
    rte_pktmbuf_free(p[0]);
    head_gone = true;
  }
  if (head_gone) {
    --count;
    egress.pending_head = 1;
    egress.head_refusals = 0;
  }
  egress.pending_count = count;
  egress.probe_at = 1;
  egress.pending_since_tsc = now;
  set_stalled(egress, false, now);
  return behind.sent + head.sent;
}

}  // namespace

unsigned sched_transmit(DataplaneShared& shared, EgressPort& egress, LcoreCounters& counters, uint64_t now) {
  if (!egress.link_up) [[unlikely]] {
    // Link down: the port is not touched (a driver may be tearing it down),
    // and what waits for it is dropped at once rather than held for a link
    // that may never return; the mbufs go back to the pool for the port that
    // still works.
    if (!sched_idle(egress)) sched_flush(egress, counters, kDropLinkDown, kDropLinkDown);
    set_stalled(egress, false, now);  // a stall of the link that went; the next one starts afresh
    return 0;
  }
  if (egress.pending_count) {
    // Back more than lcore_away_ticks after the last offer, the lcore was
    // not running: the port was offered nothing for the rest of that time,
    // which is no part of its wait (else an lcore descheduled for the stall
    // time would give up, as tx_failed, packets it never offered, the
    // probe's included, and call a working port stalled). Each absence still
    // counts lcore_away_ticks, so that a dead port on an lcore that only
    // ever runs now and then is still found stalled. Signed: a TSC that
    // stepped back is met below.
    if (const int64_t away = static_cast<int64_t>(now - egress.offered_tsc);
        away > static_cast<int64_t>(shared.lcore_away_ticks)) [[unlikely]]
      egress.pending_since_tsc += static_cast<uint64_t>(away) - shared.lcore_away_ticks;
    egress.offered_tsc = now;
    const TxOutcome tx =
        tx_burst_counted(egress, counters, egress.pending.data() + egress.pending_head, egress.pending_count, now);
    egress.pending_head += tx.gone();
    egress.pending_count -= tx.gone();
    // Only what the port took restarts the wait: frames dropped as oversize
    // (a kernel interface's MTU lowered) say nothing of a port that refuses.
    if (tx.sent) {
      egress.pending_since_tsc = now;
      egress.head_refusals = 0;
      egress.probe_at = 1;
      set_stalled(egress, false, now);
    } else if (tx.oversize) [[unlikely]] {
      // The head may be another now: its refusals and the probe's place
      // were the old head's.
      egress.head_refusals = 0;
      egress.probe_at = 1;
    }
    if (egress.pending_count) {
      // A TSC that stepped back (a VM moved) would make the wait below wrap
      // to "forever" and drop what is pending as stalled: it counts from now.
      if (static_cast<int64_t>(now - egress.pending_since_tsc) < 0) [[unlikely]]
        egress.pending_since_tsc = now;
      // Port still busy: keep the queue inside psgate, for a while.
      if (now - egress.pending_since_tsc < shared.tx_probe_ticks) return 0;
      if (const unsigned past = send_past_refused_head(shared, egress, counters, now)) return past;
      if (now - egress.pending_since_tsc < shared.tx_stall_ticks) return 0;
      // It took nothing for tx_stall_ticks: give these up and keep going
      // with one try per burst until it takes something again.
      drop_pending(egress, counters, kDropTxFailed);
      set_stalled(egress, true, now);
    }
    egress.pending_head = 0;
  }
  rte_mbuf** out = egress.pending.data();
  const unsigned n = dequeue_into(shared, egress, counters, now, out, shared.burst);
  if (n == 0) return 0;
  keep_unsent(egress, counters, n, tx_burst_counted(egress, counters, out, n, now), now);
  return n;
}

// Bit i set where cls[i] == c, for i < n. `cls` holds kMaxBurst entries
// (those from n on are ignored): a 16-byte compare gives 16 positions at once.
inline uint64_t positions_of_class(const uint8_t* cls, unsigned n, unsigned c) {
  const uint64_t valid = n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1;
  uint64_t m = 0;
#if defined(__SSE2__)
  static_assert(kMaxBurst % 16 == 0 && kMaxBurst <= 64);
  const __m128i want = _mm_set1_epi8(static_cast<char>(c));
  for (unsigned v = 0; v < (n + 15) / 16; ++v) {
    const __m128i got = _mm_loadu_si128(reinterpret_cast<const __m128i*>(cls + 16 * v));
    m |= uint64_t{static_cast<uint16_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(got, want)))} << (16 * v);
  }
#else
  for (unsigned i = 0; i < n; ++i) m |= uint64_t{cls[i] == c} << i;
#endif
  return m & valid;
}

// The packets of one class in a cut-through burst, `run`, in arrival order,
// passing through the class's empty FIFO at once: counted in and out
// (enqueued - dequeued stays the depth, zero), their sojourn recorded once
// (0, sched_cut_through), and CE decided on the depth each would have found:
// the packets of the run ahead of it.
inline void pass_through_class(EgressPort& egress, LcoreCounters& counters, unsigned c, rte_mbuf* const* run,
                               unsigned count, uint64_t bytes) {
  count_through_fifo(counters, egress.index, c, count, bytes);
  counters.hist(egress.index, c).record(0, count);
  mark_ce_in_run(egress, c, run, count);
}

bool sched_cut_through(EgressPort& egress, LcoreCounters& counters, rte_mbuf** pkts, const uint8_t* cls, unsigned n,
                       uint64_t present, uint64_t bytes, uint64_t rx_tsc) {
  if (!egress.link_up || egress.pending_count != 0 || !egress.sched.passes_through(present, n)) return false;
  // The sojourn is taken at the burst's arrival time, the clock of the whole
  // loop iteration, as it is for a packet that the FIFO path dequeues in the
  // iteration it arrived in: 0, no wait behind an earlier burst (sojourn
  // measures queueing in psgate, which a cut-through packet never met).
  const uint64_t now = rx_tsc;
  rte_mbuf** out = egress.pending.data();

  if ((present & (present - 1)) == 0) {
    // One class: the burst leaves as it came. Counted in and out of its FIFO
    // at once; CE on the packets that would have found `threshold` ahead.
    const unsigned c = static_cast<unsigned>(__builtin_ctzll(present));
    pass_through_class(egress, counters, c, pkts, n, bytes);
    if (egress.rewrite_classes & present) {
      for (unsigned i = 0; i < n; ++i) rewrite_leaving(egress, counters, pkts[i], c);
    }
    const TxOutcome tx = tx_burst_counted(egress, counters, pkts, n, now, CountAdmitted::kYes);
    for (unsigned k = tx.gone(); k < n; ++k) out[k] = pkts[k];  // kept as sched_transmit keeps them
    keep_unsent(egress, counters, n, tx, now);
    return true;
  }

  // What strict priority would dequeue: the burst ordered by class, arrival
  // order kept within each, straight into `pending`, where sched_transmit
  // keeps what the port does not take. Each present class, highest first,
  // takes its packets by the bit mask of where it occurs in the burst: one
  // pass over the packets in all, no counting pass and no chain of
  // read-modify-writes on per-class counts.
  unsigned at = 0;
  for (uint64_t p = present; p != 0; p &= p - 1) {
    const unsigned c = static_cast<unsigned>(__builtin_ctzll(p));
    const unsigned first = at;
    uint64_t run_bytes = 0;
    for (uint64_t m = positions_of_class(cls, n, c); m != 0; m &= m - 1) {
      rte_mbuf* pkt = pkts[__builtin_ctzll(m)];
      out[at++] = pkt;
      run_bytes += pkt->pkt_len;
    }
    pass_through_class(egress, counters, c, out + first, at - first, run_bytes);
    if (egress.rewrite_classes >> c & 1) {
      for (unsigned k = first; k < at; ++k) rewrite_leaving(egress, counters, out[k], c);
    }
  }
  keep_unsent(egress, counters, n, tx_burst_counted(egress, counters, out, n, now, CountAdmitted::kYes), now);
  return true;
}

void sched_sync_slots(EgressPort& egress, const Snapshot& snap, bool no_rings) {
  const size_t slots = std::min(snap.slots.size(), egress.slot_owner.size());
  const uint64_t until = rte_rdtsc() + egress.pin_hold_ticks;
  const bool first = egress.synced_generation == 0;
  auto sync = [&](size_t slot) {
    const uint64_t owner = snap.slots[slot].owner;
    if (egress.slot_owner[slot] == owner) return;
    egress.slot_owner[slot] = owner;
    // This lcore writes the slot's telemetry: a new job's starts empty.
    if (!egress.telemetry.empty()) telemetry_reset(egress.telemetry[slot]);
    if (owner == 0 || first || egress.pin_hold_ticks == 0) return;
    EgressPort::JobQueue& jq = egress.job_queue[slot];
    if (jq.pin == 0) egress.held_slots.push_back(static_cast<uint32_t>(slot));
    jq.pin = EgressPort::kPinArmed;
    egress.pins[slot] = EgressPort::Pin{
        0, snap.generation, static_cast<uint8_t>(snap.slots[slot].cls[direction_of_egress(egress.index)]), until};
    // Run-to-completion: marked before this iteration's packets are
    // accepted, so the job's own first packets are not behind its mark (the
    // hold would last until they themselves left the default class, or the
    // whole takeover_hold behind busier classes). Pipelined: the RX lcores'
    // rings must be caught up first (sched_release_holds).
    if (no_rings) {
      egress.pins[slot].mark = egress.sched.tail_position(egress.default_class);
      jq.pin = EgressPort::kPinMarked;
    }
  };
  for_each_slot_to_sync(snap, egress.synced_generation, first, slots, sync);
  // A held job re-ranked meanwhile (a re-rank changes no owner, so the walk
  // above skips it) leaves its hold for its new class: its packets held in
  // the default class carry that class, not the one it was added with, and
  // its next packet, which would say so, may never come.
  const unsigned dir = direction_of_egress(egress.index);
  for (const uint32_t slot : egress.held_slots) {
    // An emptied slot has class 0 (network control) in the snapshot: a
    // removed job's held packets keep the class they were held for.
    if (slot < slots && snap.slots[slot].owner != 0 && egress.slot_owner[slot] == snap.slots[slot].owner)
      egress.pins[slot].target = static_cast<uint8_t>(snap.slots[slot].cls[dir]);
  }
  egress.synced_generation = snap.generation;
}

namespace {

// Whether every RX lcore has taken the snapshot `generation` (or a later
// one) and this lcore has read its default ring for `egress` past where it
// stood then: every packet classified before the job arrived has been
// pulled, and (called after the iteration's accept) is in the default queue
// or gone. Run-to-completion has no rings: always.
bool rings_caught_up(const DataplaneShared& shared, const SchedContext& ctx, const EgressPort& egress,
                     uint32_t generation) {
  for (size_t r = 0; r < ctx.rx_posts.size(); ++r) {
    const uint64_t synced = (*ctx.rx_posts[r])[egress.index].synced.load(std::memory_order_acquire);
    if (static_cast<int32_t>(static_cast<uint32_t>(synced >> 32) - generation) < 0) return false;
    const uint32_t consumed = ctx.consumed[(r * kPortCount + egress.index) * shared.class_count + shared.default_class];
    if (static_cast<int32_t>(consumed - static_cast<uint32_t>(synced)) < 0) return false;
  }
  return true;
}

}  // namespace

void sched_release_holds(const DataplaneShared& shared, const SchedContext& ctx, EgressPort& egress,
                         LcoreCounters& counters) {
  const unsigned d = egress.default_class;
  size_t kept = 0;
  for (const uint32_t slot : egress.held_slots) {
    EgressPort::JobQueue& jq = egress.job_queue[slot];
    EgressPort::Pin& pin = egress.pins[slot];
    if (jq.pin == EgressPort::kPinArmed && rings_caught_up(shared, ctx, egress, pin.generation)) {
      pin.mark = egress.sched.tail_position(d);
      jq.pin = EgressPort::kPinMarked;
    }
    // A held job's packets move to its class when the hold ends, whether or
    // not another of them arrives (settle_job_class does the move).
    if (jq.pin != 0 && jq.queued != 0) settle_job_class(egress, counters, slot, pin.target, 0);
    else if (jq.pin != 0) held_in_default(egress, slot);  // ends the pin when over
    if (jq.pin != 0) egress.held_slots[kept++] = slot;
  }
  egress.held_slots.resize(kept);
}

void sched_apply_params(EgressPort& egress, const PortLive& params, uint64_t now) {
  if (params.shaper_bytes_per_sec != egress.applied.shaper_bytes_per_sec ||
      params.shaper_burst_bytes != egress.applied.shaper_burst_bytes) {
    egress.sched.set_shaper(params.shaper_bytes_per_sec, params.shaper_burst_bytes, now);
  }
  for (unsigned c = 0; c < params.classes.size(); ++c) {
    const ClassLive& want = params.classes[c];
    const ClassLive* had = c < egress.applied.classes.size() ? &egress.applied.classes[c] : nullptr;
    if (!had || want.cap_bytes_per_sec != had->cap_bytes_per_sec || want.cap_burst_bytes != had->cap_burst_bytes)
      egress.sched.set_class_cap(c, want.cap_bytes_per_sec, want.cap_burst_bytes, now);
    if (!had || want.floor_bytes_per_sec != had->floor_bytes_per_sec ||
        want.floor_burst_bytes != had->floor_burst_bytes)
      egress.sched.set_class_floor(c, want.floor_bytes_per_sec, want.floor_burst_bytes, now);
    egress.set_actions(c, want.actions);
  }
  egress.applied = params;
}

bool sched_idle(const EgressPort& egress) { return egress.pending_count == 0 && egress.sched.empty(); }

void sched_flush(EgressPort& egress, LcoreCounters& counters, DropReason pending_reason, DropReason queued_reason) {
  PortCounters& pc = counters.ports[egress.index];
  drop_pending(egress, counters, pending_reason);
  egress.sched.flush([&](rte_mbuf* m, unsigned cls) {
    // Leaving the FIFO without transmission still counts as dequeued, so
    // enqueued - dequeued stays the live depth.
    ClassCounters& cc = counters.cls(egress.index, cls);
    cc.dequeued_packets.inc();
    cc.dequeued_bytes.add(m->pkt_len);
    pc.drops[queued_reason].inc();
    const uint32_t slot = packet_meta(m)->job_slot;
    if (slot != kNoJob) {
      --egress.job_queue[slot].queued;
      counters.jobs[slot].drops.inc();
    }
    rte_pktmbuf_free(m);
  });
}

}  // namespace psgate
