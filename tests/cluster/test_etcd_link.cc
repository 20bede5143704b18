// SPDX-License-Identifier: BSD-3-Clause
// EtcdLink against fake etcd members in this process (etcd's own gRPC
// services, answered as each test says) and against endpoints that take
// connections and never answer: what the link does at the moments a real
// store makes hard to catch.
//   - Its stop cancels every call in flight: the start-up probe, a full
//     read's side reads, the probe thread's, the session's; none waits for
//     its deadline (1-2 s each), and the lease is still revoked.
//   - A key too large to receive, deleted while the full read asks for it
//     without its value, ends the read: no "store unreachable".
#include "cluster/etcd_link.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"

namespace psgate {
namespace {

namespace pb = etcdserverpb;
using Clock = std::chrono::steady_clock;

constexpr const char* kPrefix = "/psgate/linktest";
constexpr uint64_t kClusterId = 0xc1;
// A stop that cancels what is in flight takes a few ms; one that waits for
// a call's deadline takes the rest of it (1 s for a probe or a session
// call, 2 s for a side read; before the fix: 850-1980 ms). The bound
// leaves room for a loaded machine.
constexpr auto kPromptStop = std::chrono::milliseconds(600);

// Until `done` or `limit`.
bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

// One etcd member: a store of keys at one revision, the Watch, Lease and KV
// calls the link makes, each counted. `range_hook` answers a Range before
// the store does (nullopt: the store answers); `hold_*` makes a call wait
// until the client gives up on it (its deadline, or a cancel).
class FakeEtcd {
 public:
  std::function<std::optional<grpc::Status>(grpc::ServerContext*, const pb::RangeRequest&, pb::RangeResponse&)>
      range_hook;
  std::atomic<bool> hold_txn{false};
  std::atomic<int> pages{0}, counts{0}, probes{0}, keys_only{0}, txns{0}, grants{0}, revokes{0}, watches{0};
  std::atomic<int64_t> revoked{0};
  std::atomic<int64_t> revision{10};
  static constexpr int64_t kLease = 7;

