// SPDX-License-Identifier: BSD-3-Clause
// PortScheduler's item-independent half: class set-up and the live changes
// of shaper, caps and floors (control path; class_scheduler.h). The
// per-packet code is in psgate/class_scheduler_impl.h, where it can inline.
#include "psgate/class_scheduler.h"

#include <algorithm>
#include <bit>

namespace psgate {
namespace {

uint32_t ring_size_for(uint32_t depth) {
  // Next power of two >= depth (1 for depth 0). depth <= 2^31 fits.
  return depth <= 1 ? 1u : std::bit_ceil(depth);
}

}  // namespace

PortSchedulerBase::PortSchedulerBase(const PortSchedConfig& config, uint64_t now)
    : overhead_(config.overhead_bytes),
      headroom_bytes_(config.priority_headroom_bytes),
      headroom_permille_(config.priority_headroom_permille),
      max_frame_(config.max_frame_bytes),
      shaper_burst_(config.shaper_burst_bytes),
      tick_hz_(config.tick_hz ? config.tick_hz : 1) {
  const size_t n = std::min<size_t>(config.classes.size(), kMaxClasses);
  classes_.resize(n);
  reserve_.assign(n, 0);
  for (size_t c = 0; c < n; ++c) {
    const ClassSchedConfig& cc = config.classes[c];
    Class& k = classes_[c];
    k.mask = ring_size_for(cc.depth) - 1;
    k.limit = cc.depth;
    min_limit_ = c == 0 ? cc.depth : std::min(min_limit_, cc.depth);
    class_mask_ |= uint64_t{1} << c;
    set_class_cap(static_cast<unsigned>(c), cc.cap_bytes_per_sec, cc.cap_burst_bytes, now);
    set_class_floor(static_cast<unsigned>(c), cc.floor_bytes_per_sec, cc.floor_burst_bytes, now);
  }
  set_shaper_rate(config.shaper_bytes_per_sec, now);
}

// Keeps the tokens already earned (clamped to the new burst) when a bucket
// changes; one that did not exist starts full, as at construction. (A new
// burst started full too, so each change of it let a whole burst through on
// top of what the old bucket had just spent.)
TokenBucket PortSchedulerBase::rebuild(const TokenBucket& old, bool had, uint64_t bytes_per_sec, uint64_t burst_bytes,
                                       uint64_t tick_hz, uint64_t now) {
  if (had) {
    TokenBucket b = old;
    b.reconfigure(bytes_per_sec, burst_bytes, now);
    return b;
  }
  return TokenBucket(bytes_per_sec, burst_bytes, tick_hz, now);
}

void PortSchedulerBase::set_shaper_rate(uint64_t bytes_per_sec, uint64_t now) {
  set_shaper(bytes_per_sec, shaper_burst_, now);
}

void PortSchedulerBase::update_reserves() {
  const uint64_t step = headroom_bytes_ ? headroom_bytes_ : shaper_burst_ * headroom_permille_ / 1000;
  // At most 3/4 of the burst, and never so much that a class has less than
  // two of the largest charge to spend: with less, each of its frames waits
  // for a full bucket, and credit that refills meanwhile is lost, so the
  // port falls below its rate whenever the loop comes back late (a 4 KiB
  // burst at MTU 1500 left the lower classes nothing else).
  const uint64_t two_frames = 2 * (uint64_t{max_frame_} + overhead_);
  const uint64_t cap = std::min(shaper_burst_ - shaper_burst_ / 4,
                                shaper_burst_ > two_frames ? shaper_burst_ - two_frames : uint64_t{0});
  for (size_t c = 0; c < reserve_.size(); ++c) reserve_[c] = static_cast<uint32_t>(std::min(c * step, cap));
}

void PortSchedulerBase::set_shaper(uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now) {
  shaper_burst_ = burst_bytes;
  update_reserves();
  if (bytes_per_sec == 0) {
    shaped_ = false;
    return;
  }
  shaper_ = rebuild(shaper_, shaped_, bytes_per_sec, burst_bytes, tick_hz_, now);
  shaped_ = true;
}

// A cap and a floor are the same kind of per-class bucket, told apart only by
// which bucket and which mask bit they use.
void PortSchedulerBase::set_class_bucket(unsigned cls, TokenBucket Class::*bucket, uint64_t& mask,
                                         uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now) {
  if (cls >= classes_.size()) return;
  const uint64_t bit = uint64_t{1} << cls;
  if (bytes_per_sec == 0) {
    mask &= ~bit;
    return;
  }
  TokenBucket& b = classes_[cls].*bucket;
  b = rebuild(b, (mask & bit) != 0, bytes_per_sec, burst_bytes, tick_hz_, now);
  mask |= bit;
}

void PortSchedulerBase::set_class_cap(unsigned cls, uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now) {
  set_class_bucket(cls, &Class::cap, cap_mask_, bytes_per_sec, burst_bytes, now);
}

void PortSchedulerBase::set_class_floor(unsigned cls, uint64_t bytes_per_sec, uint64_t burst_bytes, uint64_t now) {
  set_class_bucket(cls, &Class::floor, floor_mask_, bytes_per_sec, burst_bytes, now);
}

}  // namespace psgate
