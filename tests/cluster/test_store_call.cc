// SPDX-License-Identifier: BSD-3-Clause
// StoreCall (cluster/etcd_calls.h), the one way the etcd link makes a call
// to the store: whichever deadline it is given, its context requires
// etcd's leader and is in the link's calls in flight for exactly the
// call's scope, so that a stop cancels it. (The stop cutting calls held by
// members short, through the link, is test_etcd_link.cc's.)
#include "cluster/etcd_calls.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/test/client_context_test_peer.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace psgate {
namespace {

namespace pb = etcdserverpb;
using etcd_detail::kCallDeadlineNs;
using etcd_detail::StoreCall;
using std::chrono::system_clock;

bool requires_leader(StoreCall& call) {
  const std::multimap<std::string, std::string> sent =
      grpc::testing::ClientContextTestPeer(&call.ctx()).GetSendInitialMetadata();
  const auto it = sent.find("hasleader");
  return it != sent.end() && it->second == "true";
}

// |a - b| within a millisecond: the deadline goes through gRPC's own time
// representation and back.
bool about(system_clock::time_point a, system_clock::time_point b) {
  return (a > b ? a - b : b - a) < std::chrono::milliseconds(1);
}

TEST(StoreCall, IsInFlightForItsScopeOnly) {
  StoreCall::Calls calls;
  {
    StoreCall call(calls, kCallDeadlineNs);
    EXPECT_EQ(calls.in_flight(), 1u) << "a call the stop would not cancel";
  }
  EXPECT_EQ(calls.in_flight(), 0u) << "a context destroyed while still in flight";
}

TEST(StoreCall, IsBoundedFromNowAndRequiresTheLeader) {
  StoreCall::Calls calls;
  const auto before = system_clock::now();
  StoreCall call(calls, kCallDeadlineNs);
  const auto after = system_clock::now();
  const auto d = call.ctx().deadline();
  EXPECT_GE(d, before + std::chrono::nanoseconds(kCallDeadlineNs) - std::chrono::milliseconds(1));
  EXPECT_LE(d, after + std::chrono::nanoseconds(kCallDeadlineNs) + std::chrono::milliseconds(1));
  EXPECT_TRUE(requires_leader(call));
}

TEST(StoreCall, TakesADeadlineSharedWithOtherCalls) {
  StoreCall::Calls calls;
  const auto shared = system_clock::now() + std::chrono::milliseconds(700);
  StoreCall a(calls, shared), b(calls, shared);
  EXPECT_TRUE(about(a.ctx().deadline(), shared));
  EXPECT_TRUE(about(b.ctx().deadline(), shared));
  EXPECT_TRUE(requires_leader(a));
  EXPECT_EQ(calls.in_flight(), 2u);
}

TEST(StoreCall, AnUnboundedOneIsStillInFlightAndRequiresTheLeader) {
  StoreCall::Calls calls;
  StoreCall watch(calls, StoreCall::Unbounded{});
  EXPECT_EQ(watch.ctx().deadline(), system_clock::time_point::max());
  EXPECT_TRUE(requires_leader(watch));
  EXPECT_EQ(calls.in_flight(), 1u);
}

TEST(StoreCall, OneMadeAfterTheStopEndsCancelledAtOnce) {
  // Nothing listens at port 1: a call that were not cancelled would wait
  // for a connection, and fail otherwise than CANCELLED.
  StoreCall::Calls calls;
  calls.stop();
  auto kv = pb::KV::NewStub(grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  StoreCall call(calls, kCallDeadlineNs);
  pb::RangeRequest req;
  req.set_key("k");
  pb::RangeResponse resp;
  const auto t0 = std::chrono::steady_clock::now();
  const grpc::Status s = kv->Range(&call.ctx(), req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::CANCELLED) << s.error_message();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
}

}  // namespace
}  // namespace psgate
