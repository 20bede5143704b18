// SPDX-License-Identifier: BSD-3-Clause
// All-or-nothing changes with the faults injected where the real thing
// cannot fail on demand: a state file write that fails and a snapshot build
// that fails. Either refuses the change, and memory, the data plane (the
// published snapshot) and the state file stay as they were; a restart never
// brings the refused change back. Also: the state file is written before the
// snapshot is published, and a read (`class` with no option) writes nothing.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "config/compile.h"  // RankedJob
#include "control/control_server.h"
#include "control/state_file.h"
#include "pipeline_harness.h"
#include "temp_dir.h"

namespace psgate::testing {
namespace {

using json = nlohmann::json;

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
[[jobs]]
id = 1
rank = 0
match = ["src=10.0.0.5/32,sport=2222,proto=tcp"]
[[jobs]]
id = 2
rank = 1
match = ["src=10.0.0.5/32,sport=2223,proto=tcp"]
)";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ControlFaultsTest : public ::testing::Test {
 protected:
  std::unique_ptr<PipelineHarness> harness() {
    return std::make_unique<PipelineHarness>(kBody, false, "state = \"" + state_ + "\"\n");
  }

  // What an operator sees, what the data plane runs and what a restart reads.
  struct Seen {
    json jobs, config;
    uint32_t generation;
    std::string file;  // the state file (it names the rules files)
    bool operator==(const Seen&) const = default;
  };
  static Seen look(PipelineHarness& h, const std::string& file) {
    return Seen{h.control().handle({{"cmd", "jobs.list"}}), h.control().handle({{"cmd", "config"}}),
                h.dataplane().snapshot().generation, slurp(file)};
  }

  testing::TempDir dir_{"psgate-faults"};
  const std::string state_ = dir_.path("state.json");
};

// One request per change command; each must go through the state file.
const std::vector<json> kChanges = {
    {{"cmd", "jobs.add"}, {"job", 9}, {"match", {"dst=10.0.0.9/32,dport=9,proto=tcp"}}},
    {{"cmd", "jobs.remove"}, {"job", 1}},
    {{"cmd", "order"}, {"ids", {2, 1}}},
    {{"cmd", "rank"}, {"job", 2}, {"rank", 0}},
    {{"cmd", "class.set"}, {"port", "wire"}, {"class", 1}, {"cap", "1Gbit/s"}},
    {{"cmd", "shaper.set"}, {"port", "host"}, {"rate", "1Gbit/s"}},
    {{"cmd", "policy"}, {"name", "round-robin"}},
    {{"cmd", "progress"}, {"job", 1}, {"fraction", 0.5}},
};

TEST_F(ControlFaultsTest, AFailingStateWriteRefusesEveryChangeAndChangesNothing) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  const Seen before = look(*h, state_);
  ASSERT_FALSE(before.file.empty());
  h->control().set_io_for_testing(
      [](const std::string&, const std::string&) { return Result<bool>::failure("state file: injected failure"); },
      nullptr);
  for (const json& change : kChanges) {
    const json reply = h->control().handle(change);
    EXPECT_EQ(reply["ok"], false) << change.dump();
    EXPECT_EQ(reply.value("error", ""), "state file: injected failure") << change.dump();
    EXPECT_TRUE(look(*h, state_) == before) << change["cmd"] << " changed something it refused";
  }
  // A "restart": a new control plane reading the same state file.
  h.reset();
  auto again = harness();
  ASSERT_TRUE(again->ok()) << again->error();
  EXPECT_EQ(again->control().handle({{"cmd", "jobs.list"}}), before.jobs);
}

TEST_F(ControlFaultsTest, AFailingSnapshotBuildRefusesTheChangeBeforeAnythingIsWritten) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  const Seen before = look(*h, state_);
  int writes = 0;
  h->control().set_io_for_testing(
      [&writes](const std::string& path, const std::string& text) {
        ++writes;
        return write_state_text(path, text);
      },
      [](const ConfigSpec&, const std::vector<RankedJob>&, const std::array<PortLive, kPortCount>&, uint32_t,
         const Snapshot*) { return Result<std::unique_ptr<Snapshot>>::failure("injected build failure"); });
  for (const json& change : kChanges) {
    // These two leave the order as it is (static policy; round-robin before
    // its first rotation ranks as the operator does): nothing to build.
    if (change["cmd"] == "progress" || change["cmd"] == "policy") continue;
    const json reply = h->control().handle(change);
    EXPECT_EQ(reply["ok"], false) << change.dump();
    EXPECT_TRUE(look(*h, state_) == before) << change["cmd"] << " changed something it refused";
  }
  EXPECT_EQ(writes, 0) << "the state file was written for a snapshot that could not be built";
  h.reset();
  auto again = harness();
  ASSERT_TRUE(again->ok()) << again->error();
  EXPECT_EQ(again->control().handle({{"cmd", "jobs.list"}}), before.jobs);
}

