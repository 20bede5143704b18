// SPDX-License-Identifier: BSD-3-Clause
// The README's first command: tools/demo installs what is missing, builds,
// writes the demo captures with psgate-demo-traffic and runs psgate on
// config/demo.toml. Everything of it but the install and the build runs here
// as the script runs it (the shipped config verbatim, from the captures'
// directory), so that a change to the config, the captures or the gateway
// that breaks the demo fails the suite instead of a user's first minute.
#include <gtest/gtest.h>

#include <string>

#include "child_process.h"
#include "daemon_runner.h"

namespace psgate::testing {
namespace {

using nlohmann::json;

const json* job_by_id(const json& stats, uint32_t id) {
  for (const json& j : stats["jobs"])
    if (j["id"] == id) return &j;
  return nullptr;
}

TEST(Demo, TheDemoRunsAsTheReadmeSaysAndShowsItsThreeJobs) {
  const std::string root = env_or_empty("PSGATE_SOURCE_ROOT");
  const std::string traffic = env_or_empty("PSGATE_DEMO_TRAFFIC_BIN");
  ASSERT_FALSE(root.empty() || traffic.empty())
      << "PSGATE_SOURCE_ROOT and PSGATE_DEMO_TRAFFIC_BIN are set by meson test";
  DaemonFixture fx;
  const std::string shipped = read_text_file(root + "/config/demo.toml");
  ASSERT_FALSE(shipped.empty()) << root << "/config/demo.toml";
  fx.write_file("demo.toml", shipped);

  {  // tools/demo: psgate-demo-traffic --out-dir . in the directory psgate then runs in
    ChildProcess gen({traffic, "--out-dir", "."}, {fx.path("traffic.out"), "", fx.dir()});
    ASSERT_EQ(gen.wait(60), 0) << read_text_file(fx.path("traffic.out"));
  }

  const DaemonRun run = fx.run("demo.toml", {"--duration", "3"}, 90);
  ASSERT_EQ(run.exit_status, 0) << run.output;
  // What the demo shows a user: a line a second per job, then the table and
  // the conservation line.
  for (const char* name : {"resnet32-a", "vgg16-b", "bert-c"})
    EXPECT_NE(run.output.find(name), std::string::npos) << name << "\n" << run.output;
  EXPECT_NE(run.output.find("conservation: received"), std::string::npos) << run.output;
  ASSERT_TRUE(run.stats.is_object()) << run.output;
  EXPECT_TRUE(run.stats["totals"]["conserved"].get<bool>()) << run.stats.dump(2);

  // Its story: three jobs' pulls through a 1 Gbit/s uplink, the first two
  // policed to their rates, the third (lowest rank, not policed) asking far
  // more than is left and losing the rest in its full queue.
  for (uint32_t id : {1u, 2u, 3u}) {
    const json* job = job_by_id(run.stats, id);
    ASSERT_NE(job, nullptr) << "job " << id << ": " << run.stats.dump(2);
    EXPECT_GT((*job)["pull"]["sent_packets"].get<uint64_t>(), 0u) << "job " << id;
  }
  EXPECT_GT((*job_by_id(run.stats, 1))["policed"].get<uint64_t>(), 0u);
  EXPECT_GT((*job_by_id(run.stats, 2))["policed"].get<uint64_t>(), 0u);
  EXPECT_GT((*job_by_id(run.stats, 3))["drops"].get<uint64_t>(), 0u);
  EXPECT_GT(run.stats["ports"]["wire"]["drops"]["queue_full"].get<uint64_t>(), 0u) << run.stats.dump(2);
}

}  // namespace
}  // namespace psgate::testing
