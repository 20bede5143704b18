// SPDX-License-Identifier: BSD-3-Clause
// Cluster mode's connection to etcd (v3 API over gRPC): follows the prefix,
// registers this gateway, and runs the policy-leader election. Three threads,
// all control-plane side (never an lcore):
//   follow:  read the whole prefix, then watch from the read's revision + 1;
//            on a cancelled or compacted watch, read everything again (the
//            mirror is replaced, so what vanished is removed). Each view is
//            handed to the control thread through newer_than().
//   session: the lease (grant, keepalive), the registration under it, the
//            leader campaign and, while leader, the cluster's policy ranks
//            written fenced on the leadership; watch progress requests, and a
//            watch that stays silent past its deadline is cancelled.
//   probe:   every few seconds, which etcd cluster the endpoints not in use
//            answer for (another cluster's is said, not followed).
// Failures move to the next endpoint after an exponential backoff with jitter
// (50 ms doubling to 5 s), never a spin. While the store is unreachable the
// gateway keeps what it applied last (fail static); status() says since when.
// Defined across etcd_link.cc (the threads, channels, view and status),
// etcd_follow.cc, etcd_probe.cc, etcd_session.cc (one file a thread) and
// etcd_write.cc (write()); etcd_calls.h holds what they share.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/security/credentials.h>

#include "psgate/cluster_link.h"
#include "psgate/config.h"
#include "psgate/full_read_failures.h"
#include "psgate/full_read_pages.h"
#include "psgate/history_compaction.h"
#include "psgate/live_calls.h"
#include "psgate/log_throttle.h"
#include "psgate/store_follow_state.h"

namespace grpc {
class Channel;
class ClientContext;
}  // namespace grpc

namespace psgate {

class EtcdLink final : public ClusterLink {
 public:
  // Starts both threads. `config_policy`: the policy when the store has none.
  EtcdLink(const ClusterSpec& spec, unsigned class_count, const PolicyParams& config_policy);
  // Stops the threads, cancelling every call to the store in flight (none
  // waits for its deadline, whatever the store does), and revokes the lease
  // (the registration and any leadership go at once), under its own
  // deadline (kRevokeDeadlineNs).
  ~EtcdLink() override;
  EtcdLink(const EtcdLink&) = delete;
  EtcdLink& operator=(const EtcdLink&) = delete;

  // Waits up to `timeout_ns` for the first full read; false if none came.
  bool wait_first_read(uint64_t timeout_ns);

  std::shared_ptr<const ClusterView> newer_than(uint64_t epoch, int64_t revision) override;
  Result<int64_t> write(const StoreWrite& write) override;
  // As the destructor begins: the threads stop (the session's revoking the
  // lease on its way out) and every call ends cancelled.
  void cancel_calls() override;
  void report(const GatewayInfo& info) override;
  bool connected() const override;
  nlohmann::json status() const override;
  int wake_fd() const override { return wake_fd_; }

