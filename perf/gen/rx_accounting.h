// SPDX-License-Identifier: BSD-3-Clause
// Per-flow receive accounting: sequence extension, reordering, duplicates.
// One FlowRx per (job, direction, flow) in a flat array indexed by flow id, so
// millions of flows cost a few bytes each and no lookup. Loss is computed at
// the end, per flow, as (packets sent on the flow) - distinct sequence
// numbers received, after the drain wait (tally_flow).
//
//   window bit i = sequence number (next - 1 - i) has arrived, i < 64
//
// An arrival above the highest seen is new (a gap is not loss yet: it may be
// reordering). Below the highest: inside the window it is a duplicate when its
// bit is set, else reordered; older than the window it is "late": it may be a
// long-delayed original or a copy of one counted long ago, and nothing here
// can tell which. Late arrivals are counted apart and never as received, so
// they cannot hide loss: the true loss lies between lost - late and lost.
#pragma once

#include <cstddef>
#include <cstdint>

namespace psgate::gen {

inline constexpr unsigned kDupWindow = 64;

// Frames per rte_eth_rx_burst.
inline constexpr uint16_t kRxBurst = 64;

// Bursts RX polls from one port per round at most: twice what one TX round
// can send (every job one burst, all of which may return on the same port),
// so that in the single loop RX drains faster than TX fills and a backlog
// left by a stall is worked off within a few rounds; never fewer than 2. The
// cap keeps a flooded RX port from starving TX.
inline constexpr unsigned rx_bursts_per_round(size_t jobs, uint32_t tx_burst) {
  const uint64_t per_round = (uint64_t{jobs} * tx_burst + kRxBurst - 1) / kRxBurst;
  return per_round < 1 ? 2u : static_cast<unsigned>(2 * per_round);
}

// 64 bytes, one cache line per flow and direction: the RX path touches one
// line per packet. Sequence state, the receive counts and a latency summary
// (min, max, sum: a histogram per flow would not fit millions of flows; the
// per-stream histograms have the distribution).
struct alignas(64) FlowRx {
  uint64_t next = 0;  // highest extended sequence number seen + 1; 0: none yet
  uint64_t window = 0;
  uint64_t received = 0;  // distinct sequence numbers (late ones excluded)
  uint64_t bytes = 0;     // every arrival's frame bytes (duplicates and late ones included)
  uint64_t lat_sum_ns = 0;
  uint32_t lat_min_ns = UINT32_MAX;  // saturating at UINT32_MAX ns (4.3 s)
  uint32_t lat_max_ns = 0;           // saturating likewise
  uint32_t reordered = 0;            // saturating: per-flow detail; the stream totals are exact
  uint32_t duplicates = 0;
  uint32_t late = 0;         // older than the window: original or duplicate, undecidable
  uint32_t lat_invalid = 0;  // arrivals without a plausible latency (stamp.h)

  // Every arrival: distinct, duplicate or late.
  uint64_t packets() const { return received + duplicates + late; }
  // Arrivals with a latency sample: all but duplicates and implausible ones.
  uint64_t lat_samples() const { return received + late - lat_invalid; }
};
static_assert(sizeof(FlowRx) == 64, "per-flow state must stay small: millions of flows");

enum class Arrival : uint8_t { kNew, kReordered, kDuplicate, kLate };

// The 64-bit sequence number closest to the highest seen whose low 32 bits
// are `seq` (the stamp carries 32 bits).
inline uint64_t extend_seq(uint64_t next, uint32_t seq) {
  if (next == 0) return seq;
  const uint64_t highest = next - 1;
  uint64_t s = (highest & ~0xffffffffull) | seq;
  if (s + 0x80000000ull < highest) {
    s += 1ull << 32;
  } else if (s > highest + 0x80000000ull && s >= (1ull << 32)) {
    s -= 1ull << 32;
  }
  return s;
}

inline void bump(uint32_t& c) { c += c != UINT32_MAX; }

inline void record_flow_latency(FlowRx& f, uint64_t ns) {
  const uint32_t v = ns < UINT32_MAX ? static_cast<uint32_t>(ns) : UINT32_MAX;
  f.lat_sum_ns += ns;
  f.lat_min_ns = v < f.lat_min_ns ? v : f.lat_min_ns;
  f.lat_max_ns = v > f.lat_max_ns ? v : f.lat_max_ns;
}

inline Arrival record_arrival(FlowRx& f, uint32_t seq32) {
  const uint64_t s = extend_seq(f.next, seq32);
  if (f.next == 0 || s >= f.next) {
    const uint64_t shift = f.next == 0 ? kDupWindow : s - (f.next - 1);
    f.window = shift >= kDupWindow ? 1 : (f.window << shift) | 1;
    f.next = s + 1;
    ++f.received;
    return Arrival::kNew;
  }
  const uint64_t age = f.next - 1 - s;  // 0: the highest itself
  if (age >= kDupWindow) {
    bump(f.late);
    return Arrival::kLate;
  }
  const uint64_t bit = 1ull << age;
  if (f.window & bit) {
    bump(f.duplicates);
    return Arrival::kDuplicate;
  }
  f.window |= bit;
  ++f.received;
  bump(f.reordered);
  return Arrival::kReordered;
}

// A flow's end result against the packets sent on it. Received sequence
// numbers beyond those sent (frames of an earlier run still in a ring,
// corrupt stamps) are `excess`, not received: lost never goes negative and
// unique never exceeds sent.
struct FlowTally {
  uint64_t unique = 0;  // min(received, sent)
  uint64_t lost = 0;    // sent - unique
  uint64_t excess = 0;  // received - unique
};

inline FlowTally tally_flow(uint64_t sent, const FlowRx& f) {
  if (f.received <= sent) return {f.received, sent - f.received, 0};
  return {sent, 0, f.received - sent};
}

}  // namespace psgate::gen
