// SPDX-License-Identifier: BSD-3-Clause
// All-or-nothing changes against the real daemon: a change the state file
// cannot take (read-only or full filesystem) is refused and changes nothing,
// in memory, in the data plane or on disk, before and after a restart; a
// state path that is a directory is refused at start; SIGKILL in a stream of
// changes leaves on disk the last change acknowledged (or the one in flight).
// The filesystem cases mount a small tmpfs and need root: they skip without.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "daemon_runner.h"
#include "packet_builder.h"

namespace psgate::testing {
namespace {

using json = nlohmann::json;

std::string atomic_config(const DaemonFixture& fx, const std::string& state) {
  const std::string prefix = "psgate-st-" + std::to_string(getpid()) + "-" + fx.dir().substr(fx.dir().size() - 6);
  return "[eal]\nargs = [\"--no-huge\", \"-m\", \"256\", \"--no-pci\", \"--file-prefix=" + prefix +
         "\", \"--log-level=3\"]\n"
         "[ports.wire]\ndevice = \"net_pcap0,rx_pcap=wire-in.pcap\"\n"
         "[ports.host]\ndevice = \"net_pcap1,rx_pcap=host-in.pcap\"\n"
         "[lcores]\nmain = 0\ndata = [1]\n"
         "[dataplane]\nmbufs = 8191\nmax_jobs = 64\n[stats]\ninterval = \"0s\"\n"
         "[control]\nsocket = \"ctl.sock\"\nstate = \"" +
         state +
         "\"\n"
         "[[jobs]]\nid = 1\nname = \"one\"\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=2222,proto=tcp\"]\n"
         "[[jobs]]\nid = 2\nname = \"two\"\nrank = 1\nmatch = [\"src=10.0.0.5/32,sport=2223,proto=tcp\"]\n";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class StateTest : public ::testing::Test {
 protected:
  void write_setup(const std::string& state) {
    pkt::PacketSpec s;
    s.src4 = {10, 0, 0, 5};
    s.proto = pkt::kTcp;
    s.sport = 2222;
    fx.write_pcap("host-in.pcap", {pkt::build_packet(s)});
    fx.write_pcap("wire-in.pcap", {});
    fx.write_file("psgate.toml", atomic_config(fx, state));
  }
  bool start() {
    fx.start_daemon("psgate.toml");
    return fx.wait_until_serving();
  }
  CtlResult ctl(std::vector<std::string> args) const { return psgatectl_at(fx.path("ctl.sock"), std::move(args)); }
  json ctl_json(std::vector<std::string> args) const { return psgatectl_json(fx.path("ctl.sock"), std::move(args)); }
  std::set<uint32_t> job_ids() const {
    std::set<uint32_t> ids;
    const json list = ctl_json({"jobs", "list"});  // named: a temporary would die before the loop runs
    for (const json& j : list["jobs"]) ids.insert(j["id"].get<uint32_t>());
    return ids;
  }

  // What an operator and the data plane see, and what a restart would read.
  struct Seen {
    json jobs;         // rank order, and each job's class in the published snapshot
    json config;       // classes, shapers, policy in force
    json generation;   // the published snapshot's
    std::string file;  // the state file (it names the rules files)
    bool operator==(const Seen&) const = default;
  };
  Seen look(const std::string& state_file) const {
    return Seen{ctl_json({"jobs", "list"}), ctl_json({"config"}), ctl_json({"stats"})["generation"], slurp(state_file)};
  }

  DaemonFixture fx;
};

// Every change command, each of which the state file must take.
const std::vector<std::vector<std::string>> kChanges = {
    {"rank", "2", "0"},
    {"order", "2", "1"},
    {"jobs", "rm", "1"},
    {"jobs", "add", "9", "--match", "dst=10.0.0.9/32,dport=9,proto=tcp"},
    {"class", "wire", "1", "--cap", "1Gbit/s"},
    {"class", "host", "0", "--floor", "10Mbit/s", "--dscp", "46"},
    {"shaper", "wire", "1Gbit/s"},
    {"policy", "round-robin"},
    {"progress", "1", "0.5"},
};

// A small tmpfs at <dir>/state; skips the test without root.
class TmpfsStateTest : public StateTest {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a tmpfs";
    mnt_ = fx.path("state");
    ASSERT_EQ(::mkdir(mnt_.c_str(), 0755), 0);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=64k") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs: " << std::strerror(errno);
    mounted_ = true;
    write_setup("state/state.json");
  }
  void TearDown() override {
    if (fx.daemon_running()) fx.stop_daemon();
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
  bool remount(bool read_only) {
    return ::mount(nullptr, mnt_.c_str(), nullptr, MS_REMOUNT | (read_only ? MS_RDONLY : 0), "size=64k") == 0;
  }
  std::string state_file() const { return mnt_ + "/state.json"; }

  std::string mnt_;
  bool mounted_ = false;
};

TEST_F(TmpfsStateTest, AReadOnlyStateDirectoryRefusesEveryChangeAndChangesNothing) {
  ASSERT_TRUE(start());
  ASSERT_EQ(ctl({"jobs", "add", "7", "--match", "dst=10.0.0.7/32,dport=7,proto=tcp"}).status, 0);
  const Seen before = look(state_file());
  ASSERT_NE(before.file.find("\"id\":7"), std::string::npos) << before.file;
  ASSERT_TRUE(remount(true)) << std::strerror(errno);

  for (const auto& change : kChanges) {
    const CtlResult r = ctl(change);
    EXPECT_EQ(r.status, 1) << change[0] << ": " << r.out << r.err;
    // The state file, or a rules file a job change writes before it.
    EXPECT_TRUE(r.err.find("state file") != std::string::npos || r.err.find("rules file") != std::string::npos)
        << change[0] << ": " << r.err;
    EXPECT_TRUE(look(state_file()) == before) << change[0] << " changed something it refused";
  }
  // Reads still answer, and write nothing.
  EXPECT_EQ(ctl({"class", "wire", "1"}).status, 0);
  EXPECT_EQ(ctl({"policy"}).status, 0);
  EXPECT_TRUE(look(state_file()) == before);
  // Health says the next change would be refused too, and why.
  const json refused = ctl_json({"health"});
  EXPECT_EQ(refused["status"], "degraded") << refused.dump();
  EXPECT_NE(refused.value("state_file_error", std::string()).find("Read-only"), std::string::npos) << refused.dump();
  ASSERT_EQ(fx.stop_daemon().exit_status, 0);

  // A start with the directory still read-only (a filesystem remounted
  // read-only after errors, at boot) forwards on what was acknowledged before
  // the refusals, and still refuses changes: a disk condition, not a
  // configuration error, must not keep the wire down.
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2, 7}));
  EXPECT_EQ(ctl({"jobs", "add", "8", "--match", "dst=10.0.0.8/32,dport=8,proto=tcp"}).status, 1);
  const Seen read_only = look(state_file());
  EXPECT_EQ(read_only.jobs, before.jobs);
  EXPECT_EQ(read_only.file, before.file);
  // Health says why changes are refused, not "ok"; writable again, the
  // retry clears it without a restart.
  json health = ctl_json({"health"});
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_NE(health.value("state_file_error", std::string()).find("Read-only"), std::string::npos) << health.dump();
  ASSERT_TRUE(remount(false)) << std::strerror(errno);
  for (int i = 0; i < 50 && ctl_json({"health"})["status"] != "ok"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ctl_json({"health"})["status"], "ok");
  EXPECT_EQ(slurp(state_file()), before.file);
  ASSERT_EQ(fx.stop_daemon().exit_status, 0);

