// SPDX-License-Identifier: BSD-3-Clause
// The session thread (etcd_link.h): this gateway's lease and registration,
// the policy leader's campaign, ranks and history compaction, and the
// watch's progress requests and silence deadline.
#include "cluster/etcd_link.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/etcd_calls.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "psgate/units.h"

namespace psgate {

namespace pb = etcdserverpb;
using namespace etcd_detail;

namespace {

// The watch is asked for a progress report this often, and is given up as
// dead (cancelled, then everything read again) when nothing at all arrived
// for the deadline: a member cut off from its cluster must not leave us
// following a store that no longer moves.
constexpr uint64_t kProgressEveryNs = 1000 * kMs;
constexpr uint64_t kWatchSilenceNs = 3000 * kMs;
constexpr uint64_t kStallNs = 500 * kMs;  // a session round this late: this process did not run
constexpr uint64_t kRegisterEveryNs = 1000 * kMs;
constexpr uint64_t kSessionTickNs = 20 * kMs;
// Step down this long before the lease can have expired: a successor may
// be elected once it has, and two leaders must never write at once.
constexpr uint64_t kLeaderMarginNs = 1000 * kMs;
constexpr uint64_t kMinEvaluationNs = 100 * kMs;

// A transaction's condition: `key` is under `lease`. etcd compares a key
// that does not exist as an empty one, so no lease (0) holds for an absent
// key too.
void compare_lease(pb::TxnRequest& txn, const std::string& key, int64_t lease) {
  auto* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_target(pb::Compare::LEASE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_lease(lease);
}

// Where the store refused a request for who asks (etcd with auth enabled),
// the way out.
std::string auth_hint(const grpc::Status& s) {
  const bool auth = s.error_code() == grpc::StatusCode::PERMISSION_DENIED ||
                    s.error_code() == grpc::StatusCode::UNAUTHENTICATED ||
                    s.error_message().find("user name is empty") != std::string::npos;
  return auth ? " (the store has authentication enabled: give this gateway a client certificate whose CN is an etcd "
                "user with readwrite on the prefix; docs/cluster.md)"
              : "";
}

}  // namespace

// The session keeps this gateway's lease alive and its registration
// written; it fails quietly where the store answers but does not do that: a
// store whose space quota is spent refuses new leases (a gateway started
// then, or whose lease ran out, never gets one), and writes that time out
// on a slow disk while reads still answer. Either way the registration, and
// any leadership, lapses with the lease while the watch follows on: said
// here rather than health ok. Not before one lease TTL and one
// registration round after the store was picked (no lease is asked for
// before: with endpoints of two etcd clusters, foreign_store says why).
std::string EtcdLink::session_problem(uint64_t now) const {
  if (!store_picked_) return "";
  const uint64_t ttl = spec_.lease_ttl_ns;
  const uint64_t from = std::max(started_ns_, picked_ns_.load());
  if (elapsed(from, now) < ttl + kRegisterEveryNs || !registration_error_.empty()) return "";
  if (lease_ok_ns_ == 0 || elapsed(lease_ok_ns_, now) > ttl) {
    return (lease_ok_ns_ == 0 ? fmt::format("the store has granted this gateway no lease since it began following "
                                            "it ({} ms ago)",
                                            elapsed(from, now) / kMs)
                              : fmt::format("no lease keepalive answered for {} ms (the lease's TTL is {} ms)",
                                            elapsed(lease_ok_ns_, now) / kMs, ttl / kMs)) +
           session_failure_note();
  }
  if (registered_ns_ == 0 || elapsed(registered_ns_, now) > ttl)
    return registered_ns_ == 0
               ? "its registration has not been written since it started" + session_failure_note()
               : fmt::format("its registration has not been written for {} ms (the lease's TTL is {} ms)",
                             elapsed(registered_ns_, now) / kMs, ttl / kMs) +
                     session_failure_note();
  return "";
}

std::string EtcdLink::session_failure_note() const {
  return session_failure_.empty() ? "" : "; last failure: " + session_failure_;
}

void EtcdLink::session_failed(const char* what, size_t ep, const grpc::Status& st) {
  if (stop_) return;  // cancelled by the stop: no failure of the store's
  const std::string why =
      std::string(what) + " failed at " + endpoints_[ep].target + ": " + status_text(st) + auth_hint(st);
  const uint64_t now = now_ns();
  bool say;
  uint64_t total;
  std::string held_back;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    session_failure_ = why;
    // Said once a minute at most: a cause that lasts fails every try,
    // several a second across the members.
    say = session_error_log_.admit(now);
    total = session_error_log_.total();
    held_back = session_error_log_.held_back_note();
  }
  if (say) spdlog::warn("cluster: {} ({} since start{})", why, total, held_back);
}
bool EtcdLink::grant_lease(size_t ep) {
  auto lease = pb::Lease::NewStub(channel(ep, Lane::kCalls));
  StoreCall call(calls_, kCallDeadlineNs);
  pb::LeaseGrantRequest req;
  req.set_ttl(static_cast<int64_t>(spec_.lease_ttl_ns / 1'000'000'000));
  pb::LeaseGrantResponse resp;
  grpc::Status st = lease->LeaseGrant(&call.ctx(), req, &resp);
  if (st.ok() && foreign_answer(ep, resp.header().cluster_id()))
    st = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the member belongs to another etcd cluster");
  if (!st.ok() || !resp.error().empty()) {
    session_failed("lease grant", ep, st.ok() ? grpc::Status(grpc::StatusCode::UNKNOWN, resp.error()) : st);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  lease_id_ = resp.id();
  lease_ok_ns_ = now_ns();
  return true;
}

bool EtcdLink::keep_alive(size_t ep) {
  int64_t id;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    id = lease_id_;
  }
  auto lease = pb::Lease::NewStub(channel(ep, Lane::kCalls));
  StoreCall call(calls_, kCallDeadlineNs);
  auto stream = lease->LeaseKeepAlive(&call.ctx());
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  pb::LeaseKeepAliveResponse resp;
  const bool answered = stream->Write(req) && stream->Read(&resp);
  stream->WritesDone();
  call.ctx().TryCancel();
  const grpc::Status st = stream->Finish();
  if (!answered) {
    session_failed("lease keepalive", ep, st);
    return false;
  }
  if (foreign_answer(ep, resp.header().cluster_id())) {
    session_failed("lease keepalive", ep,
                   grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the member belongs to another etcd cluster"));
    return false;
  }
  if (resp.ttl() <= 0) {
    // The lease expired (we were cut off longer than its TTL): registration
    // and leadership are gone; start a new one. Said (outside mutex_, as
    // publish() logs): another gateway may lead now, and nothing else in
    // this gateway's log would tell when.
    bool was_leader;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      was_leader = leader_;
      lease_id_ = 0;
      leader_ = false;
    }
    spdlog::warn("cluster: lease {:x} expired (no keepalive answered within its {} ms TTL){}; registering again", id,
                 spec_.lease_ttl_ns / kMs, was_leader ? ": no longer the policy leader" : "");
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  lease_ok_ns_ = now_ns();
  return true;
}

// Put only over our own registration or none: a registration of this name
// under another live lease is another gateway with the same cluster.name
// (or this one's previous run, until its lease expires), and two writers of
// one key would overwrite each other every second. One transaction: the key
// under our lease -> put; else (nested) absent or without a lease -> put;
// else read it back.
bool EtcdLink::put_registration(size_t ep) {
  pb::TxnRequest txn;
  const std::string key = keys_.gateway(spec_.name);
  int64_t lease;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lease = lease_id_;
    pb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(gateway_json(report_).dump());
    put->set_lease(lease);
  }
  auto* ours = txn.add_compare();
  ours->set_key(key);
  ours->set_target(pb::Compare::LEASE);
  ours->set_result(pb::Compare::EQUAL);
  ours->set_lease(lease);
  // Absent, or written without a lease (by hand: no gateway writes one):
  // such a key never expires, and waiting for it to go would leave this
  // gateway unregistered for good.
  pb::TxnRequest* absent = txn.add_failure()->mutable_request_txn();
  compare_lease(*absent, key, 0);
  *absent->add_success() = txn.success(0);
  absent->add_failure()->mutable_request_range()->set_key(key);
  if (known_foreign(ep)) {
    session_failed("registration", ep,
                   grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "the member belongs to another etcd cluster"));
    return false;
  }
  auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
  StoreCall call(calls_, kCallDeadlineNs);
  pb::TxnResponse resp;
  std::string conflict;
  if (const grpc::Status st = kv->Txn(&call.ctx(), txn, &resp); !st.ok()) {
    // The store answered and refused this write (too large for its
    // --max-request-bytes, its space quota's alarm, no permission, no user
    // where auth is enabled): the connection is fine, and treating it as
    // lost would back the session off past the lease's TTL, so the lease
    // (and any leadership) would expire every few seconds. Said as the
    // registration's error instead.
    if (!store_refused(st)) {
      session_failed("registration", ep, st);
      return false;
    }
    // Too large: the document carries a measure of every job here.
    const bool too_large = st.error_message().find("too large") != std::string::npos ||
                           st.error_message().find("larger than max") != std::string::npos;
    conflict = "the store refused this gateway's registration: " + status_text(st) +
               (too_large ? " (its document grows with the jobs configured here)" : auth_hint(st));
  } else if (!resp.succeeded() && resp.responses_size() > 0 && !resp.responses(0).response_txn().succeeded()) {
    const auto& inner = resp.responses(0).response_txn();
    const int64_t other = inner.responses_size() > 0 && inner.responses(0).response_range().kvs_size() > 0
                              ? inner.responses(0).response_range().kvs(0).lease()
                              : 0;
    // In hex, as etcdctl shows leases (etcdctl lease timetolive ID).
    conflict = "another gateway is registered as \"" + spec_.name + "\" (lease " +
               fmt::format("{:x}", static_cast<uint64_t>(other)) +
               "); not registering until it goes: two gateways with one cluster.name?";
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (conflict != registration_error_) {
    if (!conflict.empty()) spdlog::error("cluster: {}", conflict);
    else if (!registration_error_.empty()) spdlog::info("cluster: registered as \"{}\"", spec_.name);
  }
  registration_error_ = conflict;
  registered_lease_ = conflict.empty() ? lease : 0;
  if (conflict.empty()) {
    registered_ns_ = now_ns();
    session_failure_.clear();
  }
  return true;
}

void EtcdLink::begin_term(const ClusterView& view, int64_t leader_created) {
  leader_ = true;
  leader_created_ = leader_created;
  leader_epoch_ = view.store_epoch;
  ++leader_terms_;
  // Go on from the ranks the last leader wrote (round-robin's rotation).
  leader_policy_state_ = PolicyState{};
  leader_policy_state_.rotation = view.ranks_rotation;
  // ... and from the job the last leader put on top (round-robin keeps
  // it there across job changes: the rotation alone is only an offset).
  if (view.ranks) {
    for (const JobRanks& r : *view.ranks)
      if (r.pull_rank == 0) {
        leader_policy_state_.top_known = true;
        leader_policy_state_.top_id = r.id;
        break;
      }
  }
  leader_policy_params_ = view.policy.value_or(config_policy_);
  leader_evaluated_ns_ = 0;
  // What an earlier term compacted may be of a store since replaced.
  compaction_.restart();
}

// One leadership step: campaign when there is no leader; while leader,
// evaluate the cluster's policy and write its ranks, fenced on our
// leadership so a deposed leader can never overwrite its successor.
void EtcdLink::lead(size_t ep, uint64_t now) {
  std::shared_ptr<const ClusterView> view;
  bool leader;
  int64_t lease, fence;
  bool registered;
  bool following;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    view = view_;
    following = follow_state_.view_current();
    leader = leader_;
    lease = lease_id_;
    fence = leader_created_;
    registered = lease != 0 && registered_lease_ == lease;
    // Step down before the lease can have expired unnoticed.
    if (leader && elapsed(lease_ok_ns_, now) > spec_.lease_ttl_ns - kLeaderMarginNs) {
      spdlog::warn("cluster: stepping down as policy leader: no lease keepalive for {} ms",
                   elapsed(lease_ok_ns_, now) / kMs);
      leader_ = false;
      return;
    }
    // Our key gone (expired, deleted) or someone else's: not leader.
    // Across a store epoch a create revision equal to our fence proves
    // nothing (another gateway's key in the restored store may have it):
    // the key must also be ours by name and lease.
    // A put over the key by hand keeps its create revision but not its
    // name or lease: then it is not ours either.
    const bool ours =
        view && view->leader_created == fence && view->leader == spec_.name && view->leader_lease == lease;
    if (leader && view && (view->revision > fence || view->store_epoch != leader_epoch_) && !ours) {
      spdlog::info("cluster: no longer the policy leader (leader is now \"{}\")", view->leader);
      leader_ = false;
      return;
    }
  }
  // Nothing from a view the follow thread is not keeping current (its
  // watch lost, or re-reading the prefix): a leader would rank on the old
  // jobs and order, and rewrite the ranks at every evaluation, since its own
  // writes never show in that view; every gateway would follow them.
  if (!view || lease == 0 || !following) return;
  auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
  // A leader key nobody leads under, written by hand (gateways write it
  // under their own lease, naming themselves): without a lease it never
  // expires; under our lease but naming another gateway, we do not lead by
  // it (not ours) and the gateway it names does not either (not its lease),
  // until our lease ends, which is never while we run. Naming us under a
  // lease not ours (put by hand, or left from a lease of ours that ended),
  // we do not lead by it and nobody else does, until that lease ends, never
  // if something keeps it alive. Either way nobody would lead again. It is
  // removed, only as it is (fenced on its create revision and its lease), and
  // the next step campaigns as for an absent key.
  const bool lease_none = view->leader_lease == 0;
  const bool lease_ours_name_not = view->leader_lease == lease && view->leader != spec_.name;
  // Only once our registration stands under our lease: a live gateway with
  // our name (two with one cluster.name, refused at registration) writes
  // just such a key, and removing it would make the two take leadership
  // from each other for ever.
  const bool name_ours_lease_not = registered && view->leader == spec_.name && view->leader_lease != lease;
  if (!leader && view->leader_created != 0 && (lease_none || lease_ours_name_not || name_ours_lease_not)) {
    // Tried again only once the view has caught up with the last try (each
    // try is a raft proposal; every gateway tries, every 20 ms tick).
    if (view->store_epoch == campaign_lost_epoch_ && view->revision < campaign_lost_at_) return;
    pb::TxnRequest txn;
    compare_lease(txn, keys_.leader(), view->leader_lease);
    compare_created(txn, keys_.leader(), view->leader_created);
    txn.add_success()->mutable_request_delete_range()->set_key(keys_.leader());
    StoreCall call(calls_, kCallDeadlineNs);
    pb::TxnResponse resp;
    if (!kv->Txn(&call.ctx(), txn, &resp).ok()) return;
    campaign_lost_at_ = resp.header().revision();
    campaign_lost_epoch_ = view->store_epoch;
    if (resp.succeeded())
      spdlog::warn(
          "cluster: removed a policy leader key naming \"{}\" {} (written by hand?): no gateway would lead "
          "while it stayed",
          view->leader,
          lease_none            ? "without a lease (it would never expire)"
          : lease_ours_name_not ? "under our lease (not our name)"
                                : "under a lease not ours (our name)");
    return;
  }
  if (!leader && view->leader_created != 0) {
    // Our own key under our live lease: we stepped down for a keepalive
    // that came late (an etcd election, a stalled disk), and the lease
    // outlived it (a new raft leader extends every lease). Nobody else can
    // campaign while the key is there, so lead again, or nobody would.
    if (view->leader != spec_.name || view->leader_lease != lease) return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (lease_id_ != lease || elapsed(lease_ok_ns_, now) > spec_.lease_ttl_ns - kLeaderMarginNs) return;
    begin_term(*view, view->leader_created);
    spdlog::info("cluster: policy leader again from revision {}: our key outlived a late lease keepalive",
                 leader_created_);
    return;
  }
  if (!leader) {
    // A campaign lost to a key the view does not show yet (it lags the
    // store) is not tried again until the view has caught up with it: each
    // try is a raft proposal, and the session ticks every 20 ms.
    if (view->store_epoch == campaign_lost_epoch_ && view->revision < campaign_lost_at_) return;
    pb::TxnRequest txn;
    compare_created(txn, keys_.leader(), 0);
    auto* put = txn.add_success()->mutable_request_put();
    put->set_key(keys_.leader());
    put->set_value(leader_document(spec_.name));
    put->set_lease(lease);
    StoreCall call(calls_, kCallDeadlineNs);
    pb::TxnResponse resp;
    if (!kv->Txn(&call.ctx(), txn, &resp).ok()) return;
    if (!resp.succeeded()) {
      campaign_lost_at_ = resp.header().revision();
      campaign_lost_epoch_ = view->store_epoch;
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    begin_term(*view, resp.header().revision());
    spdlog::info("cluster: policy leader from revision {}", leader_created_);
    return;
  }
  compact_history(ep, *view, now);
  const PolicyParams policy = view->policy.value_or(config_policy_);
  // Before any return: a policy set and set back between two evaluations
  // (static and round-robin again) starts afresh all the same.
  if (!leader_policy_params_ || !(*leader_policy_params_ == policy)) {
    leader_policy_state_ = PolicyState{};
    leader_policy_params_ = policy;
  }
  if (policy.kind == PolicyKind::kStatic) {
    // Every gateway follows the order itself and no ranks are written; any
    // ranks document is removed (while we lead: fenced). A bad one (held or
    // not) would keep every gateway degraded for a document nobody reads; a
    // good one is a leftover of a leader of another policy (P/policy
    // deleted after a round-robin, a round-robin leader retired from
    // gateways of mixed [policy]), and every gateway of another [policy]
    // would say for ever that the leader ranks by it.
    // Each try is a raft proposal: not again until the view has caught up
    // with the last one (as for a campaign).
    const bool caught_up = view->store_epoch != ranks_removed_epoch_ || view->revision >= ranks_removed_at_;
    const bool refused = view->refused_documents.count(keys_.ranks()) != 0;
    if ((refused || view->ranks) && caught_up) {
      pb::TxnRequest txn;
      compare_created(txn, keys_.leader(), fence);
      txn.add_success()->mutable_request_delete_range()->set_key(keys_.ranks());
      StoreCall call(calls_, kCallDeadlineNs);
      pb::TxnResponse resp;
      if (!kv->Txn(&call.ctx(), txn, &resp).ok()) return;
      ranks_removed_at_ = resp.header().revision();
      ranks_removed_epoch_ = view->store_epoch;
      if (resp.succeeded() && resp.responses(0).response_delete_range().deleted() > 0) {
        if (refused)
          spdlog::warn("cluster: removed a ranks document the gateways refused: the static policy writes none");
        else
          spdlog::info("cluster: removed the \"{}\" ranks a leader left: the static policy writes none",
                       view->ranks_policy);
      }
    }
    return;
  }
  const uint64_t every = std::max(kMinEvaluationNs, std::min(policy.interval_ns, kMinEvaluationNs * 10));
  if (leader_evaluated_ns_ != 0 && elapsed(leader_evaluated_ns_, now) < every) return;
  leader_evaluated_ns_ = now;
  PolicyState trial = leader_policy_state_;
  const std::vector<JobRanks> ranks = cluster_ranks(*view, policy, trial, now);
  leader_policy_state_ = trial;
  // Unless the store holds a bad ranks document over these (held): the
  // leader writes them again, or every gateway would stay degraded.
  if (view->ranks && *view->ranks == ranks && view->ranks_policy == policy_name(policy.kind) &&
      !view->held_keys.count(keys_.ranks()))
    return;
  pb::TxnRequest txn;
  compare_created(txn, keys_.leader(), fence);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(keys_.ranks());
  put->set_value(ranks_document(ranks, policy_name(policy.kind), trial.rotation, spec_.name));
  StoreCall call(calls_, kCallDeadlineNs);
  pb::TxnResponse resp;
  if (const grpc::Status s = kv->Txn(&call.ctx(), txn, &resp); !s.ok()) {
    // Tried again at the next evaluation (the store's ranks still differ).
    // Said at most once a minute: a cause that lasts (a ranks document over
    // etcd's request size, at tens of thousands of jobs) fails every time,
    // and the gateways keep following the last ranks written meanwhile.
    if (!stop_ && ranks_error_log_.admit(now)) {
      spdlog::warn(
          "cluster: policy ranks not written ({}); the gateways keep the last ranks written ({} since start{})",
          status_text(s), ranks_error_log_.total(), ranks_error_log_.held_back_note());
    }
    return;
  }
  if (!resp.succeeded()) {
    std::lock_guard<std::mutex> lock(mutex_);
    leader_ = false;
    spdlog::warn("cluster: ranks not written: another gateway leads now");
  }
}

// etcd keeps every revision of every key until it is compacted, and etcd
// 3.4 compacts nothing unless told (--auto-compaction-retention): the
// registrations alone, rewritten every second by every gateway with a
// measure of each job, grew a store by ~75 KB/s a gateway at 4,000 jobs
// until its space quota stopped every write (NOSPACE: degraded gateways,
// changes refused). The leader compacts, as Kubernetes' API server does:
// every cluster.compact_every, the history before the revision it saw one
// period earlier. A watch that far behind is compacted and reads the
// prefix again (follow_loop), as for a compaction by anyone else.
void EtcdLink::compact_history(size_t ep, const ClusterView& view, uint64_t now) {
  const int64_t target = compaction_.due(view.store_epoch, view.revision, now);
  if (target == 0) return;
  auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
  pb::CompactionRequest req;
  req.set_revision(target);
  StoreCall call(calls_, kCallDeadlineNs);
  pb::CompactionResponse resp;
  const grpc::Status st = kv->Compact(&call.ctx(), req, &resp);
  // "required revision has been compacted": someone compacted further
  // (another leader before us, the store's own retention): as good.
  if (st.ok() || st.error_message().find("compacted") != std::string::npos) {
    compaction_.compacted(view.store_epoch, target);
    spdlog::info("cluster: store history before revision {} compacted (cluster.compact_every {})", target,
                 duration_text_exact(spec_.compact_every_ns));
  } else if (!stop_ && compact_error_log_.admit(now)) {
    spdlog::warn("cluster: store history before revision {} not compacted: {} ({} since start{})", target,
                 status_text(st), compact_error_log_.total(), compact_error_log_.held_back_note());
  }
}

void EtcdLink::session_loop() {
  size_t ep = std::hash<std::string>{}(spec_.name) % endpoints_.size();
  uint64_t backoff = kMinBackoffNs;
  uint64_t last_keepalive = 0, last_register = 0, last_progress = 0;
  uint64_t slept_from = 0;  // when the last round's closing sleep began (0: it backed off instead)
  bool session_began = false;
  while (!stop_) {
    const uint64_t now = now_ns();
    // A freeze of this process is not the watch's silence; measured on the
    // closing sleep alone, where the thread spends nearly all its time
    // (watch_heard_after_sleep).
    if (slept_from != 0) {
      const uint64_t slept = elapsed(slept_from, now);
      std::lock_guard<std::mutex> lock(mutex_);
      last_watch_message_ns_ = watch_heard_after_sleep(last_watch_message_ns_, slept, kSessionTickNs, kStallNs, now);
      slept_from = 0;
    }
    // No store picked yet (the first full read not done, or refused: the
    // endpoints answer for two etcd clusters): no lease and no registration
    // in either, as no job of either is applied.
    if (!store_picked_) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kSessionTickNs));
      continue;
    }
    // The first lease is asked where the store was just read: the member
    // the name picks may be one that does not answer, each try at one such
    // a second lost before the registration.
    if (!session_began) {
      session_began = true;
      ep = follow_endpoint_;
    }
    bool ok = true;
    int64_t lease;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lease = lease_id_;
    }
    if (lease == 0) {
      ok = grant_lease(ep);
      if (ok) last_keepalive = last_register = 0;
    } else if (elapsed(last_keepalive, now) >= spec_.lease_ttl_ns / 3) {
      ok = keep_alive(ep);
      if (ok) last_keepalive = now;
    }
    if (ok && elapsed(last_register, now) >= kRegisterEveryNs) {
      ok = put_registration(ep);
      if (ok) last_register = now;
    }
    // Leadership acts (campaigns, ranks, compacts) only at a member of the
    // cluster followed: the follow thread may be current at another member
    // while this one turned out to be of another cluster, whose history a
    // compaction would destroy.
    if (of_followed_cluster(ep)) lead(ep, now);
    // The watch: ask for progress, and give up on one that stays silent.
    if (elapsed(last_progress, now) >= kProgressEveryNs) {
      last_progress = now;
      bool ask = false;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        const uint64_t t = now_ns();  // after the lock: the follow thread may have just stamped a message
        const uint64_t silent = t > last_watch_message_ns_ ? t - last_watch_message_ns_ : 0;
        if (watch_context_ && silent > kWatchSilenceNs) {
          spdlog::warn("cluster: watch silent for {} ms; reconnecting", silent / kMs);
          watch_context_->TryCancel();
        } else {
          ask = true;
        }
      }
      if (ask) {
        std::lock_guard<std::mutex> lock(watch_write_mutex_);
        if (ask_progress_) ask_progress_();
      }
    }
    if (!ok) {
      // A step cancelled by the stop says nothing of this member: the
      // revoke below goes to it, not to the next (which may be the one that
      // does not answer).
      if (stop_) break;
      drop_channel(ep, Lane::kCalls);
      ep = (ep + 1) % endpoints_.size();
      // Never longer than a third of the lease's TTL between tries: a
      // keepalive that waits longer lets the lease, and the registration and
      // leadership with it, expire at every failure (a registration write
      // timing out on a slow disk while keepalives are answered).
      backoff = std::min(backoff, std::max(kMinBackoffNs, spec_.lease_ttl_ns / 3));
      sleep_backoff(backoff);
      continue;
    }
    backoff = kMinBackoffNs;
    slept_from = now_ns();
    std::this_thread::sleep_for(std::chrono::nanoseconds(kSessionTickNs));
  }
  // Going away: revoke the lease, so the registration and any leadership go now
  // rather than one TTL later. Outside calls_ (the stop cancelled every
  // other call; this one is made after it), under its own short deadline:
  // a plain context, not a StoreCall, which would enter calls_ and so be
  // cancelled as it starts. (Nor does it carry etcd's hasleader, which every
  // StoreCall does.)
  int64_t lease;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lease = lease_id_;
  }
  if (lease != 0) {
    auto stub = pb::Lease::NewStub(channel(ep, Lane::kCalls));
    grpc::ClientContext ctx;
    set_deadline(ctx, kRevokeDeadlineNs);
    pb::LeaseRevokeRequest req;
    req.set_id(lease);
    pb::LeaseRevokeResponse resp;
    (void)stub->LeaseRevoke(&ctx, req, &resp);
  }
}

}  // namespace psgate