 private:
  // The follow thread (etcd_follow.cc): round after round, a full read
  // (read_prefix, take_full_read), then a watch from its revision
  // (follow_watch) until that ends.
  struct Follow;     // what one round leaves the next: the member, the backoff, the mirror, the page size
  struct FullRead;   // one full read, as its pages arrive
  struct WatchCall;  // one watch's call and stream
  void follow_loop();
  // The member the first read goes to; `start_ids`: what each endpoint
  // answered at the start (left empty with one endpoint).
  size_t start_endpoint(std::vector<uint64_t>& start_ids);
  // Everything under the prefix at one revision, page by page; its status
  // is not ok where the read did not complete.
  FullRead read_prefix(Follow& f, const std::shared_ptr<grpc::Channel>& ch);
  // A page of one key that gRPC refused as larger than it may receive: the
  // key read without its value. True: the read goes on (from the next key,
  // or the same page again at a revision now fixed); false: it ends, with
  // r.status ok where the member holds no key from there (the key was
  // deleted meanwhile and none follows: the read is complete), else how the
  // keys-only read failed.
  bool read_key_without_value(Follow& f, FullRead& r);
  // A page that came late or too large: true when it is to be asked again,
  // in fewer keys.
  bool ask_smaller_pages(Follow& f, const FullRead& r);
  // The full read made the view (published, connected); false when it
  // failed or is another cluster's, and the backoff has been slept.
  bool take_full_read(Follow& f, FullRead& r);
  // Gives up on the member in use: the next one, after the backoff.
  void next_endpoint(Follow& f);
  void follow_watch(Follow& f, const std::shared_ptr<grpc::Channel>& ch);
  void read_watch(Follow& f, WatchCall& w);  // applies each change until the watch ends
  // Says why a watch ended for a full read again (compacted or cancelled).
  void watch_read_again(const StoreMirror& mirror, const WatchMessage& m, bool current);
  grpc::Status finish_watch(WatchCall& w);  // the watch no longer counts as live; how it ended
  // After a watch ended as `s` says: the backoff, and another member where
  // this one failed or was cancelled.
  void after_watch(Follow& f, const grpc::Status& s);
  // How many keys of [from, end) at `revision` (0: the newest) the member
  // at `endpoint` holds, asked with a count-only read; -1 when it does not
  // answer (within a page's first deadline).
  int64_t keys_left(size_t endpoint, const std::string& from, const std::string& end, int64_t revision);
  // The first key of [from, end) at `revision` (0: the newest), without its
  // value (a keys-only read), and the revision it was read at; `key` empty
  // when the member holds none there. nullopt when the member does not
  // answer, `failed` then saying how.
  struct KeyOnly {
    std::string key;
    StoreEntry entry;  // no value
    int64_t revision = 0;
    uint64_t cluster_id = 0;
  };
  std::optional<KeyOnly> first_key(size_t endpoint, const std::string& from, const std::string& end, int64_t revision,
                                   grpc::Status& failed);
  void session_loop();
  // Two connections to each member: the follow thread's full reads and
  // watch (pages of up to kStoreReceiveLimitBytes) on one, every small call
  // (lease, registration, leadership, writes, counts and probes) on the
  // other. On one HTTP/2 connection a small call's answer queues behind
  // the bytes of a large page in flight (in etcd's socket, the link, gRPC's
  // flow-control window): over a narrow link a keepalive missed its 1 s
  // deadline for as long as the store sent big values, and the lease, the
  // registration and any leadership lapsed with it.
  enum class Lane { kFollow, kCalls };
  std::shared_ptr<grpc::Channel> channel(size_t endpoint, Lane lane);
  grpc::SslCredentialsOptions tls_files();  // under channels_mutex_
  void drop_channel(size_t endpoint, Lane lane);
  void set_connected(bool up, const std::string& error);
  void publish(std::shared_ptr<const ClusterView> view);
  void publish_view(const StoreMirror& mirror);
  void sleep_backoff(uint64_t& backoff_ns);
  // A full read compacted away (`what` happened, etcd said `why`): counted
  // in full_read_failures_, logged. view_followed: the view is current
  // again (a watch follows it), which ends such a streak.
  void full_read_compacted(const std::string& what, const std::string& why);
  void view_followed();
  // Session steps; each returns false on a store error.
  bool grant_lease(size_t endpoint);
  bool keep_alive(size_t endpoint);
  bool put_registration(size_t endpoint);
  void lead(size_t endpoint, uint64_t now_ns);
  void compact_history(size_t endpoint, const ClusterView& view, uint64_t now_ns);
  // Leads from `leader_created` (the key's create revision) on, going on
  // from the ranks in `view`. Under mutex_.
  void begin_term(const ClusterView& view, int64_t leader_created);

