// SPDX-License-Identifier: BSD-3-Clause
// Per-egress-port scheduler: N strict-priority classes (0 = highest), each a
// bounded FIFO with an optional cap (token bucket, non-work-conserving for that
// class only) and an optional floor (minimum rate served ahead of strict
// priority), all under one port shaper. Pure and clock-injected: `now` is in
// ticks of `tick_hz`. One owner lcore; no locks, no allocation after
// construction.
//
// Choice of the next packet, per packet:
//   1. the port shaper must conform for the head packet, else stop (shaping);
//   2. floor pass: the highest-priority backlogged class whose floor bucket
//      conforms is served (floors are served ahead of strict priority);
//   3. strict pass: the highest-priority backlogged class whose cap bucket
//      (if any) conforms; a capped-out class lets the next class send
//      (work-conserving across classes).
// Priority headroom: a class c chosen by the strict pass must leave its
// reserve, min(c * step, 3/4 of the burst), in the shaper. Backlogged lower
// classes then keep credit waiting for higher ones instead of draining the
// bucket to zero, so a higher-priority burst that arrives under load leaves
// at once (up to one step of it) rather than waiting for refills: in effect
// it preempts, as it would find the bucket alone. The step is a share of the
// burst (25% by default: a class's burst tolerance under lower-priority load
// is then a quarter of what it has alone) or a fixed size. The 3/4 cap lets
// every class spend at least the top quarter of the bucket, so lower classes
// still reach the shaper's rate when the lcore polls less often than
// burst/rate. Long-run rates are unchanged. Floor-served packets need no
// headroom (a floor is a guarantee, not a priority).
// Classes are found with a 64-bit backlog bitmap and count-trailing-zeros,
// never by scanning. Shaper, cap and floor buckets are charged len + overhead.
#pragma once

#include <cstdint>
#include <vector>

#include "psgate/token_bucket.h"

namespace psgate {

inline constexpr unsigned kMaxClasses = 64;

// The scheduler's own input, separate from psgate's class models on purpose:
// this library knows nothing of the config or snapshots, so its tests and
// benchmarks drive it alone. config/compile.h fills it for psgate.
struct ClassSchedConfig {
  uint32_t depth = 1024;           // packets
  uint64_t cap_bytes_per_sec = 0;  // 0: no cap
  uint64_t cap_burst_bytes = 0;
  uint64_t floor_bytes_per_sec = 0;  // 0: no floor
  uint64_t floor_burst_bytes = 0;
};

struct PortSchedConfig {
  std::vector<ClassSchedConfig> classes;  // 1..kMaxClasses
  uint64_t shaper_bytes_per_sec = 0;      // 0: unshaped (line rate)
  uint64_t shaper_burst_bytes = 0;
  uint32_t overhead_bytes = 0;              // added to every packet's length for accounting
  uint32_t priority_headroom_bytes = 0;     // per class step, fixed; 0: see permille
  uint32_t priority_headroom_permille = 0;  // per class step, of the shaper burst, unless bytes is set; both 0: off
  // The largest frame the port sends (bytes, without overhead); 0: unknown.
  // A class's headroom always leaves two of them (with overhead) of the
  // burst: a class that may spend only the last charge of a full bucket
  // sends one frame per refill to full, and loses whatever refills while
  // the bucket is full (update_reserves).
  uint32_t max_frame_bytes = 0;
  uint64_t tick_hz = 1;
};

template <typename Item>
struct ScheduledItem {
  Item item;
  uint32_t len;  // packet length as enqueued (without overhead)
  uint8_t cls;
};

// The half of PortScheduler that does not depend on the item type: class
// limits, the shaper, caps, floors and priority reserves, set up and changed
// on the control path (src/sched/class_scheduler.cc), and the read-only
// accessors. The queues and the per-packet code are the template's.
class PortSchedulerBase {
 public:
  uint32_t depth(unsigned cls) const { return cls < classes_.size() ? classes_[cls].tail - classes_[cls].head : 0; }
  // Free-running positions of class `cls`'s queue: how many items ever left
  // its head, and where its tail is (both wrap; a migration out of the class
  // moves its tail back).
  uint32_t head_position(unsigned cls) const { return classes_[cls].head; }
  uint32_t tail_position(unsigned cls) const { return classes_[cls].tail; }
  uint64_t backlog_bytes(unsigned cls) const { return cls < classes_.size() ? classes_[cls].backlog_bytes : 0; }
  uint64_t backlog_mask() const { return backlog_; }  // bit c set when class c holds packets
  bool empty() const { return backlog_ == 0; }
  unsigned class_count() const { return static_cast<unsigned>(classes_.size()); }
  // Configured queue limit of class `cls` (packets); depth() is the occupancy.
  uint32_t capacity(unsigned cls) const { return cls < classes_.size() ? classes_[cls].limit : 0; }
  // True when enqueueing a burst of `n` items in `classes` (a class mask)
  // and dequeueing up to `n` at once would return exactly that burst, ordered
  // by class and FIFO within each: nothing is queued, the classes exist and
  // nothing shapes, caps or floors them, and each has room for the burst. A caller
  // may then hand the burst on directly (the run-to-completion cut-through).
  bool passes_through(uint64_t classes, unsigned n) const {
    return backlog_ == 0 && !shaped_ && (classes & (~class_mask_ | cap_mask_ | floor_mask_)) == 0 && n <= min_limit_;
  }

