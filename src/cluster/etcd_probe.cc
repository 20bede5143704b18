// SPDX-License-Identifier: BSD-3-Clause
// Which etcd cluster each endpoint answers for (etcd_link.h): the probes,
// the probe thread, and whether a full read's cluster is followed.
#include "cluster/etcd_link.h"

#include <utility>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "cluster/etcd_calls.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "psgate/at_once.h"

namespace psgate {

namespace pb = etcdserverpb;
using namespace etcd_detail;

namespace {

// The endpoints not in use are asked which cluster they answer for this
// often (one small count-only read each, all at once).
constexpr uint64_t kReprobeEveryNs = 3000 * kMs;

}  // namespace

uint64_t EtcdLink::probe_cluster_id(size_t ep, std::chrono::system_clock::time_point deadline) {
  auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
  StoreCall call(calls_, deadline);  // shared with the other members' probes (probe_cluster_ids)
  pb::RangeRequest req;
  req.set_key(keys_.order());
  req.set_count_only(true);
  pb::RangeResponse resp;
  if (!kv->Range(&call.ctx(), req, &resp).ok()) return 0;
  std::lock_guard<std::mutex> lock(mutex_);
  endpoint_cluster_[ep] = resp.header().cluster_id();
  if (resp.header().cluster_id() == cluster_id_) served_followed_[ep] = true;
  return resp.header().cluster_id();
}

std::string EtcdLink::answers_text(const std::vector<uint64_t>& ids, size_t in_use, uint64_t followed) const {
  std::string answers;
  for (size_t i = 0; i < ids.size() && i < endpoints_.size(); ++i)
    answers += fmt::format("{}{} {}", i ? ", " : "", endpoints_[i].target,
                           i == in_use   ? fmt::format("{:x} (followed)", followed)
                           : ids[i] == 0 ? std::string("no answer")
                                         : fmt::format("{:x}", ids[i]));
  return answers;
}

std::vector<uint64_t> EtcdLink::probe_cluster_ids(const std::vector<bool>& which) {
  // One thread a member, each call under the same deadline: a member that
  // does not answer (a host gone without a reset) costs the probe one call
  // deadline in all, not one each; asked one after another, three such
  // held a gateway's first read back past its start-up wait (2 s).
  const auto deadline = std::chrono::system_clock::now() + std::chrono::nanoseconds(kCallDeadlineNs);
  // A thread that cannot be started (EAGAIN) asks on this one, under the
  // same deadline (run_at_once): no std::terminate, no later answer.
  std::vector<uint64_t> ids(endpoints_.size(), 0);
  std::vector<size_t> asked;
  for (size_t i = 0; i < endpoints_.size(); ++i)
    if (i < which.size() && which[i]) asked.push_back(i);
  const size_t here = run_at_once(asked, [this, deadline, &ids](size_t i) { ids[i] = probe_cluster_id(i, deadline); });
  bool say = false;
  if (here != 0) {
    std::lock_guard<std::mutex> lock(mutex_);  // the follow and probe threads both ask
    say = probe_threads_log_.admit(now_ns());
  }
  if (say)
    spdlog::warn(
        "cluster: {} of {} threads asking the endpoints which cluster they answer for could not be started "
        "(the process at its thread limit?): asked one after another under the same deadline",
        here, asked.size());
  return ids;
}

void EtcdLink::probe_loop() {
  uint64_t next = now_ns() + kReprobeEveryNs;
  while (!stop_) {
    if (now_ns() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    next = now_ns() + kReprobeEveryNs;
    const uint64_t followed = cluster_id_;
    const size_t in_use = follow_endpoint_;
    bool following;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      following = follow_state_.connected() && foreign_store_.empty();
    }
    // Nothing followed yet, or the follow thread is finding out which
    // cluster to follow itself (store_followable asks every endpoint).
    if (followed == 0 || !following) {
      std::lock_guard<std::mutex> lock(mutex_);
      probed_foreign_.clear();
      continue;
    }
    std::vector<bool> others(endpoints_.size(), true);
    others[in_use] = false;
    const std::vector<uint64_t> ids = probe_cluster_ids(others);
    if (stop_) break;  // cancelled: no answers
    std::vector<bool> served;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      served = served_followed_;
    }
    // Another cluster's answer, unless the store's rules would take it as
    // the store replaced (a restore the follow thread has not read yet: the
    // endpoint in use is left unknown here, not assumed the old cluster's).
    std::string said;
    for (size_t i = 0; i < ids.size() && said.empty(); ++i) {
      if (ids[i] == 0 || ids[i] == followed) continue;
      if (store_identity(followed, ids[i], ids, served) == StoreIdentity::kReplaced) continue;
      const std::string answers = answers_text(ids, in_use, followed);
      said = fmt::format(
          "{} answers for etcd cluster {:x}, not {:x} which this gateway follows ({}): the endpoints name members "
          "of two clusters; this gateway keeps following its own, and would not follow the other on a failover "
          "(take it out of cluster.endpoints)",
          endpoints_[i].target, ids[i], followed, answers);
    }
    bool began, ended;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // The follow thread moved meanwhile: what it says wins.
      if (cluster_id_ != followed || follow_endpoint_ != in_use) continue;
      began = !said.empty() && probed_foreign_.empty();
      ended = said.empty() && !probed_foreign_.empty();
      probed_foreign_ = said;
    }
    if (began) spdlog::warn("cluster: {}", said);
    if (ended) spdlog::info("cluster: no endpoint answers for another etcd cluster now");
  }
}

