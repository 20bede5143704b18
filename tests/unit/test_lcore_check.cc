// SPDX-License-Identifier: BSD-3-Clause
// Lcores that do not exist on the machine are refused with the key named; the
// CPU set is injected, so these cases do not depend on the test machine.
#include <gtest/gtest.h>

#include "psgate/config.h"
#include "psgate/lcore_check.h"

namespace psgate {
namespace {

ConfigSpec lcores(unsigned main, std::vector<unsigned> data) {
  ConfigSpec c;
  c.main_lcore = main;
  c.data_lcores = std::move(data);
  return c;
}

TEST(LcoreCheck, CpuListText) {
  EXPECT_EQ(cpu_list_text({0, 1}), "0-1");
  EXPECT_EQ(cpu_list_text({0}), "0");
  EXPECT_EQ(cpu_list_text({0, 2, 3, 4, 5, 7}), "0,2-5,7");
  EXPECT_EQ(cpu_list_text({}), "none");
}

TEST(LcoreCheck, NamesTheFirstMissingLcore) {
  const std::vector<unsigned> two{0, 1};
  struct Case {
    ConfigSpec config;
    std::string error;  // empty: accepted
  } cases[] = {
      {lcores(0, {1}), ""},
      {lcores(0, {0, 1}), ""},  // the main lcore may share a data lcore's CPU
      {lcores(0, {99}), "demo.toml: lcores.data[0]: lcore 99 does not exist (this machine has CPUs 0-1)"},
      {lcores(0, {1, 2}), "demo.toml: lcores.data[1]: lcore 2 does not exist (this machine has CPUs 0-1)"},
      {lcores(5, {1}), "demo.toml: lcores.main: lcore 5 does not exist (this machine has CPUs 0-1)"},
  };
  for (const Case& c : cases) {
    auto r = check_lcores_exist(c.config, two, "demo.toml");
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.error();
    } else {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.error(), c.error);
    }
  }
  // An affinity set with holes: CPU 1 is not ours even though CPU 2 is.
  auto r = check_lcores_exist(lcores(0, {2, 1}), {0, 2, 3}, "x.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "x.toml: lcores.data[1]: lcore 1 does not exist (this machine has CPUs 0,2-3)");
}

TEST(LcoreCheck, ParseCpuList) {
  EXPECT_EQ(parse_cpu_list("0-1\n"), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(parse_cpu_list("0"), (std::vector<unsigned>{0}));
  EXPECT_EQ(parse_cpu_list("0,2-5,7"), (std::vector<unsigned>{0, 2, 3, 4, 5, 7}));
  EXPECT_EQ(cpu_list_text(parse_cpu_list("0,2-5,7")), "0,2-5,7");
  for (const char* bad : {"", "x", "1-", "3-1", "0,,1", "0 1", "123456"}) {
    EXPECT_TRUE(parse_cpu_list(bad).empty()) << bad;
  }
}

// A CPU the machine has but the process may not use (taskset -c 0, a cpuset,
// isolcpus under systemd) is not called missing: the message says why.
TEST(LcoreCheck, AnOnlineCpuOutsideTheAffinityIsNamedAsSuch) {
  const std::vector<unsigned> affinity{0, 1, 6, 7};
  const std::vector<unsigned> online{0, 1, 2, 3, 4, 5, 6, 7};
  auto r = check_lcores_exist(lcores(0, {3}), affinity, "psgate.toml", online);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "psgate.toml: lcores.data[0]: lcore 3 is outside psgate's CPU affinity (it may use CPUs 0-1,6-7; a cpuset, "
            "taskset, systemd's CPUAffinity= or isolcpus leaves out the others)");
  r = check_lcores_exist(lcores(0, {99}), affinity, "psgate.toml", online);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(),
            "psgate.toml: lcores.data[0]: lcore 99 does not exist (this machine has CPUs 0-7, of which psgate may use "
            "0-1,6-7)");
  // Without restrictions the message is the plain one.
  r = check_lcores_exist(lcores(0, {99}), online, "psgate.toml", online);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "psgate.toml: lcores.data[0]: lcore 99 does not exist (this machine has CPUs 0-7)");
  EXPECT_TRUE(check_lcores_exist(lcores(6, {7}), affinity, "psgate.toml", online).ok());
}

TEST(LcoreCheck, OnlineCpusIncludeTheAffinity) {
  const std::vector<unsigned> online = online_cpus();
  ASSERT_FALSE(online.empty());
  for (unsigned cpu : affinity_cpus()) EXPECT_NE(std::find(online.begin(), online.end(), cpu), online.end()) << cpu;
}

TEST(LcoreCheck, AffinityIsNotEmptyAndIncludesTheCurrentCpu) {
  const std::vector<unsigned> cpus = affinity_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_NE(std::find(cpus.begin(), cpus.end(), static_cast<unsigned>(sched_getcpu())), cpus.end());
}

}  // namespace
}  // namespace psgate
