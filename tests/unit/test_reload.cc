// SPDX-License-Identifier: BSD-3-Clause
// plan_reload: what a reload applies in place (only what changed in the file
// since it was last read) and which keys it names as needing a restart
// (compared with what is running).
#include <gtest/gtest.h>

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
      "[0]");
  const ReloadPlan p = plan_reload(was, was, now);
  EXPECT_EQ(p.restart_needed,
            (std::vector<std::string>{"eal.args", "shaper.wire.overhead", "lcores.data", "dataplane.burst",
                                      "dataplane.mbufs", "stats.interval", "control.socket", "classes.1.depth"}));
  EXPECT_TRUE(p.classes.empty());  // a depth alone is not a live change
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

TEST(Reload, JobsAreReportedNotApplied) {
  const ConfigSpec was = parse("");
  const ConfigSpec now = parse("[[jobs]]\nid = 1\nmatch = [\"dport=1,proto=udp\"]\n");
  const ReloadPlan p = plan_reload(was, was, now);
  EXPECT_TRUE(p.jobs);
  EXPECT_TRUE(p.restart_needed.empty());
}

}  // namespace
}  // namespace psgate
