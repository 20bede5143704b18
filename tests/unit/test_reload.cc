// SPDX-License-Identifier: BSD-3-Clause
// plan_reload: what a reload applies in place (only what changed in the file
// since it was last read) and which keys it names as needing a restart
// (compared with what is running).
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

#include "config/reload.h"

namespace psgate {
namespace {

ConfigSpec parse(const std::string& extra, const std::string& data = "[1]") {
  const std::string text = extra +
                           "\n[ports.wire]\ndevice = \"net_null0\"\n[ports.host]\ndevice = \"net_null1\"\n"
                           "[lcores]\ndata = " +
                           data + "\n";
  auto c = parse_config(text, "t.toml");
  EXPECT_TRUE(c.ok()) << c.error();
  return c.ok() ? *c : ConfigSpec{};
}

TEST(Reload, AnUnchangedFileChangesNothing) {
  const ConfigSpec c = parse("[classes.3]\ncap = \"1Gbit/s\"\n[policy]\nname = \"fifo\"\n");
  EXPECT_TRUE(plan_reload(c, c, c).changes_nothing());
}

TEST(Reload, ClassesAndShapersChangedInTheFileAreAppliedPerPort) {
  const ConfigSpec was = parse("[classes.3]\ncap = \"1Gbit/s\"\n");
  const ConfigSpec now = parse(
      "[classes.3]\ncap = \"1Gbit/s\"\n[classes.3.host]\ncap = \"2Gbit/s\"\n[classes.5]\ndscp = 10\n"
      "[shaper.wire]\nrate = \"5Gbit/s\"\nburst = \"1MiB\"\n");
  const ReloadPlan p = plan_reload(was, was, now);
  using PC = std::pair<unsigned, unsigned>;
  EXPECT_EQ(p.classes, (std::vector<PC>{{0, 5}, {1, 3}, {1, 5}}));
  EXPECT_EQ(p.shapers, std::vector<unsigned>{0});
  EXPECT_FALSE(p.policy);
  EXPECT_TRUE(p.restart_needed.empty());
}

TEST(Reload, ACapBurstOrFloorOrEcnChangeIsAClassChange) {
  const ConfigSpec was = parse("[classes.2]\ncap = \"1Gbit/s\"\n");
  for (const char* edit : {"[classes.2]\ncap = \"1Gbit/s\"\ncap_burst = \"1MiB\"\n",
                           "[classes.2]\ncap = \"1Gbit/s\"\nfloor = \"1Mbit/s\"\n",
                           "[classes.2]\ncap = \"1Gbit/s\"\necn_threshold = 10\n"}) {
    SCOPED_TRACE(edit);
    EXPECT_EQ(plan_reload(was, was, parse(edit)).classes.size(), 2u);
  }
}

TEST(Reload, StartTimeKeysAreNamedAsNeedingARestart) {
  const ConfigSpec was = parse("");
  const ConfigSpec now = parse(
      "[eal]\nargs = [\"--no-huge\"]\n[dataplane]\nburst = 16\nmbufs = 4095\n[stats]\ninterval = \"2s\"\n"
      "[control]\nsocket = \"/tmp/x.sock\"\n[classes.1]\ndepth = 64\n[shaper.wire]\noverhead = \"20B\"\n",
      "[0, 1]\nmode = \"pipelined\"");
  const ReloadPlan p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed, (std::vector<std::string>{"eal.args", "shaper.wire.overhead", "lcores.data",
                                                        "lcores.mode", "dataplane.burst", "dataplane.mbufs",
                                                        "stats.interval", "control.socket", "classes.1.depth"}));
  EXPECT_TRUE(p.classes.empty());  // a depth alone is not a live change
}

TEST(Reload, TheNetworkControlLimitNeedsARestartNamedPerPort) {
  const ConfigSpec was = parse("");
  ConfigSpec now = parse("[classes.host]\ncontrol_rate = \"off\"\n");
  ReloadPlan p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed, std::vector<std::string>{"classes.host.control_rate"});
  // The key that changed is named: a burst alone was named control_rate.
  now = parse("[classes]\ncontrol_burst = \"1MiB\"\n");
  p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed, (std::vector<std::string>{"classes.wire.control_burst", "classes.host.control_burst"}));
  now = parse("[classes.wire]\ncontrol_rate = \"20Mbit/s\"\ncontrol_burst = \"1MiB\"\n");
  p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed, (std::vector<std::string>{"classes.wire.control_rate", "classes.wire.control_burst"}));
  EXPECT_TRUE(p.classes.empty());
}

TEST(Reload, AnotherClassCountNeedsARestartAndNoClassIsCompared) {
  const ConfigSpec was = parse("");
  const ConfigSpec now = parse("[classes]\ncount = 4\ndefault = 3\n[classes.2]\ncap = \"1Gbit/s\"\n");
  const ReloadPlan p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed, (std::vector<std::string>{"classes.count", "classes.default"}));
  EXPECT_TRUE(p.classes.empty());
}