  // After a restart on a writable disk: exactly what was acknowledged before
  // the refusals, and changes go through again.
  ASSERT_TRUE(start());
  const Seen after = look(state_file());
  EXPECT_EQ(after.jobs, before.jobs);
  EXPECT_EQ(after.config, before.config);
  EXPECT_EQ(ctl({"jobs", "add", "8", "--match", "dst=10.0.0.8/32,dport=8,proto=tcp"}).status, 0);
}

// A policy's re-ranks change nothing the state file holds: while the file
// of the state in force cannot be written (here a read-only disk at start),
// they are applied at the policy's pace, not refused and counted as errors
// at every tick until the once-a-second retry publishes one.
TEST_F(TmpfsStateTest, PolicyReranksGoOnWhileTheStateFileIsUnwritten) {
  ASSERT_TRUE(start());
  ASSERT_EQ(ctl({"policy", "round-robin", "--interval", "200ms"}).status, 0);
  ASSERT_EQ(fx.stop_daemon().exit_status, 0);
  ASSERT_TRUE(remount(true)) << std::strerror(errno);
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  ASSERT_EQ(ctl_json({"health"})["status"], "degraded");
  std::set<std::string> orders;
  for (int i = 0; i < 15; ++i) {
    std::string order;
    const json list = ctl_json({"jobs", "list"});  // named: a temporary would die before the loop runs
    for (const json& j : list["jobs"]) order += std::to_string(j["class"].get<int>()) + ",";
    orders.insert(order);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(orders.size(), 2u) << "round-robin never rotated";
  EXPECT_EQ(ctl_json({"health"})["policy_errors"], 0) << ctl_json({"health"}).dump();
}

// A read-only directory that holds no state file yet never held one: a path
// in a read-only place (the unit's ProtectSystem= makes /etc read-only), a
// configuration error, refused at start and by --check, exit 2; --check
// warns and passes where a state file is there to read.
TEST_F(TmpfsStateTest, AReadOnlyDirectoryWithoutAStateFileIsRefusedAndWithOneOnlyWarned) {
  ASSERT_TRUE(remount(true)) << std::strerror(errno);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--check"}, {"--duration", "1"}}) {
    const DaemonRun run = fx.run("psgate.toml", args, 30);
    EXPECT_EQ(run.exit_status, 2) << args[0] << ": " << run.output;
    EXPECT_NE(run.output.find("holds no state file yet"), std::string::npos) << run.output;
  }
  ASSERT_TRUE(remount(false)) << std::strerror(errno);
  ASSERT_TRUE(start());
  ASSERT_EQ(fx.stop_daemon().exit_status, 0);
  ASSERT_TRUE(remount(true)) << std::strerror(errno);
  const DaemonRun check = fx.run("psgate.toml", {"--check"}, 30);
  EXPECT_EQ(check.exit_status, 0) << check.output;
  EXPECT_NE(check.output.find("read-only filesystem"), std::string::npos) << check.output;
}

