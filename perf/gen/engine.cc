// SPDX-License-Identifier: BSD-3-Clause
// Engine setup and results; the loops are in tx_loop.cc and rx_loop.cc.
#include "engine.h"

#include "flow_report.h"

#include <rte_cycles.h>
#include <rte_ethdev.h>

#include <algorithm>
#include <new>

namespace psgate::gen {

Engine::Engine(const Profile& profile, uint16_t host_port, uint16_t wire_port, rte_mempool* pool, uint64_t tsc_hz)
    : profile_(profile),
      port_{host_port, wire_port},
      same_port_(host_port == wire_port),
      pool_(pool),
      tsc_hz_(tsc_hz),
      run_tag_(draw_run_tag()),
      epoch_tsc_(rte_rdtsc()),
      max_skew_cycles_(tsc_hz / 1000) {
  ns_per_cycle_q32_ = static_cast<uint64_t>((static_cast<unsigned __int128>(1'000'000'000) << 32) / tsc_hz);
}

Result<std::unique_ptr<Engine>> Engine::create(const Profile& profile, uint16_t host_port, uint16_t wire_port,
                                               rte_mempool* pool, uint64_t tsc_hz) {
  using R = Result<std::unique_ptr<Engine>>;
  if (tsc_hz == 0) return R::failure("TSC frequency unknown");
  std::unique_ptr<Engine> e(new Engine(profile, host_port, wire_port, pool, tsc_hz));
  const size_t jobs = profile.jobs.size();
  e->streams_ = jobs * 2;
  e->tx_ = std::make_unique<StreamTx[]>(e->streams_);
  e->rx_ = std::make_unique<StreamRx[]>(e->streams_);
  e->rx_max_bursts_ = rx_bursts_per_round(jobs, profile.tx_burst);
  e->drivers_.reserve(jobs);
  const uint64_t now = rte_rdtsc();
  try {
    e->build_streams(now);
  } catch (const std::bad_alloc&) {
    uint64_t states = 0;
    for (const JobProfile& job : profile.jobs)
      states += job.flows * static_cast<unsigned>(__builtin_popcount(job.dirs));
    return R::failure("cannot allocate the per-flow state: " + std::to_string(states) + " flows x directions at " +
                      std::to_string(sizeof(FlowRx) + sizeof(uint64_t)) + " bytes each (" +
                      std::to_string(states * (sizeof(FlowRx) + sizeof(uint64_t)) >> 20) + " MiB)");
  }
  return e;
}

void Engine::build_streams(uint64_t now) {
  const Profile& profile = profile_;
  Engine* e = this;
  const size_t jobs = profile.jobs.size();
  for (size_t j = 0; j < jobs; ++j) {
    const JobProfile& job = profile.jobs[j];
    const std::vector<uint32_t> sizes = size_pattern(job);
    const uint32_t largest = *std::max_element(sizes.begin(), sizes.end()) - kFcsBytes;
    e->drivers_.emplace_back(job, tsc_hz_, largest, profile.tx_burst, now);
    for (unsigned d = 0; d < 2; ++d) {
      if (!job.sends(static_cast<Dir>(d))) continue;
      const size_t s = j * 2 + d;
      StreamTx& tx = e->tx_[s];
      tx.active = true;
      tx.port = e->port_[tx_side(d)];
      tx.stream = static_cast<uint16_t>(s);
      tx.flows = job.flows;
      tx.map = FlowMap(job);
      std::vector<uint32_t> distinct;
      std::vector<uint8_t> pattern;
      for (uint32_t size : sizes) {
        auto it = std::find(distinct.begin(), distinct.end(), size);
        if (it == distinct.end()) {
          distinct.push_back(size);
          tx.templates.push_back(build_template(job, static_cast<Dir>(d), size));
          it = distinct.end() - 1;
        }
        pattern.push_back(static_cast<uint8_t>(it - distinct.begin()));
      }
      tx.seq = TxSequence(job.flows, std::move(pattern));
      StreamRx& rx = e->rx_[s];
      rx.active = true;
      rx.side = rx_side(d);
      rx.flows.assign(job.flows, FlowRx{});
    }
  }
}

LiveTotals Engine::live() const {
  LiveTotals t;
  for (size_t s = 0; s < streams_; ++s) {
    t.tx_packets += tx_[s].tx_packets.get();
    t.tx_bytes += tx_[s].tx_bytes.get();
    t.tx_dropped += tx_[s].tx_dropped.get();
    t.alloc_failed += tx_[s].alloc_failed.get();
    t.rx_packets += rx_[s].packets.get();
    const uint64_t tx = tx_[s].tx_packets.get(), unique = rx_[s].unique.get();
    t.rx_unique += unique;
    t.pending += tx > unique ? tx - unique : 0;
  }
  t.rx_foreign = side_[0].rx_foreign.get() + side_[1].rx_foreign.get();
  t.rx_other_run = side_[0].rx_other_run.get() + side_[1].rx_other_run.get();
  return t;
}

RunResult Engine::result() const {
  RunResult r;
  r.tsc_hz = tsc_hz_;
  r.run_tag = run_tag_;
  r.rx_bursts_per_round = rx_max_bursts_;
  r.tx_seconds = static_cast<double>(tx_end_tsc_ - tx_start_tsc_) / static_cast<double>(tsc_hz_);
  static constexpr const char* kRoles[2] = {"host-side", "wire-side"};
  for (unsigned side = 0; side < (same_port_ ? 1u : 2u); ++side) {
    PortResult p;
    p.role = same_port_ ? "host-side+wire-side" : kRoles[side];
    p.port_id = port_[side];
    char name[RTE_ETH_NAME_MAX_LEN] = {};
    if (rte_eth_dev_get_name_by_port(port_[side], name) == 0) p.name = name;
    p.rx_foreign = side_[side].rx_foreign.get();
    p.rx_other_run = side_[side].rx_other_run.get();
    p.alloc_failed = side_[side].alloc_failed.get();
    p.rx_backlog = side_[side].rx_backlog.get();
    if (same_port_) {
      p.rx_foreign += side_[1].rx_foreign.get();
      p.rx_other_run += side_[1].rx_other_run.get();
      p.alloc_failed += side_[1].alloc_failed.get();
      p.rx_backlog += side_[1].rx_backlog.get();
    }
    rte_eth_stats st{};
    if (rte_eth_stats_get(port_[side], &st) == 0) {
      p.nic_ipackets = st.ipackets;
      p.nic_opackets = st.opackets;
      p.nic_imissed = st.imissed;
      p.nic_oerrors = st.oerrors;
      p.nic_rx_nombuf = st.rx_nombuf;
    }
    r.rx_foreign += p.rx_foreign;
    r.rx_other_run += p.rx_other_run;
    r.ports.push_back(std::move(p));
  }
  for (size_t j = 0; j < profile_.jobs.size(); ++j) {
    JobResult jr;
    jr.job = &profile_.jobs[j];
    jr.iterations = drivers_[j].iterations();
    for (unsigned d = 0; d < 2; ++d) {
      const StreamTx& tx = tx_[j * 2 + d];
      const StreamRx& rx = rx_[j * 2 + d];
      if (!tx.active) continue;
      jr.has[d] = true;
      StreamResult& s = jr.dir[d];
      s.tx_packets = tx.tx_packets.get();
      s.tx_bytes = tx.tx_bytes.get();
      s.tx_dropped = tx.tx_dropped.get();
      s.alloc_failed = tx.alloc_failed.get();
      s.rx_packets = rx.packets.get();
      s.rx_bytes = rx.bytes.get();
      s.reordered = rx.reordered;
      s.duplicates = rx.duplicates;
      s.late = rx.late;
      s.latency_invalid = rx.latency_invalid;
      s.rx_stale = rx.rx_stale;
      s.wrong_port = rx.wrong_port;
      s.flows = tx.flows;
      summarize_flows(rx.flows.data(), tx.seq.sent().data(), tx.flows, s);
      if (s.rx_packets) s.rx_seconds = static_cast<double>(rx.last_tsc - rx.first_tsc) / static_cast<double>(tsc_hz_);
      s.latency = rx.latency;
    }
    r.jobs.push_back(std::move(jr));
  }
  return r;
}

bool Engine::write_flows_csv(std::FILE* out) const {
  if (std::fputs(kFlowsCsvHeader, out) < 0) return false;
  for (size_t j = 0; j < profile_.jobs.size(); ++j) {
    for (unsigned d = 0; d < 2; ++d) {
      const StreamTx& tx = tx_[j * 2 + d];
      if (!tx.active) continue;
      if (!psgate::gen::write_flows_csv(out, profile_.jobs[j], static_cast<Dir>(d), rx_[j * 2 + d].flows.data(),
                                        tx.seq.sent().data(), tx.flows)) {
        return false;
      }
    }
  }
  return true;
}

}  // namespace psgate::gen