  // Live changes (control plane hands them to the owning lcore).
  void set_shaper_rate(uint64_t bytes_per_sec, uint64_t now);  // 0: unshaped
  // As set_shaper_rate, and replaces the burst too (set_shaper_rate keeps the
  // configured one). Same token rule as the class setters: a change keeps the
  // tokens earned, at most the new burst; a bucket first set starts full.
  void set_shaper(uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now);
  void set_class_cap(unsigned cls, uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now);    // 0: none
  void set_class_floor(unsigned cls, uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now);  // 0: none

 protected:
  // Sets up every class but its ring (the template's storage).
  PortSchedulerBase(const PortSchedConfig& config, uint64_t now);

  // Per-class state, kept small so the classes a dequeue touches share few
  // cache lines. The ring is mask + 1 (a power of two >= limit) slots of the
  // template's storage; head/tail are free-running counters, so tail - head
  // is the occupancy and wrap-around needs no branch.
  struct Class {
    uint32_t head = 0;
    uint32_t tail = 0;
    uint32_t mask = 0;           // ring size - 1
    uint32_t limit = 0;          // configured depth (packets)
    uint64_t backlog_bytes = 0;  // sum of len (without overhead)
    void* ring = nullptr;        // PortScheduler<Item>::Slot[mask + 1]
    TokenBucket cap;
    TokenBucket floor;
  };

  std::vector<Class> classes_;
  uint64_t backlog_ = 0;     // bit c: class c holds packets
  uint64_t cap_mask_ = 0;    // bit c: class c has a cap
  uint64_t floor_mask_ = 0;  // bit c: class c has a floor
  uint64_t class_mask_ = 0;  // bit c: class c exists
  uint32_t min_limit_ = 0;   // the smallest class limit (passes_through)
  TokenBucket shaper_;
  bool shaped_ = false;
  uint32_t overhead_ = 0;
  uint32_t headroom_bytes_ = 0;
  uint32_t headroom_permille_ = 0;
  uint32_t max_frame_ = 0;
  // reserve_[c]: shaper credit class c leaves for higher classes (see above);
  // recomputed when the burst changes.
  std::vector<uint32_t> reserve_;
  uint64_t shaper_burst_ = 0;
  uint64_t tick_hz_ = 1;

 private:
  void update_reserves();
  void set_class_bucket(unsigned cls, TokenBucket Class::*bucket, uint64_t& mask, uint64_t bytes_per_sec,
                        uint64_t burst_bytes, uint64_t now);
  static TokenBucket rebuild(const TokenBucket& old, bool had, uint64_t bytes_per_sec, uint64_t burst_bytes,
                             uint64_t tick_hz, uint64_t now);
};

template <typename Item>
class PortScheduler : public PortSchedulerBase {
 public:
  PortScheduler(const PortSchedConfig& config, uint64_t now);

  // false: the class queue is full; the caller drops (and counts) the item.
  // `tag` is the caller's (psgate: the job slot) and only used by migrate().
  bool enqueue(unsigned cls, Item item, uint32_t len, uint32_t tag = 0);
  // As above, and reports the class's depth the item found (on success or not).
  bool enqueue(unsigned cls, Item item, uint32_t len, uint32_t tag, uint32_t& depth_before);

  // Moves every queued item tagged `tag` from class `from` to the tail of
  // class `to`, keeping their order (and the order of what stays). All or
  // nothing: returns false, moving nothing, when `to` lacks room for them.
  // O(depth of `from`). Returns the number moved through `moved`.
  bool migrate(unsigned from, unsigned to, uint32_t tag, uint32_t& moved);

  // Dequeues up to `max` items allowed at time `now` into `out`; returns how
  // many. Refills buckets once per call.
  unsigned dequeue(uint64_t now, ScheduledItem<Item>* out, unsigned max);

  // Removes every queued item (for shutdown): calls fn(item, cls) for each.
  template <typename Fn>
  void flush(Fn&& fn);

 private:
  struct Slot {
    Item item;
    uint32_t len;
    uint32_t tag;
  };
  static Slot* ring(const Class& k) { return static_cast<Slot*>(k.ring); }

  void pop(Class& c, unsigned cls, ScheduledItem<Item>& out);
  unsigned dequeue_strict(ScheduledItem<Item>* out, unsigned max);

  std::vector<Slot> storage_;
};

}  // namespace psgate

#include "psgate/class_scheduler_impl.h"