TEST_F(TmpfsStateTest, AFullFilesystemRefusesTheChangeAndKeepsTheOldStateFile) {
  ASSERT_TRUE(start());
  ASSERT_EQ(ctl({"jobs", "add", "7", "--match", "dst=10.0.0.7/32,dport=7,proto=tcp"}).status, 0);
  // Fill what is left of the tmpfs.
  {
    std::ofstream fill(mnt_ + "/filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill; ++i) fill.write(block.data(), block.size()), fill.flush();
  }
  const Seen before = look(state_file());
  for (const auto& change : kChanges) {
    const CtlResult r = ctl(change);
    EXPECT_EQ(r.status, 1) << change[0] << ": " << r.out << r.err;
    EXPECT_TRUE(look(state_file()) == before) << change[0] << " changed something it refused";
  }
  // No partial temporary was left to hold the space.
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(state_file()).parent_path()))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path() << " left behind";
  // The gateway forwards on the state in force, but the next change would
  // be refused too: health says so, with the reason, until a write works.
  json health = ctl_json({"health"});
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_NE(health.value("state_file_error", std::string()).find("No space"), std::string::npos) << health.dump();
  // With space again health is ok within the second's retry, before any
  // change; the same change goes through, and a restart keeps it.
  ASSERT_EQ(::unlink((mnt_ + "/filler").c_str()), 0);
  for (int i = 0; i < 50 && ctl_json({"health"})["status"] != "ok"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  health = ctl_json({"health"});
  EXPECT_EQ(health["status"], "ok") << health.dump();
  EXPECT_EQ(health["state_file_error"], "") << health.dump();
  EXPECT_TRUE(look(state_file()) == before) << "the retry wrote another state than the one in force";
  ASSERT_EQ(ctl({"jobs", "add", "8", "--match", "dst=10.0.0.8/32,dport=8,proto=tcp"}).status, 0);
  const DaemonRun run = fx.stop_daemon();
  ASSERT_EQ(run.exit_status, 0) << run.output;
  ASSERT_TRUE(start());
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2, 7, 8}));
}

