// SPDX-License-Identifier: BSD-3-Clause
// The calls to a remote store in flight, so that a stop cancels every one
// of them rather than waiting for each to reach its deadline (cluster
// mode's EtcdLink: its follow, session and probe threads each block in a
// call of up to 2 s, and a member that never answers, a host gone without a
// reset, holds every such call to its deadline).
//
//   thread:  calls.enter(ctx);   call(ctx)   calls.leave(ctx)   (StoreCall, etcd_calls.h)
//   stop():            stopped = true; TryCancel every ctx registered
//
// A call registered after stop() is cancelled as it is registered: gRPC
// keeps a cancel made before the call starts (ClientContext::TryCancel sets
// call_canceled_) and ends the call with CANCELLED as it starts, so no call
// begun after a stop waits for its deadline either. Generic over the
// context (anything with TryCancel()), so tests drive it with a fake.
#pragma once

#include <cstddef>
#include <mutex>
#include <set>

namespace psgate {

template <class Call>
class LiveCalls {
 public:
  // `call` is in flight until leave(); cancelled at once after stop().
  void enter(Call& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) {
      call.TryCancel();
      return;
    }
    live_.insert(&call);
  }

  // Before `call` is destroyed: stop() never touches it past this.
  void leave(Call& call) {
    std::lock_guard<std::mutex> lock(mutex_);
    live_.erase(&call);
  }

  // Cancels every call in flight and every one entered from now on.
  // TryCancel under the lock: a call's context cannot be destroyed meanwhile
  // (leave() takes the lock first); it takes only the context's own lock.
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = true;
    for (Call* c : live_) c->TryCancel();
  }

  bool stopped() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stopped_;
  }

  size_t in_flight() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return live_.size();
  }

 private:
  mutable std::mutex mutex_;
  bool stopped_ = false;
  std::set<Call*> live_;
};

}  // namespace psgate
