// SPDX-License-Identifier: BSD-3-Clause
// What the etcd link's files share (etcd_calls.h).
#include "cluster/etcd_calls.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace psgate::etcd_detail {

namespace pb = etcdserverpb;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

uint64_t elapsed(uint64_t a, uint64_t b) { return b > a ? b - a : 0; }

void set_deadline(grpc::ClientContext& ctx, uint64_t ns) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(ns));
}

StoreCall::StoreCall(Calls& calls, uint64_t deadline_ns) : calls_(calls) {
  set_deadline(ctx_, deadline_ns);
  enter();
}

StoreCall::StoreCall(Calls& calls, std::chrono::system_clock::time_point deadline) : calls_(calls) {
  ctx_.set_deadline(deadline);
  enter();
}

StoreCall::StoreCall(Calls& calls, Unbounded) : calls_(calls) { enter(); }

void StoreCall::enter() {
  ctx_.AddMetadata("hasleader", "true");
  // Last: once registered, a stop may cancel the context from another
  // thread at any moment.
  calls_.enter(ctx_);
}

void compare_created(pb::TxnRequest& txn, const std::string& key, int64_t revision) {
  auto* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(revision);
}

bool store_refused(const grpc::Status& s) {
  // Not FAILED_PRECONDITION ("not leader", a learner) nor etcd's "revision
  // of auth store is old" (INVALID_ARGUMENT): those are one member's, or
  // passing, and the session moves on to another member. Every other
  // INVALID_ARGUMENT is the request's own: "user name is empty" (an etcd
  // with auth enabled, and no user: no client certificate), "too many
  // operations", "request is too large".
  const std::string& m = s.error_message();
  switch (s.error_code()) {
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return true;
    case grpc::StatusCode::INVALID_ARGUMENT:
      return m.find("is old") == std::string::npos;
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return m.find("space exceeded") != std::string::npos || m.find("larger than max") != std::string::npos ||
             m.find("too large") != std::string::npos;
    default:
      return false;
  }
}

std::string status_text(const grpc::Status& s) {
  return s.error_message().empty() ? "gRPC code " + std::to_string(static_cast<int>(s.error_code()))
                                   : s.error_message();
}

}  // namespace psgate::etcd_detail
