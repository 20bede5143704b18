// SPDX-License-Identifier: BSD-3-Clause
// Full reads of the store's prefix compacted away although the store
// answers, as pure logic with the clock passed in (etcd_follow.cc's follow
// thread counts them; tests drive it directly).
//
// A full read is paged, each page at the first page's revision; a
// compaction past that revision between two pages fails the read with
// etcd's "required revision has been compacted", and the follow thread
// reads again from the newest revision. So does a read whose watch (from
// its revision + 1) is compacted before it caught up. Once is routine (the
// policy leader compacts every cluster.compact_every). Without a bound, a
// read that is compacted away every time (a prefix too large to page
// through between two compactions of an aggressive
// --auto-compaction-retention) was retried for ever with health "ok", on a
// view that no longer moved. After `report_after` failures in a row, or
// `report_after_ns` since the first of them, problem() says so (health
// degraded); the reads go on with backoff, and the first read that a watch
// then follows (the view current again) clears it.
#pragma once

#include <cstdint>
#include <string>

namespace psgate {

class FullReadFailures {
 public:
  FullReadFailures(unsigned report_after, uint64_t report_after_ns)
      : report_after_(report_after), report_after_ns_(report_after_ns) {}

  // A full read was compacted away at `now_ns` (etcd said `why`). Returns
  // true the first time in the streak that problem() is not empty after it,
  // whether the count or the time made it so: the caller says so once in
  // its log.
  bool failed(uint64_t now_ns, std::string why) {
    if (streak_ == 0) first_ns_ = now_ns;
    ++streak_;
    last_why_ = std::move(why);
    if (reported_ || problem(now_ns).empty()) return false;
    reported_ = true;
    return true;
  }
  // The store is not reachable: what fails now is not a compacted read, and
  // the streak starts again once it is back.
  void reset() {
    streak_ = 0;
    reported_ = false;
    last_why_.clear();
  }
  // A full read succeeded and a watch follows it: whatever failed before
  // is over. Returns how many
  // had failed in a row (0: none), for the caller's log.
  unsigned succeeded() {
    const unsigned was = streak_;
    reset();
    return was;
  }

  // Why the view is not read, "" while nothing says so: fewer than
  // `report_after` failures in a row, within `report_after_ns` of the first.
  std::string problem(uint64_t now_ns) const {
    if (streak_ == 0) return "";
    const uint64_t for_ns = now_ns > first_ns_ ? now_ns - first_ns_ : 0;  // a clock read before the stamp: no time
    if (streak_ < report_after_ && for_ns < report_after_ns_) return "";
    return std::to_string(streak_) + " full read(s) of the prefix in a row compacted away over " +
           std::to_string(for_ns / 1'000'000) + " ms though the store answers (" + last_why_ +
           "): the view is the one from before and no longer moves; reading again with backoff";
  }

  unsigned streak() const { return streak_; }

 private:
  const unsigned report_after_;
  const uint64_t report_after_ns_;
  unsigned streak_ = 0;    // failures since the last success
  uint64_t first_ns_ = 0;  // when the first of them failed
  std::string last_why_;
  bool reported_ = false;  // failed() said so in this streak
};

}  // namespace psgate
