// SPDX-License-Identifier: BSD-3-Clause
// The data lcores' main loops. Same stages in every role; only the hand-off
// between them differs (direct call or SPSC ring).
#include <time.h>

#include <algorithm>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ring.h>

#include "dataplane/dataplane_impl.h"
#include "dataplane/rx_stage.h"
#include "dataplane/sched_stage.h"

namespace psgate {

namespace {

Dataplane::Impl* g_dataplane = nullptr;

bool rings_empty(const SchedContext& ctx) {
  for (const std::vector<rte_ring*>* rings : ctx.rx_rings)
    for (rte_ring* r : *rings)
      if (!rte_ring_empty(r)) return false;
  return true;
}

// Top of every loop iteration (outside all bursts): report to the port
// teardown handshake and take the link state the iteration will obey.
inline unsigned link_check(DataplaneShared& shared, unsigned lcore_index) {
  return shared.link->report_and_read(lcore_index);
}

inline void apply_links(SchedContext& ctx, unsigned up) {
  for (EgressPort* e : ctx.egress) e->link_up = (up >> e->index) & 1u;
}

void transmit_all(DataplaneShared& shared, SchedContext& ctx, uint64_t now) {
  for (EgressPort* e : ctx.egress) {
    if (!e->held_slots.empty()) [[unlikely]]
      sched_release_holds(shared, ctx, *e, *ctx.counters);
    sched_transmit(shared, *e, *ctx.counters, now);
  }
}

// A scheduler lcore fed by n RX lcores takes up to n bursts a port from the
// rings in one loop iteration; one burst out per iteration would let the
// class FIFOs overflow (counted as queue_full) while the port could take
// more, and the lcore would spend its time accepting packets only to drop
// them: with 6 RX lcores it took 188 packets an iteration and sent 32. So
// it sends up to as many more bursts as it took in, and stops at the first
// short one (FIFOs empty, shaper out of credit, or the port refusing).
// `now`: the iteration's one TSC read.
void transmit_pulled(DataplaneShared& shared, SchedContext& ctx, uint64_t now) {
  for (EgressPort* e : ctx.egress) {
    for (uint32_t more = ctx.pulled_for[e->index] / shared.burst; more > 0; --more) {
      if (sched_transmit(shared, *e, *ctx.counters, now) < shared.burst || e->pending_count) break;
    }
  }
}

// Passes of sched_drain_rings that empty the fullest ring (one burst a pass).
unsigned ring_passes(const DataplaneShared& shared, const SchedContext& ctx) {
  unsigned most = 0;
  for (const std::vector<rte_ring*>* rings : ctx.rx_rings)
    for (rte_ring* r : *rings) most = std::max(most, rte_ring_count(r));
  return most / shared.burst + 1;
}

// After RX stopped: send what is queued until empty or the drain deadline,
// then count and free the rest.
void drain(DataplaneShared& shared, SchedContext& ctx, unsigned lcore_index) {
  for (;;) {
    // Still transmitting: still part of the teardown handshake.
    apply_links(ctx, link_check(shared, lcore_index));
    // Acquire pairs with the RX lcores' release on exit: their last ring
    // enqueues are visible once the count reads zero. A run-to-completion
    // lcore's ports are fed by its own RX alone, stopped before it drains:
    // with two a direction each, one stuck in a driver call must not keep
    // the other draining (and named stuck) until the process gives up.
    const bool rx_done = ctx.rx_rings.empty() || shared.rx_lcores_running.load(std::memory_order_acquire) == 0;
    const uint64_t now = rte_rdtsc();
    if (!ctx.rx_rings.empty()) sched_drain_rings(shared, ctx);
    transmit_all(shared, ctx, now);
    // As many bursts out as came in from the rings, as in the loop: one a
    // pass would overflow the FIFOs (queue_full) with packets the port could
    // still have sent before the deadline.
    if (!ctx.rx_rings.empty()) transmit_pulled(shared, ctx, now);
    bool idle = rx_done && rings_empty(ctx);
    for (EgressPort* e : ctx.egress) idle = idle && sched_idle(*e);
    if (idle) return;
    // Read each pass: a second stop signal moves it to now (stop_and_drain).
    if (rte_rdtsc() >= shared.drain_deadline_tsc.load(std::memory_order_relaxed)) {
      // Every ring to its last packet before the flush counts what is left
      // (a pass takes one burst a ring; what the FIFOs cannot hold is
      // counted as queue_full). The rings' tails are final once RX is done,
      // so the passes are bounded by the deepest ring.
      if (rx_done && !ctx.rx_rings.empty()) {
        const unsigned passes = ring_passes(shared, ctx);
        for (unsigned pass = 0; pass < passes && !rings_empty(ctx); ++pass) sched_drain_rings(shared, ctx);
      }
      for (EgressPort* e : ctx.egress) sched_flush(*e, *ctx.counters);
      if (rx_done) return;
    }
  }
}

// Every data lcore reads snapshots: RX stages for classification, scheduler
// stages for live shaper/class parameters. Each reports quiescence once per
// loop, after which it holds no snapshot pointer.
class SnapshotReader {
 public:
  SnapshotReader(DataplaneShared& shared, unsigned thread_id) : shared_(shared), id_(thread_id) {
    rte_rcu_qsbr_thread_register(shared_.qsbr, id_);
    rte_rcu_qsbr_thread_online(shared_.qsbr, id_);
  }
  ~SnapshotReader() {
    rte_rcu_qsbr_thread_offline(shared_.qsbr, id_);
    rte_rcu_qsbr_thread_unregister(shared_.qsbr, id_);
  }
  const Snapshot& current() const { return *shared_.snapshots->current(); }
  void quiescent() const { rte_rcu_qsbr_quiescent(shared_.qsbr, id_); }

