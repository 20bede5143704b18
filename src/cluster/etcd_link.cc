// SPDX-License-Identifier: BSD-3-Clause
// etcd v3 over gRPC for cluster mode (see etcd_link.h).
#include "cluster/etcd_link.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <utility>

#include <sys/eventfd.h>
#include <unistd.h>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "psgate/at_once.h"
#include "psgate/pem_file.h"
#include "psgate/units.h"

namespace psgate {

namespace pb = etcdserverpb;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kMinBackoffNs = 50 * kMs;
constexpr uint64_t kMaxBackoffNs = 5000 * kMs;
constexpr uint64_t kReadDeadlineNs = 2000 * kMs;  // per page of a full read
// At one key a page, a value that takes longer than that to arrive (a very
// narrow link) is given up to this long (FullReadPages).
constexpr uint64_t kLongestReadDeadlineNs = 16000 * kMs;
// Keys per page of a full read, at most: at etcd's largest value (1.5 MiB
// by default) a page stays under the receive limit, and each page is a
// small read for etcd to build in memory, under its own deadline, so a
// large prefix reads in many short calls rather than one that never ends
// within the deadline. Pages of large values that still do not arrive in
// time are asked for in fewer keys (FullReadPages).
constexpr int64_t kReadPageKeys = 128;
// The first page's keys, and what a page should carry at most once the
// bytes a key are known (FullReadPages): pages of large values start small
// and stay near this size, rather than make etcd build hundreds of MB.
constexpr int64_t kFirstReadPageKeys = 16;
constexpr uint64_t kReadPageBytes = 64ull << 20;
constexpr uint64_t kCallDeadlineNs = 1000 * kMs;
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
// The endpoints not in use are asked which cluster they answer for this
// often (one small count-only read each, all at once).
constexpr uint64_t kReprobeEveryNs = 3000 * kMs;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// b - a, or 0 when another thread stamped `a` after `b` was read.
uint64_t elapsed(uint64_t a, uint64_t b) { return b > a ? b - a : 0; }

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void set_deadline(grpc::ClientContext& ctx, uint64_t ns) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::nanoseconds(ns));
}

// etcd's WithRequireLeader: a member that has lost its raft leader fails the
// call instead of answering from a store that no longer moves.
void require_leader(grpc::ClientContext& ctx) { ctx.AddMetadata("hasleader", "true"); }

// Every unary call to the store: bounded, and refused by a leaderless member.
void prepare_call(grpc::ClientContext& ctx, uint64_t deadline_ns) {
  set_deadline(ctx, deadline_ns);
  require_leader(ctx);
}

// A transaction's condition: `key` was created at `revision` (0: it does not exist).
void compare_created(pb::TxnRequest& txn, const std::string& key, int64_t revision) {
  auto* cmp = txn.add_compare();
  cmp->set_key(key);
  cmp->set_target(pb::Compare::CREATE);
  cmp->set_result(pb::Compare::EQUAL);
  cmp->set_create_revision(revision);
}

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

// Whether the store (or gRPC on its way) answered and refused the request
// itself, which sending it again, or to another member, would not change:
// etcd's "request is too large" (InvalidArgument), its space quota's alarm
// and gRPC's message size limit (ResourceExhausted, unlike "too many
// requests", which is load), auth. Not a lost connection.
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

// gRPC's own refusal of a message larger than the channel's receive limit
// ("Received message larger than max (283115587 vs. 268435456)"), not the
// store's ResourceExhausted (a request too large, "too many requests").
bool over_receive_limit(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
         s.error_message().find("Received message larger than max") != std::string::npos;
}

// The size over_receive_limit's message gives, or the limit where it gives none.
uint64_t received_size(const grpc::Status& s) {
  const std::string& m = s.error_message();
  const size_t open = m.find('(');
  if (open != std::string::npos) {
    const uint64_t n = std::strtoull(m.c_str() + open + 1, nullptr, 10);
    if (n > 0) return n;
  }
  return kStoreReceiveLimitBytes;
}

