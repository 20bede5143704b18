// Internal state of Dataplane, shared by its setup (dataplane.cc), the lcore
// loops (lcore_loops.cc) and the counter reader (totals.cc).
#pragma once

#include <memory>
#include <vector>

#include <rte_mempool.h>
#include <rte_ring.h>

#include "psgate/dataplane.h"
#include "psgate/lcore_context.h"

namespace psgate {

enum class LcoreRole { kRunToCompletion, kRx, kScheduler };

struct LcorePlan {
  unsigned lcore_id = 0;
  LcoreRole role = LcoreRole::kRunToCompletion;
  RxContext* rx = nullptr;        // RTC and RX roles
  SchedContext* sched = nullptr;  // RTC and scheduler roles
  unsigned rcu_thread_id = 0;     // every data lcore reads snapshots
};

struct Dataplane::Impl {
  ConfigSpec config;
  DataplaneShared shared;
  rte_mempool* pool = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  std::unique_ptr<SnapshotPublisher> publisher;
  std::vector<std::unique_ptr<LcoreCounters>> counters;  // one per data lcore
  std::vector<std::unique_ptr<EgressPort>> egress;       // [wire, host]
  std::vector<std::unique_ptr<RxContext>> rx;
  std::vector<std::unique_ptr<SchedContext>> sched;
  std::vector<LcorePlan> plans;
  std::vector<rte_ring*> rings;  // all handoff rings, for cleanup
  bool started = false;
  bool ports_started = false;
  ~Impl();
};

// Entry point of every data lcore (arg: LcorePlan*, with Impl reachable through
// a pointer set before launch).
int lcore_main(void* arg);
void set_lcore_dataplane(Dataplane::Impl* impl);

}  // namespace psgate