  FakeEtcd() : kv_(*this), watch_(*this), lease_(*this) {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    b.RegisterService(&kv_);
    b.RegisterService(&watch_);
    b.RegisterService(&lease_);
    server_ = b.BuildAndStart();
  }
  ~FakeEtcd() {
    closing_ = true;
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  void put(const std::string& key, const std::string& value) {
    std::lock_guard<std::mutex> lock(mutex_);
    store_[key] = value;
  }

  // Until the client gives up on the call.
  grpc::Status hold(grpc::ServerContext* ctx) {
    while (!ctx->IsCancelled() && !closing_) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return grpc::Status(grpc::StatusCode::CANCELLED, "held");
  }

  void header(pb::ResponseHeader* h) {
    h->set_cluster_id(kClusterId);
    h->set_member_id(1);
    h->set_revision(revision);
  }

 private:
  grpc::Status range(grpc::ServerContext* ctx, const pb::RangeRequest& req, pb::RangeResponse& resp) {
    if (req.count_only()) ++(req.range_end().empty() ? probes : counts);
    else if (req.keys_only()) ++keys_only;
    else ++pages;
    if (range_hook)
      if (auto s = range_hook(ctx, req, resp)) return *s;
    header(resp.mutable_header());
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t n = 0;
    for (auto it = store_.lower_bound(req.key()); it != store_.end(); ++it) {
      if (req.range_end().empty() ? it->first != req.key() : it->first >= req.range_end()) break;
      ++n;
      if (req.count_only()) continue;
      if (req.limit() > 0 && resp.kvs_size() == req.limit()) {
        resp.set_more(true);
        continue;
      }
      auto* kv = resp.add_kvs();
      kv->set_key(it->first);
      if (!req.keys_only()) kv->set_value(it->second);
      kv->set_create_revision(2);
      kv->set_mod_revision(2);
    }
    resp.set_count(n);
    return grpc::Status::OK;
  }

  struct KvService : pb::KV::Service {
    explicit KvService(FakeEtcd& f) : f(f) {}
    grpc::Status Range(grpc::ServerContext* ctx, const pb::RangeRequest* req, pb::RangeResponse* resp) override {
      return f.range(ctx, *req, *resp);
    }
    grpc::Status Txn(grpc::ServerContext* ctx, const pb::TxnRequest*, pb::TxnResponse* resp) override {
      ++f.txns;
      if (f.hold_txn) return f.hold(ctx);
      f.header(resp->mutable_header());
      // Far ahead of the view: a leader's fence the view never passes.
      resp->mutable_header()->set_revision(1000);
      resp->set_succeeded(true);
      return grpc::Status::OK;
    }
    FakeEtcd& f;
  };

  struct WatchService : pb::Watch::Service {
    explicit WatchService(FakeEtcd& f) : f(f) {}
    grpc::Status Watch(grpc::ServerContext* ctx,
                       grpc::ServerReaderWriter<pb::WatchResponse, pb::WatchRequest>* stream) override {
      ++f.watches;
      pb::WatchRequest req;
      while (!f.closing_ && stream->Read(&req)) {
        pb::WatchResponse resp;
        f.header(resp.mutable_header());
        if (req.has_create_request()) resp.set_created(true);
        else resp.set_watch_id(-1);  // a progress report
        if (!stream->Write(resp)) break;
      }
      (void)ctx;
      return grpc::Status::OK;
    }
    FakeEtcd& f;
  };

  struct LeaseService : pb::Lease::Service {
    explicit LeaseService(FakeEtcd& f) : f(f) {}
    grpc::Status LeaseGrant(grpc::ServerContext*, const pb::LeaseGrantRequest* req,
                            pb::LeaseGrantResponse* resp) override {
      ++f.grants;
      f.header(resp->mutable_header());
      resp->set_id(kLease);
      resp->set_ttl(req->ttl());
      return grpc::Status::OK;
    }
    grpc::Status LeaseRevoke(grpc::ServerContext*, const pb::LeaseRevokeRequest* req,
                             pb::LeaseRevokeResponse* resp) override {
      f.revoked = req->id();
      ++f.revokes;
      f.header(resp->mutable_header());
      return grpc::Status::OK;
    }
    grpc::Status LeaseKeepAlive(
        grpc::ServerContext*,
        grpc::ServerReaderWriter<pb::LeaseKeepAliveResponse, pb::LeaseKeepAliveRequest>* stream) override {
      pb::LeaseKeepAliveRequest req;
      while (!f.closing_ && stream->Read(&req)) {
        pb::LeaseKeepAliveResponse resp;
        f.header(resp.mutable_header());
        resp.set_id(req.id());
        resp.set_ttl(3);
        if (!stream->Write(resp)) break;
      }
      return grpc::Status::OK;
    }
    FakeEtcd& f;
  };

  std::atomic<bool> closing_{false};
  int port_ = 0;
  std::mutex mutex_;
  std::map<std::string, std::string> store_;
  KvService kv_;
  WatchService watch_;
  LeaseService lease_;
  std::unique_ptr<grpc::Server> server_;
};

// An endpoint that takes connections and never answers: a member whose host
// is gone without a reset. The kernel completes the TCP handshake into the
// backlog; gRPC's HTTP/2 handshake never does.
class SilentMember {
 public:
  SilentMember() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no listening socket");
    port_ = ntohs(a.sin_port);
  }
  ~SilentMember() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// What the link logs, for the test to read.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("test", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  // Call once nothing logs any more (the link is gone).
  std::string text() const { return out_.str(); }

 private:
  std::shared_ptr<spdlog::logger> previous_;
  std::ostringstream out_;
};

ClusterSpec spec(std::vector<std::string> endpoints) {
  ClusterSpec s;
  s.endpoints = std::move(endpoints);
  s.name = "gw-test";
  s.prefix = kPrefix;
  s.address = "gw-test";
  return s;
}

std::unique_ptr<EtcdLink> link(std::vector<std::string> endpoints) {
  return std::make_unique<EtcdLink>(spec(std::move(endpoints)), 8, PolicyParams{});
}

// How long destroying the link took.
std::chrono::milliseconds stop(std::unique_ptr<EtcdLink>& l) {
  const auto t0 = Clock::now();
  l.reset();
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0);
}

const std::string kJob1 = R"({"schema": 1, "job": 1, "match": ["dst=10.0.0.1/32"]})";
const std::string kJob8 = R"({"schema": 1, "job": 8, "match": ["dst=10.0.0.8/32"]})";

grpc::Status too_large_to_receive() {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "Received message larger than max (283115587 vs. 268435456)");
}

