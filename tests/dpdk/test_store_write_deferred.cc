// SPDX-License-Identifier: BSD-3-Clause
// In cluster mode a client's change goes to the store, which takes up to a
// second per member to answer, and comes back through the watch: the
// control thread used to wait for both, and every other client (a
// monitor's `health`, the scheduler's `order`), the tick and the service
// watchdog waited with it. Here the store is in-process (StoreMirror behind
// a ClusterLink whose write waits at a gate the test opens), the clients
// real sockets on a real ControlServer: while a write is held, others are
// answered; the writer's own requests stay in order; a second writer waits
// its turn; a client that hangs up meanwhile still has its later requests
// taken; a failed write is an error reply, and the client is read again.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "control/control_server.h"
#include "pipeline_harness.h"
#include "psgate/cluster_layout.h"
#include "psgate/cluster_link.h"
#include "temp_dir.h"

namespace psgate::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

const char* kBody = R"([lcores]
main = 0
data = [1]
[classes]
count = 4
[dataplane]
max_jobs = 16
mbufs = 1024
[stats]
interval = "0s"
)";

constexpr const char* kPrefix = "/psgate/test";

// The store: one StoreMirror; a write applies its puts and deletes at the
// next revision once the gate is open (or fails with `fail_with`), and
// wakes the control thread as the link's watch would.
class GatedStore : public ClusterLink {
 public:
  GatedStore() : mirror_(ClusterKeys{kPrefix}, 4), wake_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    mirror_.set_revision(1);
  }
  ~GatedStore() override { ::close(wake_); }

  std::shared_ptr<const ClusterView> newer_than(uint64_t epoch, int64_t revision) override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto v = std::make_shared<ClusterView>(mirror_.view());
    return view_is_newer(*v, epoch, revision) ? v : nullptr;
  }
  Result<int64_t> write(const StoreWrite& w) override {
    std::unique_lock<std::mutex> lock(mutex_);
    ++writes_started_;
    changed_.notify_all();
    changed_.wait(lock, [&] { return open_ || cancelled_; });
    if (cancelled_) return Result<int64_t>::failure("cancelled");
    if (!fail_with_.empty()) return Result<int64_t>::failure(fail_with_);
    const int64_t rev = mirror_.revision() + 1;
    for (const std::string& key : w.deletes) mirror_.erase(key);
    for (const auto& [key, value] : w.puts) mirror_.put(key, StoreEntry{value, rev, rev, 0});
    mirror_.set_revision(rev);
    revisions_.push_back(rev);
    const uint64_t one = 1;
    (void)!::write(wake_, &one, sizeof one);
    return rev;
  }
  void cancel_calls() override {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_ = true;
    changed_.notify_all();
  }
  void report(const GatewayInfo&) override {}
  bool connected() const override { return true; }
  json status() const override { return json{{"connected", true}}; }
  int wake_fd() const override { return wake_; }

  bool cancelled() {
    std::lock_guard<std::mutex> lock(mutex_);
    return cancelled_;
  }
  void set_open(bool open, const std::string& fail_with = "") {
    std::lock_guard<std::mutex> lock(mutex_);
    open_ = open;
    fail_with_ = fail_with;
    changed_.notify_all();
  }
  // Waits until `n` writes have reached the gate (or 5 s).
  bool wait_writes_started(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return changed_.wait_for(lock, 5s, [&] { return writes_started_ >= n; });
  }
  int writes_started() {
    std::lock_guard<std::mutex> lock(mutex_);
    return writes_started_;
  }
  std::vector<int64_t> revisions() {
    std::lock_guard<std::mutex> lock(mutex_);
    return revisions_;
  }
  std::vector<uint32_t> job_ids() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint32_t> ids;
    for (const ClusterJob& j : mirror_.view().jobs) ids.push_back(j.spec.id);
    return ids;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  StoreMirror mirror_;
  int wake_;
  bool open_ = true;
  bool cancelled_ = false;
  std::string fail_with_;
  int writes_started_ = 0;
  std::vector<int64_t> revisions_;
};

