// SPDX-License-Identifier: BSD-3-Clause
// When to try again a change that failed to apply. A cluster view whose
// classifier cannot be built (too many rules for the memory) fails the same
// way at every try, and each try may hold the control thread for seconds:
// retried every second, the control socket stopped answering. The same
// content is tried again after a backoff that doubles from `first` up to
// `max` (it may fit once memory frees); other content is tried sooner, but
// never within `first` of the last failure, whatever it is (under a policy
// the store's ranks change every evaluation).
// Pure, on the caller's clock, so tests drive it directly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>

namespace psgate {

template <typename Content>
class RetryBackoff {
 public:
  RetryBackoff(uint64_t first_ns, uint64_t max_ns) : first_ns_(first_ns), max_ns_(max_ns) {}

  // Whether `content` may be tried at `now_ns`.
  bool may_try(const Content& content, uint64_t now_ns) const {
    if (!failed_) return true;
    if (now_ns < failed_ns_ + first_ns_) return false;
    return !(*failed_ == content) || now_ns >= retry_ns_;
  }
  // `content` failed at `now_ns`; returns the wait before it is tried again.
  uint64_t failed(const Content& content, uint64_t now_ns) {
    backoff_ns_ = failed_ && *failed_ == content ? std::min(backoff_ns_ * 2, max_ns_) : first_ns_;
    failed_ = content;
    failed_ns_ = now_ns;
    retry_ns_ = now_ns + backoff_ns_;
    return backoff_ns_;
  }
  void succeeded() { failed_.reset(); }

 private:
  uint64_t first_ns_, max_ns_;
  std::optional<Content> failed_;
  uint64_t backoff_ns_ = 0;
  uint64_t failed_ns_ = 0;
  uint64_t retry_ns_ = 0;
};

}  // namespace psgate