TEST(EtcdLinkStop, CancelsTheStartUpProbeOfMembersThatNeverAnswer) {
  // Both members hold the start-up probe (which cluster do you answer
  // for?) to its 1 s deadline.
  SilentMember a, b;
  auto l = link({a.url(), b.url()});
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop) << "the stop waited for the probes' deadline";
}

TEST(EtcdLinkStop, CancelsTheStartUpProbeHeldByTheMembers) {
  FakeEtcd a, b;
  for (FakeEtcd* f : {&a, &b}) {
    f->range_hook = [f](grpc::ServerContext* ctx, const pb::RangeRequest& req,
                        pb::RangeResponse&) -> std::optional<grpc::Status> {
      if (req.count_only() && req.range_end().empty()) return f->hold(ctx);
      return std::nullopt;
    };
  }
  auto l = link({a.url(), b.url()});
  ASSERT_TRUE(eventually([&] { return a.probes > 0 && b.probes > 0; }, std::chrono::milliseconds(900)));
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop) << "the stop waited for the probes' 1 s deadline";
}

// A page too large to receive; the count of the keys left (keys_left), or
// with pages of one key the key without its value (first_key), held.
void side_read_held(bool count) {
  FakeEtcd m;
  m.range_hook = [&m, count](grpc::ServerContext* ctx, const pb::RangeRequest& req,
                             pb::RangeResponse& resp) -> std::optional<grpc::Status> {
    if (!req.count_only() && !req.keys_only()) return too_large_to_receive();
    if (req.count_only() != count) {
      resp.set_count(1);  // one key left: the next page asks for one
      return grpc::Status::OK;
    }
    return m.hold(ctx);
  };
  auto l = link({m.url()});
  ASSERT_TRUE(eventually([&] { return count ? m.counts > 0 : m.keys_only > 0; }, std::chrono::milliseconds(1500)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the call in flight, not just asked
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop) << "the stop waited for the side read's 2 s deadline";
}

TEST(EtcdLinkStop, CancelsACountOfTheKeysLeft) { side_read_held(true); }

TEST(EtcdLinkStop, CancelsAKeysOnlyRead) { side_read_held(false); }

TEST(EtcdLinkStop, CancelsTheProbeThreadsCall) {
  // One member answers; the other holds every probe. Once the store is
  // followed, the probe thread asks the other every 3 s.
  FakeEtcd good, held;
  good.put(std::string(kPrefix) + "/jobs/1", kJob1);
  held.range_hook = [&held](grpc::ServerContext* ctx, const pb::RangeRequest&,
                            pb::RangeResponse&) -> std::optional<grpc::Status> { return held.hold(ctx); };
  auto l = link({good.url(), held.url()});
  ASSERT_TRUE(l->wait_first_read(3'000'000'000));
  // The start-up probe, then the probe thread's.
  ASSERT_TRUE(eventually([&] { return held.probes >= 2; }, std::chrono::milliseconds(6000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop) << "the stop waited for the probe's 1 s deadline";
}

TEST(EtcdLinkStop, CancelsASessionCallAndStillRevokesTheLease) {
  FakeEtcd m;
  m.put(std::string(kPrefix) + "/jobs/1", kJob1);
  m.hold_txn = true;  // the registration's write
  auto l = link({m.url()});
  ASSERT_TRUE(l->wait_first_read(3'000'000'000));
  ASSERT_TRUE(eventually([&] { return m.txns > 0; }, std::chrono::milliseconds(3000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop) << "the stop waited for the registration's 1 s deadline";
  EXPECT_EQ(m.revokes, 1) << "a clean stop revokes the lease (registration and leadership go at once)";
  EXPECT_EQ(m.revoked, FakeEtcd::kLease);
}

TEST(EtcdLinkStop, ACleanStopRevokesTheLeaseAtTheMemberInUse) {
  FakeEtcd m;
  m.put(std::string(kPrefix) + "/jobs/1", kJob1);
  auto l = link({m.url()});
  ASSERT_TRUE(l->wait_first_read(3'000'000'000));
  ASSERT_TRUE(eventually([&] { return m.txns >= 2; }, std::chrono::milliseconds(3000)));  // registered
  const auto took = stop(l);
  EXPECT_LT(took, kPromptStop);
  EXPECT_EQ(m.revokes, 1);
  EXPECT_EQ(m.revoked, FakeEtcd::kLease);
}

// The only key under the prefix holds a value too large to receive: every
// page of it is refused as such, until the keys-only read (which the
// follower asks at the newest revision, no page having come) finds it gone.
TEST(EtcdLinkOversize, AKeyDeletedBeforeItsKeysOnlyReadEndsTheReadNoUnreachableStore) {
  CapturedLog log;
  FakeEtcd m;
  std::atomic<bool> deleted{false};
  std::atomic<int> pages_after{0};
  m.range_hook = [&](grpc::ServerContext*, const pb::RangeRequest& req,
                     pb::RangeResponse& resp) -> std::optional<grpc::Status> {
    if (req.count_only()) {
      if (!req.range_end().empty() && !deleted) resp.set_count(1);
      return std::nullopt;  // the store (empty): no key
    }
    if (req.keys_only()) {
      deleted = true;
      m.revision = 11;  // the delete's
      return std::nullopt;
    }
    if (deleted) {
      ++pages_after;
      return std::nullopt;
    }
    return too_large_to_receive();
  };
  auto l = link({m.url()});
  ASSERT_TRUE(l->wait_first_read(5'000'000'000));
  ASSERT_TRUE(eventually([&] { return l->connected(); }, std::chrono::milliseconds(2000)));
  const auto status = l->status();
  l.reset();
  const std::string text = log.text();
  EXPECT_EQ(text.find("store unreachable"), std::string::npos)
      << "an empty answer is the key gone, not a member failure; log:\n"
      << text;
  EXPECT_EQ(pages_after, 0) << "the read ended with the keys-only answer: no page, no second full read";
  EXPECT_EQ(status["full_reads"], 1);
  EXPECT_EQ(status["store_revision"], 11) << "the view is the store at the keys-only read's revision";
  EXPECT_NE(text.find("deleted meanwhile"), std::string::npos) << text;
}

// As above, but a key follows the deleted one: the keys-only read at the
// newest revision finds that one, whose value is no larger than any other.
// It was taken for the key too large, and its job refused as too large.
TEST(EtcdLinkOversize, TheKeyAfterOneDeletedMeanwhileIsReadWithItsValue) {
  CapturedLog log;
  FakeEtcd m;
  const std::string big = std::string(kPrefix) + "/jobs/7", next = std::string(kPrefix) + "/jobs/8";
  m.put(next, kJob8);
  std::atomic<bool> deleted{false};
  m.range_hook = [&](grpc::ServerContext*, const pb::RangeRequest& req,
                     pb::RangeResponse& resp) -> std::optional<grpc::Status> {
    if (req.count_only() && !deleted) {
      m.header(resp.mutable_header());
      resp.set_count(2);  // job 7 too
      return grpc::Status::OK;
    }
    if (req.keys_only()) {
      deleted = true;  // job 7 deleted just before
      m.revision = 11;
      return std::nullopt;
    }
    if (deleted) return std::nullopt;
    // job 7 first, too large for any page that holds it
    if (req.key() <= big) return too_large_to_receive();
    return std::nullopt;
  };
  auto l = link({m.url()});
  ASSERT_TRUE(l->wait_first_read(5'000'000'000));
  auto view = l->newer_than(0, 0);
  ASSERT_TRUE(view);
  l.reset();
  EXPECT_EQ(view->refused_jobs.count(8), 0u) << "job 8 refused as too large to receive";
  ASSERT_EQ(view->jobs.size(), 1u) << log.text();
  EXPECT_EQ(view->jobs[0].spec.id, 8u);
}

}  // namespace
}  // namespace psgate
