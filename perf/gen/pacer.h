// SPDX-License-Identifier: BSD-3-Clause
// Token-bucket pacer for one job, driven by an injected clock (the TSC in
// psgate-gen, a plain counter in the tests).
//
// Units: `rate` is cost units per second (packets for a pps rate, bits for a
// bit/s rate); the clock runs at `hz` ticks per second. Credit is kept in
// (cost unit x hz), so one tick adds exactly `rate` and one unit costs exactly
// `hz`: no rounding, no drift, however long the run. Refill is lazy, once per
// TX burst. The depth caps the credit a slow loop can bank (the largest burst
// the pacer lets out at once); it is at least one cost of the largest packet,
// or that packet could never pass.
#pragma once

#include <cstdint>

namespace psgate::gen {

class Pacer {
 public:
  Pacer() = default;
  Pacer(uint64_t rate_per_s, uint64_t hz, uint64_t depth_units, uint64_t now)
      : rate_(rate_per_s), hz_(hz), cap_(static_cast<u128>(depth_units) * hz), credit_(0), last_(now) {}

  // Empty, counting from `now`: what a bucket banked before the sending
  // began (link wait, settle) is no credit to send it with.
  void restart(uint64_t now) {
    credit_ = 0;
    last_ = now;
  }

  void refill(uint64_t now) {
    if (now <= last_) return;
    const u128 add = static_cast<u128>(now - last_) * rate_;  // < 2^128: both factors < 2^64
    credit_ = add >= cap_ - credit_ ? cap_ : credit_ + add;
    last_ = now;
  }

  // Spends `units` (one packet, or its bits) when the credit covers it.
  bool try_take(uint64_t units) {
    const u128 need = static_cast<u128>(units) * hz_;
    if (credit_ < need) return false;
    credit_ -= need;
    return true;
  }

  // Whole units available now (after refill()).
  uint64_t available() const { return hz_ ? static_cast<uint64_t>(credit_ / hz_) : 0; }

 private:
  using u128 = unsigned __int128;
  uint64_t rate_ = 0;
  uint64_t hz_ = 0;
  u128 cap_ = 0;
  u128 credit_ = 0;
  uint64_t last_ = 0;
};

}  // namespace psgate::gen