TEST_F(ControlFaultsTest, TheStateFileIsWrittenBeforeTheSnapshotIsPublished) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  PipelineHarness* hp = h.get();
  const uint32_t generation = hp->dataplane().snapshot().generation;
  uint32_t generation_at_write = 0;
  hp->control().set_io_for_testing(
      [&](const std::string& path, const std::string& text) {
        generation_at_write = hp->dataplane().snapshot().generation;
        return write_state_text(path, text);
      },
      nullptr);
  ASSERT_EQ(hp->control().handle(kChanges[0])["ok"], true);
  EXPECT_EQ(generation_at_write, generation);
  EXPECT_EQ(hp->dataplane().snapshot().generation, generation + 1);
  EXPECT_NE(slurp(state_).find("\"id\":9"), std::string::npos);
}

TEST_F(ControlFaultsTest, ClassAndShaperChangesSurviveARestartAndAReadWritesNothing) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  ASSERT_EQ(h->control().handle(kChanges[4])["ok"], true);
  ASSERT_EQ(h->control().handle(kChanges[5])["ok"], true);
  const Seen before = look(*h, state_);
  int writes = 0;
  h->control().set_io_for_testing(
      [&writes](const std::string&, const std::string&) {
        ++writes;
        return Result<bool>::failure("no write expected");
      },
      nullptr);
  const json read = h->control().handle({{"cmd", "class.set"}, {"port", "wire"}, {"class", 1}});
  EXPECT_EQ(read["ok"], true) << read.dump();
  EXPECT_EQ(read["result"]["cap"], "1Gbit/s");
  EXPECT_EQ(writes, 0);
  EXPECT_TRUE(look(*h, state_) == before);
  h.reset();
  auto again = harness();
  ASSERT_TRUE(again->ok()) << again->error();
  // The devices and socket differ between harnesses; the live settings must not.
  const json now = again->control().handle({{"cmd", "config"}})["result"];
  EXPECT_EQ(now["classes"], before.config["result"]["classes"]);
  EXPECT_EQ(now["shaper"], before.config["result"]["shaper"]);
  EXPECT_EQ(now["classes"]["1"]["wire"]["cap"], "1Gbit/s");
}

// The id of the job in the highest-priority class (the lowest number): the
// one on top.
uint32_t top_job(PipelineHarness& h) {
  uint32_t id = 0, best = UINT32_MAX;
  const json reply = h.control().handle({{"cmd", "jobs.list"}});
  for (const json& j : reply["result"]["jobs"]) {
    if (j["class"].get<uint32_t>() < best) best = j["class"].get<uint32_t>(), id = j["id"].get<uint32_t>();
  }
  return id;
}

