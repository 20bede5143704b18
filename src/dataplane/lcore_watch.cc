// SPDX-License-Identifier: BSD-3-Clause
// Which data lcores stopped looping (control thread, every tick).
//
// Every data lcore passes an RCU quiescent state once per loop iteration
// (lcore_loops.cc), so the QSBR variable it already writes is its heartbeat:
// each tick starts a new token, and an lcore that has not reached the token
// of the tick before has not finished an iteration since. One that stays
// behind for kLcoreStuckNs is stuck, typically inside a driver call that
// never returns (DPDK 22.11's af_packet TX waits in poll(2) without a
// timeout behind an interface that never drains): its ports forward nothing,
// and until now nothing said so before the stop timed out on it. Time its
// thread spent runnable but given no CPU does not count (lcore_stall.h): a
// loaded host that starves an lcore for a second has not made it stuck.
#include <spdlog/spdlog.h>

#include "dataplane/dataplane_impl.h"

namespace psgate {

void Dataplane::watch_lcores(uint64_t now_ns) {
  Impl& d = *impl_;
  LcoreWatch& w = d.watch;
  if (!w.running.load(std::memory_order_acquire) || d.qsbr == nullptr) {
    // Not started yet, or stopping: the stop watches its lcores itself.
    w.stall.clear();
    w.stuck.clear();
    w.any_stuck.store(false, std::memory_order_relaxed);
    return;
  }
  // A tick that comes late (the whole process stopped: a VM paused, SIGSTOP)
  // judges nobody: the lcores were stopped too, and may not have run since.
  const bool late = w.last_tick_ns != 0 && now_ns - w.last_tick_ns >= kLcoreStuckNs;
  const bool first = w.stall.size() != d.plans.size();
  w.last_tick_ns = now_ns;
  w.stall.resize(d.plans.size());
  std::vector<unsigned> stuck;
  for (size_t i = 0; i < d.plans.size(); ++i) {
    const LcorePlan& plan = d.plans[i];
    const ThreadSample thread = sample_lcore_thread(plan);
    const uint64_t seen = __atomic_load_n(&d.qsbr->qsbr_cnt[plan.rcu_thread_id].cnt, __ATOMIC_ACQUIRE);
    // Offline (0): the lcore stopped reading snapshots (it is draining or
    // gone), which the stop watches on its own.
    if (late || first || seen == 0 || seen >= w.token) w.stall[i].progressed(now_ns, thread);
    else w.stall[i].advance(now_ns, thread);
    if (w.stall[i].stalled_ns() >= kLcoreStuckNs) stuck.push_back(plan.lcore_id);
  }
  // Starting a token is what a publish does too: lcores store it at their
  // next quiescent state, and retired snapshots are judged by their own.
  w.token = rte_rcu_qsbr_start(d.qsbr);
  if (stuck == w.stuck) return;
  if (stuck.empty()) {
    spdlog::info("data lcores loop again (none has been stuck for {} s)", kLcoreStuckNs / 1'000'000'000);
  } else {
    spdlog::error(
        "data lcore(s) {} have not finished a loop iteration for {} s or more: stuck in a driver call? Their "
        "ports forward nothing meanwhile; health is degraded (lcores_stuck)",
        fmt::join(stuck, ", "), kLcoreStuckNs / 1'000'000'000);
  }
  w.stuck = std::move(stuck);
  w.any_stuck.store(!w.stuck.empty(), std::memory_order_relaxed);
}

std::vector<unsigned> Dataplane::stuck_lcores() const { return impl_->watch.stuck; }

bool Dataplane::any_lcore_stuck() const { return impl_->watch.any_stuck.load(std::memory_order_relaxed); }

}  // namespace psgate
