// SPDX-License-Identifier: BSD-3-Clause
// What each data lcore owns, for the three fast-path stages that run on it:
//
//   RX stage  (rx_stage.h):    rx_burst -> parse -> classify -> police -> hand off
//   sched stage (sched_stage.h): accept (ECN decision, class FIFO) -> schedule -> DSCP/CE rewrite
//   TX (tx.h):                 tx_burst, counting what left
//
// Run-to-completion: one lcore runs both (for both directions, or for the one
// it receives when two lcores take a direction each) and the hand-off is a
// direct call.
// Pipelined: RX lcores hand off through SPSC rings, one per (RX lcore, egress
// port, class), so a full low-priority ring never blocks a high-priority one.
// Each RX lcore also posts, per egress port, where each of its rings' tails
// stands (RingPosts): the scheduler reads that one line per RX lcore and
// port instead of polling every ring, most of which are empty.
//
//   RX lcore k ──ring[k][egress][class]──▶ scheduler lcore of that egress port
//              ──posts[k][egress]───────▶ (which of those rings have news)
//
// Every structure here has exactly one writer lcore; nothing is locked.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <rte_mbuf.h>
#include <rte_rcu_qsbr.h>
#include <rte_ring.h>

#include "dataplane/port_link.h"
#include "psgate/class_scheduler.h"
#include "psgate/classifier.h"
#include "psgate/control_limit.h"
#include "psgate/counters.h"
#include "psgate/flow_cache.h"
#include "psgate/fragment_table.h"
#include "psgate/job_telemetry.h"
#include "psgate/snapshot.h"
#include "psgate/token_bucket.h"