// Round-robin's position survives a restart: the job on top stays on top
// for the rest of its turn. It did not: rotation started again from the
// first job, with a new interval, so a gateway restarted more often than the
// interval kept the first job on top for good.
TEST_F(ControlFaultsTest, RoundRobinsJobOnTopStaysOnTopAcrossARestart) {
  constexpr uint64_t kHourNs = 3'600'000'000'000;
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  const json set = h->control().handle({{"cmd", "policy"}, {"name", "round-robin"}, {"interval", "3600s"}});
  ASSERT_EQ(set["ok"], true) << set.dump();
  ASSERT_EQ(top_job(*h), 1u);
  // An hour on (the test's own clock): job 2's turn.
  h->control().tick(monotonic_ns() + kHourNs + 1'000'000'000);
  ASSERT_EQ(top_job(*h), 2u);
  EXPECT_NE(slurp(state_).find("\"policy_position\": {\"since_unix_ns\""), std::string::npos) << slurp(state_);
  h.reset();

  auto again = harness();
  ASSERT_TRUE(again->ok()) << again->error();
  EXPECT_EQ(top_job(*again), 2u) << "the restart put the first job back on top";
  // Its turn goes on, and ends: an hour later it is job 1's again.
  again->control().tick(monotonic_ns() + 1'000'000'000);
  EXPECT_EQ(top_job(*again), 2u);
  again->control().tick(monotonic_ns() + kHourNs + 1'000'000'000);
  EXPECT_EQ(top_job(*again), 1u);
  // A rotation now writes the file (the position); one that cannot (a full
  // disk) still rotates, and health says the file is behind.
  again->control().set_io_for_testing(
      [](const std::string&, const std::string&) { return Result<bool>::failure("No space left on device"); }, nullptr);
  again->control().tick(monotonic_ns() + 2 * kHourNs + 2'000'000'000);
  EXPECT_EQ(top_job(*again), 2u) << "a state file that cannot be written held the rotation back";
  EXPECT_EQ(again->control().handle({{"cmd", "health"}})["result"]["status"], "degraded");
}

// Round-robin under a second (tests and benches use 100-200 ms; rotate_on
// "iteration" rotates as often) keeps no position in the state file, so its
// rotations write nothing: they wrote the whole file (write, fsync, rename)
// on the control thread at each, up to ten times a second and more, and on
// a failing disk pushed the once-a-second retry back at each. An interval of
// a second or more keeps it (the test above).
TEST_F(ControlFaultsTest, RoundRobinUnderASecondDoesNotWriteTheStateFilePerRotation) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  for (const json& policy : {json{{"cmd", "policy"}, {"name", "round-robin"}, {"interval", "100ms"}},
                             json{{"cmd", "policy"}, {"name", "round-robin"}, {"rotate_on", "iteration"}}}) {
    unsigned writes = 0;
    h->control().set_io_for_testing(
        [&](const std::string& path, const std::string& text) {
          ++writes;
          return write_state_text(path, text);
        },
        nullptr);
    const json set = h->control().handle(policy);
    ASSERT_EQ(set["ok"], true) << set.dump();
    EXPECT_EQ(writes, 1u) << "the policy command writes the file once";
    writes = 0;
    if (policy.contains("interval")) {
      // Ten rotations, 150 ms apart on the control thread's clock.
      const uint64_t t0 = monotonic_ns();
      uint32_t last = top_job(*h);
      unsigned rotations = 0;
      for (unsigned k = 1; k <= 10; ++k) {
        h->control().tick(t0 + k * 150'000'000);
        if (top_job(*h) != last) ++rotations, last = top_job(*h);
      }
      EXPECT_GE(rotations, 5u) << "the round-robin did not rotate";
    } else {
      for (unsigned k = 1; k <= 10; ++k) h->control().tick(monotonic_ns() + k * 150'000'000);
    }
    EXPECT_EQ(writes, 0u) << policy.dump() << ": rotations wrote the state file";
    EXPECT_EQ(slurp(state_).find("policy_position"), std::string::npos) << slurp(state_);
  }
}

// A state file whose lock could not be taken at start (no space or inodes
// for the lock file): a second psgate on the same file would not be
// noticed, and the only trace was a warning on stderr at start, health ok.
TEST_F(ControlFaultsTest, AStateFileRunWithoutItsLockIsDegraded) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  ASSERT_EQ(h->control().handle({{"cmd", "health"}})["result"]["status"], "ok");
  h->control().note_state_unlocked("cannot lock x.lock (No space left on device)");
  const json health = h->control().handle({{"cmd", "health"}})["result"];
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_NE(health["state_file_error"].get<std::string>().find("restart psgate once it can be locked"),
            std::string::npos)
      << health.dump();
  // A change is still made and written: the lock guards against another
  // gateway, not the writes.
  EXPECT_EQ(h->control().handle(kChanges[4])["ok"], true);
}

// An exception in the control thread's periodic work (here a snapshot
// build that runs out of memory as a round-robin rotates) costs that step,
// not the gateway: the thread goes on serving the socket. It used to leave
// the thread, and std::terminate stopped forwarding.
TEST_F(ControlFaultsTest, AThrowInThePeriodicStepKeepsTheControlThreadServing) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  // The policy and the failing builder are set before the control thread
  // runs (set_io_for_testing is not for a running control thread); the
  // policy's first rotation, on that thread, builds.
  ASSERT_EQ(h->control().handle(json::parse(R"({"cmd":"policy","name":"round-robin","interval":"100ms"})"))["ok"],
            true);
  std::atomic<int> builds{0};
  h->control().set_io_for_testing(
      nullptr,
      [&builds](const ConfigSpec&, const std::vector<RankedJob>&, const std::array<PortLive, kPortCount>&, uint32_t,
                const Snapshot*) -> Result<std::unique_ptr<Snapshot>> {
        ++builds;
        throw std::bad_alloc();
      });
  const std::string socket = dir_.path("control.sock");
  auto ask = [&](const std::string& line) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket.c_str());
    std::string reply;
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      const std::string out = line + "\n";
      (void)!::write(fd, out.data(), out.size());
      timeval tv{2, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      char buf[4096];
      for (ssize_t n; reply.find('\n') == std::string::npos && (n = ::read(fd, buf, sizeof(buf))) > 0;)
        reply.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return reply.empty() ? json() : json::parse(reply, nullptr, false);
  };
  ControlServer::Options options;
  options.socket_path = socket;
  options.tick_ns = 10'000'000;
  auto server = ControlServer::start(h->control(), options);
  ASSERT_TRUE(server) << server.error();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (builds.load() < 3 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_GE(builds.load(), 3) << "the policy never tried to rotate";
  const json health = ask(R"({"cmd":"health"})");
  EXPECT_EQ(health.value("ok", false), true) << health.dump();
  server->reset();
}

// A server stopping removes its socket file only if it is still the one it
// bound: once it was removed (a cleaner, an operator) and another psgate
// bound the path, the stop removed the live one's socket and psgatectl
// found nothing. (The cleaner takes the socket's lock file too: while that
// is there, held, a second server refuses the path.)
TEST_F(ControlFaultsTest, AStoppingServerLeavesAnotherServersSocketAtItsPath) {
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  ControlServer::Options options;
  options.socket_path = dir_.path("shared.sock");
  options.tick_ns = 10'000'000;
  auto first = ControlServer::start(h->control(), options);
  ASSERT_TRUE(first) << first.error();
  ASSERT_EQ(::unlink(options.socket_path.c_str()), 0);
  auto refused = ControlServer::start(h->control(), options);
  ASSERT_FALSE(refused) << "a second server took a path whose lock the first holds";
  EXPECT_NE(refused.error().find("is in use by another process"), std::string::npos) << refused.error();
  ASSERT_EQ(::unlink((options.socket_path + ".lock").c_str()), 0);
  auto second = ControlServer::start(h->control(), options);
  ASSERT_TRUE(second) << second.error();
  struct stat before {};
  ASSERT_EQ(::stat(options.socket_path.c_str(), &before), 0);
  first->reset();
  struct stat after {};
  ASSERT_EQ(::stat(options.socket_path.c_str(), &after), 0) << "the first server's stop removed the second's socket";
  EXPECT_EQ(after.st_ino, before.st_ino);
  second->reset();
  EXPECT_NE(::access(options.socket_path.c_str(), F_OK), 0) << "the second server left its own socket behind";
}

// A start without a state file that finds rules files (the state file
// deleted or lost, or a backup restored rules directory first) moves them
// aside, whole, before it writes its own: they were all that was left of
// those jobs' rules, and the start used to delete them, or write its own
// jobs' rules over the ones of the same name.
TEST_F(ControlFaultsTest, AStartWithoutAStateFileSetsTheRulesFilesItFindsAside) {
  const std::string rules = state_ + ".rules";
  ASSERT_TRUE(std::filesystem::create_directory(rules));
  const std::string kept = R"({"job": 1, "match": ["dst=10.9.9.9/32,dport=1,proto=udp"]})";
  std::ofstream(rules + "/" + rules_file_name(1, 0)) << kept;  // the name this start gives job 1's
  std::ofstream(rules + "/" + rules_file_name(7, 3)) << "{}";
  {
    auto h = harness();
    ASSERT_TRUE(h->ok()) << h->error();
  }
  std::vector<std::filesystem::path> aside;
  for (const auto& e : std::filesystem::directory_iterator(rules))
    if (e.is_directory()) aside.push_back(e.path());
  ASSERT_EQ(aside.size(), 1u) << "one directory of the files no state named";
  EXPECT_EQ(aside[0].filename().string().rfind("unnamed-", 0), 0u) << aside[0];
  EXPECT_EQ(slurp((aside[0] / rules_file_name(1, 0)).string()), kept);
  EXPECT_EQ(slurp((aside[0] / rules_file_name(7, 3)).string()), "{}");
  EXPECT_FALSE(std::filesystem::exists(rules + "/" + rules_file_name(7, 3)));
  // A start from the state file now written leaves that directory alone.
  auto h = harness();
  ASSERT_TRUE(h->ok()) << h->error();
  EXPECT_EQ(h->control().job_count(), 2u);
  EXPECT_EQ(slurp((aside[0] / rules_file_name(1, 0)).string()), kept);
}

}  // namespace
}  // namespace psgate::testing
