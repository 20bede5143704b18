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
  ASSERT_TRUE(write_state_text(t.path("state.json"), state_file_text(one_job(), policy, live, 1)));
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
  const std::string old_text = state_file_text(one_job(), PolicyParams{}, two_classes(), 1);
  ASSERT_TRUE(write_state_text(path, old_text));
  // The temporary cannot be created (a directory is in its way), while the
  // file itself is writable: a writer that writes in place would succeed and
  // a crash during it would lose the old state.
  ASSERT_EQ(::mkdir((path + ".tmp").c_str(), 0700), 0);
  auto written = write_state_text(path, state_file_text(JobRegistry(8), PolicyParams{}, two_classes(), 2));
  ASSERT_FALSE(written);
  EXPECT_NE(written.error().find("state file"), std::string::npos) << written.error();
  EXPECT_EQ(slurp(path), old_text);
}

// The ranks file beside the state file: applied when it belongs to the state
// file's revision, ignored when it is older (a crash between writing a new
// state file and removing the old ranks file), refused when corrupt.
TEST(StateFile, TheRanksFileOfTheSameRevisionOverridesRanksProgressPolicyAndClasses) {
  TempDir t;
  const std::string path = t.path("state.json");
  JobRegistry jobs = one_job();
  JobRecord four;
  four.spec.id = 4;
  four.spec.match.push_back(*parse_match_rule("proto=udp"));
  ASSERT_TRUE(jobs.add(std::move(four), 1));
  ASSERT_TRUE(write_state_text(path, state_file_text(jobs, PolicyParams{}, two_classes(), 7)));

  // Later changes: a re-rank, progress, another policy and class settings.
  ASSERT_TRUE(jobs.set_rank(4, 0));
  ASSERT_TRUE(jobs.set_rank(3, 5));
  JobProgress progress;
  progress.fraction = 0.25;
  ASSERT_TRUE(jobs.set_progress(3, progress));
  PolicyParams policy;
  policy.kind = PolicyKind::kShortestFirst;
  auto live = two_classes();
  live[0].classes[1].cap_bytes_per_sec = 1'000'000;
  live[0].classes[1].cap_burst_bytes = 65536;
  const std::string ranks_text = ranks_file_text(jobs, policy, live, 7);
  ASSERT_TRUE(write_state_text(ranks_file_path(path), ranks_text));
  auto saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  const SavedState& s = **saved;
  EXPECT_TRUE(s.ranks_applied);
  EXPECT_EQ(s.revision, 7u);
  EXPECT_EQ(s.jobs.find(4)->spec.rank, 0u);
  EXPECT_EQ(s.jobs.find(3)->spec.rank, 5u);
  EXPECT_EQ(s.jobs.find(3)->progress.fraction, 0.25);
  EXPECT_EQ(s.policy.kind, PolicyKind::kShortestFirst);
  EXPECT_TRUE(*s.live == live);
  // Jobs come back in the order they were added (rule precedence).
  EXPECT_LT(s.jobs.find(3)->sequence, s.jobs.find(4)->sequence);

  // A ranks file of another revision is older than the state file: ignored.
  ASSERT_TRUE(write_state_text(ranks_file_path(path), ranks_file_text(jobs, policy, live, 6)));
  saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  EXPECT_FALSE((*saved)->ranks_applied);
  EXPECT_EQ((*saved)->jobs.find(3)->spec.rank, 0u);
  EXPECT_EQ((*saved)->policy.kind, PolicyKind::kStatic);

  // A corrupt ranks file is an error, as a corrupt state file is.
  std::ofstream(ranks_file_path(path)) << "{\"version\": 1, \"base\": 7, \"jobs\": [";
  EXPECT_FALSE(read_state_file(path, 8, 2));
  // ... and so is one naming a job the state file does not have.
  JobRegistry other = one_job();
  JobRecord nine;
  nine.spec.id = 9;
  nine.spec.match.push_back(*parse_match_rule("proto=udp"));
  ASSERT_TRUE(other.add(std::move(nine), 1));
  ASSERT_TRUE(write_state_text(ranks_file_path(path), ranks_file_text(other, policy, live, 7)));
  auto unknown = read_state_file(path, 8, 2);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().find("job 9 is not in the state file"), std::string::npos) << unknown.error();
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