std::string status_text(const grpc::Status& s) {
  return s.error_message().empty() ? "gRPC code " + std::to_string(static_cast<int>(s.error_code()))
                                   : s.error_message();
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

// gRPC's own log lines (gpr_log, those its GRPC_VERBOSITY lets through:
// errors by default) went to stderr from gRPC's threads, unthrottled: a
// member that refused every TLS handshake made ~420 lines a minute. They go
// through psgate's log, its errors as warnings (what they cost is said by
// psgate's own lines: store unreachable, and why), each place in gRPC's
// source at most once a minute, with how many were held back.
void log_grpc_line(gpr_log_func_args* args) {
  // Never destroyed: a gRPC thread may log while exit() runs the static
  // destructors.
  static auto& mutex = *new std::mutex;
  static auto& throttles = *new std::map<std::pair<std::string, int>, LogThrottle>;
  const uint64_t now = now_ns();
  const char* slash = args->file != nullptr ? std::strrchr(args->file, '/') : nullptr;
  const std::string file = slash != nullptr ? slash + 1 : args->file != nullptr ? args->file : "?";
  std::string held_back;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = throttles.try_emplace({file, args->line}, 60'000'000'000).first;
    if (!it->second.admit(now)) return;
    held_back = it->second.held_back_note();
  }
  const auto level = args->severity == GPR_LOG_SEVERITY_ERROR ? spdlog::level::warn : spdlog::level::debug;
  spdlog::log(level, "cluster: gRPC: {} ({}:{}; at most once a minute from there{})", args->message, file, args->line,
              held_back);
}

}  // namespace

EtcdLink::EtcdLink(const ClusterSpec& spec, unsigned class_count, const PolicyParams& config_policy)
    : spec_(spec), keys_{spec.prefix}, class_count_(class_count), config_policy_(config_policy), started_ns_(now_ns()) {
  for (const std::string& e : spec.endpoints) endpoints_.push_back(parse_endpoint(e));
  channels_.resize(endpoints_.size());
  endpoint_cluster_.resize(endpoints_.size());
  served_followed_.resize(endpoints_.size());
  report_.name = spec.name;
  report_.address = spec.address;
  report_.version = PSGATE_VERSION;
  report_.health = "ok";
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  static std::once_flag grpc_log_routed;
  std::call_once(grpc_log_routed, [] { gpr_set_log_function(log_grpc_line); });
  follow_thread_ = std::thread([this] { follow_loop(); });
  session_thread_ = std::thread([this] { session_loop(); });
  if (endpoints_.size() > 1) probe_thread_ = std::thread([this] { probe_loop(); });
}

EtcdLink::~EtcdLink() {
  stop_ = true;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (watch_context_) watch_context_->TryCancel();
    if (read_context_) read_context_->TryCancel();
  }
  if (follow_thread_.joinable()) follow_thread_.join();
  if (session_thread_.joinable()) session_thread_.join();
  if (probe_thread_.joinable()) probe_thread_.join();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

