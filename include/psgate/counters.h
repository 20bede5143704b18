// SPDX-License-Identifier: BSD-3-Clause
// Data-plane counters. Each lcore owns one LcoreCounters and is its only
// writer; readers (stats, control) sum the lcores' copies and difference
// successive reads. Nothing is ever reset, so no increment can be lost.
//
// Every counter is described once, as one line of a field table below
// (PSGATE_*_COUNTERS: name, unit, counts a drop or not, text-report column,
// help). The lcore's struct here, the reader's totals (psgate/totals.h), the
// sum across lcores, the `stats` JSON keys, the final text report's columns,
// the DPDK telemetry (which flattens that JSON) and docs/counters.md are all
// derived from those lines. The fast path is untouched by the tables: it
// writes plain named fields (`pc.tx_packets.add(n)`,
// `pc.drops[kDropRunt].inc()`), exactly as if they were written out by hand.
//
// Adding a drop reason is one line in PSGATE_DROP_REASONS (the enumerator,
// its name in JSON and reports, its help); count it where it happens with
// `counters.ports[egress_port].drops[kDropNew].add(n)`. Unit tests then ask
// for its row in docs/operations.md's drop-reason table (what to do about it)
// and for docs/counters.md to be regenerated:
//   PSGATE_UPDATE_DOCS=1 PSGATE_SOURCE_ROOT=$PWD build/tests/unit_tests --gtest_filter='CounterDocs.*'
// A new counter in a group is likewise one line in that group's table.
//
// Counter is a relaxed atomic written with load+store (no read-modify-write):
// on x86 that is a plain add to a cache line the lcore owns, and the reader's
// concurrent load is well defined.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <span>

#include "psgate/latency_histogram.h"