// A policy's re-ranks after a refused change write nothing (the file holds
// the policy, not its order): they must not clear the refusal from health,
// which only a write that happened may do.
TEST_F(TmpfsStateTest, AChangeRefusedOnAFullDiskKeepsHealthDegradedThroughPolicyReranks) {
  ASSERT_TRUE(start());
  ASSERT_EQ(ctl({"policy", "round-robin", "--interval", "100ms"}).status, 0);
  {
    std::ofstream fill(mnt_ + "/filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && fill; ++i) fill.write(block.data(), block.size()), fill.flush();
  }
  ASSERT_EQ(ctl({"jobs", "add", "7", "--match", "dst=10.0.0.7/32,dport=7,proto=tcp"}).status, 1);
  std::set<std::string> orders;
  for (int i = 0; i < 15; ++i) {  // 1.5 s: about 15 re-ranks, and the retry refused again
    std::string order;
    const json list = ctl_json({"jobs", "list"});
    for (const json& j : list["jobs"]) order += std::to_string(j["class"].get<int>()) + ",";
    orders.insert(order);
    const json health = ctl_json({"health"});
    EXPECT_EQ(health["status"], "degraded") << "after " << i * 100 << " ms: " << health.dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_GE(orders.size(), 2u) << "round-robin never rotated: the test saw no re-rank";
  ASSERT_EQ(::unlink((mnt_ + "/filler").c_str()), 0);
  for (int i = 0; i < 50 && ctl_json({"health"})["status"] != "ok"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ctl_json({"health"})["status"], "ok") << ctl_json({"health"}).dump();
}

// A disk that is full when the gateway starts (at boot, say) must not keep
// the wire down: the state it read (state file or config) is published, and
// the file is written once there is room. An unchanged state file is not
// rewritten at a start at all.
TEST_F(TmpfsStateTest, AFullFilesystemAtStartStillForwardsAndTheFileIsWrittenOnceThereIsRoom) {
  auto fill = [this] {
    std::ofstream out(mnt_ + "/filler", std::ios::binary);
    const std::string block(4096, 'x');
    for (int i = 0; i < 64 && out; ++i) out.write(block.data(), block.size()), out.flush();
  };
  // A first start (the config's jobs, no file yet) on a full disk.
  fill();
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2}));
  json health = ctl_json({"health"});
  EXPECT_EQ(health["status"], "degraded") << health.dump();
  EXPECT_NE(health.value("state_file_error", std::string()), "") << health.dump();
  struct stat st {};
  EXPECT_NE(::stat(state_file().c_str(), &st), 0) << "a state file was written on a full disk?";
  // Changes are still refused while nothing can be written.
  EXPECT_EQ(ctl({"jobs", "add", "7", "--match", "dst=10.0.0.7/32,dport=7,proto=tcp"}).status, 1);
  // Room again: the retry writes the file within a few seconds.
  ASSERT_EQ(::unlink((mnt_ + "/filler").c_str()), 0);
  for (int i = 0; i < 50 && ctl_json({"health"})["status"] != "ok"; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  health = ctl_json({"health"});
  EXPECT_EQ(health["status"], "ok") << health.dump();
  ASSERT_EQ(::stat(state_file().c_str(), &st), 0);
  EXPECT_NE(slurp(state_file()).find("\"id\":2"), std::string::npos) << slurp(state_file());
  ASSERT_EQ(fx.stop_daemon().exit_status, 0);

  // A restart on a full disk with the state file in place: nothing to
  // write, a healthy start on the state the file holds.
  const std::string file_before = slurp(state_file());
  fill();
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(ctl_json({"health"})["status"], "ok");
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2}));
  EXPECT_EQ(slurp(state_file()), file_before);
}