std::shared_ptr<grpc::Channel> EtcdLink::channel(size_t endpoint, Lane lane) {
  std::lock_guard<std::mutex> lock(channels_mutex_);
  std::shared_ptr<grpc::Channel>& ch = channels_[endpoint][static_cast<size_t>(lane)];
  if (ch) return ch;
  grpc::ChannelArguments args;
  // Its own connection: gRPC shares one among channels of the same target
  // and arguments (its global subchannel pool); the lanes must not share
  // (Lane), and a channel made again after a drop must not take up the
  // failed one's.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Keepalive pings find a dead peer even on an idle watch. Not more often
  // than etcd's --grpc-keepalive-min-time (5 s by default): a server that sees
  // pings sooner closes the connection ("too many pings"). The watch's own
  // progress deadline (kWatchSilenceNs) finds a dead stream sooner.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 6000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  // Reconnect soon to a member that refused (gRPC raises the initial
  // backoff to 100 ms). The minimum backoff is not one: gRPC gives each
  // connection attempt (TCP, TLS, HTTP/2's SETTINGS) at least that long
  // (its min_connect_timeout, subchannel.cc's ParseArgsForBackoffValues in
  // gRPC 1.51), and at 50 ms (raised to 100) every attempt over a link of a
  // 100 ms round trip or more timed out until the backoff outgrew it:
  // 7.5 s to connect at 100 ms one way, 25 s at 300 ms. A member that does
  // not answer is given up on by the calls' own deadlines, not by this.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // A page of a full read (kReadPageKeys keys of at most etcd's 1.5 MiB
  // each) or a watch message.
  args.SetMaxReceiveMessageSize(static_cast<int>(kStoreReceiveLimitBytes));
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (endpoints_[endpoint].tls) {
    creds = grpc::SslCredentials(tls_files());
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  ch = grpc::CreateCustomChannel(endpoints_[endpoint].target, creds, args);
  return ch;
}

// Read again for every new channel, so that rotated files are taken up at
// the next reconnect. Files that cannot be read or hold no
// complete PEM of their kind (mid-rotation, removed, cut short) leave
// the last good ones in use, with a warning naming the file, once per
// problem. With none ever read (the daemon checks them before it starts,
// so only if they went in between), the root list is a text that is no
// certificate: every call fails, the store counts as unreachable.
grpc::SslCredentialsOptions EtcdLink::tls_files() {
  grpc::SslCredentialsOptions o;
  std::string why;
  // The files in order, stopping at the first that cannot be read.
  auto read = [&why](const std::string& path, PemKind kind) -> std::optional<std::string> {
    auto pem = read_pem_file(path, kind);
    if (!pem) {
      why = pem.error();
      return std::nullopt;
    }
    return std::move(*pem);
  };
  auto ca = read(spec_.ca, PemKind::kCertificates);
  std::optional<std::string> cert, key;
  if (ca && !spec_.cert.empty()) {
    cert = read(spec_.cert, PemKind::kCertificates);
    if (cert) key = read(spec_.key, PemKind::kPrivateKey);
  }
  if (ca && (spec_.cert.empty() || (cert && key))) {
    o.pem_root_certs = std::move(*ca);
    if (cert) o.pem_cert_chain = std::move(*cert);
    if (key) o.pem_private_key = std::move(*key);
    tls_good_ = o;
    if (!tls_problem_.empty()) spdlog::info("cluster: TLS files readable again");
    tls_problem_.clear();
    return o;
  }
  if (why != tls_problem_) {
    spdlog::warn("cluster: TLS: {}; {}", why,
                 tls_good_ ? "connecting with the files read before" : "cannot connect until it can be read");
  }
  tls_problem_ = why;
  if (tls_good_) return *tls_good_;
  o.pem_root_certs = "unreadable: " + why;
  return o;
}

void EtcdLink::drop_channel(size_t endpoint, Lane lane) {
  // A channel that failed may sit in gRPC's own reconnect state; the next
  // attempt gets a fresh connection instead.
  std::lock_guard<std::mutex> lock(channels_mutex_);
  channels_[endpoint][static_cast<size_t>(lane)].reset();
}

void EtcdLink::sleep_backoff(uint64_t& backoff_ns) {
  uint64_t wait;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Full jitter over the upper half: gateways that lost the store together
    // do not come back in lockstep.
    wait = backoff_ns / 2 + jitter_() % (backoff_ns / 2 + 1);
  }
  const uint64_t until = now_ns() + wait;
  while (!stop_ && now_ns() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  backoff_ns = std::min(backoff_ns * 2, kMaxBackoffNs);
}

void EtcdLink::set_connected(bool up, const std::string& error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (up) {
    if (!follow_state_.connected() && degraded_since_s_ != 0)
      spdlog::info("cluster: store reachable again at {}", endpoints_[follow_endpoint_].target);
    follow_state_.read_whole();
    degraded_since_s_ = 0;
    last_error_.clear();
    return;
  }
  if (follow_state_.connected() || degraded_since_s_ == 0) {
    degraded_since_s_ = unix_now_s();
    spdlog::warn("cluster: store unreachable ({}); forwarding on the last order applied", error);
  }
  follow_state_.lost();
  full_read_failures_.reset();  // "though the store answers" no longer holds
  last_error_ = error;
}

void EtcdLink::publish_view(const StoreMirror& mirror) {
  // Documents are parsed defensively (cluster_layout.cc), and a bug there must
  // still not end this thread, which would end the gateway: the view is kept
  // as it was and the error logged.
  try {
    publish(std::make_shared<const ClusterView>(mirror.view()));
  } catch (const std::exception& e) {
    spdlog::error("cluster: revision {} not read: {}", mirror.revision(), e.what());
  }
}

void EtcdLink::publish(std::shared_ptr<const ClusterView> view) {
  // A stray key is logged when it appears, not again at every publish (about
  // once a second per gateway, forever) while it stays. Outside mutex_: a
  // log sink that blocks must not hold up status() on the control thread.
  std::set<std::string> problems(view->problems.begin(), view->problems.end());
  for (const std::string& p : problems)
    if (!logged_problems_.count(p)) spdlog::warn("cluster: ignored {}", p);
  logged_problems_ = std::move(problems);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    view_ = std::move(view);
  }
  // Wake the control thread: a change is applied as soon as it is read, not
  // on the next tick.
  if (wake_fd_ >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
  }
}

