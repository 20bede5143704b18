// SPDX-License-Identifier: BSD-3-Clause
// etcd v3 over gRPC for cluster mode (see etcd_link.h): the link itself,
// its threads, its connections to the members, the view it hands over and
// what status() says. Each thread's work is in its own file: etcd_follow.cc,
// etcd_probe.cc, etcd_session.cc; the control socket's writes in
// etcd_write.cc.
#include "cluster/etcd_link.h"

#include <algorithm>
#include <chrono>
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

#include "cluster/etcd_calls.h"
#include "psgate/pem_file.h"

namespace psgate {

using json = nlohmann::json;
using namespace etcd_detail;

namespace {

constexpr uint64_t kMaxBackoffNs = 5000 * kMs;

double unix_now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
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

void EtcdLink::cancel_calls() {
  stop_ = true;
  calls_.stop();
}

EtcdLink::~EtcdLink() {
  stop_ = true;
  // Every call in flight ends now, not at its deadline: a full read's page
  // (2-16 s), its side reads (2 s), the cluster id probes and the session's
  // calls (1 s each), the watch. A thread that had not yet started its
  // call starts it cancelled.
  calls_.stop();
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

}  // namespace psgate