namespace psgate {

class Counter {
 public:
  void add(uint64_t n) { v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed); }
  void inc() { add(1); }
  uint64_t get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// What one unit of a counter is.
enum class CounterUnit { packets, bytes, lookups, flows };
// `drop`: the packets it counts did not leave psgate (or, for a job, left no
// further than its policer); `count`: anything else.
enum class CounterKind { count, drop };

// One counter as readers see it. `column`/`width`: its column in the final
// text report (stats_report.cc), or nullptr when it has none.
struct CounterInfo {
  const char* name;  // the JSON and telemetry key
  CounterUnit unit;
  CounterKind kind;
  const char* column;
  int width;
  const char* help;
};

constexpr const char* unit_name(CounterUnit u) {
  switch (u) {
    case CounterUnit::packets:
      return "packets";
    case CounterUnit::bytes:
      return "bytes";
    case CounterUnit::lookups:
      return "lookups";
    case CounterUnit::flows:
      return "flows";
  }
  return "";
}

// ---- The field tables ------------------------------------------------------
// X(enumerator, name, help): why a packet that was received did not leave.
// Every received packet is either transmitted or counted under exactly one of
// these, on the port it was to leave by.
#define PSGATE_DROP_REASONS(X)                                                                                        \
  X(kDropRingFull, "ring_full", "the RX -> scheduler handoff ring was full (pipelined and hybrid modes)")             \
  X(kDropQueueFull, "queue_full", "the class FIFO was at its depth")                                                  \
  X(kDropPoliced, "policed", "the job's ingress policer")                                                             \
  X(kDropTxFailed, "tx_failed",                                                                                       \
    "the egress port refused it for 100 ms, or while stalled, or at the drain timeout, or refused it alone (it took " \
    "the packets behind it) after 1 ms of taking nothing")                                                            \
  X(kDropShutdown, "shutdown_flush", "still queued when the drain timeout expired")                                   \
  X(kDropBadMbuf, "bad_mbuf", "the driver handed over a broken buffer (lengths, chain, bounds): never read")          \
  X(kDropOversize, "oversize",                                                                                        \
    "larger than the egress port's MTU (or its kernel interface's, set lower) plus L2 header and tags: at RX, or "    \
    "where it leaves if it was queued when that interface's MTU went down")                                           \
  X(kDropLinkDown, "link_down", "the egress port's link was down: nowhere to send it")                                \
  X(kDropRunt, "runt", "shorter than 17 bytes (an Ethernet header and 3): nothing a NIC can send")                    \
  X(kDropTooManySegments, "too_many_segments",                                                                        \
    "an mbuf chain of more segments than the egress device sends as one packet (its nb_mtu_seg_max)")                 \
  X(kDropMacControl, "mac_control",                                                                                   \
    "802.3 MAC Control (ethertype 0x8808: PAUSE, PFC): addressed to the link it came in on, never relayed")           \
  X(kDropVlanStripped, "vlan_stripped",                                                                               \
    "the driver stripped its VLAN tag, and it could not be put back (under 4 bytes of headroom a tag)")               \
  X(kDropSharedBuffer, "shared_buffer",                                                                               \
    "a buffer another holder shares (a clone's reference), forwarded only as a copy of psgate's own, and no mbuf "    \
    "was free for the copy")                                                                                          \
  X(kDropControlPoliced, "control_policed",                                                                           \
    "network control (class 0: ARP, LLDP, ...) over the egress port's classes.control_rate: a flood of it would "     \
    "otherwise take the port from every job")

// X(field, unit, kind, column, width, help): a port's counters. Ingress
// counters are charged to the port the packet came in on, egress counters
// (and the drops by reason) to the port it was meant to leave by.
#define PSGATE_PORT_COUNTERS(X)                                                                                       \
  X(rx_packets, packets, count, "rx pkts", 12, "received on this port")                                               \
  X(rx_bytes, bytes, count, "rx bytes", 14, "received on this port (pkt_len)")                                        \
  X(tx_packets, packets, count, "tx pkts", 12, "transmitted by this port")                                            \
  X(tx_bytes, bytes, count, "tx bytes", 14, "transmitted by this port (pkt_len)")                                     \
  X(rx_malformed, packets, count, "malformed", 10, "headers that do not parse: sent in the default class")            \
  X(rx_network_control, packets, count, "net-ctrl", 10,                                                               \
    "link control (ARP, LLDP, LACP, ND, OSPF...), sent in class 0")                                                   \
  X(rx_unclassified, packets, count, "unclassified", 12, "matched no job (and non-IP payload): default class")        \
  X(rx_fragments_followed, packets, count, nullptr, 0,                                                                \
    "later IP fragments given their first fragment's job (none for a malformed first, class 0 for link control)")     \
  X(rx_fragments_orphaned, packets, count, nullptr, 0,                                                                \
    "later IP fragments whose first was not seen: classified on addresses and protocol")                              \
  X(rerank_migrations, packets, count, nullptr, 0, "re-ranking: a job's queued packets followed it to its new class") \
  X(rerank_deferred, packets, count, nullptr, 0, "re-ranking waited: the new class was full, the job kept its old")

// X(field, unit, kind, column, width, help): an egress class's counters.
#define PSGATE_CLASS_COUNTERS(X)                                                                                       \
  X(enqueued_packets, packets, count, "enqueued", 12, "accepted into the class FIFO")                                  \
  X(enqueued_bytes, bytes, count, nullptr, 0, "accepted into the class FIFO")                                          \
  X(dequeued_packets, packets, count, "sent", 12, "left the FIFO towards TX")                                          \
  X(dequeued_bytes, bytes, count, nullptr, 0, "left the FIFO towards TX")                                              \
  X(drop_queue_full, packets, drop, "q-full", 10, "dropped: the FIFO was at its depth")                                \
  X(drop_ring_full, packets, drop, "ring-full", 10, "dropped: the handoff ring to this class was full")                \
  X(ecn_marked, packets, count, "ecn-ce", 9, "ECN-capable packets marked CE: they found ecn_threshold packets queued") \
  X(dscp_remarked, packets, count, "dscp", 9, "DSCP rewritten to the class's dscp")                                    \
  X(migrated_in, packets, count, nullptr, 0, "re-ranking moved a job's queued packets into this class (in order)")     \
  X(migrated_out, packets, count, nullptr, 0, "re-ranking moved a job's queued packets out of this class (in order)")

// X(field, unit, kind, column, width, help): a job's counters per Direction
// (an array of two, indexed by kPush/kPull). The report's column is headed
// "<direction> <column>".
#define PSGATE_JOB_DIRECTION_COUNTERS(X)                                                            \
  X(admitted_packets, packets, count, "admit", 12, "offered by the job, after its ingress policer") \
  X(admitted_bytes, bytes, count, nullptr, 0, "offered by the job, after its ingress policer")      \
  X(sent_packets, packets, count, "sent", 12, "left psgate")                                        \
  X(sent_bytes, bytes, count, nullptr, 0, "left psgate")

// X(field, unit, kind, column, width, help): a job's counters, both directions.
#define PSGATE_JOB_COUNTERS(X)                                                     \
  X(policed, packets, drop, "policed", 10, "dropped by the job's ingress policer") \
  X(drops, packets, drop, "drops", 10, "dropped for any other reason")

// X(field, unit, kind, column, width, help): the RX lcores' flow caches: how
// often the ACL was skipped, and how often the cache was too small for the
// flows it saw (evictions: size dataplane.flow_cache).
#define PSGATE_FLOW_CACHE_COUNTERS(X)                                                        \
  X(hits, lookups, count, nullptr, 0, "flow lookups answered by the cache, the ACL skipped") \
  X(misses, lookups, count, nullptr, 0, "flow lookups that went to the ACL")                 \
  X(evictions, flows, count, nullptr, 0, "flows evicted to make room: more flows than the cache holds well")

// ---- Derived from the tables -----------------------------------------------
enum DropReason : unsigned {
#define PSGATE_DROP_ENUMERATOR(id, name, help) id,
  PSGATE_DROP_REASONS(PSGATE_DROP_ENUMERATOR)
#undef PSGATE_DROP_ENUMERATOR
      kDropReasonCount
};
inline constexpr const char* kDropReasonNames[kDropReasonCount] = {
#define PSGATE_DROP_NAME(id, name, help) name,
    PSGATE_DROP_REASONS(PSGATE_DROP_NAME)
#undef PSGATE_DROP_NAME
};
inline constexpr CounterInfo kDropReasonInfo[kDropReasonCount] = {
#define PSGATE_DROP_INFO(id, name, help) {name, CounterUnit::packets, CounterKind::drop, nullptr, 0, help},
    PSGATE_DROP_REASONS(PSGATE_DROP_INFO)
#undef PSGATE_DROP_INFO
};

inline constexpr unsigned kPortCount = 2;  // 0 = wire, 1 = host
inline constexpr const char* kPortNames[kPortCount] = {"wire", "host"};

// Direction of a job's packet: towards the PS (push: arrived on wire, leaves
// by host) or from it (pull: arrived on host, leaves by wire).
enum Direction : unsigned { kPush = 0, kPull = 1 };
inline constexpr const char* kDirectionNames[2] = {"push", "pull"};
inline constexpr unsigned direction_of_ingress(unsigned in_port) { return in_port; }
inline constexpr unsigned direction_of_egress(unsigned out_port) { return out_port ^ 1u; }

#define PSGATE_COUNTER_MEMBER(field, unit, kind, column, width, help) Counter field;
#define PSGATE_DIRECTION_COUNTER_MEMBER(field, unit, kind, column, width, help) std::array<Counter, 2> field;

struct PortCounters {
  PSGATE_PORT_COUNTERS(PSGATE_COUNTER_MEMBER)
  std::array<Counter, kDropReasonCount> drops;  // by DropReason
};

struct ClassCounters {
  PSGATE_CLASS_COUNTERS(PSGATE_COUNTER_MEMBER)
};

struct JobCounters {
  PSGATE_JOB_DIRECTION_COUNTERS(PSGATE_DIRECTION_COUNTER_MEMBER)  // by Direction
  PSGATE_JOB_COUNTERS(PSGATE_COUNTER_MEMBER)
};

struct FlowCacheCounters {
  PSGATE_FLOW_CACHE_COUNTERS(PSGATE_COUNTER_MEMBER)
};

#undef PSGATE_COUNTER_MEMBER
#undef PSGATE_DIRECTION_COUNTER_MEMBER

// One data lcore's counters. The per-class and per-job arrays are sized by
// the config; the data plane allocates them with this struct, cache-aligned on
// the lcore's NUMA node (dataplane/lcore_counters_memory.h), so no cache line
// holds two lcores' counters. This struct only views them.
struct alignas(64) LcoreCounters {
  std::array<PortCounters, kPortCount> ports;
  FlowCacheCounters flow_cache;
  std::span<ClassCounters> classes;     // [egress port][class]
  std::span<LatencyHistogram> sojourn;  // [egress port][class], ns from RX to TX
  std::span<JobCounters> jobs;          // by job slot
  unsigned class_count = 0;
  ClassCounters& cls(unsigned port, unsigned c) { return classes[port * class_count + c]; }
  LatencyHistogram& hist(unsigned port, unsigned c) { return sojourn[port * class_count + c]; }
};

}  // namespace psgate