bool EtcdLink::wait_first_read(uint64_t timeout_ns) {
  const uint64_t until = now_ns() + timeout_ns;
  while (now_ns() < until) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (view_) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::shared_ptr<const ClusterView> EtcdLink::newer_than(uint64_t epoch, int64_t revision) {
  std::lock_guard<std::mutex> lock(mutex_);
  return view_ && view_is_newer(*view_, epoch, revision) ? view_ : nullptr;
}

bool EtcdLink::connected() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return follow_state_.connected();
}

void EtcdLink::report(const GatewayInfo& info) {
  std::lock_guard<std::mutex> lock(mutex_);
  report_ = info;
  report_.name = spec_.name;
  report_.address = spec_.address;
  report_.version = PSGATE_VERSION;
  report_.degraded_since_s = degraded_since_s_ != 0 ? std::optional<double>(degraded_since_s_) : std::nullopt;
}

json EtcdLink::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {{"name", spec_.name},
          {"prefix", spec_.prefix},
          {"endpoint", endpoints_[follow_endpoint_].target},
          {"connected", follow_state_.connected()},
          {"degraded_since", degraded_since_s_ != 0 ? json(degraded_since_s_) : json(nullptr)},
          {"last_error", last_error_},
          {"store_revision", view_ ? view_->revision : 0},
          {"leader", view_ ? view_->leader : ""},
          {"is_leader", leader_},
          {"lease_ttl_s", static_cast<double>(spec_.lease_ttl_ns) / 1e9},
          {"full_reads", full_reads_},
          {"watch_restarts", watch_restarts_},
          {"events", events_},
          {"write_errors", write_errors_},
          {"leader_terms", leader_terms_},
          {"registration_error", registration_error_},
          {"session_error", session_problem(now_ns())},
          {"full_read_error", full_read_failures_.problem(now_ns())},
          {"foreign_store", foreign_store_},
          // The probe's word, only while the store followed answers: an
          // endpoint not in use is another cluster's (nothing else changes).
          {"foreign_endpoint", foreign_store_.empty() && follow_state_.connected() ? probed_foreign_ : ""}};
}

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

// ---- following the prefix ----------------------------------------------------------

// A full read compacted away under the follow thread, while paging or
// before its watch caught up: counted (FullReadFailures), and said in health
// once it happens again and again. The log says each until then, then that
// once: not a line every 5 s for as long as it lasts.
void EtcdLink::full_read_compacted(const std::string& what, const std::string& why) {
  bool became_trouble;
  std::string trouble;
  unsigned streak;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const uint64_t t = now_ns();
    became_trouble = full_read_failures_.failed(t, why);
    trouble = full_read_failures_.problem(t);
    streak = full_read_failures_.streak();
  }
  if (became_trouble) {
    spdlog::warn("cluster: {} (health degraded until the prefix is read and followed again)", trouble);
  } else if (trouble.empty()) {
    spdlog::warn("cluster: {} ({} in a row): reading everything again", what, streak);
  }
}

void EtcdLink::view_followed() {
  unsigned failed_before;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failed_before = full_read_failures_.succeeded();
  }
  if (failed_before > 0)
    spdlog::info("cluster: the prefix read and followed again after {} full read(s) compacted away in a row",
                 failed_before);
}

