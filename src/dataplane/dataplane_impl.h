// SPDX-License-Identifier: BSD-3-Clause
// Internal state of Dataplane, shared by its setup (dataplane.cc), the lcore
// loops (lcore_loops.cc) and the counter reader (totals.cc).
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <rte_mempool.h>
#include <rte_ring.h>

#include "dataplane/lcore_context.h"
#include "dataplane/lcore_counters_memory.h"
#include "dataplane/ports.h"
#include "psgate/dataplane.h"
#include "psgate/frame_plan.h"
#include "psgate/lcore_stall.h"
#include "psgate/log_throttle.h"

namespace psgate {

// kHybrid: run to completion on its own RX queue, and scheduler of the
// rings the RX lcores fill for its egress port (lcores.mode "hybrid").
enum class LcoreRole { kRunToCompletion, kRx, kScheduler, kHybrid };

struct LcorePlan {
  unsigned lcore_id = 0;
  LcoreRole role = LcoreRole::kRunToCompletion;
  RxContext* rx = nullptr;        // RTC, RX and hybrid roles
  SchedContext* sched = nullptr;  // RTC, scheduler and hybrid roles
  unsigned rcu_thread_id = 0;     // every data lcore reads snapshots
  // The lcore thread's kernel id, stored by the lcore as it starts (atomic
  // builtins: the control thread reads it, sample_lcore_thread); 0 until then.
  int tid = 0;
};

// The lcore's thread as the kernel sees it now (state, CPU time:
// lcore_stall.h); not known before the lcore started. Control thread.
inline ThreadSample sample_lcore_thread(const LcorePlan& plan) {
  return sample_thread(__atomic_load_n(&plan.tid, __ATOMIC_ACQUIRE));
}

// What the control path knows about one port's link (link_watch.cc).
struct PortWatch {
  // kEthdev: the driver's link status (LSC events where the driver raises
  // them, else polled). kKernelIface: net_af_packet and net_af_xdp always
  // report "up", so the kernel interface itself is watched; for af_packet a
  // deleted one is detached from DPDK and probed again when an interface of
  // that name is back (af_xdp stays down: see poll_port).
  enum Kind { kEthdev, kKernelIface } kind = kEthdev;
  std::string iface;      // kKernelIface: the kernel interface (iface=)
  unsigned ifindex = 0;   // kKernelIface: the interface the driver's socket is bound to
  bool detached = false;  // kKernelIface: device removed, waiting for the interface
  bool reprobe = false;   // kKernelIface: detached and probed again (af_packet; af_xdp stays down)
  bool lsc = false;       // an LSC callback is registered
  bool up = true;
  uint64_t since_unix_ns = 0;  // CLOCK_REALTIME of the last change (or start)
  uint64_t changes = 0;
  std::string detail;      // why it is down ("no memif peer", "interface gwps gone")
  bool warned = false;     // a failed re-probe was logged once
  bool quiesced = false;   // down, and every lcore has seen it since (publish): nothing polls it
  uint32_t short_mtu = 0;  // kKernelIface: the interface's MTU while below ports.<p>.mtu, else 0
  // kKernelIface: the driver counters of the devices detached before the one
  // now probed (each probe starts from 0): reported with the live ones, so
  // they never go backwards across an interface replaced.
  NicTotals nic_detached;
  // kKernelIface: polls that could not look at the interface (no descriptor left).
  LogThrottle unknown_logged{60'000'000'000};
  // Link changes: a flapping NIC that raises an interrupt for each would
  // otherwise log a line for every one (their count is in `changes`).
  LogThrottle change_logged{1'000'000'000};
  // kKernelIface: when the offloads and promiscuous mode psgate set are
  // next looked at (steady ns).
  uint64_t next_settings_look_ns = 0;
};
inline constexpr uint64_t kSettingsLookNs = 1'000'000'000;

// The data lcores' heartbeat (lcore_watch.cc; control thread only).
struct LcoreWatch {
  uint64_t token = 0;                  // the QSBR token the last tick started
  uint64_t last_tick_ns = 0;           // when the last watch ran
  std::vector<LcoreStallClock> stall;  // per plan: stalled since its last progress
  std::vector<unsigned> stuck;         // lcore ids, as last logged
  // Read by the LSC interrupt thread too (link_watch.cc publish): whether
  // `stuck` is not empty. `running`: set by start(), cleared by the stop.
  std::atomic<bool> any_stuck{false};
  std::atomic<bool> running{false};
};

struct Dataplane::Impl {
  ConfigSpec config;
  DataplaneShared shared;
  rte_mempool* pool = nullptr;
  FramePlan frames;  // how the ports carry the MTU, also for a port set up again (link_watch.cc)
  rte_rcu_qsbr* qsbr = nullptr;
  std::unique_ptr<SnapshotPublisher> publisher;
  std::vector<LcoreCountersMemory> counters;        // one per data lcore, on its NUMA node
  std::vector<std::unique_ptr<EgressPort>> egress;  // [wire, host]
  std::vector<std::unique_ptr<RxContext>> rx;
  std::vector<std::unique_ptr<SchedContext>> sched;
  std::vector<LcorePlan> plans;
  std::vector<rte_ring*> rings;  // all handoff rings, for cleanup
  bool started = false;
  bool ports_started = false;
  unsigned n_rx = 1;  // RX queues per port (re-probing sets the same up)
  // What the ports changed on their kernel interfaces: put back at exit.
  std::vector<KernelIfaceChange> iface_changes;
  std::array<PortWatch, kPortCount> links;
  LcoreWatch watch;
  std::mutex link_mutex;  // control thread and the interrupt thread (LSC); never a data lcore
  // Publishes the config's own snapshot unless one was published (by the
  // control plane): lcores need one to run.
  Result<bool> ensure_snapshot();
  ~Impl();
};

// Link watching (link_watch.cc): initial state after the ports started, and
// the LSC callbacks' removal before the ports close.
void links_init(Dataplane::Impl& d);
void links_shutdown(Dataplane::Impl& d);

// Entry point of every data lcore (arg: LcorePlan*, with Impl reachable through
// a pointer set before launch).
int lcore_main(void* arg);
void set_lcore_dataplane(Dataplane::Impl* impl);

}  // namespace psgate
