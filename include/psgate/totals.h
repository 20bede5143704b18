// SPDX-License-Identifier: BSD-3-Clause
// The reader's view of the counters: every lcore's counters summed
// (Dataplane::read_totals), plus what the driver and the link watcher report
// per port. The structs and the field lists that readers loop over (sums,
// JSON, text report, docs) are derived from the field tables in
// psgate/counters.h; nothing here names a counter except the NIC table.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "psgate/counters.h"
#include "psgate/latency_histogram.h"

namespace psgate {

// X(field, column, width, help): driver-level counts (rte_eth_stats, whose
// fields have these names): frames lost before psgate saw them, or that the
// driver failed to send. Not per lcore; JSON: ports.<port>.nic.<field>.
#define PSGATE_NIC_COUNTERS(X)                                                                                        \
  X(imissed, "nic-missed", 10, "frames the NIC dropped: its RX queue was full")                                       \
  X(ierrors, nullptr, 0, "erroneous frames the NIC received")                                                         \
  X(rx_nombuf, "nic-nombuf", 10, "frames dropped for want of an mbuf")                                                \
  X(oerrors, nullptr, 0,                                                                                              \
    "transmit failures the driver counted: some drivers (tap, af_packet) count each refused try, and psgate retries " \
    "a refused burst, so one lost frame may count many times")

// A port's link as the control path last saw it.
struct PortLink {
  bool up = true;
  uint64_t since_unix_ns = 0;  // when it last changed (or psgate started)
  uint64_t changes = 0;        // up/down transitions since start
  std::string detail;          // why it is down; empty when up
  uint32_t short_mtu = 0;      // a kernel interface's MTU while below ports.<p>.mtu, else 0
};

#define PSGATE_TOTAL_MEMBER(field, ...) uint64_t field = 0;
#define PSGATE_DIRECTION_TOTAL_MEMBER(field, ...) std::array<uint64_t, 2> field{};

struct NicTotals {
  PSGATE_NIC_COUNTERS(PSGATE_TOTAL_MEMBER)
};

struct PortTotals {
  PSGATE_PORT_COUNTERS(PSGATE_TOTAL_MEMBER)
  std::array<uint64_t, kDropReasonCount> drops{};  // by DropReason
  NicTotals nic;
  PortLink link;
  uint64_t drop_total() const {
    uint64_t t = 0;
    for (uint64_t d : drops) t += d;
    return t;
  }
};

struct ClassTotals {
  PSGATE_CLASS_COUNTERS(PSGATE_TOTAL_MEMBER)
  LatencyHistogram sojourn;
  // Never below 0: the four are read one after another while the lcore
  // counts on, so a read may see a cut-through burst's dequeue without its
  // enqueue (or a migration's out without its in) and would wrap to ~1.8e19.
  uint64_t depth() const {
    const uint64_t in = enqueued_packets + migrated_in, out = dequeued_packets + migrated_out;
    return in > out ? in - out : 0;
  }
};

struct JobTotals {
  PSGATE_JOB_DIRECTION_COUNTERS(PSGATE_DIRECTION_TOTAL_MEMBER)  // by Direction
  PSGATE_JOB_COUNTERS(PSGATE_TOTAL_MEMBER)
};

struct FlowCacheTotals {
  PSGATE_FLOW_CACHE_COUNTERS(PSGATE_TOTAL_MEMBER)
};

#undef PSGATE_TOTAL_MEMBER
#undef PSGATE_DIRECTION_TOTAL_MEMBER

struct Totals {
  PortTotals ports[kPortCount];
  FlowCacheTotals flow_cache;        // all RX lcores
  std::vector<ClassTotals> classes;  // [port * class_count + class]
  std::vector<JobTotals> jobs;       // by slot
  unsigned class_count = 0;
  // The mbuf pool: its size, and the buffers out of it at the read (in a
  // driver's RX ring, a class queue, a ring, a pending burst; the lcores'
  // pool caches count as free). A figure that climbs while the traffic and
  // the queues do not is a leak, seen long before rx_nombuf; read live, it
  // is approximate (DPDK reads the caches without a lock).
  uint64_t mbufs = 0;
  uint64_t mbufs_in_use = 0;
  const ClassTotals& cls(unsigned port, unsigned c) const { return classes[port * class_count + c]; }
  uint64_t rx_total() const { return ports[0].rx_packets + ports[1].rx_packets; }
  uint64_t tx_total() const { return ports[0].tx_packets + ports[1].tx_packets; }
  uint64_t drop_total() const { return ports[0].drop_total() + ports[1].drop_total(); }
};

// ---- Field lists for readers -----------------------------------------------
// One entry per table line: its description, and where it lives in the
// lcore's struct and in the totals.
template <class Counters, class Sums, class C = Counter, class T = uint64_t>
struct CounterField {
  CounterInfo info;
  C Counters::*counter;
  T Sums::*total;
};
template <class Counters, class Sums>
using DirectionCounterField = CounterField<Counters, Sums, std::array<Counter, 2>, std::array<uint64_t, 2>>;
template <class Sums>
struct TotalField {
  CounterInfo info;
  uint64_t Sums::*total;
};

#define PSGATE_COUNTER_FIELD(Counters, Sums, field, unit, kind, column, width, help) \
  {{#field, CounterUnit::unit, CounterKind::kind, column, width, help}, &Counters::field, &Sums::field},
#define PSGATE_PORT_FIELD(...) PSGATE_COUNTER_FIELD(PortCounters, PortTotals, __VA_ARGS__)
#define PSGATE_CLASS_FIELD(...) PSGATE_COUNTER_FIELD(ClassCounters, ClassTotals, __VA_ARGS__)
#define PSGATE_JOB_FIELD(...) PSGATE_COUNTER_FIELD(JobCounters, JobTotals, __VA_ARGS__)
#define PSGATE_FLOW_CACHE_FIELD(...) PSGATE_COUNTER_FIELD(FlowCacheCounters, FlowCacheTotals, __VA_ARGS__)
#define PSGATE_NIC_FIELD(field, column, width, help) \
  {{#field, CounterUnit::packets, CounterKind::drop, column, width, help}, &NicTotals::field},

inline constexpr CounterField<PortCounters, PortTotals> kPortFields[] = {PSGATE_PORT_COUNTERS(PSGATE_PORT_FIELD)};
inline constexpr CounterField<ClassCounters, ClassTotals> kClassFields[] = {PSGATE_CLASS_COUNTERS(PSGATE_CLASS_FIELD)};
inline constexpr DirectionCounterField<JobCounters, JobTotals> kJobDirectionFields[] = {
    PSGATE_JOB_DIRECTION_COUNTERS(PSGATE_JOB_FIELD)};
inline constexpr CounterField<JobCounters, JobTotals> kJobFields[] = {PSGATE_JOB_COUNTERS(PSGATE_JOB_FIELD)};
inline constexpr CounterField<FlowCacheCounters, FlowCacheTotals> kFlowCacheFields[] = {
    PSGATE_FLOW_CACHE_COUNTERS(PSGATE_FLOW_CACHE_FIELD)};
inline constexpr TotalField<NicTotals> kNicFields[] = {PSGATE_NIC_COUNTERS(PSGATE_NIC_FIELD)};

#undef PSGATE_COUNTER_FIELD
#undef PSGATE_PORT_FIELD
#undef PSGATE_CLASS_FIELD
#undef PSGATE_JOB_FIELD
#undef PSGATE_FLOW_CACHE_FIELD
#undef PSGATE_NIC_FIELD

// ---- Summing and differencing, field by field --------------------------------
namespace counters_detail {
inline void add(uint64_t& to, const Counter& from) { to += from.get(); }
inline void add(std::array<uint64_t, 2>& to, const std::array<Counter, 2>& from) {
  for (size_t i = 0; i < to.size(); ++i) to[i] += from[i].get();
}
inline void subtract(uint64_t& from, uint64_t v) { from -= v; }
inline void subtract(std::array<uint64_t, 2>& from, const std::array<uint64_t, 2>& v) {
  for (size_t i = 0; i < from.size(); ++i) from[i] -= v[i];
}
template <class Fields, class Sums, class Counters>
void add_fields(const Fields& fields, Sums& to, const Counters& from) {
  for (const auto& f : fields) add(to.*f.total, from.*f.counter);
}
template <class Fields, class Sums>
void subtract_fields(const Fields& fields, Sums& from, const Sums& v) {
  for (const auto& f : fields) subtract(from.*f.total, v.*f.total);
}
}  // namespace counters_detail

// Adds one lcore's counters to the sums (histograms apart: merged on demand).
inline void add_counters(PortTotals& to, const PortCounters& from) {
  counters_detail::add_fields(kPortFields, to, from);
  for (unsigned r = 0; r < kDropReasonCount; ++r) to.drops[r] += from.drops[r].get();
}
inline void add_counters(ClassTotals& to, const ClassCounters& from) {
  counters_detail::add_fields(kClassFields, to, from);
}
inline void add_counters(JobTotals& to, const JobCounters& from) {
  counters_detail::add_fields(kJobDirectionFields, to, from);
  counters_detail::add_fields(kJobFields, to, from);
}
inline void add_counters(FlowCacheTotals& to, const FlowCacheCounters& from) {
  counters_detail::add_fields(kFlowCacheFields, to, from);
}

// A job's counters since `baseline` (what its slot held when it was assigned).
inline void subtract_baseline(JobTotals& job, const JobTotals& baseline) {
  counters_detail::subtract_fields(kJobDirectionFields, job, baseline);
  counters_detail::subtract_fields(kJobFields, job, baseline);
}

}  // namespace psgate