// The restart list compares with what runs; the live part with the file as
// last read, so a second reload of the same file applies nothing again but
// still says the restart is pending.
TEST(Reload, ARestartStaysPendingWhileLiveChangesApplyOnce) {
  const ConfigSpec running = parse("");
  const ConfigSpec now = parse("[policy]\nname = \"fifo\"\n[dataplane]\nburst = 16\n");
  const ReloadPlan first = plan_reload(running, running, now);
  EXPECT_TRUE(first.policy);
  EXPECT_EQ(first.restart_needed, std::vector<std::string>{"dataplane.burst"});
  const ReloadPlan second = plan_reload(running, now, now);
  EXPECT_FALSE(second.policy);
  EXPECT_EQ(second.restart_needed, std::vector<std::string>{"dataplane.burst"});
}

// A reload that applied something with another class count in the file
// makes that file the last read one; reverting the count must compare the
// classes with what runs, not skip them.
TEST(Reload, AfterAnotherClassCountClassesAreComparedWithWhatRuns) {
  const ConfigSpec running = parse("[classes]\ncount = 4\ndefault = 3\n");
  const ConfigSpec odd =
      parse("[classes]\ncount = 5\ndefault = 4\n[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"1MiB\"\n");
  const ConfigSpec back = parse("[classes]\ncount = 4\ndefault = 3\n[classes.1]\ncap = \"1Gbit/s\"\ndepth = 64\n");
  const ReloadPlan p = plan_reload(running, odd, back);
  EXPECT_EQ(p.classes.size(), 2u);
  EXPECT_EQ(p.restart_needed, std::vector<std::string>{"classes.1.depth"});
  EXPECT_EQ(&reload_base(running, odd, back), &running);
}

// Only what the file changed is taken from it; a setting made on the socket
// (here DSCP, and the shaper's burst) stays.
TEST(Reload, MergesOnlyTheSettingsTheFileChanged) {
  // The file's wire port compiled: class 2 capped at 1 Gbit/s then 2, the
  // shaper at 1 Gbit/s then 3 (1 MiB burst), then no shaper.
  auto port_of = [](uint64_t cap, uint64_t shaper) {
    PortLive p;
    p.classes.resize(4);
    p.classes[2].cap_bytes_per_sec = cap;
    p.classes[2].cap_burst_bytes = 65536;
    p.shaper_bytes_per_sec = shaper;
    p.shaper_burst_bytes = shaper ? 1 << 20 : 0;
    return p;
  };
  const PortLive was = port_of(125'000'000, 125'000'000);
  const PortLive now = port_of(250'000'000, 375'000'000);
  const PortLive unshaped = port_of(250'000'000, 0);
  ClassLive in_force = was.classes[2];
  in_force.actions.dscp = 10;  // set on the socket
  const ClassLive got = merge_class_change(in_force, was.classes[2], now.classes[2]);
  EXPECT_EQ(got.cap_bytes_per_sec, 250'000'000u);
  EXPECT_EQ(got.actions.dscp, 10);
  EXPECT_EQ(merge_class_change(in_force, now.classes[2], now.classes[2]), in_force) << "unchanged: kept";

  PortLive port = was;
  port.shaper_burst_bytes = 4 << 20;  // set on the socket
  EXPECT_TRUE(merge_shaper_change(port, was, now));
  EXPECT_EQ(port.shaper_bytes_per_sec, 375'000'000u);
  EXPECT_EQ(port.shaper_burst_bytes, 4u << 20);
  EXPECT_FALSE(merge_shaper_change(port, now, now));
  EXPECT_TRUE(merge_shaper_change(port, now, unshaped));
  EXPECT_EQ(port.shaper_bytes_per_sec, 0u);  // removed from the file: unshaped
  // Back in the file: its rate, and its burst (the file had none meanwhile).
  EXPECT_TRUE(merge_shaper_change(port, unshaped, was));
  EXPECT_EQ(port.shaper_bytes_per_sec, 125'000'000u);
  EXPECT_EQ(port.shaper_burst_bytes, 1u << 20);
}

