// SPDX-License-Identifier: BSD-3-Clause
// Template bodies of PortScheduler: the queues and the per-packet path
// (class_scheduler.h holds the contract; the item-independent set-up and live
// changes are src/sched/class_scheduler.cc).
//
// Per dequeue call:
//
//   refill shaper ──► loop until max or no choice:
//     floor pass : ctz over backlog & floor_mask & ~floor_out & ~cap_out
//                  (floor conforms, and cap conforms if capped)
//     strict pass: ctz over backlog & ~cap_out   (cap conforms if capped)
//     shaper gate: chosen head (len + overhead, plus class * headroom unless
//                  floor-served) must conform, else return
//     charge shaper, cap, and floor only when served by the floor pass
//
// cap_out / floor_out are per-call exclusion masks. Within one call `now` is
// fixed, so no bucket earns tokens: a class whose cap does not conform for its
// head stays out for the rest of the call (its head cannot move). A floor that
// does not conform stays out only until the class is served by the strict pass,
// since the new head may be shorter and conform. Buckets are refilled lazily
// when a class is first considered; TokenBucket::refill at an unchanged `now`
// is a no-op, and refilling late gives the same tokens as refilling early.
#pragma once

#include <type_traits>
#include <utility>

#include "psgate/class_scheduler.h"