void EtcdLink::follow_loop() {
  uint64_t backoff = kMinBackoffNs;
  // Gateways start on different members (by name), so that the watches are
  // spread and one member's loss moves only its share of them.
  size_t ep = std::hash<std::string>{}(spec_.name) % endpoints_.size();
  // At the start every endpoint is asked at once which cluster it answers
  // for: the first read goes to one that answers (the first from the
  // name's pick on), not to a silent one that would hold it for its whole
  // deadline, and that read's identity check takes these answers rather
  // than asking again. One call deadline in all, however many are silent.
  std::vector<uint64_t> start_ids;
  if (endpoints_.size() > 1) {
    start_ids = probe_cluster_ids(std::vector<bool>(endpoints_.size(), true));
    for (size_t k = 0; k < endpoints_.size(); ++k) {
      if (start_ids[(ep + k) % endpoints_.size()] != 0) {
        ep = (ep + k) % endpoints_.size();
        break;
      }
    }
  }
  StoreMirror mirror(keys_, class_count_);
  const std::string start = keys_.all(), end = prefix_range_end(keys_.all());
  // Kept from one full read to the next: a store whose pages had to be
  // smaller is read so from the start next time.
  FullReadPages pages(kFirstReadPageKeys, kReadPageKeys, kReadPageBytes, kReadDeadlineNs, kLongestReadDeadlineNs);
  while (!stop_) {
    follow_endpoint_ = ep;
    auto ch = channel(ep, Lane::kFollow);
    // 1. Everything under the prefix, at one revision: page by page, each
    //    page at the first one's revision (what it read is the store then).
    {
      auto kv = pb::KV::NewStub(ch);
      std::map<std::string, StoreEntry> entries;
      int64_t at = 0;        // the revision read at: the first page's
      uint64_t read_id = 0;  // the etcd cluster that answered (the first page's header)
      std::string from = start;
      grpc::Status s;
      for (;;) {
        grpc::ClientContext ctx;
        prepare_call(ctx, pages.deadline_ns());
        {
          // Registered before stop_ is read: a stop either sees it and
          // cancels the call, or was seen here.
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = &ctx;
        }
        if (stop_) {
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = nullptr;
          break;
        }
        pb::RangeRequest req;
        req.set_key(from);
        req.set_range_end(end);
        req.set_limit(pages.keys());
        req.set_revision(at);  // 0: the newest
        pb::RangeResponse resp;
        const uint64_t asked_ns = now_ns();
        s = kv->Range(&ctx, req, &resp);
        {
          std::lock_guard<std::mutex> lock(mutex_);
          read_context_ = nullptr;
        }
        if (!s.ok()) {
          if (stop_) break;
          if (pages.keys() == 1 && over_receive_limit(s)) {
            // One key's value is larger than this gateway may receive: no
            // page, however small or long, can bring it. Asked again and
            // again (each time etcd built the whole value to send), it left
            // the gateway "store unreachable" for good, the store answering.
            // Read without its value: a key outside the layout is ignored
            // as ever, a document is refused, naming its size.
            auto k = first_key(ep, from, end, at);
            if (!k) break;  // the member does not answer: the next one
            if (at == 0) {
              at = k->revision;
              read_id = k->cluster_id;
            }
            const uint64_t bytes = received_size(s);
            const bool document = mirror.keeps_value(k->key);
            k->entry.value = document ? unreceived_value(bytes) : std::string();
            spdlog::warn(
                "cluster: {} holds a value of about {} bytes, more than the {} this gateway can receive: read without "
                "it ({}); delete or shrink it (etcdctl del {})",
                k->key, bytes, kStoreReceiveLimitBytes,
                document ? "refused as a document" : "ignored, as is every key outside the layout", k->key);
            entries[k->key] = std::move(k->entry);
            from = k->key + '\0';
            continue;
          }
          if (s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED &&
              s.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED)
            break;
          // Late or larger than the receive limit: too much at once for
          // this store or link, or a member that no longer answers. The
          // pages get smaller either way (they grow back once pages arrive
          // in time); a member that answers is asked again at once.
          const int64_t left = keys_left(ep, from, end, at);
          const int64_t asked = pages.keys();
          const uint64_t allowed_ns = pages.deadline_ns();
          const bool smaller = pages.too_large(left > 0 ? left : 0);
          if (left < 0 || !smaller) break;
          spdlog::info(
              "cluster: a page of {} key(s) of the full read from {} did not arrive ({} within {} ms; {} key(s) "
              "still to read): asking for {} key(s) a page, within {} ms",
              asked, endpoints_[ep].target, status_text(s), allowed_ns / kMs, left, pages.keys(),
              pages.deadline_ns() / kMs);
          continue;
        }
        pages.arrived(now_ns() - asked_ns, resp.kvs_size(), resp.ByteSizeLong());
        if (at == 0) {
          at = resp.header().revision();
          read_id = resp.header().cluster_id();
        }
        for (const auto& k : resp.kvs()) {
          // A key outside the layout is kept without its value (StoreMirror::put).
          entries[k.key()] = StoreEntry{mirror.keeps_value(k.key()) ? k.value() : std::string(), k.create_revision(),
                                        k.mod_revision(), k.lease()};
        }
        if (!resp.more() || resp.kvs_size() == 0) break;
        from = resp.kvs(resp.kvs_size() - 1).key() + '\0';  // the next key after the last read
      }
      if (stop_) break;  // a read cut short is no view to publish
      // The start-up answers serve the first read only: later ones ask anew.
      const std::vector<uint64_t> probed = std::exchange(start_ids, {});
      if (!s.ok()) {
        // Compacted past the first page's revision while paging: start
        // over at the newest, on this member (it answers).
        const bool compacted = s.error_code() == grpc::StatusCode::OUT_OF_RANGE;
        if (compacted) {
          full_read_compacted(fmt::format("full read compacted at revision {} while paging", at), status_text(s));
          sleep_backoff(backoff);
          continue;
        }
        set_connected(false, endpoints_[ep].target + ": " + status_text(s));
        drop_channel(ep, Lane::kFollow);
        ep = (ep + 1) % endpoints_.size();
        sleep_backoff(backoff);
        continue;
      }
      bool replaced = false;
      if (!store_followable(ep, read_id, replaced, probed)) {
        std::string why;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          why = foreign_store_;
        }
        set_connected(false, why);
        drop_channel(ep, Lane::kFollow);
        ep = (ep + 1) % endpoints_.size();
        sleep_backoff(backoff);
        continue;
      }
      const int64_t before = mirror.revision();
      mirror.reset(std::move(entries), at, replaced);
      if (mirror.revision() < before) {
        spdlog::warn(
            "cluster: the store's revision went back from {} to {} (restored from a snapshot, or another "
            "cluster at these endpoints?): following it from there",
            before, mirror.revision());
      }
      publish_view(mirror);
      set_connected(true, "");
      std::lock_guard<std::mutex> lock(mutex_);
      ++full_reads_;
    }
    // 2. Every change after that revision.
    auto watch = pb::Watch::NewStub(ch);
    grpc::ClientContext ctx;
    require_leader(ctx);
    auto stream = watch->Watch(&ctx);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      watch_context_ = &ctx;
      last_watch_message_ns_ = now_ns();
    }
    pb::WatchRequest create;
    auto* c = create.mutable_create_request();
    c->set_key(start);
    c->set_range_end(end);
    c->set_start_revision(mirror.revision() + 1);
    c->set_progress_notify(true);
    // A response larger than etcd's --max-request-bytes comes in fragments
    // of at most that: a watch created behind the store's head (writes
    // while the prefix was read) is sent the revisions since in one
    // response of up to 1000 revisions, which over a narrow link took
    // longer than the silence deadline to arrive: the watch was cancelled,
    // the prefix read again, the next watch behind again, for as long as
    // the writes went on, never delivering a change. Fragments arrive.
    c->set_fragment(true);
    bool healthy = stream->Write(create);
    {
      // The session thread asks for progress through this (a Write may run
      // beside this thread's Read; writes are serialised by
      // watch_write_mutex_).
      std::lock_guard<std::mutex> lock(watch_write_mutex_);
      ask_progress_ = [s = stream.get()] {
        pb::WatchRequest r;
        r.mutable_progress_request();
        return s->Write(r);
      };
    }
    pb::WatchResponse resp;
    // The events of the response being received (of all its fragments so
    // far, for a fragmented one: a revision's events are applied together,
    // the whole response is), and the bytes of the values kept (those
    // outside the layout are not).
    std::vector<WatchEvent> pending;
    size_t pending_bytes = 0;
    bool created = false;
    bool current = false;  // the view is current (follow_state_): the watch is created and cannot be compacted away
    while (healthy && !stop_ && stream->Read(&resp)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last_watch_message_ns_ = now_ns();
      }
      bool became_current = false;
      if (resp.created()) {
        created = true;
        std::lock_guard<std::mutex> lock(mutex_);
        became_current = current = follow_state_.watch_created(resp.header().revision(), mirror.revision());
      }
      for (const auto& ev : resp.events()) {
        const auto& k = ev.kv();
        const bool keep = mirror.keeps_value(k.key());
        pending_bytes += k.key().size() + (keep ? k.value().size() : 0);
        pending.push_back(
            WatchEvent{ev.type() == mvccpb::Event::PUT, k.key(),
                       StoreEntry{keep ? k.value() : std::string(), k.create_revision(), k.mod_revision(), k.lease()}});
      }
      // One message is at most that (gRPC's receive limit); fragments add up.
      if (pending_bytes > kStoreReceiveLimitBytes) {
        spdlog::warn(
            "cluster: a watch response of more than {} bytes of documents, in fragments: reading "
            "everything again",
            kStoreReceiveLimitBytes);
        break;
      }
      if (resp.fragment()) continue;  // more of this response to come
      WatchMessage m;
      m.created = resp.created();
      m.canceled = resp.canceled();
      m.compact_revision = resp.compact_revision();
      m.revision = resp.header().revision();
      m.requested_progress = resp.watch_id() == -1;
      m.cancel_reason = resp.cancel_reason();
      m.events = std::exchange(pending, {});
      pending_bytes = 0;
      const WatchOutcome outcome = apply_watch_message(mirror, m);
      if (outcome == WatchOutcome::kReadAgain) {
        const std::string what =
            m.compact_revision > 0 ? "compacted at revision " + std::to_string(m.compact_revision) : "cancelled";
        // Compacted before it delivered anything: the read it was to follow
        // was compacted away as surely as one while paging, and a store
        // compacted between every read and its watch would otherwise be
        // read again and again, never followed, with health ok.
        if (m.compact_revision > 0 && !current) {
          full_read_compacted(
              fmt::format("the watch from revision {} {} before it delivered anything", mirror.revision() + 1, what),
              m.cancel_reason.empty() ? "watch " + what : m.cancel_reason);
        } else {
          spdlog::warn("cluster: watch {} ({}): reading everything again", what, m.cancel_reason);
        }
        break;
      }
      if (outcome == WatchOutcome::kChanged) {
        publish_view(mirror);
        std::lock_guard<std::mutex> lock(mutex_);
        events_ += m.events.size();
        if (follow_state_.watch_delivered()) became_current = current = true;
      }
      if (created) set_connected(true, "");
      // Followed from here: the next failure backs off from the start, and
      // reads compacted away before are over.
      if (became_current) {
        backoff = kMinBackoffNs;
        view_followed();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      watch_context_ = nullptr;
      ++watch_restarts_;
      // Still connected, maybe (a watch cancelled for silence or compacted),
      // but nothing after this view is delivered until the next watch: the
      // leader pauses (lead()).
      follow_state_.watch_ended();
    }
    {
      // No progress request runs on the stream past this point.
      std::lock_guard<std::mutex> lock(watch_write_mutex_);
      ask_progress_ = nullptr;
    }
    ctx.TryCancel();
    const grpc::Status s = stream->Finish();
    if (stop_) break;
    if (over_receive_limit(s)) {
      // A change larger than this gateway can receive (one value, or
      // etcd's batch of many): the member answers, and a full read reads
      // such a value's key without it. Not "store unreachable".
      spdlog::warn(
          "cluster: the watch's message of about {} bytes is more than the {} this gateway can receive: "
          "reading everything again",
          received_size(s), kStoreReceiveLimitBytes);
      sleep_backoff(backoff);
    } else if (!s.ok() && s.error_code() != grpc::StatusCode::CANCELLED) {
      set_connected(false, endpoints_[ep].target + ": watch: " + status_text(s));
      drop_channel(ep, Lane::kFollow);
      ep = (ep + 1) % endpoints_.size();
      sleep_backoff(backoff);
    } else if (!s.ok()) {
      // Cancelled by the session thread (silent watch) or by the server: this
      // member may be cut off; try the next one.
      drop_channel(ep, Lane::kFollow);
      ep = (ep + 1) % endpoints_.size();
      sleep_backoff(backoff);
    }
  }
}

