// SPDX-License-Identifier: BSD-3-Clause
// The state file: what it keeps (jobs, policy, class and shaper settings),
// that version 1 files still load, and that a failed write leaves the old
// file intact (a write in place, not through a temporary, fails this).
#include "control/state_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace psgate {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/psgate-state-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  std::string path(const std::string& name) const { return dir + "/" + name; }
  std::string dir;
};

std::array<PortLive, kPortCount> two_classes() {
  std::array<PortLive, kPortCount> live;
  for (PortLive& p : live) p.classes.resize(2);
  live[0].shaper_bytes_per_sec = 125'000'000;
  live[0].shaper_burst_bytes = 65536;
  live[1].classes[1].floor_bytes_per_sec = 12'500'000;
  live[1].classes[1].floor_burst_bytes = 4096;
  live[1].classes[1].actions.dscp = 46;
  live[1].classes[1].actions.ecn_threshold = 20;
  return live;
}

JobRegistry one_job() {
  JobRegistry jobs(8);
  JobRecord job;
  job.spec.id = 3;
  job.spec.name = "three";
  job.spec.match.push_back(*parse_match_rule("dst=10.0.0.5/32,dport=2222,proto=tcp"));
  EXPECT_TRUE(jobs.add(std::move(job), 0));
  return jobs;
}

TEST(StateFile, KeepsJobsPolicyAndLiveClassAndShaperSettings) {
  TempDir t;
  PolicyParams policy;
  policy.kind = PolicyKind::kRoundRobin;
  const auto live = two_classes();
  ASSERT_TRUE(write_state_text(t.path("state.json"), state_file_text(one_job(), policy, live)));
  auto saved = read_state_file(t.path("state.json"), 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->jobs.size(), 1u);
  EXPECT_EQ((*saved)->policy.kind, PolicyKind::kRoundRobin);
  ASSERT_TRUE((*saved)->live.has_value());
  EXPECT_TRUE(*(*saved)->live == live);
  // Written for another classes.count: refused, nothing loaded.
  EXPECT_FALSE(read_state_file(t.path("state.json"), 8, 4));
}

TEST(StateFile, VersionOneFilesStillLoadWithTheConfigsClasses) {
  TempDir t;
  std::ofstream(t.path("state.json"))
      << R"({"version": 1, "jobs": [{"id": 3, "name": "three", "rank": 0, "match": ["dst=10.0.0.5/32"]}],
            "policy": {"name": "static"}})";
  auto saved = read_state_file(t.path("state.json"), 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->jobs.size(), 1u);
  EXPECT_FALSE((*saved)->live.has_value());
}

TEST(StateFile, AFailedWriteLeavesTheOldFileIntact) {
  TempDir t;
  const std::string path = t.path("state.json");
  const std::string old_text = state_file_text(one_job(), PolicyParams{}, two_classes());
  ASSERT_TRUE(write_state_text(path, old_text));
  // The temporary cannot be created (a directory is in its way), while the
  // file itself is writable: a writer that writes in place would succeed and
  // a crash during it would lose the old state.
  ASSERT_EQ(::mkdir((path + ".tmp").c_str(), 0700), 0);
  auto written = write_state_text(path, state_file_text(JobRegistry(8), PolicyParams{}, two_classes()));
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().find("state file"), std::string::npos) << written.error();
  EXPECT_EQ(slurp(path), old_text);
}

TEST(StateFile, APathThatIsADirectoryIsRefusedWithAClearMessage) {
  TempDir t;
  ASSERT_EQ(::mkdir(t.path("state").c_str(), 0700), 0);
  auto usable = check_state_path(t.path("state"));
  ASSERT_FALSE(usable);
  EXPECT_NE(usable.error().find("is a directory"), std::string::npos) << usable.error();
  auto read = read_state_file(t.path("state"), 8, 2);
  EXPECT_FALSE(read);
  EXPECT_TRUE(check_state_path(t.path("state/state.json")));
  EXPECT_TRUE(check_state_path(t.path("not/yet/there/state.json")));
  EXPECT_TRUE(check_state_path(""));
}

}  // namespace
}  // namespace psgate