 private:
  DataplaneShared& shared_;
  unsigned id_;
};

// dataplane.idle_sleep: a data lcore that has found nothing to do for that
// long sleeps that long at a time until it finds work again. Asleep it holds
// no snapshot and touches no port, so it is offline to RCU and to the port
// teardown handshake: neither a publish nor a link change waits for it. Its
// first iteration after waking reports to both again (link_check, online).
class IdleSleep {
 public:
  IdleSleep(DataplaneShared& shared, unsigned lcore_index) : shared_(shared), lcore_index_(lcore_index) {}
  bool enabled() const { return shared_.idle_sleep_ticks != 0; }
  // After an iteration: `idle` when it received nothing and holds nothing.
  void after_iteration(bool idle) {
    if (!idle) {
      idle_since_ = 0;
      return;
    }
    const uint64_t now = rte_rdtsc();
    if (idle_since_ == 0) {
      idle_since_ = now | 1;
      return;
    }
    if (now - idle_since_ < shared_.idle_sleep_ticks) return;
    shared_.link->go_offline(lcore_index_);
    rte_rcu_qsbr_thread_offline(shared_.qsbr, lcore_index_);
    const timespec pause{0, static_cast<long>(shared_.idle_sleep_ns)};  // at most 10 ms (config.cc)
    nanosleep(&pause, nullptr);
    rte_rcu_qsbr_thread_online(shared_.qsbr, lcore_index_);
    shared_.link->go_online(lcore_index_);
  }