namespace psgate {

inline constexpr unsigned kMaxBurst = 64;

// What one RX lcore has put into its rings to one egress port: tail[c] is
// ring c's prod.tail after the RX lcore's last enqueue there, stored after
// the enqueue (release). The scheduler compares it with how far it has read
// (its own cons.head): equal means the ring has nothing new, and it is not
// touched. A stale value only delays a ring to the next loop iteration; the
// RX lcore's last store is published before it stops (rx_lcores_running),
// so the drain at shutdown sees every ring's final tail. One cache line per
// 16 classes, written only by the RX lcore.
struct alignas(RTE_CACHE_LINE_SIZE) RingPosts {
  std::array<std::atomic<uint32_t>, kMaxClasses> tail{};
  // The snapshot generation the RX lcore last synced (high half) and its
  // default class ring's prod.tail then (low half), stored (release) at each
  // sync: every packet it classified with an older snapshot lies before
  // that position (sched_release_holds).
  alignas(RTE_CACHE_LINE_SIZE) std::atomic<uint64_t> synced{0};
};

// One egress port as its scheduler lcore sees it.
struct EgressPort {
  EgressPort(const PortSchedConfig& config, uint64_t now) : sched(config, now) {}
  unsigned index = 0;  // 0 wire, 1 host
  uint16_t port_id = 0;
  uint16_t tx_queue = 0;
  PortScheduler<rte_mbuf*> sched;
  std::vector<ClassActions> actions;  // by class (snapshot.h), read per packet
  // Bit c: class c remarks DSCP or marks CE, so its packets are rewritten at
  // dequeue; with no bit set dequeue never looks at a packet's header.
  uint64_t rewrite_classes = 0;
  void set_actions(unsigned cls, const ClassActions& a) {
    actions[cls] = a;
    const uint64_t bit = uint64_t{1} << cls;
    rewrite_classes = (a.dscp >= 0 || a.ecn_threshold != 0) ? rewrite_classes | bit : rewrite_classes & ~bit;
  }
  PortLive applied;  // the live parameters in force, to apply only what changed
  // Class 0's limit on this port (classes.control_rate): only this port's
  // scheduler lcore charges it, where class 0's packets reach it (rx_stage.cc
  // run to completion, sched_pull_rings pipelined).
  ControlLimit control;
  // Where each job's queued packets are, by job slot: a job is in one class
  // at a time, which is what keeps its flows in order across re-ranking.
  struct JobQueue {
    uint32_t queued = 0;
    uint8_t cls = 0;
    // A job new to its slot may take over flows whose earlier packets wait
    // in the default class (unclassified until it came): it stays in the
    // default class until they have left (settle_job_class). kPinArmed: new,
    // no packet seen yet; kPinMarked: until the default queue's head passes
    // pin_mark.
    uint8_t pin = 0;
  };
  static constexpr uint8_t kPinArmed = 1, kPinMarked = 2;
  // The rest of a pin, read only while `pin` is set (apart from JobQueue,
  // which every packet touches).
  struct Pin {
    uint32_t mark = 0;        // kPinMarked: the default queue's tail once everything before the job was in it
    uint32_t generation = 0;  // the snapshot the job arrived in
    uint8_t target = 0;       // the job's own class, as its last held packet asked
    uint64_t until_tsc = 0;   // the hold ends then at the latest (armed + takeover_hold)
  };
  std::vector<Pin> pins;             // by job slot
  std::vector<uint32_t> held_slots;  // slots with a pin set: released by sched_release_holds
  std::vector<uint64_t> slot_owner;  // SlotInfo::owner as this port's scheduler last synced it
  // The snapshot sched_sync_slots last brought this port to; 0: none yet
  // (the first snapshot's jobs are not new: nothing came before them).
  uint32_t synced_generation = 0;
  uint64_t pin_hold_ticks = 0;  // dataplane.takeover_hold: the longest a new job waits in the default class
  unsigned default_class = 0;
  std::vector<JobQueue> job_queue;
  // Pull-burst telemetry by job slot; only the wire egress (pull direction) has it.
  std::vector<JobBurstState> telemetry;
  uint64_t burst_gap_ticks = 0;
  // Packets the NIC did not take yet: retried before anything new is
  // dequeued, so backpressure keeps the queue inside psgate.
  std::array<rte_mbuf*, kMaxBurst> pending{};
  unsigned pending_head = 0;
  unsigned pending_count = 0;
  // When the port last took a packet while some were pending (TSC): pending
  // packets are retried until shared.tx_stall_ticks after that, then counted
  // as tx_failed and freed. While `stalled`, a burst the port refuses is
  // counted at once instead of retried, so a dead NIC drains the queues at
  // the scheduler's pace rather than freezing them; the first packet the
  // port takes again ends the stall.
  uint64_t pending_since_tsc = 0;
  // When psgate last offered the port its pending packets (TSC). What a gap
  // before the next offer has beyond shared.lcore_away_ticks is time the
  // lcore did not run (descheduled, a VM's vCPU taken away), not time the
  // port refused: pending_since_tsc moves on by it (sched_transmit).
  uint64_t offered_tsc = 0;
  // The refused-head probe's state (sched_stage.cc, send_past_refused_head):
  // where in `pending` it offers next, and how often the head was refused
  // right after the port took packets behind it.
  uint8_t probe_at = 1;
  uint8_t head_refusals = 0;
  bool stalled = false;  // set_stalled() only: stalled_since follows it
  // For health (read on the control thread): when the current stall began
  // (TSC), 0 while not stalled. Written only when `stalled` changes.
  std::atomic<uint64_t> stalled_since_tsc{0};
  // The egress link as this port's scheduler lcore last read it (top of its
  // loop iteration). Down: nothing is sent, everything meant for the port is
  // dropped as link_down.
  bool link_up = true;
  // The largest untagged frame the port carries now
  // (DataplaneShared::max_untagged_frame[index], lowered by the control
  // thread while a kernel interface's MTU is short) and with the configured
  // MTU. tx_burst_counted compares the two once per burst: only while the
  // port is short does it look at each frame's length (frames queued before
  // the MTU went down were judged at RX against the old one). The default
  // never reads short.
  const std::atomic<uint32_t>* max_untagged_frame = &kNeverShort;
  uint32_t configured_max_frame = 0;
  bool one_dot1q_tag_room = false;  // PortCapacity::one_dot1q_tag_room
  static inline const std::atomic<uint32_t> kNeverShort{0};
};

// Shared, read-mostly state every lcore needs.
struct DataplaneShared {
  std::array<uint16_t, kPortCount> port_ids{};
  unsigned burst = 32;
  unsigned class_count = 8;
  unsigned default_class = 7;
  uint64_t tsc_hz = 0;
  uint64_t ns_per_tick_q32 = 0;  // (1e9 << 32) / tsc_hz: ticks -> ns without division
  // Per egress port: the largest untagged frame it may send. A frame above
  // it is oversize unless its VLAN tags account for the difference
  // (rx_stage.cc; tx.cc for those queued before it went down). Both ports
  // carry the configured MTU, except a kernel interface (af_packet, af_xdp)
  // whose MTU was set below it under psgate: the kernel would drop the
  // larger frames unseen (link_watch.cc).
  std::array<std::atomic<uint32_t>, kPortCount> max_untagged_frame{1514, 1514};
  // Per egress port: the most segments a packet leaving it may have (the
  // frame plan's max_segs); a longer chain is dropped at RX.
  std::array<uint16_t, kPortCount> max_tx_segs{UINT16_MAX, UINT16_MAX};
  std::array<bool, kPortCount> one_dot1q_tag_room{};  // PortCapacity::one_dot1q_tag_room, by egress port
  const SnapshotPublisher* snapshots = nullptr;
  rte_rcu_qsbr* qsbr = nullptr;
  // Shutdown handshake: main stores the deadline, then clears rx_enabled
  // (release); lcores load rx_enabled (acquire) and then the deadline.
  std::atomic<bool> rx_enabled{true};
  std::atomic<uint64_t> drain_deadline_tsc{UINT64_MAX};
  std::atomic<unsigned> rx_lcores_running{0};
  // How long pending packets are retried on a port that takes none (TSC
  // ticks), and after how long the port is offered the packets behind the
  // first, in case it refuses that one alone (sched_stage.cc).
  uint64_t tx_stall_ticks = 0;
  uint64_t tx_probe_ticks = 0;
  uint64_t lcore_away_ticks = 0;  // kLcoreAwayNs (EgressPort::offered_tsc)
  // dataplane.idle_sleep (0: busy polling), in ns and TSC ticks.
  uint64_t idle_sleep_ns = 0;
  uint64_t idle_sleep_ticks = 0;
  // Link state and the port-teardown handshake (port_link.h).
  std::unique_ptr<LinkShared> link;
};

struct RxContext {
  unsigned rx_queue = 0;
  // The ports it receives from, a bit per port: both, but one each when two
  // lcores run a direction each (their packets leave by the other port).
  unsigned in_ports = (1u << kPortCount) - 1;
  LcoreCounters* counters = nullptr;
  std::unique_ptr<FlowCache> flow_cache;     // may be null (disabled)
  std::unique_ptr<FragmentTable> fragments;  // later fragments follow their first's job
  // Ingress policers by job slot, resynchronised when the snapshot changes.
  std::vector<TokenBucket> police;
  std::vector<uint64_t> slot_owner;         // SlotInfo::owner as this lcore last synced it
  bool hold_new_jobs = true;                // dataplane.takeover_hold is not 0
  uint32_t synced_generation = UINT32_MAX;  // the snapshot rx_sync_slots last brought this lcore to
  // Hand-off: exactly one of these is used.
  std::array<EgressPort*, kPortCount> direct{};  // run-to-completion
  std::vector<rte_ring*> rings;                  // [egress][class], pipelined
  std::array<RingPosts, kPortCount> posts;       // [egress], pipelined
  // Pipelined re-ranking: the ring each job's packets go to, by [egress][slot],
  // and the ring position after the job's last packet in it. A job moves to
  // another class's ring only once the scheduler has consumed past that
  // position, so its packets are never in two rings at once.
  struct RingStick {
    uint32_t ticket = 0;
    uint32_t burst = 0;  // the last burst that sent the job to `cls`
    uint8_t cls = 0;
    uint8_t valid = 0;
  };
  std::vector<RingStick> ring_stick;
  unsigned max_jobs = 0;
  uint32_t burst_seq = 0;  // counts RX bursts that reach the hand-off
  // Per-packet scratch of the burst in flight, kept here rather than on the
  // stack so that a burst does not pay for zero-initialising them: wire flow
  // keys and their hashes (common case), and full parse results (the rest).
  std::array<FlowKey4, kMaxBurst> keys;
  std::array<uint32_t, kMaxBurst> hashes;
  std::array<ParsedPacket, kMaxBurst> parsed;
};

struct SchedContext {
  LcoreCounters* counters = nullptr;
  uint32_t applied_generation = 0;
  std::vector<EgressPort*> egress;  // the ports this lcore transmits on
  // Pipelined only: rx_rings[r] is RX lcore r's ring set ([egress][class])
  // and rx_posts[r] its posted tails ([egress]).
  std::vector<const std::vector<rte_ring*>*> rx_rings;
  std::vector<const std::array<RingPosts, kPortCount>*> rx_posts;
  // How far this lcore has read each ring, [r][egress][class]: the rings'
  // cons.head, kept here side by side so that finding the rings with news
  // reads one local line per RX lcore and port rather than one per ring.
  std::vector<uint32_t> consumed;
  // Packets taken from the rings and not yet in the class FIFOs (see
  // sched_pull_rings), as runs of one ring's burst each, in the order taken.
  struct PulledRun {
    EgressPort* egress;
    uint32_t start;
    uint32_t n;
    uint32_t cls;  // the ring's class
  };
  std::vector<rte_mbuf*> pulled;   // room for a burst from every ring
  std::vector<rte_mbuf*> ordered;  // the same, in strict-priority order (sched_accept_pulled's pass-through)
  std::vector<PulledRun> pulled_runs;
  unsigned n_pulled_runs = 0;
  std::array<uint32_t, kPortCount> pulled_for{};  // packets the last pull took, by egress port
};

// How long psgate retries a burst on a port that accepts nothing before it
// counts the burst as tx_failed (see EgressPort::pending_since_tsc).
inline constexpr uint64_t kTxStallTimeoutNs = 100'000'000;
// How long a port may take nothing before psgate checks whether it refuses
// one packet (the first pending) rather than being busy: far longer than a
// working port's TX ring takes to free room at any speed psgate runs, and a
// PAUSE from the peer (3.4 ms at most at 10 Gbit/s) makes it refuse the
// probe too.
inline constexpr uint64_t kTxProbeAfterNs = 1'000'000;
// A data lcore that comes back to a port with pending packets more than
// this long after it last offered them was away (the kernel ran something
// else on its CPU, a hypervisor stole the vCPU): far longer than any loop
// iteration of an lcore that runs, short enough that an absence of the
// stall time is told apart. Only this much of an absence counts toward
// kTxStallTimeoutNs and kTxProbeAfterNs: the port was offered nothing.
inline constexpr uint64_t kLcoreAwayNs = 10'000'000;

}  // namespace psgate