// A control client: sends lines, reads reply lines with a deadline.
class Client {
 public:
  explicit Client(const std::string& path) : fd_(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~Client() { close(); }
  bool connected() const { return connected_; }
  void send(const std::string& lines) { (void)!::write(fd_, lines.data(), lines.size()); }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // The next reply line within `wait`, or null.
  json reply(std::chrono::milliseconds wait) {
    const auto until = std::chrono::steady_clock::now() + wait;
    for (;;) {
      if (const size_t nl = buffered_.find('\n'); nl != std::string::npos) {
        json j = json::parse(buffered_.substr(0, nl), nullptr, false);
        buffered_.erase(0, nl + 1);
        return j;
      }
      const auto left = std::chrono::duration_cast<std::chrono::microseconds>(until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return json();
      timeval tv{static_cast<time_t>(left.count() / 1'000'000), static_cast<suseconds_t>(left.count() % 1'000'000)};
      ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[4096];
      const ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0) return json();
      buffered_.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool connected_ = false;
  std::string buffered_;
};

std::string add_job(uint32_t id) {
  return json{{"cmd", "jobs.add"}, {"job", id}, {"match", {"dst=10.0.0." + std::to_string(id) + "/32"}}}.dump() + "\n";
}

std::vector<uint32_t> listed_ids(const json& reply) {
  std::vector<uint32_t> ids;
  if (!reply.is_object() || !reply.contains("result") || !reply["result"].contains("jobs")) return ids;
  for (const json& j : reply["result"]["jobs"]) ids.push_back(j.at("id").get<uint32_t>());
  return ids;
}

class StoreWriteDeferredTest : public ::testing::Test {
 protected:
  void SetUp() override { start(10'000'000); }
  void start(uint64_t tick_ns) {
    h_ = std::make_unique<PipelineHarness>(kBody, false);
    ASSERT_TRUE(h_->ok()) << h_->error();
    ClusterSpec spec;
    spec.endpoints = {"http://127.0.0.1:1"};
    spec.name = "gw-test";
    spec.prefix = kPrefix;
    h_->control().follow_cluster(&store_, spec);
    ControlServer::Options options;
    options.socket_path = socket_;
    options.tick_ns = tick_ns;
    options.wake_fd = store_.wake_fd();
    auto server = ControlServer::start(h_->control(), options);
    ASSERT_TRUE(server) << server.error();
    server_ = std::move(*server);
  }
  void TearDown() override {
    store_.set_open(true);  // a test that failed with the gate shut must not hold the stop
    server_.reset();
    h_.reset();
  }

  TempDir dir_{"psgate-deferred"};
  const std::string socket_ = dir_.path("control.sock");
  GatedStore store_;
  std::unique_ptr<PipelineHarness> h_;
  std::unique_ptr<ControlServer> server_;
};

TEST_F(StoreWriteDeferredTest, OtherClientsAreAnsweredWhileAChangeWaitsForTheStore) {
  store_.set_open(false);
  Client writer(socket_), monitor(socket_), second(socket_);
  ASSERT_TRUE(writer.connected() && monitor.connected() && second.connected());
  // The writer pipelines a read after its change: answered after it, and
  // showing it.
  writer.send(add_job(1) + R"({"cmd":"jobs.list"})" + "\n");
  ASSERT_TRUE(store_.wait_writes_started(1)) << "the change never reached the store";
  // The store holds the write: others are answered meanwhile.
  const auto asked = std::chrono::steady_clock::now();
  const json health = monitor.reply(0ms);  // nothing owed yet
  EXPECT_TRUE(health.is_null());
  monitor.send(R"({"cmd":"health"})"
               "\n");
  const json answered = monitor.reply(1000ms);
  ASSERT_TRUE(answered.is_object()) << "health was not answered while a change waited for the store";
  EXPECT_EQ(answered.value("ok", false), true) << answered.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - asked, 500ms);
  // A second writer waits its turn: its change is not sent meanwhile.
  second.send(add_job(2));
  EXPECT_TRUE(second.reply(200ms).is_null()) << "the second change was answered before the first";
  EXPECT_EQ(store_.writes_started(), 1) << "two changes were sent to the store at once";
  EXPECT_TRUE(writer.reply(100ms).is_null()) << "the writer was answered before the store took its change";

  store_.set_open(true);
  const json added = writer.reply(3000ms);
  ASSERT_TRUE(added.is_object()) << "no reply once the store took the change";
  EXPECT_EQ(added.value("ok", false), true) << added.dump();
  ASSERT_TRUE(added["result"].contains("store_revision")) << added.dump();
  EXPECT_FALSE(added["result"].contains("applied_here")) << "the change was not in force here: " << added.dump();
  const json list = writer.reply(1000ms);
  ASSERT_TRUE(list.is_object()) << "the writer's pipelined read was not answered";
  // (The second writer's change may be in force by then too: it was sent
  // as the first was answered.)
  const std::vector<uint32_t> listed = listed_ids(list);
  EXPECT_NE(std::find(listed.begin(), listed.end(), 1u), listed.end()) << "the read ran before the change it follows";
  const json added2 = second.reply(3000ms);
  ASSERT_TRUE(added2.is_object()) << "the second writer's change was never answered";
  EXPECT_EQ(added2.value("ok", false), true) << added2.dump();
  // One at a time, in the order asked.
  const std::vector<int64_t> revisions = store_.revisions();
  ASSERT_EQ(revisions.size(), 2u);
  EXPECT_EQ(added["result"]["store_revision"].get<int64_t>(), revisions[0]);
  EXPECT_EQ(added2["result"]["store_revision"].get<int64_t>(), revisions[1]);
  EXPECT_EQ(store_.job_ids(), (std::vector<uint32_t>{1, 2}));
}

TEST_F(StoreWriteDeferredTest, AClientThatHangsUpWhileItsChangeWaitsHasItsLaterRequestsTaken) {
  store_.set_open(false);
  {
    Client script(socket_);
    ASSERT_TRUE(script.connected());
    script.send(add_job(3) + add_job(4));
    ASSERT_TRUE(store_.wait_writes_started(1));
  }  // hung up, its second change unread
  Client monitor(socket_);
  monitor.send(R"({"cmd":"health"})"
               "\n");
  EXPECT_TRUE(monitor.reply(1000ms).is_object()) << "health was not answered while a change waited for the store";
  store_.set_open(true);
  ASSERT_TRUE(store_.wait_writes_started(2)) << "the hung-up client's second change was never taken";
  const auto until = std::chrono::steady_clock::now() + 3s;
  json list;
  do {
    monitor.send(R"({"cmd":"jobs.list"})"
                 "\n");
    list = monitor.reply(1000ms);
    ASSERT_TRUE(list.is_object());
  } while (listed_ids(list).size() < 2 && std::chrono::steady_clock::now() < until);
  EXPECT_EQ(listed_ids(list), (std::vector<uint32_t>{3, 4}));
}

TEST_F(StoreWriteDeferredTest, AFailedWriteIsAnErrorReplyAndTheClientIsReadAgain) {
  store_.set_open(false);
  Client writer(socket_);
  ASSERT_TRUE(writer.connected());
  writer.send(add_job(5) + R"({"cmd":"health"})" + "\n");
  ASSERT_TRUE(store_.wait_writes_started(1));
  store_.set_open(true, "the cluster store did not answer in time (test)");
  const json failed = writer.reply(3000ms);
  ASSERT_TRUE(failed.is_object());
  EXPECT_EQ(failed.value("ok", true), false) << failed.dump();
  EXPECT_NE(failed.value("error", "").find("did not answer in time (test)"), std::string::npos) << failed.dump();
  const json health = writer.reply(1000ms);
  ASSERT_TRUE(health.is_object()) << "the client was not read again after its failed change";
  EXPECT_EQ(health.value("ok", false), true) << health.dump();
  store_.set_open(true);
  writer.send(add_job(6));
  const json added = writer.reply(3000ms);
  EXPECT_EQ(added.value("ok", false), true) << added.dump();
  EXPECT_EQ(store_.job_ids(), std::vector<uint32_t>{6});
}

TEST_F(StoreWriteDeferredTest, AStopWhileAChangeIsOutAnswersTheWriterWithWhatBecameOfIt) {
  store_.set_open(false);
  Client writer(socket_), queued(socket_);
  ASSERT_TRUE(writer.connected() && queued.connected());
  writer.send(add_job(9));
  ASSERT_TRUE(store_.wait_writes_started(1));
  queued.send(R"({"cmd":"jobs.add","job":10,"match":["dst=10.0.0.10/32"],"id":"q1"})"
              "\n");
  EXPECT_TRUE(queued.reply(200ms).is_null());
  // The store takes the change a moment after the stop began: the stop
  // waits for it (kStopWriteWaitNs), and the writer learns it was written.
  std::thread opener([&] {
    std::this_thread::sleep_for(200ms);
    store_.set_open(true);
  });
  server_.reset();  // as the daemon's SIGTERM does
  opener.join();
  const json r = writer.reply(3000ms);
  EXPECT_EQ(store_.job_ids(), std::vector<uint32_t>{9});
  ASSERT_TRUE(r.is_object()) << "the writer's connection closed with no reply, though its change was written";
  EXPECT_EQ(r.value("ok", false), true) << r.dump();
  EXPECT_EQ(r["result"].value("store_revision", int64_t{0}), store_.revisions().at(0)) << r.dump();
  // The change behind it was never sent, and is told so.
  const json q = queued.reply(1000ms);
  ASSERT_TRUE(q.is_object()) << "the waiting change's client got no reply at the stop";
  EXPECT_EQ(q.value("ok", true), false) << q.dump();
  EXPECT_EQ(q.value("id", ""), "q1") << q.dump();
  EXPECT_NE(q.value("error", "").find("nothing written"), std::string::npos) << q.dump();
}

TEST_F(StoreWriteDeferredTest, AStopDoesNotWaitForAStoreThatNeverAnswers) {
  store_.set_open(false);
  Client writer(socket_);
  ASSERT_TRUE(writer.connected());
  writer.send(add_job(12));
  ASSERT_TRUE(store_.wait_writes_started(1));
  const auto t0 = std::chrono::steady_clock::now();
  server_.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s) << "the stop waited for the store";
  EXPECT_TRUE(store_.cancelled()) << "the write out was not cancelled";
  const json r = writer.reply(1000ms);
  ASSERT_TRUE(r.is_object()) << "no reply at the stop";
  EXPECT_EQ(r.value("ok", true), false) << r.dump();
  EXPECT_NE(r.value("error", "").find("may or may not have been written"), std::string::npos) << r.dump();
}

// A client that shut its sending side after a change and a read: no event
// spins the control thread while the change is out, and both replies come.
TEST_F(StoreWriteDeferredTest, AHalfClosedWriterGetsItsRepliesThenTheConnectionCloses) {
  store_.set_open(false);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_.c_str());
  ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string lines = add_job(11) + R"({"cmd":"health"})" + "\n";
  ASSERT_EQ(::write(fd, lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  ::shutdown(fd, SHUT_WR);
  ASSERT_TRUE(store_.wait_writes_started(1));
  rusage before{}, after{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(500ms);
  ::getrusage(RUSAGE_SELF, &after);
  const auto cpu_us = [](const rusage& r) {
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1'000'000L + r.ru_utime.tv_usec + r.ru_stime.tv_usec;
  };
  EXPECT_LT(cpu_us(after) - cpu_us(before), 250'000) << "the process spun while the change was out";
  store_.set_open(true);
  std::string got;
  char buf[4096];
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.append(buf, static_cast<size_t>(n));
  ::close(fd);
  EXPECT_EQ(std::count(got.begin(), got.end(), '\n'), 2) << got;
}

// With no tick to make up for a lost wake-up (20 s), every reply comes as
// its write ends, and the write's descriptor is drained each time: left
// readable with nothing pending, the level-triggered loop spins.
TEST_F(StoreWriteDeferredTest, EveryReplyComesAsItsWriteEndsAndTheDescriptorIsDrained) {
  server_.reset();
  start(20'000'000'000);
  Client writer(socket_);
  ASSERT_TRUE(writer.connected());
  for (int i = 0; i < 100; ++i) {
    for (const std::string& line : {add_job(1), std::string(R"({"cmd":"jobs.remove","job":1})") + "\n"}) {
      writer.send(line);
      const json r = writer.reply(3000ms);
      ASSERT_TRUE(r.is_object()) << "round " << i << ": no reply within 3 s (the tick is 20 s): a lost wake-up";
      ASSERT_EQ(r.value("ok", false), true) << r.dump();
      std::this_thread::sleep_for(1ms);
      pollfd p{h_->control().deferred_fd(), POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, 0), 0) << "round " << i << ": the write's descriptor left readable, nothing pending";
    }
  }
}

}  // namespace
}  // namespace psgate::testing
