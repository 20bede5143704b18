// SPDX-License-Identifier: BSD-3-Clause
// The control socket's writes to the store (etcd_link.h): one transaction,
// tried at each member until one takes it or refuses it.
#include "cluster/etcd_link.h"

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/etcd_calls.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace psgate {

namespace pb = etcdserverpb;
using namespace etcd_detail;

namespace {

// Whether a failed write surely never reached a raft leader, so that another
// member may be sent it and "nothing written" is true: no connection was
// made, the member had no leader (the hasleader metadata refuses before
// proposing) or was too busy to take it. Any other failure (a connection
// lost after the request went out, "leader changed") may have been applied.
bool write_surely_not_applied(const grpc::Status& s) {
  if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) return true;
  const std::string& m = s.error_message();
  for (const char* never_sent : {"failed to connect", "Connection refused", "no leader", "not capable"}) {
    if (m.find(never_sent) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

Result<int64_t> EtcdLink::write(const StoreWrite& w) {
  using R = Result<int64_t>;
  pb::TxnRequest txn;
  for (const std::string& key : w.absent) compare_created(txn, key, 0);
  for (const auto& [key, rev] : w.unchanged_since) {
    auto* cmp = txn.add_compare();
    cmp->set_key(key);
    cmp->set_target(pb::Compare::MOD);
    cmp->set_result(pb::Compare::EQUAL);
    cmp->set_mod_revision(rev);
  }
  for (const std::string& key : w.deletes) txn.add_success()->mutable_request_delete_range()->set_key(key);
  for (const auto& [key, value] : w.puts) {
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
  }
  // On a failed fence, read the fenced keys back to say which one failed.
  for (const std::string& key : w.absent) txn.add_failure()->mutable_request_range()->set_key(key);
  for (const auto& [key, rev] : w.unchanged_since) txn.add_failure()->mutable_request_range()->set_key(key);
  // A write the store did not take (counted in write_errors_), with why.
  auto store_error = [this](const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++write_errors_;
    return R::failure(why);
  };
  std::string last;
  // A failed attempt that may have reached a leader (the connection lost
  // after the request went out, "leader changed") may have been applied: a
  // fence that then fails on the next member may be failing on this very
  // change, and "nothing written" would not be known.
  std::string maybe_applied;
  const size_t first = follow_endpoint_;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t ep = (first + i) % endpoints_.size();
    if (known_foreign(ep)) {
      // Another etcd cluster's member: this change is not its.
      last = endpoints_[ep].target + ": a member of another etcd cluster";
      continue;
    }
    auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
    StoreCall call(calls_, kCallDeadlineNs);
    pb::TxnResponse resp;
    const grpc::Status s = kv->Txn(&call.ctx(), txn, &resp);
    if (!s.ok()) {
      last = endpoints_[ep].target + ": " + status_text(s);
      if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        // The member may still be applying it: sent to another as well, it
        // could land after a later change of the operator's, and the
        // operator must not be told that nothing was written. (Failures that
        // may have applied it but ended the call, a lost connection or
        // "leader changed" in an election, do go to the next member: a
        // fenced write then fails its fence, answered below as maybe
        // written; an unfenced one puts the same values again.)
        return store_error("the cluster store did not answer in time (" + last +
                           "): the change may or may not have been written; read the jobs back (psgatectl jobs "
                           "list) before retrying");
      }
      // A refusal of the request itself (too many operations in one
      // transaction, a request too large, no permission) would come from
      // every member: say what it said. Anything else may be this member's
      // alone (unreachable, not the leader, a learner, too busy): try the next.
      // (A full store, its space quota's alarm, is one of them: it said
      // "unreachable" while health said connected.)
      if (store_refused(s)) {
        return store_error("the cluster store refused the write (" + last + "); nothing written");
      }
      if (!write_surely_not_applied(s) && maybe_applied.empty()) maybe_applied = last;
      continue;
    }
    if (foreign_answer(ep, resp.header().cluster_id())) {
      return store_error(endpoints_[ep].target +
                         " turned out to be a member of another etcd cluster than the one this gateway follows, "
                         "and may have taken the change: read the jobs back (psgatectl jobs list) and check "
                         "cluster.endpoints");
    }
    if (resp.succeeded()) return resp.header().revision();
    const std::string unknown =
        maybe_applied.empty() ? "nothing written"
                              : "an earlier attempt failed (" + maybe_applied +
                                    ") and may have written this change itself: read the jobs back (psgatectl jobs "
                                    "list) before retrying";
    const int absent = static_cast<int>(w.absent.size());
    for (int r = 0; r < resp.responses_size() && r < absent; ++r) {
      const auto& range = resp.responses(r).response_range();
      if (range.kvs_size() > 0) return R::failure("already in the cluster: " + range.kvs(0).key() + "; " + unknown);
    }
    // The fenced documents: which one another writer changed (the order's
    // words for the order, the common case: two re-ranks at once).
    std::string changed;
    for (int r = absent; r < resp.responses_size() && r - absent < static_cast<int>(w.unchanged_since.size()); ++r) {
      const auto& [key, rev] = w.unchanged_since[static_cast<size_t>(r - absent)];
      const auto& range = resp.responses(r).response_range();
      const int64_t now = range.kvs_size() > 0 ? range.kvs(0).mod_revision() : 0;
      if (now != rev && key != keys_.order()) {
        changed = key;
        break;
      }
    }
    if (!changed.empty())
      return R::failure(changed + " was changed by another writer meanwhile; " +
                        (maybe_applied.empty() ? "nothing written (read it again and retry)" : unknown));
    return R::failure("the cluster's order was changed by another writer meanwhile; " +
                      (maybe_applied.empty() ? "nothing written (read it again and retry)" : unknown));
  }
  if (!maybe_applied.empty()) {
    return store_error("cluster store unreachable (" + last + "): the change may or may not have been written (" +
                       maybe_applied + "); read the jobs back (psgatectl jobs list) before retrying");
  }
  return store_error("cluster store unreachable (" + last +
                     "): nothing written; this gateway keeps forwarding on the last order it applied");
}

}  // namespace psgate