 private:
  DataplaneShared& shared_;
  unsigned lcore_index_;
  uint64_t idle_since_ = 0;  // TSC | 1 of the first idle iteration in a row; 0 while busy
};

bool all_idle(const SchedContext& ctx) {
  for (const EgressPort* e : ctx.egress)
    if (!sched_idle(*e)) return false;
  return true;
}

// A port whose link is down is not polled: its driver may be tearing down
// what rx_burst reads (memif unmaps the peer's memory on disconnect).
// `now`: the iteration's one TSC read (rx_poll). Returns the packets received.
unsigned rx_iteration(DataplaneShared& shared, RxContext& rx, const Snapshot& snap, unsigned up, uint64_t now) {
  if (snap.generation != rx.synced_generation) rx_sync_slots(shared, rx, snap);
  unsigned received = 0;
  const unsigned polled = up & rx.in_ports;
  if (polled & 1u) received += rx_poll(shared, rx, snap, 0, now);
  if (polled & 2u) received += rx_poll(shared, rx, snap, 1, now);
  return received;
}

void sched_sync_params(SchedContext& ctx, const Snapshot& snap) {
  if (snap.generation == ctx.applied_generation) return;
  const uint64_t now = rte_rdtsc();
  for (EgressPort* e : ctx.egress) {
    sched_apply_params(*e, snap.ports[e->index], now);
    sched_sync_slots(*e, snap, ctx.rx_posts.empty());
  }
  ctx.applied_generation = snap.generation;
}

// One data lcore's life, the same in every role: online to RCU and to the
// port teardown handshake, `iteration(reader, up)` while RX is enabled with a
// quiescent state after each (the iteration holds no snapshot past it) and
// the idle sleep's count, then `after_loop()` (the role's drain, its place in
// rx_lcores_running) offline to RCU but still in the port handshake, whose
// transmits the drain is part of. `iteration` returns whether it found
// nothing to do and holds nothing.
template <typename Iteration, typename AfterLoop>
int run_lcore(DataplaneShared& shared, const LcorePlan& plan, Iteration&& iteration, AfterLoop&& after_loop) {
  {
    SnapshotReader reader(shared, plan.rcu_thread_id);
    IdleSleep idle(shared, plan.rcu_thread_id);
    shared.link->go_online(plan.rcu_thread_id);
    while (shared.rx_enabled.load(std::memory_order_acquire)) {
      const bool idle_pass = iteration(reader, link_check(shared, plan.rcu_thread_id));
      reader.quiescent();
      if (idle.enabled()) [[unlikely]]
        idle.after_iteration(idle_pass);
    }
  }
  after_loop();
  shared.link->go_offline(plan.rcu_thread_id);
  return 0;
}

int run_to_completion(DataplaneShared& shared, LcorePlan& plan) {
  SchedContext& ctx = *plan.sched;
  return run_lcore(
      shared, plan,
      [&](const SnapshotReader& reader, unsigned up) {
        apply_links(ctx, up);
        const Snapshot& snap = reader.current();
        sched_sync_params(ctx, snap);
        // One clock read for the whole iteration: RX time, policers, shaper.
        // The shaper refilling at the iteration's start rather than a few
        // hundred nanoseconds later only ever sends later, never more.
        const uint64_t now = rte_rdtsc();
        const unsigned received = rx_iteration(shared, *plan.rx, snap, up, now);
        transmit_all(shared, ctx, now);
        return received == 0 && all_idle(ctx);
      },
      [&] {
        // Its ports are fed by its own RX alone, stopped with the loop.
        shared.rx_lcores_running.fetch_sub(1, std::memory_order_release);
        drain(shared, ctx, plan.rcu_thread_id);
      });
}

int run_rx(DataplaneShared& shared, LcorePlan& plan) {
  return run_lcore(
      shared, plan,
      [&](const SnapshotReader& reader, unsigned up) {
        return rx_iteration(shared, *plan.rx, reader.current(), up, rte_rdtsc()) == 0;
      },
      // Release: its last ring enqueues are seen by the schedulers' drain
      // once they read the count.
      [&] { shared.rx_lcores_running.fetch_sub(1, std::memory_order_release); });
}

// One iteration of a scheduler lcore after its link check and parameter sync.
// Take from the rings (requesting the packets' mbuf lines, last written on
// the RX lcores' CPUs), put them into the FIFOs (or, for a port with nothing
// queued, straight out: sched_accept_pulled), then transmit. Accepting before
// transmitting keeps what the single lcore does: a high-priority packet taken
// now leaves ahead of a lower class's backlog, and its CE mark is decided on
// the depth it found before anything left.
// The snapshot is loaded and synced between the pull and the accept: a
// packet an RX lcore classified with a newer snapshot is then never accepted
// under an older one (the ring's release/acquire orders the RX lcore's
// snapshot read before this lcore's), so a job new in it is known, and held,
// from its first packet on. `current` returns the snapshot in force; called
// after the pull (one loaded before it could be older than a packet pulled,
// and that packet's job, new in the newer one, would overtake its flow's
// unclassified packets queued in the default class).
// `own_rx(snap, now)` runs between the accept and the transmits: a hybrid
// lcore's own RX (hybrid_iteration), nothing for a scheduler lcore. Returns
// whether it took anything from the rings.
template <typename CurrentSnapshot, typename OwnRx>
bool ring_iteration(DataplaneShared& shared, SchedContext& ctx, CurrentSnapshot&& current, OwnRx&& own_rx) {
  sched_pull_rings(shared, ctx);
  const bool pulled = ctx.n_pulled_runs != 0;
  const Snapshot& snap = current();
  sched_sync_params(ctx, snap);
  const uint64_t now = rte_rdtsc();  // one clock read: RX time, policers, shaper, the transmits
  sched_accept_pulled(shared, ctx, now, true);
  own_rx(snap, now);
  transmit_all(shared, ctx, now);
  // As many more bursts as came from the rings (transmit_all sent one a
  // port, for what was queued already or by the own RX).
  transmit_pulled(shared, ctx, now);
  return pulled;
}

template <typename CurrentSnapshot>
bool scheduler_iteration(DataplaneShared& shared, SchedContext& ctx, CurrentSnapshot&& current) {
  return ring_iteration(shared, ctx, current, [](const Snapshot&, uint64_t) {});
}

int run_scheduler(DataplaneShared& shared, LcorePlan& plan) {
  SchedContext& ctx = *plan.sched;
  return run_lcore(
      shared, plan,
      [&](const SnapshotReader& reader, unsigned up) {
        apply_links(ctx, up);
        const bool pulled =
            scheduler_iteration(shared, ctx, [&reader]() -> const Snapshot& { return reader.current(); });
        return !pulled && all_idle(ctx);
      },
      [&] { drain(shared, ctx, plan.rcu_thread_id); });
}

// One iteration of a hybrid lcore after its link check: a scheduler
// iteration (ring_iteration) with the lcore's own RX between the accept
// and the transmits, as a run-to-completion lcore receives before it
// transmits. The pull comes first and the snapshot after it, for the
// reason ring_iteration gives; the own RX then classifies with that
// same snapshot, so a job new in it is known, and held, on both paths from
// the same iteration on. Its own RX cuts through only when the port holds
// nothing (the pulled packets may have filled the FIFOs, and its packets
// then queue behind them). A new job's hold is marked as a pipelined
// scheduler marks it, once the RX lcores' rings have caught up
// (sched_release_holds): the own RX's earlier packets are in the default
// queue by then, accepted in earlier iterations. `received`: the packets
// its own RX took. Returns whether it took anything from the rings.
template <typename CurrentSnapshot>
bool hybrid_iteration(DataplaneShared& shared, LcorePlan& plan, unsigned up, CurrentSnapshot&& current,
                      unsigned& received) {
  return ring_iteration(shared, *plan.sched, current, [&](const Snapshot& snap, uint64_t now) {
    received = rx_iteration(shared, *plan.rx, snap, up, now);
  });
}

int run_hybrid(DataplaneShared& shared, LcorePlan& plan) {
  SchedContext& ctx = *plan.sched;
  return run_lcore(
      shared, plan,
      [&](const SnapshotReader& reader, unsigned up) {
        apply_links(ctx, up);
        unsigned received = 0;
        const bool pulled = hybrid_iteration(
            shared, plan, up, [&reader]() -> const Snapshot& { return reader.current(); }, received);
        return received == 0 && !pulled && all_idle(ctx);
      },
      // Its own RX has stopped with the loop; the RX lcores' rings are
      // drained until they have stopped too (rx_lcores_running counts only
      // them).
      [&] { drain(shared, ctx, plan.rcu_thread_id); });
}

}  // namespace

void set_lcore_dataplane(Dataplane::Impl* impl) { g_dataplane = impl; }

bool Dataplane::run_once() {
  Impl& d = *impl_;
  if (d.started || d.plans.empty() || !d.ensure_snapshot()) return false;
  // No lcore runs, so nothing else reads snapshots: no RCU registration.
  // The caller takes each lcore's part in the link handshake for the pass.
  const Snapshot& snap = *d.shared.snapshots->current();
  auto current = [&snap]() -> const Snapshot& { return snap; };
  // Every RX lcore's iteration first, then every scheduler's and hybrid
  // lcore's: what the RX lcores handed off this pass is taken in the same
  // pass.
  for (LcorePlan& p : d.plans) {
    if (p.role != LcoreRole::kRx) continue;
    d.shared.link->go_online(p.rcu_thread_id);
    rx_iteration(d.shared, *p.rx, snap, link_check(d.shared, p.rcu_thread_id), rte_rdtsc());
    d.shared.link->go_offline(p.rcu_thread_id);
  }
  for (LcorePlan& p : d.plans) {
    if (p.role == LcoreRole::kRx) continue;
    d.shared.link->go_online(p.rcu_thread_id);
    const unsigned up = link_check(d.shared, p.rcu_thread_id);
    apply_links(*p.sched, up);
    if (p.role == LcoreRole::kScheduler) {
      scheduler_iteration(d.shared, *p.sched, current);
    } else if (p.role == LcoreRole::kHybrid) {
      unsigned received = 0;
      hybrid_iteration(d.shared, p, up, current, received);
    } else {  // run to completion: one lcore, or two with a direction each
      sched_sync_params(*p.sched, snap);
      const uint64_t now = rte_rdtsc();
      rx_iteration(d.shared, *p.rx, snap, up, now);
      transmit_all(d.shared, *p.sched, now);
    }
    d.shared.link->go_offline(p.rcu_thread_id);
  }
  return true;
}

int lcore_main(void* arg) {
  auto& plan = *static_cast<LcorePlan*>(arg);
  DataplaneShared& shared = g_dataplane->shared;
  __atomic_store_n(&plan.tid, static_cast<int>(rte_sys_gettid()), __ATOMIC_RELEASE);
  switch (plan.role) {
    case LcoreRole::kRunToCompletion:
      return run_to_completion(shared, plan);
    case LcoreRole::kRx:
      return run_rx(shared, plan);
    case LcoreRole::kScheduler:
      return run_scheduler(shared, plan);
    case LcoreRole::kHybrid:
      return run_hybrid(shared, plan);
  }
  return -1;
}

}  // namespace psgate
