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

TEST(LcoreCheck, AffinityIsNotEmptyAndIncludesTheCurrentCpu) {
  const std::vector<unsigned> cpus = affinity_cpus();
  ASSERT_FALSE(cpus.empty());
  EXPECT_NE(std::find(cpus.begin(), cpus.end(), static_cast<unsigned>(sched_getcpu())), cpus.end());
}

}  // namespace
}  // namespace psgate