namespace {

// A small read beside a full read's pages (a count, a key without its
// value): of [from, end) at `revision` (0: the newest), `shape` setting what
// it asks for. On the calls' connection (Lane), not behind what a late
// page left in flight on the follow thread's; under a page's deadline all
// the same: it shares the link with those bytes. nullopt: no answer.
std::optional<pb::RangeResponse> side_read(const std::shared_ptr<grpc::Channel>& ch, const std::string& from,
                                           const std::string& end, int64_t revision,
                                           const std::function<void(pb::RangeRequest&)>& shape) {
  auto kv = pb::KV::NewStub(ch);
  grpc::ClientContext ctx;
  prepare_call(ctx, kReadDeadlineNs);
  pb::RangeRequest req;
  req.set_key(from);
  req.set_range_end(end);
  req.set_revision(revision);
  shape(req);
  pb::RangeResponse resp;
  if (!kv->Range(&ctx, req, &resp).ok()) return std::nullopt;
  return resp;
}

}  // namespace

int64_t EtcdLink::keys_left(size_t ep, const std::string& from, const std::string& end, int64_t revision) {
  auto resp =
      side_read(channel(ep, Lane::kCalls), from, end, revision, [](pb::RangeRequest& r) { r.set_count_only(true); });
  return resp ? resp->count() : -1;
}

