// SPDX-License-Identifier: BSD-3-Clause
// Data plane set-up and tear-down (control path; runs on the main lcore).
#include "psgate/dataplane.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>

#include "config/compile.h"
#include "dataplane/dataplane_impl.h"
#include "dataplane/ports.h"
#include "psgate/packet_meta.h"
#include "psgate/tsc_clock.h"

namespace psgate {

namespace {

using CreateResult = Result<std::unique_ptr<Dataplane>>;

}  // namespace

Dataplane::Impl::~Impl() {
  if (ports_started) {
    links_shutdown(*this);
    // Closing flushes what drivers buffer (net_pcap's output file).
    for (uint16_t port : shared.port_ids) {
      rte_eth_dev_stop(port);
      rte_eth_dev_close(port);
    }
  }
  restore_kernel_ifaces(iface_changes);
  // Snapshots hold ACL contexts; free them before the EAL goes away.
  publisher.reset();
  rx.clear();
  for (rte_ring* r : rings) rte_ring_free(r);
  rte_free(qsbr);
  // The ports are closed (or were never set up: a start stopped or failed
  // before them): nothing references the pool any more.
  if (pool) rte_mempool_free(pool);
}

Dataplane::Dataplane(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dataplane::~Dataplane() {
  // A data lcore still launched (a stop that gave up on it, or none asked)
  // runs on what Impl owns: its contexts, rings, snapshots, the ports and
  // the pool. Freed under it, the lcore crashed the process later, far from
  // the cause, and EAL still saw it busy, so the next start failed. A slow
  // lcore (descheduled on a loaded machine) is waited for, a stop at a
  // time; one that never returns ends the process here, saying why, rather
  // than with a use after free. psgate's main never gets here with one
  // running: it leaves with _Exit when the stop gives up.
  if (!impl_ || !impl_->started) return;
  const uint64_t hz = impl_->shared.tsc_hz;
  const uint64_t until = rte_rdtsc() + ticks_from_ns(kDestroyWaitNs, hz);
  while (!stop_and_drain()) {
    if (rte_rdtsc() >= until) {
      spdlog::critical(
          "data lcore(s) still running {} s after the data plane was to be freed: aborting rather than "
          "freeing what they use",
          kDestroyWaitNs / 1'000'000'000);
      spdlog::default_logger()->flush();
      std::abort();
    }
  }
}

CreateResult Dataplane::create(const ConfigSpec& config, const std::function<bool()>& stop_asked) {
  // A stop asked between steps: what `d` holds so far is released with it.
  auto stop_now = [&] { return stop_asked && stop_asked(); };
  auto stopped = [](const std::string& step) {
    return CreateResult::failure(std::string(kStartStopped) + " before " + step);
  };
  auto d = std::make_unique<Impl>();
  d->config = config;
  DataplaneShared& shared = d->shared;
  shared.burst = config.burst;
  shared.class_count = config.class_count;
  shared.default_class = config.default_class;
  shared.tsc_hz = psgate::tsc_hz();  // measured: DPDK rounds it (tsc_clock.h)
  if (shared.tsc_hz != rte_get_tsc_hz())
    spdlog::info("TSC {:.3f} MHz measured against CLOCK_MONOTONIC_RAW (DPDK reports {:.3f} MHz)", shared.tsc_hz / 1e6,
                 rte_get_tsc_hz() / 1e6);
  shared.ns_per_tick_q32 = (uint64_t{1'000'000'000} << 32) / shared.tsc_hz;
  shared.tx_stall_ticks = ticks_from_ns(kTxStallTimeoutNs, shared.tsc_hz);
  shared.tx_probe_ticks = ticks_from_ns(kTxProbeAfterNs, shared.tsc_hz);
  shared.lcore_away_ticks = ticks_from_ns(kLcoreAwayNs, shared.tsc_hz);
  shared.idle_sleep_ns = config.idle_sleep_ns;
  shared.idle_sleep_ticks = ticks_from_ns(config.idle_sleep_ns, shared.tsc_hz);
  const int socket = static_cast<int>(rte_socket_id());
  // DPDK object names are process-wide; tests build several data planes in one process.
  static std::atomic<unsigned> instances{0};
  const std::string tag = std::to_string(instances.fetch_add(1));

  if (register_packet_meta() < 0) return CreateResult::failure("cannot register the mbuf metadata field");

  // Lcore roles (see dataplane.h).
  const std::vector<unsigned>& lcores = config.data_lcores;
  const size_t n = lcores.size();
  // Two lcores run one direction each to completion unless told to
  // pipeline: an RX lcore handing every packet to a scheduler lcore moves
  // each mbuf's lines between cores, and that cost more than the second
  // core gave (1 RX + 1 scheduler forwarded half what one lcore did).
  // Hybrid (3 or more, asked for): the first two lcores run a direction
  // each, as two do, and also take the rings of the other N-2, RX lcores.
  const bool hybrid = n >= 3 && config.lcore_mode == ConfigSpec::LcoreMode::kHybrid;
  const bool by_direction = n == 2 && config.lcore_mode == ConfigSpec::LcoreMode::kAuto;
  const bool pipelined = n > 1 && !by_direction && !hybrid;
  // RX lcores that hand off through rings, and RX queues per port: the
  // hybrid lcores receive queue 0 of their port, its RX lcores 1..N-2.
  const unsigned ring_rx = pipelined ? (n > 2 ? static_cast<unsigned>(n - 2) : 1)
                           : hybrid  ? static_cast<unsigned>(n - 2)
                                     : 0;
  const unsigned n_rx = hybrid ? static_cast<unsigned>(n - 1) : n > 2 ? static_cast<unsigned>(n - 2) : 1;
  const bool with_rings = ring_rx != 0;
  shared.link = std::make_unique<LinkShared>(static_cast<unsigned>(n));

  // Ports.
  const PortSpec* specs[kPortCount] = {&config.wire, &config.host};
  // Full queues hold mbufs; so do RX descriptor rings, the pipelined mode's
  // hand-off rings (one per RX lcore, egress port and class) and each
  // egress port's packets waiting for TX. A pool smaller than that runs dry
  // under overload and the NIC drops whatever comes, class 0 too (counted
  // as nic rx_nombuf).
  uint64_t queued = 0;
  for (const ClassSpec& cls : config.classes) queued += cls.depth;
  uint64_t needed = 0;
  for (const PortSpec* spec : specs)
    needed += queued + uint64_t{n_rx} * spec->rx_desc + spec->tx_desc + kMaxBurst;  // + pending TX
  needed += uint64_t{ring_rx} * kPortCount * config.class_count * (config.ring_size - 1);
  // Each lcore's pool cache (256, flushed at 1.5 times that) holds buffers
  // the others cannot take: the data lcores' and the main lcore's.
  needed += uint64_t{n + 1} * 384;
  const bool auto_mbufs = config.mbufs == kAutoMbufs;
  if (!auto_mbufs && config.mbufs < needed) {
    spdlog::warn(
        "dataplane.mbufs = {} is below what full queues, descriptor rings{} can hold ({}): "
        "under overload the NIC will drop for lack of buffers, whatever their class",
        config.mbufs, with_rings ? " and hand-off rings" : "", needed);
  }
  PortCapacity caps[kPortCount];
  for (unsigned p = 0; p < kPortCount; ++p) {
    auto port = find_port(kPortNames[p], specs[p]->device);
    if (!port.ok()) return CreateResult::failure(port.error());
    shared.port_ids[p] = *port;
    auto cap = port_capacity(kPortNames[p], *port, *specs[p]);
    if (!cap.ok()) return CreateResult::failure(cap.error());
    caps[p] = std::move(*cap);
  }
  if (shared.port_ids[0] == shared.port_ids[1])
    return CreateResult::failure(config.source + ": ports.host.device: the same device as ports.wire.device");
  auto frames = plan_frames(config, caps);
  if (!frames.ok()) return CreateResult::failure(config.source + ": " + frames.error());
  d->frames = *frames;
  // The RX stage drops what the egress port could not carry: frames over the
  // MTU plus the Ethernet header (untagged, the common case, checked first)
  // or plus the tags the frame actually has.
  for (auto& max : shared.max_untagged_frame) max.store(max_frame_bytes(config.wire.mtu, 0), std::memory_order_relaxed);
  for (unsigned p = 0; p < kPortCount; ++p) shared.max_tx_segs[p] = frames->max_segs[p];
  for (unsigned p = 0; p < kPortCount; ++p) shared.one_dot1q_tag_room[p] = caps[p].one_dot1q_tag_room;
  const uint32_t buffer_bytes = frames->data_room + RTE_PKTMBUF_HEADROOM + 256;  // + mbuf header, pool overhead
  auto mib_of = [&](uint64_t count) { return (count * buffer_bytes + (1 << 20) - 1) >> 20; };
  auto create_pool = [&](uint32_t count) {
    return rte_pktmbuf_pool_create(("psgate_mbufs" + tag).c_str(), count, 256, 0,
                                   static_cast<uint16_t>(frames->data_room + RTE_PKTMBUF_HEADROOM), socket);
  };
  uint32_t pool_size =
      auto_mbufs ? static_cast<uint32_t>(std::clamp<uint64_t>(needed, kMinMbufs, kMaxMbufs)) : config.mbufs;
  // "auto" is the default: a gateway whose EAL memory cannot hold what its
  // queues could (jumbo buffers under a small -m) still starts, with what
  // fits, rather than refusing a file that names no size at all. A pool
  // fits when it is made and what the start allocates after it (flow
  // caches, rings, counters, the ports' descriptor rings: after_pool, as
  // docs/operations.md counts them) can still be had; an allocation of that
  // size tried and given back tells, with hugepages mapped on demand too.
  // Each try takes a quarter less; the smallest that is made is kept.
  const uint64_t receivers = pipelined ? ring_rx : n;
  const uint64_t flow_cache_bytes =
      config.flow_cache_entries ? uint64_t{rte_align32pow2(config.flow_cache_entries)} * 96 : 0;
  const uint64_t after_pool =
      receivers * flow_cache_bytes +
      uint64_t{ring_rx} * kPortCount * config.class_count * (8 * uint64_t{config.ring_size} + 384) +
      n * (2 * uint64_t{config.class_count} * 7912 + uint64_t{config.max_jobs} * 80 + 384) +
      (16 << 20);  // descriptors, EAL's and the drivers' own
  auto out_of_memory = [] { return rte_errno == ENOMEM || rte_errno == ENOBUFS || rte_errno == ENOSPC; };
  auto room_after = [&] {
    void* probe = rte_malloc_socket("psgate_after_pool", after_pool, 0, socket);
    rte_free(probe);
    return probe != nullptr;
  };
  for (;;) {
    if (stop_now()) return stopped("the mbuf pool (" + std::to_string(pool_size) + " buffers)");
    d->pool = create_pool(pool_size);
    if (!auto_mbufs) break;
    const bool smaller = pool_size > kMinMbufs;
    if (d->pool && (room_after() || !smaller)) break;
    if (!d->pool && (!out_of_memory() || !smaller)) break;
    if (d->pool) rte_mempool_free(d->pool);
    d->pool = nullptr;
    pool_size = std::max(pool_size * 3 / 4, kMinMbufs);
  }
  if (!d->pool) {
    if (auto_mbufs && out_of_memory()) {
      return CreateResult::failure("dataplane.mbufs = \"auto\": cannot create a pool of even " +
                                   std::to_string(pool_size) + " buffers (at least " +
                                   std::to_string(mib_of(pool_size)) + " MiB): " + rte_strerror(rte_errno) +
                                   "; give DPDK more memory ([eal] args -m, hugepages)");
    }
    const std::string size =
        auto_mbufs ? "\"auto\" (" + std::to_string(pool_size) + " buffers)" : std::to_string(config.mbufs);
    return CreateResult::failure("dataplane.mbufs = " + size + ": cannot create the pool (at least " +
                                 std::to_string(mib_of(pool_size)) + " MiB): " + rte_strerror(rte_errno) +
                                 "; lower dataplane.mbufs or give DPDK more memory ([eal] args -m, hugepages)");
  }
  // What the pool really took: without hugepages an mbuf never crosses a
  // 4 KiB page, so a 2 KiB-buffer pool takes about twice mib_of's figure.
  uint64_t pool_bytes = 0;
  rte_mempool_mem_iter(
      d->pool,
      [](rte_mempool*, void* bytes, rte_mempool_memhdr* chunk, unsigned) {
        *static_cast<uint64_t*>(bytes) += chunk->len;
      },
      &pool_bytes);
  const uint64_t pool_mib = (pool_bytes + (1 << 20) - 1) >> 20;
  if (auto_mbufs && pool_size < needed) {
    spdlog::warn(
        "dataplane.mbufs = \"auto\": {} buffers (about {} MiB), what DPDK's memory has room for, below what full "
        "queues, descriptor rings{} can hold ({}): under overload the NIC will drop for lack of buffers, whatever "
        "their class; give DPDK more memory ([eal] args -m, hugepages)",
        pool_size, pool_mib, with_rings ? " and hand-off rings" : "", needed);
  }
  spdlog::info("mbuf pool: {} buffers of {} B ({} MiB){}", pool_size, frames->data_room, pool_mib,
               auto_mbufs ? ", sized by dataplane.mbufs = \"auto\"" : "");
  for (unsigned p = 0; p < kPortCount; ++p) {
    if (stop_now()) return stopped(std::string("port ") + kPortNames[p]);
    bool config_error = false;
    auto started = start_port(kPortNames[p], shared.port_ids[p], *specs[p], *frames, n_rx, 1, d->pool, d->iface_changes,
                              &config_error, stop_asked);
    d->ports_started = true;
    // "<config>: <key>: ..." is a configuration error (exit 2: a restart
    // cannot mend it), as main() tells them apart.
    if (!started.ok()) return CreateResult::failure((config_error ? config.source + ": " : "") + started.error());
  }

  d->n_rx = n_rx;
  links_init(*d);

  // RCU for snapshot readers (RX stages).
  const size_t qsbr_size = rte_rcu_qsbr_get_memsize(static_cast<uint32_t>(n));
  d->qsbr = static_cast<rte_rcu_qsbr*>(
      rte_zmalloc_socket(("psgate_qsbr" + tag).c_str(), qsbr_size, RTE_CACHE_LINE_SIZE, socket));
  if (!d->qsbr || rte_rcu_qsbr_init(d->qsbr, static_cast<uint32_t>(n)) != 0)
    return CreateResult::failure("cannot set up RCU");
  shared.qsbr = d->qsbr;

  // No snapshot yet: the control plane publishes the first one (start()), or,
  // without a control plane, start() and run_once() compile the config's.
  d->publisher = std::make_unique<SnapshotPublisher>(nullptr, d->qsbr);
  shared.snapshots = d->publisher.get();

  // Egress schedulers, with the configured parameters; a snapshot's differing
  // ones are applied when the scheduler lcore first sees it.
  const uint64_t now = rte_rdtsc();
  const std::array<PortLive, kPortCount> configured = compile_ports(config);
  for (unsigned p = 0; p < kPortCount; ++p) {
    const PortLive& live = configured[p];
    auto e = std::make_unique<EgressPort>(compile_scheduler(config, p, live, shared.tsc_hz), now);
    e->index = p;
    e->port_id = shared.port_ids[p];
    e->actions.resize(live.classes.size());
    for (unsigned c = 0; c < live.classes.size(); ++c) e->set_actions(c, live.classes[c].actions);
    e->applied = live;
    e->job_queue.resize(config.max_jobs);
    e->slot_owner.resize(config.max_jobs);
    e->pins.resize(config.max_jobs);
    e->held_slots.reserve(config.max_jobs);  // a slot is held at most once: no allocation on the lcore
    e->default_class = config.default_class;
    e->max_untagged_frame = &shared.max_untagged_frame[p];
    e->configured_max_frame = max_frame_bytes(config.wire.mtu, 0);  // as stored above: the ports' MTUs are one
    e->one_dot1q_tag_room = shared.one_dot1q_tag_room[p];
    e->pin_hold_ticks = ticks_from_ns(config.takeover_hold_ns, shared.tsc_hz);
    if (const std::optional<RateSpec>& limit = (p == 0 ? config.wire : config.host).control)
      e->control = ControlLimit(bytes_per_sec(limit->rate_bps), limit->burst_bytes,
                                (p == 0 ? config.wire : config.host).overhead_bytes, shared.tsc_hz, now);
    if (p == 0) {  // wire egress: pull traffic, from which iterations are measured
      e->telemetry = std::vector<JobBurstState>(config.max_jobs);
      e->burst_gap_ticks = ticks_from_ns(kBurstGapNs, shared.tsc_hz);
    }
    d->egress.push_back(std::move(e));
  }

  // Per-lcore contexts.
  for (size_t i = 0; i < n; ++i) {
    auto counters = LcoreCountersMemory::create(config.class_count, config.max_jobs,
                                                static_cast<int>(rte_lcore_to_socket_id(lcores[i])));
    if (!counters.ok()) return CreateResult::failure("lcore " + std::to_string(lcores[i]) + ": " + counters.error());
    d->counters.push_back(std::move(*counters));
  }
  // RX queue k of the ports; `tag_k` tells its DPDK objects apart.
  auto make_rx = [&](unsigned k, unsigned tag_k, LcoreCounters* counters, bool rings) -> Result<RxContext*> {
    auto rx = std::make_unique<RxContext>();
    rx->rx_queue = k;
    rx->counters = counters;
    rx->police.resize(config.max_jobs);
    rx->slot_owner.resize(config.max_jobs);
    rx->hold_new_jobs = config.takeover_hold_ns != 0;
    rx->max_jobs = config.max_jobs;
    if (config.flow_cache_entries) {
      auto fc = FlowCache::create(config.flow_cache_entries, "psgate_fc" + tag + "_" + std::to_string(tag_k), socket);
      if (!fc.ok()) return Result<RxContext*>::failure("flow cache: " + fc.error());
      rx->flow_cache = std::move(*fc);
    }
    // A datagram's fragments cross one link within microseconds; a second
    // covers any queueing, and bounds how long a recycled IPv4
    // Identification can find an old datagram's entry.
    rx->fragments = std::make_unique<FragmentTable>(shared.tsc_hz);
    if (rings) {
      rx->ring_stick.resize(kPortCount * config.max_jobs);
      for (unsigned p = 0; p < kPortCount; ++p) {
        for (unsigned c = 0; c < config.class_count; ++c) {
          const std::string name =
              "psg" + tag + "_r" + std::to_string(tag_k) + "_" + std::to_string(p) + "_" + std::to_string(c);
          rte_ring* r = rte_ring_create(name.c_str(), config.ring_size, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
          if (!r) return Result<RxContext*>::failure("cannot create ring " + name + ": " + rte_strerror(rte_errno));
          d->rings.push_back(r);
          rx->rings.push_back(r);
        }
      }
    } else {
      for (unsigned p = 0; p < kPortCount; ++p) rx->direct[p] = d->egress[p].get();
    }
    d->rx.push_back(std::move(rx));
    return d->rx.back().get();
  };

  // A scheduler context fed by the rings of the RX lcores made so far.
  auto take_rings = [&](SchedContext& sched) {
    for (auto& rx : d->rx) {
      sched.rx_rings.push_back(&rx->rings);
      sched.rx_posts.push_back(&rx->posts);
    }
    const size_t rings = d->rx.size() * kPortCount * config.class_count;
    sched.consumed.assign(rings, 0);  // new rings start at 0, as their posts
    sched.pulled.resize(rings * config.burst);
    sched.ordered.resize(rings * config.burst);
    sched.pulled_runs.resize(rings);
  };

  if (hybrid) {
    // Lcores 2..N-1 receive queues 1..N-2 of both ports and hand off
    // through rings, as pipelined RX lcores do. Lcore k < 2 receives queue 0
    // of port k to completion and is the only scheduler of the other port,
    // whose rings it also takes (its own RX context, made last, has none).
    for (unsigned k = 2; k < n; ++k) {
      auto rx = make_rx(k - 1, k, d->counters[k].get(), true);
      if (!rx.ok()) return CreateResult::failure(rx.error());
    }
    std::vector<LcorePlan> rx_plans;
    for (unsigned k = 2; k < n; ++k)
      rx_plans.push_back(LcorePlan{lcores[k], LcoreRole::kRx, d->rx[k - 2].get(), nullptr, k});
    for (unsigned k = 0; k < 2; ++k) {
      const unsigned out = 1 - k;
      auto sched = std::make_unique<SchedContext>();
      sched->counters = d->counters[k].get();
      sched->egress = {d->egress[out].get()};
      take_rings(*sched);
      sched->applied_generation = 0;
      d->sched.push_back(std::move(sched));
    }
    for (unsigned k = 0; k < 2; ++k) {
      auto rx = make_rx(0, k, d->counters[k].get(), false);
      if (!rx.ok()) return CreateResult::failure(rx.error());
      const unsigned out = 1 - k;
      (*rx)->in_ports = 1u << k;
      (*rx)->direct = {};
      (*rx)->direct[out] = d->egress[out].get();
      d->plans.push_back(LcorePlan{lcores[k], LcoreRole::kHybrid, *rx, d->sched[k].get(), k});
    }
    for (LcorePlan& p : rx_plans) d->plans.push_back(p);
  } else if (!pipelined) {
    // One lcore: both directions. Two (by_direction): lcore k receives on
    // port k and schedules the other port, the only one its packets leave
    // by; each egress port still has exactly one scheduler.
    for (unsigned k = 0; k < n; ++k) {
      auto rx = make_rx(0, k, d->counters[k].get(), false);
      if (!rx.ok()) return CreateResult::failure(rx.error());
      auto sched = std::make_unique<SchedContext>();
      sched->counters = d->counters[k].get();
      if (by_direction) {
        const unsigned out = 1 - k;
        (*rx)->in_ports = 1u << k;
        (*rx)->direct = {};
        (*rx)->direct[out] = d->egress[out].get();
        sched->egress = {d->egress[out].get()};
      } else {
        sched->egress = {d->egress[0].get(), d->egress[1].get()};
      }
      sched->applied_generation = 0;  // before any snapshot (generations start at 1)
      d->plans.push_back(LcorePlan{lcores[k], LcoreRole::kRunToCompletion, *rx, sched.get(), k});
      d->sched.push_back(std::move(sched));
    }
  } else {
    for (unsigned k = 0; k < n_rx; ++k) {
      auto rx = make_rx(k, k, d->counters[k].get(), true);
      if (!rx.ok()) return CreateResult::failure(rx.error());
      d->plans.push_back(LcorePlan{lcores[k], LcoreRole::kRx, *rx, nullptr, k});
    }
    const unsigned n_sched = n == 2 ? 1 : 2;
    for (unsigned s = 0; s < n_sched; ++s) {
      auto sched = std::make_unique<SchedContext>();
      sched->counters = d->counters[n_rx + s].get();
      if (n_sched == 1) {
        sched->egress = {d->egress[0].get(), d->egress[1].get()};
      } else {
        sched->egress = {d->egress[s].get()};
      }
      take_rings(*sched);
      sched->applied_generation = 0;
      d->plans.push_back(LcorePlan{lcores[n_rx + s], LcoreRole::kScheduler, nullptr, sched.get(), n_rx + s});
      d->sched.push_back(std::move(sched));
    }
  }
  // The lcores whose RX feeds rings: a scheduler drains its rings until they
  // have all stopped. A hybrid lcore's own RX is not among them: it stops
  // before its lcore drains, and one hybrid lcore stuck in a driver call must
  // not keep the other draining (lcore_loops.cc, drain).
  shared.rx_lcores_running.store(with_rings ? ring_rx : static_cast<unsigned>(n), std::memory_order_relaxed);
  return std::unique_ptr<Dataplane>(new Dataplane(std::move(d)));
}

Result<bool> Dataplane::Impl::ensure_snapshot() {
  if (publisher->current()) return true;
  auto snap = compile_config_snapshot(config, 1);
  if (!snap) return Result<bool>::failure(snap.error());
  publisher->publish(std::move(*snap));
  return true;
}

Result<bool> Dataplane::start() {
  if (auto ok = impl_->ensure_snapshot(); !ok) return Result<bool>::failure("no snapshot to run with: " + ok.error());
  // Every data lcore must be one EAL launches work on: a service core (an
  // -s/-S that came past the config's check) or an lcore EAL does not run
  // would leave its part of the data path unserved, silently.
  for (const LcorePlan& plan : impl_->plans) {
    if (rte_eal_lcore_role(plan.lcore_id) != ROLE_RTE || rte_eal_get_lcore_state(plan.lcore_id) != WAIT)
      return Result<bool>::failure("data lcore " + std::to_string(plan.lcore_id) +
                                   " is not an lcore EAL can launch work on (a service core, or busy)");
  }
  set_lcore_dataplane(impl_.get());
  g_teardown_guard.store(impl_->shared.link.get(), std::memory_order_release);
  impl_->started = true;  // from the first launch on, stop_and_drain() waits for what runs
  for (LcorePlan& plan : impl_->plans) {
    if (const int rc = rte_eal_remote_launch(lcore_main, &plan, plan.lcore_id); rc != 0)
      return Result<bool>::failure("cannot launch data lcore " + std::to_string(plan.lcore_id) + ": " +
                                   rte_strerror(-rc));
  }
  impl_->watch.running.store(true, std::memory_order_release);
  return true;
}

namespace {
uint64_t steady_now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

bool Dataplane::stop_and_drain(const std::function<bool()>& cut_short) {
  if (!impl_->started) return true;
  DataplaneShared& shared = impl_->shared;
  impl_->watch.running.store(false, std::memory_order_release);  // lcores going offline are no stall
  const uint64_t timeout_ticks = ticks_from_ns(impl_->config.drain_timeout_ns, shared.tsc_hz);
  const uint64_t now = rte_rdtsc();
  shared.drain_deadline_tsc.store(now + timeout_ticks, std::memory_order_relaxed);
  shared.rx_enabled.store(false, std::memory_order_release);
  // rte_eal_wait_lcore has no timeout: an lcore blocked in a driver call
  // (af_packet's TX polls with none once its ring is full) would hold the
  // process for ever, past any stop timeout. Polled instead, up to the
  // drain timeout and a grace.
  // What counts is the lcore's stalled time (lcore_stall.h), not the wall
  // clock: one starved of CPU meanwhile (a loaded host) is given up on only
  // kStarvedStopExtraNs past the wall-clock deadline.
  const uint64_t grace_ns = kStuckLcoreGraceNs;
  uint64_t budget_ns = impl_->config.drain_timeout_ns + grace_ns;
  const uint64_t give_up = now + timeout_ticks + ticks_from_ns(grace_ns + kStarvedStopExtraNs, shared.tsc_hz);
  std::vector<LcoreStallClock> stall(impl_->plans.size());
  for (size_t i = 0; i < impl_->plans.size(); ++i)
    stall[i].progressed(steady_now_ns(), sample_lcore_thread(impl_->plans[i]));
  bool cut = false;
  std::string stuck;
  for (size_t i = 0; i < impl_->plans.size(); ++i) {
    const LcorePlan& plan = impl_->plans[i];
    while (rte_eal_get_lcore_state(plan.lcore_id) == RUNNING && stall[i].stalled_ns() < budget_ns &&
           rte_rdtsc() < give_up) {
      if (!cut && cut_short && cut_short()) {
        // The lcores read the deadline at every drain pass: they flush now,
        // and each has the grace from here.
        cut = true;
        const uint64_t at = rte_rdtsc();
        shared.drain_deadline_tsc.store(at, std::memory_order_relaxed);
        budget_ns = grace_ns;
        for (size_t j = i; j < impl_->plans.size(); ++j)
          stall[j].progressed(steady_now_ns(), sample_lcore_thread(impl_->plans[j]));
      }
      timespec pause{0, 1'000'000};
      nanosleep(&pause, nullptr);
      stall[i].advance(steady_now_ns(), sample_lcore_thread(plan));
    }
    if (rte_eal_get_lcore_state(plan.lcore_id) == RUNNING) {
      stuck += (stuck.empty() ? "" : ", ") + std::to_string(plan.lcore_id);
      continue;
    }
    rte_eal_wait_lcore(plan.lcore_id);  // returns at once: collects its return value
  }
  if (!stuck.empty()) {
    spdlog::error(
        "data lcore(s) {} did not stop within the drain timeout and {} s more: stuck in a driver call "
        "(a port whose TX never drains?); the counters below may miss their last packets",
        stuck, kStuckLcoreGraceNs / 1'000'000'000);
    return false;
  }
  impl_->started = false;
  g_teardown_guard.store(nullptr, std::memory_order_release);
  return true;
}

const Snapshot& Dataplane::snapshot() const { return *impl_->publisher->current(); }
uint64_t Dataplane::tsc_hz() const { return impl_->shared.tsc_hz; }

JobTelemetry Dataplane::job_telemetry(uint32_t slot) const {
  const EgressPort& wire = *impl_->egress[0];
  if (slot >= wire.telemetry.size()) return {};
  return read_telemetry(wire.telemetry[slot], rte_rdtsc(), wire.burst_gap_ticks, impl_->shared.tsc_hz);
}
SnapshotPublisher& Dataplane::publisher() { return *impl_->publisher; }
const ConfigSpec& Dataplane::config() const { return impl_->config; }

std::string Dataplane::describe_lcores() const {
  std::string out;
  for (const LcorePlan& plan : impl_->plans) {
    if (!out.empty()) out += ", ";
    out += "lcore " + std::to_string(plan.lcore_id) + ": ";
    switch (plan.role) {
      case LcoreRole::kRunToCompletion:
      case LcoreRole::kHybrid: {
        // "run-to-completion (RX wire+host, schedule+TX wire+host)" with one
        // lcore; "(RX wire, schedule+TX host)" with one direction each.
        std::string in;
        for (unsigned p = 0; p < kPortCount; ++p)
          if (plan.rx->in_ports >> p & 1u) in += (in.empty() ? "" : "+") + std::string(kPortNames[p]);
        std::string egress;
        for (EgressPort* e : plan.sched->egress)
          egress += (egress.empty() ? "" : "+") + std::string(kPortNames[e->index]);
        if (plan.role == LcoreRole::kHybrid)
          out += "hybrid (RX " + in + " queue 0, schedule+TX " + egress + " with the RX lcores' rings)";
        else out += "run-to-completion (RX " + in + ", schedule+TX " + egress + ")";
        break;
      }
      case LcoreRole::kRx:
        out += "RX queue " + std::to_string(plan.rx->rx_queue) + " of wire+host";
        break;
      case LcoreRole::kScheduler: {
        out += "schedule+TX";
        for (EgressPort* e : plan.sched->egress) out += std::string(" ") + kPortNames[e->index];
        break;
      }
    }
  }
  return out;
}

}  // namespace psgate
