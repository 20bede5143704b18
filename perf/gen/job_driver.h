// SPDX-License-Identifier: BSD-3-Clause
// What one job sends, round by round: direction, pacing, iteration phases.
// Pure logic on an injected clock (TSC ticks in psgate-gen, a counter in tests).
//
//   constant:  every round the job's direction (alternating push/pull when it
//              sends both), as far as the pacer allows ("max": no pacer).
//   iteration: push phase (each worker pushes push_bytes to the PS)
//              -> pull phase (the PS sends pull_bytes to each worker)
//              -> compute gap -> next iteration. Open loop: a phase ends when
//              its bytes were sent, not when they arrived.
//
// Rates: a pps rate charges 1 unit per packet, a bit/s rate 8 units per frame
// byte (without FCS, as DPDK counts bytes). With both directions the job's
// rate is shared by them.
#pragma once

#include <cstdint>

#include "pacer.h"
#include "profile.h"

namespace psgate::gen {

class JobDriver {
 public:
  JobDriver() = default;
  // `largest_frame`: the job's largest frame in bytes without FCS (the pacer
  // depth covers at least `tx_burst` of them).
  JobDriver(const JobProfile& job, uint64_t hz, uint32_t largest_frame, uint32_t tx_burst, uint64_t now);

  // TX begins at `now`: the pacer starts empty there, not where the driver
  // was made. Made before the links were awaited and settled, its bucket
  // had filled to pacer_depth by then and let that out at once, so a run
  // sent up to pacer_depth x rate more than the rate over its TX time.
  void start(uint64_t now) {
    if (paced_) pacer_.restart(now);
  }
  // Start of a TX round: refills the pacer, moves through iteration phases.
  // The direction to send now, or -1 (compute gap).
  int begin(uint64_t now);
  // One frame of `bytes` (without FCS) of the round: true when it may go.
  bool admit(uint32_t bytes) {
    if (phase_ != Phase::kConstant && budget_ == 0) return false;
    if (paced_ && !pacer_.try_take(mode_ == RateMode::kPps ? 1 : uint64_t{bytes} * 8)) return false;
    if (phase_ != Phase::kConstant) budget_ -= budget_ < bytes ? budget_ : bytes;
    return true;
  }
  // Admitted frames the TX ring refused: their bytes go back to the phase
  // (their pacer credit is gone: the generator missed its rate, and says so).
  void refund(uint64_t bytes) {
    if (phase_ != Phase::kConstant) budget_ += bytes;
  }
  uint64_t iterations() const { return iterations_; }

 private:
  enum class Phase : uint8_t { kConstant, kPush, kPull, kGap };
  void enter(Phase p, uint64_t now);

  Pacer pacer_;
  bool paced_ = false;
  RateMode mode_ = RateMode::kMax;
  Phase phase_ = Phase::kConstant;
  unsigned dirs_ = 0;
  unsigned next_dir_ = 0;
  uint64_t budget_ = 0;  // bytes left in the phase
  uint64_t push_total_ = 0, pull_total_ = 0;
  uint64_t gap_ticks_ = 0;
  uint64_t gap_end_ = 0;
  uint64_t iterations_ = 0;  // completed push+pull+gap cycles
};

}  // namespace psgate::gen