// A state path that is a symbolic link: refused at start, dangling or not (a
// dangling one, a disk not mounted yet, would have looked like a first start).
TEST_F(StateTest, AStatePathThatIsASymbolicLinkIsRefused) {
  write_setup("state.json");
  ASSERT_EQ(::symlink("elsewhere/state.json", fx.path("state.json").c_str()), 0);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--check"}, {"--duration", "1"}}) {
    const DaemonRun run = fx.run("psgate.toml", args, 30);
    EXPECT_EQ(run.exit_status, 2) << args[0] << ": " << run.output;
    EXPECT_NE(run.output.find("symbolic link"), std::string::npos) << run.output;
  }
}

TEST_F(StateTest, AStatePathThatIsADirectoryIsAClearErrorWithExitTwo) {
  write_setup("statedir");
  ASSERT_EQ(::mkdir(fx.path("statedir").c_str(), 0755), 0);
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--check"}, {"--duration", "1"}}) {
    const DaemonRun run = fx.run("psgate.toml", args, 30);
    EXPECT_EQ(run.exit_status, 2) << args[0] << ": " << run.output;
    EXPECT_NE(run.output.find("is a directory"), std::string::npos) << run.output;
  }
}

// A second psgate on a live one's state file (another --file-prefix, and
// devices that open twice) or control socket stops before it starts DPDK:
// it used to write its own view over the live one's state file, and delete
// rules files only the live one names, before it found the socket taken.
TEST_F(StateTest, ASecondGatewayOnTheSameStateOrSocketChangesNothing) {
  write_setup("state.json");
  ASSERT_TRUE(start());
  ASSERT_EQ(ctl({"policy", "fifo"}).status, 0);
  ASSERT_EQ(ctl({"jobs", "add", "9", "--match", "dst=10.0.0.9/32,dport=9,proto=tcp"}).status, 0);
  const Seen before = look(fx.path("state.json"));
  const std::string config = slurp(fx.path("psgate.toml"));
  auto variant = [&](const std::string& name, const std::string& socket, const std::string& state) {
    std::string c = config;
    c.replace(c.find("--file-prefix=psgate-st-"), 24, "--file-prefix=psgate-s2-");
    c.replace(c.find("\"ctl.sock\""), 10, "\"" + socket + "\"");
    c.replace(c.find("\"state.json\""), 12, "\"" + state + "\"");
    // Its own policy: the merge a start makes would write it into the file.
    fx.write_file(name, c + "[policy]\nname = \"round-robin\"\n");
  };
  variant("same-state.toml", "ctl2.sock", "state.json");
  const DaemonRun same_state = fx.run("same-state.toml", {"--duration", "1"}, 30);
  EXPECT_EQ(same_state.exit_status, 1) << same_state.output;
  EXPECT_NE(same_state.output.find("is in use by another psgate (pid"), std::string::npos) << same_state.output;
  variant("same-socket.toml", "ctl.sock", "other.json");
  const DaemonRun same_socket = fx.run("same-socket.toml", {"--duration", "1"}, 30);
  EXPECT_EQ(same_socket.exit_status, 1) << same_socket.output;
  EXPECT_NE(same_socket.output.find("control socket ctl.sock is in use"), std::string::npos) << same_socket.output;
  EXPECT_FALSE(std::filesystem::exists(fx.path("other.json")));
  // The live one: the same state in force and on disk, and its rules files.
  EXPECT_EQ(look(fx.path("state.json")), before);
  EXPECT_EQ(ctl_json({"policy"})["policy"]["name"], "fifo");
  // Once it is gone, the same state file is free again.
  fx.stop_daemon();
  const DaemonRun after = fx.run("same-state.toml", {"--duration", "1"}, 30);
  EXPECT_EQ(after.exit_status, 0) << after.output;
}