std::optional<EtcdLink::KeyOnly> EtcdLink::first_key(size_t ep, const std::string& from, const std::string& end,
                                                     int64_t revision) {
  auto resp = side_read(channel(ep, Lane::kCalls), from, end, revision, [](pb::RangeRequest& r) {
    r.set_limit(1);
    r.set_keys_only(true);
  });
  if (!resp || resp->kvs_size() == 0) return std::nullopt;
  const auto& k = resp->kvs(0);
  return KeyOnly{k.key(), StoreEntry{std::string(), k.create_revision(), k.mod_revision(), k.lease()},
                 resp->header().revision(), resp->header().cluster_id()};
}

// ---- which etcd cluster ----------------------------------------------------------------

uint64_t EtcdLink::probe_cluster_id(size_t ep, std::chrono::system_clock::time_point deadline) {
  auto kv = pb::KV::NewStub(channel(ep, Lane::kCalls));
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline);
  require_leader(ctx);
  pb::RangeRequest req;
  req.set_key(keys_.order());
  req.set_count_only(true);
  pb::RangeResponse resp;
  if (!kv->Range(&ctx, req, &resp).ok()) return 0;
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

// ---- the session: lease, registration, leadership -----------------------------------

bool EtcdLink::grant_lease(size_t ep) {
  auto lease = pb::Lease::NewStub(channel(ep, Lane::kCalls));
  grpc::ClientContext ctx;
  prepare_call(ctx, kCallDeadlineNs);
  pb::LeaseGrantRequest req;
  req.set_ttl(static_cast<int64_t>(spec_.lease_ttl_ns / 1'000'000'000));
  pb::LeaseGrantResponse resp;
  grpc::Status st = lease->LeaseGrant(&ctx, req, &resp);
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
  grpc::ClientContext ctx;
  prepare_call(ctx, kCallDeadlineNs);
  auto stream = lease->LeaseKeepAlive(&ctx);
  pb::LeaseKeepAliveRequest req;
  req.set_id(id);
  pb::LeaseKeepAliveResponse resp;
  const bool answered = stream->Write(req) && stream->Read(&resp);
  stream->WritesDone();
  ctx.TryCancel();
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
  grpc::ClientContext ctx;
  prepare_call(ctx, kCallDeadlineNs);
  pb::TxnResponse resp;
  std::string conflict;
  if (const grpc::Status st = kv->Txn(&ctx, txn, &resp); !st.ok()) {
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
    grpc::ClientContext ctx;
    prepare_call(ctx, kCallDeadlineNs);
    pb::TxnResponse resp;
    if (!kv->Txn(&ctx, txn, &resp).ok()) return;
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
    grpc::ClientContext ctx;
    prepare_call(ctx, kCallDeadlineNs);
    pb::TxnResponse resp;
    if (!kv->Txn(&ctx, txn, &resp).ok()) return;
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
      grpc::ClientContext ctx;
      prepare_call(ctx, kCallDeadlineNs);
      pb::TxnResponse resp;
      if (!kv->Txn(&ctx, txn, &resp).ok()) return;
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
  grpc::ClientContext ctx;
  prepare_call(ctx, kCallDeadlineNs);
  pb::TxnResponse resp;
  if (const grpc::Status s = kv->Txn(&ctx, txn, &resp); !s.ok()) {
    // Tried again at the next evaluation (the store's ranks still differ).
    // Said at most once a minute: a cause that lasts (a ranks document over
    // etcd's request size, at tens of thousands of jobs) fails every time,
    // and the gateways keep following the last ranks written meanwhile.
    if (ranks_error_log_.admit(now)) {
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
  grpc::ClientContext ctx;
  prepare_call(ctx, kCallDeadlineNs);
  pb::CompactionResponse resp;
  const grpc::Status st = kv->Compact(&ctx, req, &resp);
  // "required revision has been compacted": someone compacted further
  // (another leader before us, the store's own retention): as good.
  if (st.ok() || st.error_message().find("compacted") != std::string::npos) {
    compaction_.compacted(view.store_epoch, target);
    spdlog::info("cluster: store history before revision {} compacted (cluster.compact_every {})", target,
                 duration_text_exact(spec_.compact_every_ns));
  } else if (compact_error_log_.admit(now)) {
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
  // rather than one TTL later.
  int64_t lease;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    lease = lease_id_;
  }
  if (lease != 0) {
    auto stub = pb::Lease::NewStub(channel(ep, Lane::kCalls));
    grpc::ClientContext ctx;
    set_deadline(ctx, 500 * kMs);
    pb::LeaseRevokeRequest req;
    req.set_id(lease);
    pb::LeaseRevokeResponse resp;
    (void)stub->LeaseRevoke(&ctx, req, &resp);
  }
}

// ---- writes from the control socket ---------------------------------------------------

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
    grpc::ClientContext ctx;
    prepare_call(ctx, kCallDeadlineNs);
    pb::TxnResponse resp;
    const grpc::Status s = kv->Txn(&ctx, txn, &resp);
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
