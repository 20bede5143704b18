// SPDX-License-Identifier: BSD-3-Clause
#include "job_driver.h"

#include <algorithm>

namespace psgate::gen {
namespace {

using u128 = unsigned __int128;

uint64_t scale_ns(uint64_t value_per_s, uint64_t ns) {
  const u128 v = static_cast<u128>(value_per_s) * ns / 1'000'000'000u;
  return v > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(v);
}

}  // namespace

JobDriver::JobDriver(const JobProfile& job, uint64_t hz, uint32_t largest_frame, uint32_t tx_burst, uint64_t now)
    : mode_(job.rate_mode), dirs_(job.dirs), next_dir_(job.sends(kPush) ? kPush : kPull) {
  if (mode_ != RateMode::kMax) {
    paced_ = true;
    const uint64_t largest_cost = mode_ == RateMode::kPps ? 1 : uint64_t{largest_frame} * 8;
    const uint64_t depth =
        std::max<uint64_t>(uint64_t{tx_burst} * largest_cost, scale_ns(job.rate, job.pacer_depth_ns));
    pacer_ = Pacer(job.rate, hz, depth, now);
  }
  if (job.pattern == Pattern::kIteration) {
    push_total_ = job.push_bytes * job.workers;  // the profile keeps these below 2^64
    pull_total_ = job.pull_bytes * job.workers;
    gap_ticks_ = scale_ns(hz, job.gap_ns);
    enter(Phase::kPush, now);
  }
}

void JobDriver::enter(Phase p, uint64_t now) {
  phase_ = p;
  if (p == Phase::kPush) {
    budget_ = push_total_;
    if (budget_ == 0) enter(Phase::kPull, now);
  } else if (p == Phase::kPull) {
    budget_ = pull_total_;
    if (budget_ == 0) enter(Phase::kGap, now);
  } else if (p == Phase::kGap) {
    budget_ = 0;
    gap_end_ = now + gap_ticks_;
  }
}

int JobDriver::begin(uint64_t now) {
  if (paced_) pacer_.refill(now);
  // At most push -> pull -> gap -> push in one call (the profile requires
  // push + pull > 0, so a cycle always has something to send).
  for (int step = 0; step < 4; ++step) {
    switch (phase_) {
      case Phase::kConstant: {
        const unsigned d = next_dir_;
        if (dirs_ == 3) next_dir_ ^= 1u;
        return static_cast<int>(d);
      }
      case Phase::kPush:
        if (budget_) return kPush;
        enter(Phase::kPull, now);
        break;
      case Phase::kPull:
        if (budget_) return kPull;
        enter(Phase::kGap, now);
        break;
      case Phase::kGap:
        if (now < gap_end_) return -1;
        ++iterations_;
        enter(Phase::kPush, now);
        break;
    }
  }
  return -1;
}

}  // namespace psgate::gen