// The same where the state's directory did not exist yet (it is made at the
// first write): the lock was skipped there, so two gateways ran on one
// state file. And a lock path that is no regular file is refused.
TEST_F(StateTest, TheLockHoldsInAStateDirectoryNotMadeYet) {
  write_setup("fresh/state.json");
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  std::string c = slurp(fx.path("psgate.toml"));
  c.replace(c.find("--file-prefix=psgate-st-"), 24, "--file-prefix=psgate-s3-");
  c.replace(c.find("\"ctl.sock\""), 10, "\"ctl3.sock\"");
  fx.write_file("second.toml", c);
  const DaemonRun second = fx.run("second.toml", {"--duration", "1"}, 30);
  EXPECT_EQ(second.exit_status, 1) << second.output;
  EXPECT_NE(second.output.find("is in use by another psgate"), std::string::npos) << second.output;
  fx.stop_daemon();
  ASSERT_EQ(::unlink(fx.path("fresh/state.json.lock").c_str()), 0);
  ASSERT_EQ(::mkdir(fx.path("fresh/state.json.lock").c_str(), 0700), 0);
  const DaemonRun blocked = fx.run("psgate.toml", {"--duration", "1"}, 30);
  EXPECT_EQ(blocked.exit_status, 2) << blocked.output;  // stays until moved: no restart loop
  EXPECT_NE(blocked.output.find("state.json.lock"), std::string::npos) << blocked.output;
}

// The state directory removed while psgate runs (an operator's rm -rf):
// the next change wrote a state file naming rules files that were gone,
// health said ok, and the next start refused the file, every job lost.
// The rules files are written again with the next change; a restart has
// every job.
TEST_F(StateTest, AStateDirectoryRemovedWhileRunningIsWrittenWholeAgain) {
  write_setup("st/state.json");
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  ASSERT_EQ(ctl({"jobs", "add", "3", "-m", "dst=10.0.0.3/32"}).status, 0);
  // Gone at once, then removed: removed in place, the gateway's own repair
  // (about every second, StateFilesRemovedWhileRunningAreWrittenAgainUnasked)
  // could write into it between remove_all's steps, which then threw
  // "Directory not empty" (once in CI).
  std::filesystem::rename(fx.path("st"), fx.path("st.gone"));
  std::filesystem::remove_all(fx.path("st.gone"));
  ASSERT_EQ(ctl({"rank", "3", "0"}).status, 0);
  const DaemonRun stopped = fx.stop_daemon();
  EXPECT_EQ(stopped.exit_status, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("was removed or replaced while psgate ran"), std::string::npos) << stopped.output;
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2, 3}));
  const json jobs = ctl_json({"jobs", "list"})["jobs"];
  for (const json& j : jobs) {
    if (j["id"] == 3) {
      EXPECT_EQ(j["rank"], 0) << "the rank given after the removal was lost: " << jobs.dump();
    }
  }
  EXPECT_EQ(fx.stop_daemon().exit_status, 0);
}

