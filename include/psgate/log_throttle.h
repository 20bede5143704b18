// SPDX-License-Identifier: BSD-3-Clause
// A log line for an event that can come in storms: a script's loop of
// clients that never read or of SIGHUPs, a failure that comes back at every
// round of a loop. Said when first seen, then at most once per interval,
// with how many were not said in between and how many there were in all,
// so that the log stays readable and no occurrence goes unaccounted.
// Pure, on the caller's clock (nanoseconds of a monotonic clock), so tests
// drive it directly; one thread's.
#pragma once

#include <cstdint>
#include <string>

namespace psgate {

class LogThrottle {
 public:
  explicit constexpr LogThrottle(uint64_t interval_ns) : interval_ns_(interval_ns) {}

  // One occurrence at `now_ns`: whether to log it now. When it says yes,
  // held_back() is how many occurrences since the last line were not logged.
  bool admit(uint64_t now_ns) {
    ++total_;
    if (said_any_ && now_ns - said_ns_ < interval_ns_) {
      ++unsaid_;
      return false;
    }
    said_any_ = true;
    said_ns_ = now_ns;
    held_back_ = unsaid_;
    unsaid_ = 0;
    return true;
  }
  // For an event whose latest occurrence says how things stand (a link that
  // went down, then up): whether occurrences were held back and a line is
  // due again at `now_ns`, so that the caller says the state they left,
  // which the last line may no longer tell. Not an occurrence itself; when
  // it says yes, held_back() counts those it stands for.
  bool catch_up(uint64_t now_ns) {
    if (unsaid_ == 0 || now_ns - said_ns_ < interval_ns_) return false;
    said_ns_ = now_ns;
    held_back_ = unsaid_;
    unsaid_ = 0;
    return true;
  }
  // Occurrences between the line before and the one admit() just allowed.
  uint64_t held_back() const { return held_back_; }
  // Every occurrence admit() was told of, logged or not.
  uint64_t total() const { return total_; }
  // ", N not logged since the last such line", or "" when none were: the
  // end of the line's parenthesis of counts.
  std::string held_back_note() const {
    return held_back_ ? ", " + std::to_string(held_back_) + " not logged since the last such line" : std::string();
  }

 private:
  uint64_t interval_ns_;
  uint64_t said_ns_ = 0;
  bool said_any_ = false;
  uint64_t unsaid_ = 0;
  uint64_t held_back_ = 0;
  uint64_t total_ = 0;
};

}  // namespace psgate
