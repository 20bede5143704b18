// The data lcores' main loops. Same stages in every role; only the hand-off
// between them differs (direct call or SPSC ring).
#include <rte_cycles.h>
#include <rte_ring.h>

#include "psgate/dataplane_impl.h"

namespace psgate {

namespace {

Dataplane::Impl* g_dataplane = nullptr;

bool rings_empty(const SchedContext& ctx) {
  for (const std::vector<rte_ring*>* rings : ctx.rx_rings)
    for (rte_ring* r : *rings)
      if (!rte_ring_empty(r)) return false;
  return true;
}

void transmit_all(DataplaneShared& shared, SchedContext& ctx) {
  const uint64_t now = rte_rdtsc();
  for (EgressPort* e : ctx.egress) sched_transmit(shared, *e, *ctx.counters, now);
}

// After RX stopped: send what is queued until empty or the drain deadline,
// then count and free the rest.
void drain(DataplaneShared& shared, SchedContext& ctx) {
  const uint64_t deadline = shared.drain_deadline_tsc.load(std::memory_order_relaxed);
  for (;;) {
    // Acquire pairs with the RX lcores' release on exit: their last ring
    // enqueues are visible once the count reads zero.
    const bool rx_done = shared.rx_lcores_running.load(std::memory_order_acquire) == 0;
    if (!ctx.rx_rings.empty()) sched_drain_rings(shared, ctx);
    transmit_all(shared, ctx);
    bool idle = rx_done && rings_empty(ctx);
    for (EgressPort* e : ctx.egress) idle = idle && sched_idle(*e);
    if (idle) return;
    if (rte_rdtsc() >= deadline) {
      if (rx_done) sched_drain_rings(shared, ctx);
      for (EgressPort* e : ctx.egress) sched_flush(*e, *ctx.counters);
      if (rx_done) return;
    }
  }
}

// One RX iteration over both ports with the snapshot pinned for its duration.
void rx_iteration(DataplaneShared& shared, RxContext& rx) {
  const Snapshot* snap = shared.snapshots->current();
  if (snap->generation != rx.police_generation) rx_sync_policers(shared, rx, *snap);
  rx_poll(shared, rx, *snap, 0);
  rx_poll(shared, rx, *snap, 1);
  // Past this point this lcore holds no snapshot pointer.
  rte_rcu_qsbr_quiescent(shared.qsbr, rx.rcu_thread_id);
}

void rcu_online(DataplaneShared& shared, RxContext& rx) {
  rte_rcu_qsbr_thread_register(shared.qsbr, rx.rcu_thread_id);
  rte_rcu_qsbr_thread_online(shared.qsbr, rx.rcu_thread_id);
}

void rcu_offline(DataplaneShared& shared, RxContext& rx) {
  rte_rcu_qsbr_thread_offline(shared.qsbr, rx.rcu_thread_id);
  rte_rcu_qsbr_thread_unregister(shared.qsbr, rx.rcu_thread_id);
}

int run_to_completion(DataplaneShared& shared, LcorePlan& plan) {
  rcu_online(shared, *plan.rx);
  while (shared.rx_enabled.load(std::memory_order_acquire)) {
    rx_iteration(shared, *plan.rx);
    transmit_all(shared, *plan.sched);
  }
  rcu_offline(shared, *plan.rx);
  shared.rx_lcores_running.fetch_sub(1, std::memory_order_release);
  drain(shared, *plan.sched);
  return 0;
}

int run_rx(DataplaneShared& shared, LcorePlan& plan) {
  rcu_online(shared, *plan.rx);
  while (shared.rx_enabled.load(std::memory_order_acquire)) rx_iteration(shared, *plan.rx);
  rcu_offline(shared, *plan.rx);
  shared.rx_lcores_running.fetch_sub(1, std::memory_order_release);
  return 0;
}

int run_scheduler(DataplaneShared& shared, LcorePlan& plan) {
  SchedContext& ctx = *plan.sched;
  while (shared.rx_enabled.load(std::memory_order_acquire)) {
    sched_drain_rings(shared, ctx);
    transmit_all(shared, ctx);
  }
  drain(shared, ctx);
  return 0;
}

}  // namespace

void set_lcore_dataplane(Dataplane::Impl* impl) { g_dataplane = impl; }

int lcore_main(void* arg) {
  auto& plan = *static_cast<LcorePlan*>(arg);
  DataplaneShared& shared = g_dataplane->shared;
  switch (plan.role) {
    case LcoreRole::kRunToCompletion: return run_to_completion(shared, plan);
    case LcoreRole::kRx: return run_rx(shared, plan);
    case LcoreRole::kScheduler: return run_scheduler(shared, plan);
  }
  return -1;
}

}  // namespace psgate