bool EtcdLink::foreign_answer(size_t ep, uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (id != 0) endpoint_cluster_[ep] = id;
  if (id != 0 && id == cluster_id_) served_followed_[ep] = true;
  const uint64_t followed = cluster_id_;
  return followed != 0 && id != 0 && id != followed;
}

bool EtcdLink::of_followed_cluster(size_t ep) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Nothing followed yet: lead() waits for a current view anyway.
  return cluster_id_ == 0 || endpoint_cluster_[ep] == cluster_id_;
}

bool EtcdLink::known_foreign(size_t ep) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t followed = cluster_id_, id = endpoint_cluster_[ep];
  return followed != 0 && id != 0 && id != followed;
}

bool EtcdLink::store_followable(size_t ep, uint64_t read_id, bool& replaced, const std::vector<uint64_t>& probed) {
  const uint64_t followed = cluster_id_;
  StoreIdentity verdict = StoreIdentity::kSame;  // a read without an identity, or of the cluster followed
  std::vector<uint64_t> ids;
  // Another cluster, or the first read (which may have come from either of
  // two clusters the endpoints name): what does every endpoint answer for?
  // Asked now, all at once, unless the caller has just asked (the start).
  if (read_id != 0 && read_id != followed) {
    if (probed.size() == endpoints_.size()) {
      ids = probed;
    } else {
      std::vector<bool> others(endpoints_.size(), true);
      others[ep] = false;
      ids = probe_cluster_ids(others);
    }
    ids[ep] = read_id;
    std::vector<bool> served;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      served = served_followed_;
    }
    verdict = store_identity(followed, read_id, ids, served);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  endpoint_cluster_[ep] = read_id;
  if (verdict != StoreIdentity::kForeign) {
    replaced = verdict == StoreIdentity::kReplaced;
    // Which endpoints answer for the cluster followed from now on.
    if (!ids.empty())
      for (size_t i = 0; i < ids.size(); ++i) served_followed_[i] = ids[i] == read_id && read_id != 0;
    if (read_id != 0) served_followed_[ep] = true;
    if (replaced)
      spdlog::warn(
          "cluster: the endpoints answer for etcd cluster {:x}, not {:x} followed until now: the store was replaced "
          "(restored from a snapshot, or started anew); following it",
          read_id, followed);
    else if (!foreign_store_.empty())
      spdlog::info("cluster: following etcd cluster {:x} at {}", read_id != 0 ? read_id : followed,
                   endpoints_[ep].target);
    if (read_id != 0) cluster_id_ = read_id;
    foreign_store_.clear();
    if (!store_picked_.exchange(true)) picked_ns_ = now_ns();
    return true;
  }
  const std::string answers = answers_text(ids);
  const bool began = foreign_store_.empty();
  foreign_store_ =
      followed == 0
          ? fmt::format(
                "the endpoints answer for different etcd clusters ({}): none is followed until every endpoint that "
                "answers answers for one (a config naming members of two clusters?); no job or order is applied "
                "from either",
                answers)
          : fmt::format(
                "{} answers for etcd cluster {:x}, not {:x} which this gateway follows ({}): another cluster's jobs "
                "and order are not applied, and it is followed only once no endpoint answers for another cluster "
                "and most answer for it (a store replaced at the same endpoints)",
                endpoints_[ep].target, read_id, followed, answers);
  // The first of a spell always, then at most once a minute.
  const bool admitted = foreign_store_log_.admit(now_ns());
  if (began || admitted) spdlog::warn("cluster: {}; forwarding on the last order applied", foreign_store_);
  return false;
}

}  // namespace psgate
