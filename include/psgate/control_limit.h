// SPDX-License-Identifier: BSD-3-Clause
// The network-control limit: class 0 (ARP, LLDP, LACP, ND, OSPF...) is served
// first by strict priority with no cap of its own, so a flood of it on the
// wire (an ARP storm, a looped LLDP or broadcast) would take the whole egress
// port from every job. Each egress port polices its class 0 with one token
// bucket (classes.control_rate / control_burst, docs/configuration.md), as a
// switch's control-plane policing does: a frame over it is dropped at once
// (`control_policed`), never queued, so what passes waits behind no flood.
//
// Charged on the wire's bytes (the frame plus the port's per-frame overhead,
// as class caps are), so that a flood of small frames costs what it takes of
// the link. Pure and clock-injected (`now` in the bucket's ticks): one owner,
// the port's scheduler lcore.
//
// Per burst: the bucket is refilled once (police()), and only the class 0
// packets of a burst are looked at (which a burst without any never pays
// for beyond one test of its class mask, made by the caller).
#pragma once

#include <cstdint>

#include "psgate/token_bucket.h"

namespace psgate {

struct ControlLimit {
  TokenBucket bucket;
  uint32_t overhead = 0;  // bytes charged per frame besides its length
  bool on = false;        // false: class 0 is not limited

  ControlLimit() = default;
  // rate 0: off.
  ControlLimit(uint64_t rate_bytes_per_sec, uint64_t burst_bytes, uint32_t overhead_bytes, uint64_t tick_hz,
               uint64_t now)
      : bucket(rate_bytes_per_sec, burst_bytes, tick_hz, now), overhead(overhead_bytes), on(rate_bytes_per_sec != 0) {}

  // Marks an item of police()'s run that is not class 0's: kept, uncharged.
  static constexpr uint32_t kOtherClass = UINT32_MAX;

  // Whether a frame of `len` bytes arriving at `now` passes; it is charged
  // when it does.
  bool admit(uint32_t len, uint64_t now) {
    bucket.refill(now);
    return take(len);
  }

  // Polices a run of `n` items in place, the bucket refilled once at `now`:
  // item i is a class 0 frame of `len(i)` bytes, or another class's item
  // (len(i) == kOtherClass), which is kept and not charged. What is kept
  // moves to the front in its order (keep(from, to), from >= to); a frame
  // over the limit goes to drop(i). Returns how many were kept. The one
  // policing loop of both data paths (rx_stage.cc's mixed burst, and
  // sched_stage.cc's class 0 ring take through the overload below).
  template <typename Len, typename Keep, typename Drop>
  unsigned police(unsigned n, uint64_t now, Len&& len, Keep&& keep, Drop&& drop) {
    bucket.refill(now);
    unsigned kept = 0;
    for (unsigned i = 0; i < n; ++i) {
      const uint32_t l = len(i);
      if (l != kOtherClass && !take(l)) {
        drop(i);
      } else {
        keep(i, kept++);
      }
    }
    return kept;
  }

  // A run of class 0 items only: the ones that pass are kept at the front,
  // in their order, the others appended to `dropped` (n_dropped advances).
  // `len(item)` is a frame's length. Returns how many passed.
  template <typename Item, typename Len>
  unsigned police(Item* items, unsigned n, uint64_t now, Len&& len, Item* dropped, unsigned& n_dropped) {
    return police(
        n, now, [&](unsigned i) { return static_cast<uint32_t>(len(items[i])); },
        [&](unsigned from, unsigned to) { items[to] = items[from]; },
        [&](unsigned i) { dropped[n_dropped++] = items[i]; });
  }

 private:
  bool take(uint32_t len) {
    const uint32_t charge = len + overhead;
    if (!bucket.conforms(charge)) return false;
    bucket.consume(charge);
    return true;
  }
};

}  // namespace psgate
