// SPDX-License-Identifier: BSD-3-Clause
// What the etcd link's files share (etcd_link.h's class, defined across
// etcd_link.cc, etcd_follow.cc, etcd_probe.cc, etcd_session.cc and
// etcd_write.cc): the clock, how a call to the store is made (StoreCall)
// and bounded, and how a failed one is read. Private to src/cluster/.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>

#include "psgate/live_calls.h"

namespace etcdserverpb {
class TxnRequest;
}  // namespace etcdserverpb

namespace psgate::etcd_detail {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kMinBackoffNs = 50 * kMs;
constexpr uint64_t kCallDeadlineNs = 1000 * kMs;
// The lease's revoke at stop: the one call the stop does not cancel (the
// registration and any leadership go at once rather than one TTL later),
// so short that a member that does not answer holds the stop this long at
// most.
constexpr uint64_t kRevokeDeadlineNs = 500 * kMs;

uint64_t now_ns();  // steady clock

// b - a, or 0 when another thread stamped `a` after `b` was read.
uint64_t elapsed(uint64_t a, uint64_t b);

// `ns` from now.
void set_deadline(grpc::ClientContext& ctx, uint64_t ns);

// One call to the store, for the scope it is made in. Its context carries
// a deadline (unless Unbounded) and etcd's WithRequireLeader (a member that
// has lost its raft leader fails the call instead of answering from a
// store that no longer moves), and is in the link's calls in flight
// (EtcdLink::calls_) from before the call starts until after it ends, so
// that the stop cancels it rather than waiting for its deadline. No call
// can be made otherwise; and the context leaves `calls` before it is
// destroyed however the StoreCall is declared (the destructor's body runs
// before the members go), which a context and a separate guard side by
// side got right only by their order.
//
//   StoreCall call(calls_, kCallDeadlineNs);
//   kv->Txn(&call.ctx(), txn, &resp);
//
// The lease's revoke at a clean stop is the one call that is not one
// (etcd_session.cc says why).
class StoreCall {
 public:
  using Calls = LiveCalls<grpc::ClientContext>;

  // Ends `deadline_ns` from now.
  StoreCall(Calls& calls, uint64_t deadline_ns);

  // Ends at `deadline`: one shared by calls made at once, each on its own
  // thread (the probes of every member: one deadline in all, not one each).
  StoreCall(Calls& calls, std::chrono::system_clock::time_point deadline);

  // No deadline: the watch, a stream that runs as long as the store has
  // events to send. It ends when it fails, when the session thread cancels
  // it for silence, or at the stop.
  struct Unbounded {};
  StoreCall(Calls& calls, Unbounded);

  ~StoreCall() { calls_.leave(ctx_); }
  StoreCall(const StoreCall&) = delete;
  StoreCall& operator=(const StoreCall&) = delete;

  grpc::ClientContext& ctx() { return ctx_; }

 private:
  // Requires the leader and registers the call: every constructor's last step.
  void enter();

  Calls& calls_;
  grpc::ClientContext ctx_;
};

// A transaction's condition: `key` was created at `revision` (0: it does not exist).
void compare_created(etcdserverpb::TxnRequest& txn, const std::string& key, int64_t revision);

// Whether the store (or gRPC on its way) answered and refused the request
// itself, which sending it again, or to another member, would not change:
// etcd's "request is too large" (InvalidArgument), its space quota's alarm
// and gRPC's message size limit (ResourceExhausted, unlike "too many
// requests", which is load), auth. Not a lost connection.
bool store_refused(const grpc::Status& s);

std::string status_text(const grpc::Status& s);

}  // namespace psgate::etcd_detail