// The state file, a rules file, or the whole state directory removed while
// psgate runs, and no change after it: nothing was noticed until the next
// change, so a restart before one started from the config's jobs (the job
// added since lost) or refused the state file (a rules file it names gone).
// Within about a second the gateway writes what is gone again.
TEST_F(StateTest, StateFilesRemovedWhileRunningAreWrittenAgainUnasked) {
  write_setup("st/state.json");
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  ASSERT_EQ(ctl({"jobs", "add", "3", "-m", "dst=10.0.0.3/32"}).status, 0);
  const std::string rules = fx.path("st/state.json.rules");
  auto rules_files = [&] {
    std::set<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(rules, ec)) names.insert(e.path().filename());
    return names;
  };
  auto eventually = [](auto&& done) {
    for (int i = 0; i < 50 && !done(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return done();
  };
  const size_t files = rules_files().size();
  ASSERT_EQ(files, 3u);
  // Whole and settled: the state file names exactly the rules files there.
  // A repair writes the rules files first, then the state file naming them
  // (a temporary file renamed over it): with the rules files back alone, the
  // state file is the old one, naming a file that is gone, and its new one
  // is still to come. A state file removed then was put back by that
  // rename, which is right (the daemon's own write, the file whole), but
  // left nothing for the daemon to notice or say; the removal below must
  // come after the daemon's writes.
  auto whole = [&] {
    const json state = json::parse(slurp(fx.path("st/state.json")), nullptr, /*allow_exceptions=*/false);
    if (!state.is_object() || !state.contains("jobs") || !state["jobs"].is_array()) return false;
    std::set<std::string> named;
    for (const json& j : state["jobs"])
      if (j.contains("rules") && j["rules"].is_string()) named.insert(j["rules"].get<std::string>());
    return named.size() == files && named == rules_files();
  };
  // One rules file.
  std::filesystem::remove(rules + "/" + *rules_files().begin());
  EXPECT_TRUE(eventually(whole)) << "a removed rules file was not written again";
  // The state file.
  std::filesystem::remove(fx.path("st/state.json"));
  EXPECT_TRUE(eventually(whole)) << "a removed state file was not written again";
  // Everything.
  std::filesystem::remove_all(fx.path("st"));
  EXPECT_TRUE(eventually(whole)) << "a removed state directory was not written again";
  EXPECT_EQ(ctl_json({"health"})["status"], "ok");
  const DaemonRun stopped = fx.stop_daemon();
  EXPECT_EQ(stopped.exit_status, 0) << stopped.output;
  EXPECT_NE(stopped.output.find("rules files under"), std::string::npos) << stopped.output;
  EXPECT_NE(stopped.output.find("was removed while psgate ran: written again"), std::string::npos) << stopped.output;
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 2, 3}));
  EXPECT_EQ(fx.stop_daemon().exit_status, 0);
}