namespace psgate {

template <typename Item>
PortScheduler<Item>::PortScheduler(const PortSchedConfig& config, uint64_t now) : PortSchedulerBase(config, now) {
  static_assert(std::is_default_constructible_v<Item>, "ring slots are preallocated");
  size_t total = 0;
  for (const Class& k : classes_) total += size_t{k.mask} + 1;
  storage_.resize(total);
  size_t offset = 0;
  for (Class& k : classes_) {
    k.ring = storage_.data() + offset;
    offset += size_t{k.mask} + 1;
  }
}

template <typename Item>
bool PortScheduler<Item>::enqueue(unsigned cls, Item item, uint32_t len, uint32_t tag) {
  uint32_t depth_before;
  return enqueue(cls, std::move(item), len, tag, depth_before);
}

template <typename Item>
bool PortScheduler<Item>::enqueue(unsigned cls, Item item, uint32_t len, uint32_t tag, uint32_t& depth_before) {
  depth_before = 0;
  if (cls >= classes_.size()) return false;
  Class& k = classes_[cls];
  depth_before = k.tail - k.head;
  if (depth_before >= k.limit) return false;
  Slot& s = ring(k)[k.tail & k.mask];
  s.item = std::move(item);
  s.len = len;
  s.tag = tag;
  ++k.tail;
  k.backlog_bytes += len;
  backlog_ |= uint64_t{1} << cls;
  return true;
}

template <typename Item>
bool PortScheduler<Item>::migrate(unsigned from, unsigned to, uint32_t tag, uint32_t& moved) {
  moved = 0;
  if (from >= classes_.size() || to >= classes_.size() || from == to) return from == to;
  Class& src = classes_[from];
  Class& dst = classes_[to];
  uint32_t count = 0;
  for (uint32_t i = src.head; i != src.tail; ++i) count += ring(src)[i & src.mask].tag == tag;
  if (count == 0) return true;
  if ((dst.tail - dst.head) + count > dst.limit) return false;
  // One pass: tagged items go to dst's tail, the others are compacted towards
  // src's head, both in their original order.
  uint32_t keep = src.head;
  uint64_t bytes = 0;
  for (uint32_t i = src.head; i != src.tail; ++i) {
    Slot& s = ring(src)[i & src.mask];
    if (s.tag == tag) {
      bytes += s.len;
      ring(dst)[dst.tail & dst.mask] = std::move(s);
      ++dst.tail;
    } else {
      if (keep != i) ring(src)[keep & src.mask] = std::move(s);
      ++keep;
    }
  }
  src.tail = keep;
  src.backlog_bytes -= bytes;
  dst.backlog_bytes += bytes;
  if (src.head == src.tail) backlog_ &= ~(uint64_t{1} << from);
  backlog_ |= uint64_t{1} << to;
  moved = count;
  return true;
}

template <typename Item>
void PortScheduler<Item>::pop(Class& k, unsigned cls, ScheduledItem<Item>& out) {
  Slot& s = ring(k)[k.head & k.mask];
  out.item = std::move(s.item);
  out.len = s.len;
  out.cls = static_cast<uint8_t>(cls);
  ++k.head;
  k.backlog_bytes -= s.len;
  if (k.head == k.tail) backlog_ &= ~(uint64_t{1} << cls);
}

template <typename Item>
unsigned PortScheduler<Item>::dequeue(uint64_t now, ScheduledItem<Item>* out, unsigned max) {
  if (shaped_) shaper_.refill(now);
  // No backlogged class has a cap or a floor: the floor pass and the cap
  // checks below would find nothing, and the strict pass is a class-by-class
  // drain. (The backlog only shrinks during a call, so this holds throughout.)
  if ((backlog_ & (cap_mask_ | floor_mask_)) == 0) return dequeue_strict(out, max);
  uint64_t cap_out = 0;    // capped classes whose cap does not conform (this call)
  uint64_t floor_out = 0;  // floored classes whose floor does not conform for the head
  unsigned n = 0;
  while (n < max && backlog_ != 0) {
    unsigned chosen = kMaxClasses;
    bool via_floor = false;

    // Floor pass: minimum rates are served ahead of strict priority.
    for (uint64_t cand = backlog_ & floor_mask_ & ~floor_out & ~cap_out; cand != 0;) {
      const unsigned c = static_cast<unsigned>(__builtin_ctzll(cand));
      const uint64_t bit = uint64_t{1} << c;
      cand &= ~bit;
      Class& k = classes_[c];
      const uint32_t charge = ring(k)[k.head & k.mask].len + overhead_;
      k.floor.refill(now);
      if (!k.floor.conforms(charge)) {
        floor_out |= bit;
        continue;
      }
      if (cap_mask_ & bit) {
        k.cap.refill(now);
        if (!k.cap.conforms(charge)) {
          cap_out |= bit;
          continue;
        }
      }
      chosen = c;
      via_floor = true;
      break;
    }

    // Strict pass: highest-priority backlogged class not capped out.
    if (chosen == kMaxClasses) {
      for (uint64_t cand = backlog_ & ~cap_out; cand != 0;) {
        const unsigned c = static_cast<unsigned>(__builtin_ctzll(cand));
        const uint64_t bit = uint64_t{1} << c;
        cand &= ~bit;
        if (cap_mask_ & bit) {
          Class& k = classes_[c];
          k.cap.refill(now);
          if (!k.cap.conforms(ring(k)[k.head & k.mask].len + overhead_)) {
            cap_out |= bit;
            continue;
          }
        }
        chosen = c;
        break;
      }
      if (chosen == kMaxClasses) break;  // every backlogged class is capped out
    }

    Class& k = classes_[chosen];
    const uint64_t bit = uint64_t{1} << chosen;
    const uint32_t charge = ring(k)[k.head & k.mask].len + overhead_;
    // The shaper gates the chosen packet only: letting a smaller packet of a
    // lower class pass here would invert priority.
    if (shaped_) {
      // conforms() caps what it asks for at the burst, so the lowest classes
      // of a small bucket still send.
      const uint32_t need = via_floor ? charge : charge + reserve_[chosen];
      if (!shaper_.conforms(need)) break;
      shaper_.consume(charge);
    }
    if (cap_mask_ & bit) k.cap.consume(charge);
    if (via_floor) {
      k.floor.consume(charge);
    } else {
      floor_out &= ~bit;  // new head: its floor conformance is unknown again
    }
    pop(k, chosen, out[n++]);
  }
  return n;
}

// Strict priority under the shaper only: drains the highest backlogged class,
// then the next, each packet gated by the shaper with its class's headroom,
// exactly as the general loop would choose them.
template <typename Item>
unsigned PortScheduler<Item>::dequeue_strict(ScheduledItem<Item>* out, unsigned max) {
  unsigned n = 0;
  while (n < max && backlog_ != 0) {
    const unsigned c = static_cast<unsigned>(__builtin_ctzll(backlog_));
    Class& k = classes_[c];
    const uint32_t reserve = reserve_[c];
    uint64_t bytes = 0;
    bool blocked = false;
    while (n < max && k.head != k.tail) {
      Slot& s = ring(k)[k.head & k.mask];
      if (shaped_) {
        const uint32_t charge = s.len + overhead_;
        if (!shaper_.conforms(charge + reserve)) {
          blocked = true;
          break;
        }
        shaper_.consume(charge);
      }
      ScheduledItem<Item>& o = out[n++];
      o.item = std::move(s.item);
      o.len = s.len;
      o.cls = static_cast<uint8_t>(c);
      bytes += s.len;
      ++k.head;
    }
    k.backlog_bytes -= bytes;
    if (k.head == k.tail) backlog_ &= ~(uint64_t{1} << c);
    if (blocked) break;  // a lower class must not pass the one the shaper holds back
  }
  return n;
}

template <typename Item>
template <typename Fn>
void PortScheduler<Item>::flush(Fn&& fn) {
  for (unsigned c = 0; c < classes_.size(); ++c) {
    Class& k = classes_[c];
    while (k.head != k.tail) {
      Slot& s = ring(k)[k.head & k.mask];
      ++k.head;
      fn(s.item, c);
    }
    k.backlog_bytes = 0;
  }
  backlog_ = 0;
}

}  // namespace psgate
