// Data-plane counters. Each lcore owns one LcoreCounters and is its only
// writer; readers (stats, control) sum the lcores' copies and difference
// successive reads. Nothing is ever reset, so no increment can be lost.
//
// Counter is a relaxed atomic written with load+store (no read-modify-write):
// on x86 that is a plain add to a cache line the lcore owns, and the reader's
// concurrent load is well defined.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

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

// Why a packet that was received did not leave. Every received packet is
// either transmitted or counted under exactly one of these.
enum DropReason : unsigned {
  kDropRingFull = 0,   // RX -> scheduler handoff ring full (pipelined mode)
  kDropQueueFull,      // class FIFO at its depth
  kDropPoliced,        // job ingress policer
  kDropTxFailed,       // the egress port refused it until shutdown
  kDropShutdown,       // still queued when the drain timeout expired
  kDropBadMbuf,        // the driver handed over a broken buffer (lengths, chain, bounds): never read
  kDropOversize,       // larger than the egress port's MTU plus L2 header and tags
  kDropLinkDown,       // the egress port's link was down: nowhere to send it
  kDropRunt,           // shorter than an Ethernet header (14 bytes): nothing to forward
  kDropReasonCount
};
inline constexpr const char* kDropReasonNames[kDropReasonCount] = {
    "ring_full", "queue_full", "policed", "tx_failed", "shutdown_flush", "bad_mbuf", "oversize", "link_down", "runt"};

inline constexpr unsigned kPortCount = 2;  // 0 = wire, 1 = host
inline constexpr const char* kPortNames[kPortCount] = {"wire", "host"};

struct PortCounters {
  // Ingress side (counted by the RX stage on the port the packet came in on).
  Counter rx_packets, rx_bytes;
  Counter rx_malformed;      // forwarded unclassified in the default class
  Counter rx_network_control;  // non-IP frames and IPv6 ND, sent in class 0
  Counter rx_unclassified;   // IP that matched no job: default class
  // Egress side (counted on the port the packet was meant to leave by).
  Counter tx_packets, tx_bytes;
  std::array<Counter, kDropReasonCount> drops;
  // Re-ranking: a job's queued packets followed it to its new class, or (new
  // class full) the job stayed in its old class until that drained.
  Counter rerank_migrations, rerank_deferred;
};

struct ClassCounters {
  Counter enqueued_packets, enqueued_bytes;   // accepted into the class FIFO
  Counter dequeued_packets, dequeued_bytes;   // left the FIFO towards TX
  // Re-ranking moved a job's queued packets between classes (in order).
  Counter migrated_in, migrated_out;
  Counter drop_queue_full, drop_ring_full;
  Counter ecn_marked, dscp_remarked;
};

// Direction of a job's packet: towards the PS (push: arrived on wire, leaves
// by host) or from it (pull: arrived on host, leaves by wire).
enum Direction : unsigned { kPush = 0, kPull = 1 };
inline constexpr const char* kDirectionNames[2] = {"push", "pull"};
inline constexpr unsigned direction_of_ingress(unsigned in_port) { return in_port; }
inline constexpr unsigned direction_of_egress(unsigned out_port) { return out_port ^ 1u; }

struct JobCounters {
  std::array<Counter, 2> admitted_packets, admitted_bytes;  // by direction, after the policer
  std::array<Counter, 2> sent_packets, sent_bytes;          // by direction
  Counter policed;  // dropped by the job's ingress policer
  Counter drops;    // dropped for any other reason
};

// The RX lcore's flow cache: how often the ACL was skipped, and how often the
// cache was too small for the flows it saw (evictions: size dataplane.flow_cache).
struct FlowCacheCounters {
  Counter hits, misses, evictions;
};

struct alignas(64) LcoreCounters {
  LcoreCounters(unsigned class_count, unsigned max_jobs)
      : classes(kPortCount * class_count), sojourn(kPortCount * class_count), jobs(max_jobs),
        class_count_(class_count) {}
  std::array<PortCounters, kPortCount> ports;
  std::vector<ClassCounters> classes;       // [egress port][class]
  std::vector<LatencyHistogram> sojourn;    // [egress port][class], ns from RX to TX
  std::vector<JobCounters> jobs;            // by job slot
  FlowCacheCounters flow_cache;
  ClassCounters& cls(unsigned port, unsigned c) { return classes[port * class_count_ + c]; }
  LatencyHistogram& hist(unsigned port, unsigned c) { return sojourn[port * class_count_ + c]; }
  unsigned class_count_;
};

}  // namespace psgate