// A start that fails once its state file is written (here the metrics port
// is taken) served nobody: the file it wrote from the config goes again, so
// that the next start takes the config's [[jobs]], edited meanwhile, rather
// than that file's copy of the old ones.
TEST_F(StateTest, AStartThatFailsLeavesNoStateFileOfItsOwn) {
  write_setup("state.json");
  const int taken = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(taken, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(::bind(taken, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(taken, 1), 0);
  ASSERT_EQ(::getsockname(taken, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string metrics = "[metrics]\nlisten = \"127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "\"\n";
  std::string config = atomic_config(fx, "state.json") + metrics;
  fx.write_file("psgate.toml", config);
  const DaemonRun failed = fx.run("psgate.toml", {}, 60);
  ::close(taken);
  ASSERT_EQ(failed.exit_status, 1) << failed.output;
  EXPECT_NE(failed.output.find("metrics"), std::string::npos) << failed.output;
  EXPECT_FALSE(std::filesystem::exists(fx.path("state.json"))) << failed.output;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(fx.path("state.json.rules"), ec)) {
    ADD_FAILURE() << entry.path() << " left behind";
  }

  // The operator fixes the port and edits a job: the next start runs it.
  config.replace(config.find("id = 2\nname = \"two\""), 19, "id = 7\nname = \"new\"");
  fx.write_file("psgate.toml", config.substr(0, config.find("[metrics]")));
  ASSERT_TRUE(start()) << fx.stop_daemon().output;
  EXPECT_EQ(job_ids(), (std::set<uint32_t>{1, 7}));
  EXPECT_EQ(fx.stop_daemon().exit_status, 0);
}

// A job whose rules file was written but whose state file could not be (a
// file-size limit lets the small rules file through and not the state file,
// as a disk that fills between the two would) is refused, and its rules file
// goes with it: no state file will ever name it. Such files used to pile up
// in STATE.rules/ until the next start.
TEST_F(StateTest, ARefusedAddLeavesNoRulesFileBehind) {
  write_setup("state.json");
  ASSERT_TRUE(start());
  ASSERT_GT(slurp(fx.path("state.json")).size(), 400u);
  rlimit was{};
  ASSERT_EQ(prlimit(fx.daemon_pid(), RLIMIT_FSIZE, nullptr, &was), 0) << std::strerror(errno);
  const rlimit small{400, was.rlim_max};  // the soft limit only: raising it back needs no privilege
  ASSERT_EQ(prlimit(fx.daemon_pid(), RLIMIT_FSIZE, &small, nullptr), 0) << std::strerror(errno);
  for (const char* id : {"5", "6", "7"}) {
    const CtlResult r = ctl({"jobs", "add", id, "--match", std::string("dst=10.0.0.") + id + "/32"});
    EXPECT_NE(r.status, 0) << id << " was acknowledged without its state file";
  }
  ASSERT_EQ(prlimit(fx.daemon_pid(), RLIMIT_FSIZE, &was, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(ctl({"jobs", "add", "8", "--match", "dst=10.0.0.8/32"}).status, 0);
  const std::string state = slurp(fx.path("state.json"));
  unsigned files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fx.path("state.json.rules"))) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("job-", 0) != 0) continue;
    ++files;
    EXPECT_NE(state.find(name), std::string::npos) << name << " is named by no state file";
  }
  EXPECT_GE(files, 1u) << "no rules file at all: the test looked in the wrong place";
}

// SIGKILL at a random moment in a stream of adds, removes and re-ranks
// (rules files, then the state file that names them): after the restart the jobs
// and their ranks are those of the last acknowledged change, or of the one in
// flight (sent, reply not received) — never anything else.
TEST_F(StateTest, SigkillDuringAStreamOfChangesKeepsTheLastAcknowledgedState) {
  write_setup("state.json");
  std::mt19937 rng(12);
  std::map<uint32_t, uint32_t> model = {{1, 0}, {2, 1}};  // job -> rank
  auto jobs_and_ranks = [this] {
    std::map<uint32_t, uint32_t> seen;
    const json list = ctl_json({"jobs", "list"});
    for (const json& j : list["jobs"]) seen[j["id"].get<uint32_t>()] = j["rank"].get<uint32_t>();
    return seen;
  };
  uint32_t next_id = 10;
  for (int round = 0; round < 4; ++round) {
    ASSERT_TRUE(start()) << "round " << round;
    ASSERT_EQ(jobs_and_ranks(), model) << "round " << round;
    const pid_t pid = fx.daemon_pid();
    const int delay_ms = std::uniform_int_distribution<int>(50, 600)(rng);
    std::thread killer([pid, delay_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      ::kill(pid, SIGKILL);
    });
    std::map<uint32_t, uint32_t> pending = model;
    for (int i = 0; i < 500; ++i) {
      pending = model;
      CtlResult r;
      if (i % 4 == 2 && model.size() > 2) {
        const uint32_t victim = model.rbegin()->first;
        pending.erase(victim);
        r = ctl({"jobs", "rm", std::to_string(victim)});
      } else if (i % 4 == 3) {
        auto it = std::next(model.begin(), static_cast<long>(rng() % model.size()));
        const uint32_t rank = rng() % 50;
        pending[it->first] = rank;
        r = ctl({"rank", std::to_string(it->first), std::to_string(rank)});
      } else {
        const uint32_t id = next_id++;
        uint32_t last = 0;
        for (const auto& [job, rank] : model) last = std::max(last, rank);
        pending[id] = last + 1;  // a job added without a rank goes last
        r = ctl({"jobs", "add", std::to_string(id), "--match",
                 "dst=10.1." + std::to_string(id / 256) + "." + std::to_string(id % 256) + "/32,proto=udp"});
      }
      if (r.status != 0) break;  // the daemon is gone: this change was in flight
      model = pending;
    }
    killer.join();
    fx.stop_daemon();
    ASSERT_TRUE(start()) << "round " << round;
    const std::map<uint32_t, uint32_t> seen = jobs_and_ranks();
    EXPECT_TRUE(seen == model || seen == pending) << "round " << round;
    model = seen;
    ASSERT_EQ(fx.stop_daemon().exit_status, 0);
  }
}

}  // namespace
}  // namespace psgate::testing