  const ClusterSpec spec_;
  const ClusterKeys keys_;
  const unsigned class_count_;
  const PolicyParams config_policy_;
  std::vector<ClusterEndpoint> endpoints_;
  // By endpoint, then lane; made on first use, again after a drop (guarded
  // by channels_mutex_).
  std::vector<std::array<std::shared_ptr<grpc::Channel>, 2>> channels_;
  std::mutex channels_mutex_;
  // The TLS files last read whole, and why the last read failed ("": it did
  // not); under channels_mutex_.
  std::optional<grpc::SslCredentialsOptions> tls_good_;
  std::string tls_problem_;
  std::atomic<bool> stop_{false};
  // Every call to the store in flight (each thread's, and write()'s), all
  // cancelled by the stop; one started after it is cancelled as it starts.
  // The lease's revoke at stop is the one call outside it.
  LiveCalls<grpc::ClientContext> calls_;
  std::atomic<size_t> follow_endpoint_{0};  // where the follow thread reads: writes try it first

  mutable std::mutex mutex_;  // guards the fields below
  std::shared_ptr<const ClusterView> view_;
  StoreFollowState follow_state_;  // the store answers; the view is current (a watch follows it)
  double degraded_since_s_ = 0;    // unix time the store was lost (0: connected, or never reached)
  std::string last_error_;
  std::string registration_error_;  // why this gateway is not registered ("": it is)
  int64_t registered_lease_ = 0;    // the lease our registration was last written under (0: none)
  uint64_t registered_ns_ = 0;      // when it was last written (0: never)
  const uint64_t started_ns_;       // when this link began (the session's first registration is due after)
  // Why the registration (and any leadership) has lapsed though no write was
  // refused, "" when it has not (under mutex_): session_problem.
  std::string session_problem(uint64_t now) const;
  // A session step (lease grant or keepalive, registration write) that
  // failed at endpoint `ep` other than by the store's refusal: kept as
  // session_failure_ (said in session_problem) and logged, at most once a
  // minute. Not under mutex_ (takes it).
  void session_failed(const char* what, size_t ep, const grpc::Status& st);
  std::string session_failure_note() const;  // under mutex_
  // The etcd cluster followed (the cluster_id of its response headers; 0:
  // none read yet), and what each endpoint last answered for (0: unknown).
  // A full read of another cluster is followed only as store_identity
  // says; until then foreign_store_ says why not (health degraded).
  // `replaced`: set when it is followed as a replaced store (a new epoch).
  // `probed`: what each endpoint answered just before (the start-up
  // probe), or empty: they are asked now.
  bool store_followable(size_t endpoint, uint64_t read_id, bool& replaced, const std::vector<uint64_t>& probed = {});
  uint64_t probe_cluster_id(size_t endpoint, std::chrono::system_clock::time_point deadline);
  // The cluster id each endpoint in `which` (by endpoint) answers for, 0 for
  // no answer: asked all at once, under one call deadline in all.
  std::vector<uint64_t> probe_cluster_ids(const std::vector<bool>& which);
  // What each endpoint answered, for the log and health: "HOST:PORT ID,
  // HOST:PORT no answer, ..."; the endpoint `in_use` (not asked: followed)
  // as "FOLLOWED (followed)".
  std::string answers_text(const std::vector<uint64_t>& ids, size_t in_use = SIZE_MAX, uint64_t followed = 0) const;
  // The probe thread: every kReprobeEveryNs, while a cluster is followed,
  // asks the endpoints the follow thread does not use which cluster they
  // answer for, so that another cluster coming up at one of them is said
  // (probed_foreign_) before a failover meets it. It changes nothing
  // followed: the follow thread's rules (store_followable) decide that.
  void probe_loop();
  // Whether an answer from `endpoint` with cluster id `id` is another
  // cluster's than the one followed; notes the endpoint's id.
  bool foreign_answer(size_t endpoint, uint64_t id);
  bool known_foreign(size_t endpoint) const;  // it last answered for another cluster
  // It last answered for the cluster followed (any, before the first read):
  // leadership acts only there.
  bool of_followed_cluster(size_t endpoint) const;
  std::atomic<uint64_t> cluster_id_{0};
  // A full read has been followed (store_followable said so): the session
  // registers only from then on, in the store followed.
  std::atomic<bool> store_picked_{false};
  std::atomic<uint64_t> picked_ns_{0};      // when it was first (session_problem counts from there)
  std::vector<uint64_t> endpoint_cluster_;  // by endpoint; under mutex_
  // By endpoint: it answered for the cluster followed at some time (a
  // probe, a read, a session call); under mutex_. A new cluster id at most
  // of the endpoints is a replaced store only where one of them did
  // (store_identity).
  std::vector<bool> served_followed_;
  std::string foreign_store_;  // under mutex_
  // Another cluster's answer at an endpoint not in use, found by the probe
  // thread while this gateway follows its own ("": none); under mutex_.
  // Said as foreign_endpoint while the store followed answers.
  std::string probed_foreign_;
  LogThrottle foreign_store_log_{60'000'000'000};
  LogThrottle probe_threads_log_{60'000'000'000};  // threads probe_cluster_ids could not start; under mutex_
  std::string session_failure_;                    // the last such failure, with where and why ("": none yet)
  LogThrottle session_error_log_{60'000'000'000};
  GatewayInfo report_;
  bool leader_ = false;
  int64_t leader_created_ = 0;  // our leader key's create revision: the fence on our ranks writes
  uint64_t leader_epoch_ = 0;   // the store epoch it is a revision of (ClusterView::store_epoch)
  int64_t lease_id_ = 0;
  // Full reads compacted away under the follow thread (while paging, or
  // before their watch caught up), in a row: said in status() (health
  // degraded) after 3, or 10 s after the first.
  FullReadFailures full_read_failures_{3, 10'000'000'000};
  uint64_t full_reads_ = 0, watch_restarts_ = 0, events_ = 0, write_errors_ = 0, leader_terms_ = 0;
  grpc::ClientContext* watch_context_ = nullptr;  // the live watch, to cancel when it goes silent
  uint64_t last_watch_message_ns_ = 0;
  // The problems of the last published view, each logged once while it
  // lasts (a view is published for every store event, gateway heartbeats
  // included). The follow thread's alone (it publishes); not under mutex_.
  std::set<std::string> logged_problems_;
  // Writes a progress request on the live watch. Set, cleared and called
  // under watch_write_mutex_, never under mutex_: a Write can block on a
  // stalled stream, and mutex_ is what status() (the control thread, every
  // tick) takes.
  std::mutex watch_write_mutex_;
  std::function<bool()> ask_progress_;

  std::mt19937_64 jitter_{std::random_device{}()};

  // Session-thread state.
  uint64_t lease_ok_ns_ = 0;  // last successful grant or keepalive (written under mutex_: status() reads it)
  PolicyState leader_policy_state_;
  // The policy leader_policy_state_ was evaluated under: another one (or
  // other settings) starts afresh, as a single gateway's policy command does.
  std::optional<PolicyParams> leader_policy_params_;
  // The store revision at which the last campaign found the leader key
  // taken (session thread only): no new campaign before the view reaches it.
  int64_t campaign_lost_at_ = 0;
  uint64_t campaign_lost_epoch_ = 0;
  int64_t ranks_removed_at_ = 0;  // a held ranks document's delete (static): not again before the view shows it
  uint64_t ranks_removed_epoch_ = 0;
  uint64_t leader_evaluated_ns_ = 0;
  LogThrottle ranks_error_log_{60'000'000'000};  // failed ranks writes
  // The leader's compaction (compact_history): when, and to which revision.
  HistoryCompaction compaction_{spec_.compact_every_ns};
  LogThrottle compact_error_log_{60'000'000'000};

  int wake_fd_ = -1;  // eventfd: written on every new view
  std::thread follow_thread_;
  std::thread session_thread_;
  std::thread probe_thread_;
};

}  // namespace psgate
