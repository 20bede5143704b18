// SPDX-License-Identifier: BSD-3-Clause
// Token bucket in exact integer arithmetic, refilled lazily from a caller-given
// clock (TSC ticks on the data path, a hand-ticked counter in tests).
//
// Units: tokens are kept in byte-ticks (bytes * tick_hz), so a refill adds
// elapsed_ticks * rate_bytes_per_sec with no division and no rounding: the
// long-run rate is exact. A packet conforms when the bucket holds at least
// min(len, burst) bytes; it then may drive the bucket negative by up to one
// packet, which later refills repay. That lets a frame larger than the burst
// pass (at the configured rate) instead of stalling its queue forever.
//
// Overflow: capacity = burst * tick_hz must stay below 2^62, i.e. burst up to
// ~1 GiB at a 4 GHz TSC; refills are clamped to the time needed to go from the
// deepest debt to full, so elapsed * rate stays below 2^63.
//
// One owner (one lcore), no atomics.
#pragma once

#include <algorithm>
#include <cstdint>

namespace psgate {

class TokenBucket {
 public:
  // The largest charge: a 65,535-byte frame plus a port's overhead (at most
  // 64 B): the deepest debt a refill repays (fill_ticks_).
  static constexpr uint64_t kMaxPacketBytes = 65535 + 64;

  TokenBucket() = default;
  TokenBucket(uint64_t rate_bytes_per_sec, uint64_t burst_bytes, uint64_t tick_hz, uint64_t now)
      : tick_hz_(tick_hz), burst_bytes_(burst_bytes), last_(now) {
    set_rate(rate_bytes_per_sec, now);
    tokens_ = capacity_;
  }

  // Changes the rate (and keeps the tokens already earned, clamped to the burst).
  void set_rate(uint64_t rate_bytes_per_sec, uint64_t now) { reconfigure(rate_bytes_per_sec, burst_bytes_, now); }
  // Changes the rate and the burst: the tokens earned so far (at the old rate,
  // up to `now`) are kept, clamped to the new burst. A larger burst is earned
  // at the new rate, never handed out at once: a bucket refilled to full on
  // every change would let a burst through per change, above the rate.
  void reconfigure(uint64_t rate_bytes_per_sec, uint64_t burst_bytes, uint64_t now) {
    refill(now);
    burst_bytes_ = burst_bytes;
    rate_ = rate_bytes_per_sec;
    capacity_ = static_cast<int64_t>(burst_bytes_ * tick_hz_);
    const uint64_t span = static_cast<uint64_t>(capacity_) + kMaxPacketBytes * tick_hz_;
    fill_ticks_ = rate_ == 0 ? UINT64_MAX : span / rate_ + 1;
    tokens_ = std::min(tokens_, capacity_);
  }

  void refill(uint64_t now) {
    const uint64_t elapsed = now - last_;
    if (static_cast<int64_t>(elapsed) <= 0) [[unlikely]] {
      // A clock that went backwards adds nothing. By a little (clocks read
      // on two cores, a test), it waits for the clock to pass the last
      // refill; by more than 100 ms, the clock itself stepped back (a VM
      // moved to a host whose TSC is behind): refills go on from the new
      // reading, or the bucket would earn nothing for as long as the step.
      if (static_cast<int64_t>(elapsed) < -static_cast<int64_t>(tick_hz_ / 10)) last_ = now;
      return;
    }
    last_ = now;
    if (elapsed >= fill_ticks_) {
      tokens_ = capacity_;
      return;
    }
    // Compare against the room left instead of adding first: tokens_ + earned
    // can exceed 2^63 when capacity_ is near its 2^62 limit (both terms then
    // approach capacity_). room < 2^62 + kMaxPacketBytes * tick_hz.
    const uint64_t earned = elapsed * rate_;
    const uint64_t room = static_cast<uint64_t>(capacity_ - tokens_);
    tokens_ = earned >= room ? capacity_ : tokens_ + static_cast<int64_t>(earned);
  }

  bool conforms(uint32_t len) const {
    const uint64_t need = std::min<uint64_t>(len, burst_bytes_);
    return tokens_ >= static_cast<int64_t>(need * tick_hz_);
  }

  void consume(uint32_t len) { tokens_ -= static_cast<int64_t>(uint64_t{len} * tick_hz_); }

  // Whole bytes currently available (may be negative while repaying a frame).
  int64_t tokens_bytes() const { return tokens_ / static_cast<int64_t>(tick_hz_ ? tick_hz_ : 1); }
  uint64_t rate_bytes_per_sec() const { return rate_; }
  uint64_t burst_bytes() const { return burst_bytes_; }

 private:
  uint64_t tick_hz_ = 1;
  uint64_t burst_bytes_ = 0;
  uint64_t rate_ = 0;     // bytes per second
  int64_t capacity_ = 0;  // byte-ticks
  int64_t tokens_ = 0;    // byte-ticks
  uint64_t fill_ticks_ = UINT64_MAX;
  uint64_t last_ = 0;
};

}  // namespace psgate