// A start with a state file: what the file changed since the state was
// written comes from the file, setting by setting; what it did not change
// keeps the saved value (made on the socket), and the policy only outside
// cluster mode.
TEST(Reload, AStartTakesWhatTheFileChangedSinceTheStateWasWritten) {
  auto settings = [](uint64_t shaper, uint64_t cap, int dscp, PolicyKind policy) {
    FileSettings f;
    f.policy.kind = policy;
    for (PortLive& p : f.ports) {
      p.shaper_bytes_per_sec = shaper;
      p.shaper_burst_bytes = shaper ? 65536 : 0;
      p.classes.resize(4);
      p.classes[2].cap_bytes_per_sec = cap;
      p.classes[2].cap_burst_bytes = cap ? 65536 : 0;
      p.classes[2].actions.dscp = dscp;
    }
    return f;
  };
  const FileSettings was = settings(0, 125'000'000, kNoDscp, PolicyKind::kStatic);
  const FileSettings is = settings(250'000'000, 125'000'000, kNoDscp, PolicyKind::kRoundRobin);
  // Saved: the socket set class 2's DSCP and the host port's cap.
  std::array<PortLive, kPortCount> live = was.ports;
  live[0].classes[2].actions.dscp = 10;
  live[1].classes[2].cap_bytes_per_sec = 1'000'000;
  PolicyParams policy;
  policy.kind = PolicyKind::kTensorLightsOne;
  const auto taken = apply_file_changes(live, policy, was, is, true);
  EXPECT_EQ(taken, (std::vector<std::string>{"shaper.wire", "shaper.host", "policy"}));
  EXPECT_EQ(live[0].shaper_bytes_per_sec, 250'000'000u);
  EXPECT_EQ(live[0].shaper_burst_bytes, 65536u);
  EXPECT_EQ(live[0].classes[2].actions.dscp, 10);               // not changed in the file: kept
  EXPECT_EQ(live[1].classes[2].cap_bytes_per_sec, 1'000'000u);  // likewise
  EXPECT_EQ(policy.kind, PolicyKind::kRoundRobin);

  // An unchanged file changes nothing; in cluster mode the policy stays.
  std::array<PortLive, kPortCount> same = live;
  PolicyParams kept;
  kept.kind = PolicyKind::kTensorLightsOne;
  EXPECT_TRUE(apply_file_changes(same, kept, is, is, true).empty());
  EXPECT_EQ(same, live);
  EXPECT_TRUE(apply_file_changes(same, kept, was, is, false) ==
              (std::vector<std::string>{"shaper.wire", "shaper.host"}));
  EXPECT_EQ(kept.kind, PolicyKind::kTensorLightsOne);

  // A class setting changed in the file reaches every port.
  std::array<PortLive, kPortCount> capped_live = was.ports;
  FileSettings capped = was;
  for (PortLive& p : capped.ports) p.classes[2].cap_bytes_per_sec = 2'000'000;
  PolicyParams none;
  const auto t = apply_file_changes(capped_live, none, was, capped, true);
  EXPECT_EQ(capped_live[1].classes[2].cap_bytes_per_sec, 2'000'000u);
  EXPECT_EQ(t, (std::vector<std::string>{"classes.2.wire", "classes.2.host"}));
}

// The control thread reads the file: a FIFO (no writer) or a device must be
// refused at once, not block it.
TEST(Reload, ReadsOnlyARegularFileAndNeverBlocks) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp ? tmp : "/tmp") + "/psgate-reload-" + std::to_string(getpid());
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  const std::string fifo = dir + "/fifo.toml";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto r = read_config_for_reload(fifo);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not a regular file"), std::string::npos) << r.error();
  r = read_config_for_reload("/dev/zero");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("not a regular file"), std::string::npos) << r.error();
  r = read_config_for_reload(dir + "/missing.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("cannot read config"), std::string::npos) << r.error();
  const std::string good = dir + "/good.toml";
  std::ofstream(good) << "[ports.wire]\ndevice = \"net_null0\"\n[ports.host]\ndevice = \"net_null1\"\n"
                         "[lcores]\ndata = [1]\n";
  r = read_config_for_reload(good);
  EXPECT_TRUE(r.ok()) << r.error();
  // Past the limit a config has at start too, with the same message.
  const std::string big = dir + "/big.toml";
  { std::ofstream(big) << "# big\n"; }
  ASSERT_EQ(::truncate(big.c_str(), off_t{kMaxConfigFileBytes} + 1), 0);  // sparse
  r = read_config_for_reload(big);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), big + ": cannot read config: more than 16 MiB");
  const auto at_start = load_config_file(big);
  ASSERT_FALSE(at_start.ok());
  EXPECT_EQ(at_start.error(), r.error());
  ::unlink(big.c_str());
  ::unlink(fifo.c_str());
  ::unlink(good.c_str());
  ::rmdir(dir.c_str());
}

TEST(Reload, JobsAreReportedNotApplied) {
  const ConfigSpec was = parse("");
  const ConfigSpec now = parse("[[jobs]]\nid = 1\nmatch = [\"dport=1,proto=udp\"]\n");
  const ReloadPlan p = plan_reload(was, was, now);
  EXPECT_TRUE(p.jobs);
  EXPECT_TRUE(p.restart_needed.empty());
}

}  // namespace
}  // namespace psgate
