// SPDX-License-Identifier: BSD-3-Clause
// The state file: what it keeps (jobs, policy, class and shaper settings),
// that version 1 files still load, and that a failed write leaves the old
// file intact (a write in place, not through a temporary, fails this).
#include "control/state_file.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unordered_map>

namespace psgate {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using testing::TempDir;

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

// one_job() with its rules file written beside the state file at `path`.
JobRegistry one_job_stored(const std::string& path) {
  JobRegistry jobs = one_job();
  EXPECT_TRUE(write_rules_file(rules_dir_path(path), "job-3.0.json", rules_file_text(*jobs.find(3))));
  jobs.set_rules_file(3, "job-3.0.json");
  return jobs;
}

TEST(StateFile, KeepsJobsPolicyAndLiveClassAndShaperSettings) {
  TempDir t("psgate-state");
  PolicyParams policy;
  policy.kind = PolicyKind::kRoundRobin;
  const auto live = two_classes();
  ASSERT_TRUE(
      write_state_text(t.path("state.json"), state_file_text(one_job_stored(t.path("state.json")), policy, live, 1)));
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

// Round-robin's position (the job on top, since when) is kept and read back;
// files written before it was kept load as before.
TEST(StateFile, KeepsRoundRobinsPositionAndFilesWithoutItStillLoad) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  PolicyParams policy;
  policy.kind = PolicyKind::kRoundRobin;
  const JobRegistry jobs = one_job_stored(path);
  const PolicyPosition position{3, 1'796'000'000'123'456'789};
  ASSERT_TRUE(write_state_text(path, state_file_text(jobs, policy, two_classes(), 1, nullptr, nullptr, &position)));
  auto saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE((*saved)->position.has_value());
  EXPECT_EQ(*(*saved)->position, position);
  // The incremental render gives the same text, and drops the key with the position.
  StateTextRenderer r;
  EXPECT_EQ(r.render(jobs, policy, two_classes(), 1, nullptr, nullptr, &position), slurp(path));
  const std::string without = r.render(jobs, policy, two_classes(), 1);
  EXPECT_EQ(without, state_file_text(jobs, policy, two_classes(), 1));
  EXPECT_EQ(without.find("policy_position"), std::string::npos);
  // A file written before psgate kept it loads, without one.
  ASSERT_TRUE(write_state_text(path, without));
  saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  EXPECT_FALSE((*saved)->position.has_value());
  // A hand-edited one of the wrong kind is refused by name.
  for (const char* bad : {R"("x")", R"({"top": 3})", R"({"top": -1, "since_unix_ns": 5})",
                          R"({"top": 4294967296, "since_unix_ns": 5})", R"({"top": 3, "since_unix_ns": "5"})"}) {
    std::string text = without;
    text.replace(text.find(",\n \"jobs\""), 0, std::string(",\n \"policy_position\": ") + bad);
    ASSERT_TRUE(write_state_text(path, text));
    saved = read_state_file(path, 8, 2);
    ASSERT_FALSE(saved) << bad;
    EXPECT_NE(saved.error().find("policy_position"), std::string::npos) << saved.error();
  }
}

TEST(StateFile, ARestartResumesTheTurnItWasIn) {
  constexpr uint64_t kSecond = 1'000'000'000, kInterval = 20 * kSecond;
  constexpr uint64_t kUnix = 1'796'000'000 * kSecond, kNow = 5000 * kSecond;
  const PolicyPosition at{7, kUnix};
  PolicyParams params;
  params.kind = PolicyKind::kRoundRobin;
  params.interval_ns = kInterval;
  // Jobs 5-8 (set field by field: a designated initializer naming id alone
  // warns of the fields it leaves out, -Wmissing-field-initializers).
  const std::vector<PolicyJob> jobs = [] {
    std::vector<PolicyJob> four(4);
    for (uint32_t k = 0; k < four.size(); ++k) four[k].id = 5 + k;
    return four;
  }();
  auto top = [&](PolicyState& st, uint64_t now) {
    for (const JobRanks& r : evaluate_policy(params, st, jobs, now))
      if (r.pull_rank == 0) return r.id;
    return 0u;
  };
  // 5 s into job 7's turn: 7 on top for 15 s more, then 8.
  PolicyState st = resume_policy_state(at, kInterval, kNow, kUnix + 5 * kSecond);
  EXPECT_EQ(top(st, kNow), 7u);
  EXPECT_EQ(top(st, kNow + 14 * kSecond), 7u);
  EXPECT_EQ(top(st, kNow + 15 * kSecond), 8u);
  // Down for longer than a turn: the next job at once, and a whole turn for it.
  st = resume_policy_state(at, kInterval, kNow, kUnix + 3600 * kSecond);
  EXPECT_EQ(top(st, kNow), 8u);
  EXPECT_EQ(top(st, kNow + kInterval - 1), 8u);
  EXPECT_EQ(top(st, kNow + kInterval), 5u);
  // A wall clock set back: a whole turn, not a turn from the future.
  st = resume_policy_state(at, kInterval, kNow, kUnix - 3600 * kSecond);
  EXPECT_EQ(top(st, kNow + kInterval - 1), 7u);
  EXPECT_EQ(top(st, kNow + kInterval), 8u);
  // The job on top left while psgate was down: the first job takes its turn.
  const PolicyPosition gone{99, kUnix};
  st = resume_policy_state(gone, kInterval, kNow, kUnix + 5 * kSecond);
  EXPECT_EQ(top(st, kNow), 5u);
  // Iterations: the data plane counts them from 0 again.
  params.rotate_on = RotateOn::kIteration;
  st = resume_policy_state(at, kInterval, kNow, kUnix + 5 * kSecond);
  EXPECT_EQ(top(st, kNow), 7u);
  std::vector<PolicyJob> done = jobs;
  done[2].iterations_seen = 1;
  bool rotated = false;
  for (const JobRanks& r : evaluate_policy(params, st, done, kNow + kSecond)) rotated |= r.id == 8 && r.pull_rank == 0;
  EXPECT_TRUE(rotated) << "job 7's first iteration after the restart ends its turn";
}

// Cluster mode: the ranks the cluster's policy leader computed are what
// this gateway forwarded on. Not kept, a gateway restarted while the store
// was unreachable ranked by the plain order instead, apart from every other
// gateway under any policy but static.
TEST(StateFile, KeepsTheClustersRanks) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  const PolicyParams progress{PolicyKind::kProgress, 1'000'000'000};
  const std::unordered_map<uint32_t, JobRanks> ranks = {{3, JobRanks{3, 2, 1}}, {9, JobRanks{9, 0, UINT32_MAX}}};
  ASSERT_TRUE(
      write_state_text(path, state_file_text(one_job_stored(path), progress, two_classes(), 1, nullptr, &ranks)));
  auto saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  ASSERT_TRUE((*saved)->cluster_ranks.has_value()) << "the cluster's ranks were not kept";
  EXPECT_EQ(*(*saved)->cluster_ranks, ranks) << "a job no longer held (9) keeps its ranks too";
  EXPECT_EQ((*saved)->policy.kind, PolicyKind::kProgress);
  // Written again from what was read: the same text (a start rewrites the
  // file only when its rendering differs).
  EXPECT_EQ(state_file_text((*saved)->jobs, (*saved)->policy, *(*saved)->live, 1, nullptr, &*(*saved)->cluster_ranks),
            (*saved)->text);
  // None in force (single-host mode, or none read yet): none written, none read.
  ASSERT_TRUE(write_state_text(path, state_file_text(one_job_stored(path), progress, two_classes(), 1)));
  saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  EXPECT_FALSE((*saved)->cluster_ranks.has_value());
  // Hand-edited into something else: refused by name, nothing loaded.
  for (const char* bad : {R"("cluster_ranks": {"3": 1})", R"("cluster_ranks": [[3, 1]])",
                          R"("cluster_ranks": [[3, -1, 0]])", R"("cluster_ranks": [[0, 1, 1]])",
                          R"("cluster_ranks": [[3, 1, 1], [3, 2, 2]])", R"("cluster_ranks": [[3, 4294967296, 1]])"}) {
    std::string text = state_file_text(one_job_stored(path), progress, two_classes(), 1);
    text.replace(text.find("\"jobs\""), 0, std::string(bad) + ", ");
    ASSERT_TRUE(write_state_text(path, text));
    auto refused = read_state_file(path, 8, 2);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("cluster_ranks"), std::string::npos) << refused.error();
  }
}

TEST(StateFile, VersionOneFilesStillLoadWithTheConfigsClasses) {
  TempDir t("psgate-state");
  std::ofstream(t.path("state.json"))
      << R"({"version": 1, "jobs": [{"id": 3, "name": "three", "rank": 0, "match": ["dst=10.0.0.5/32"]}],
            "policy": {"name": "static"}})";
  auto saved = read_state_file(t.path("state.json"), 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  EXPECT_EQ((*saved)->jobs.size(), 1u);
  EXPECT_FALSE((*saved)->live.has_value());
  // Written before psgate kept the cluster's ranks: none kept (the store's,
  // once read, are applied).
  EXPECT_FALSE((*saved)->cluster_ranks.has_value());
}

// A rule an older psgate kept: proto=0, refused now in a new rule, is read
// as it ran (refused, the upgraded gateway would not start and would forward
// nothing); an IPv4-mapped prefix is the IPv4 one, as in every new rule.
TEST(StateFile, AnOlderVersionsRulesLoadAsTheyRanAndMappedAddressesAreIpv4) {
  TempDir t("psgate-state");
  std::ofstream(t.path("state.json")) << R"({"version": 1, "jobs": [{"id": 3, "name": "three", "rank": 0,
            "match": ["proto=0", "dst=::ffff:10.0.0.5/128,dport=2222,proto=tcp"]}],
            "policy": {"name": "static"}})";
  auto saved = read_state_file(t.path("state.json"), 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  const JobRecord* job = (*saved)->jobs.find(3);
  ASSERT_NE(job, nullptr);
  ASSERT_EQ(job->spec.match.size(), 2u);
  EXPECT_EQ(job->spec.match[0].proto, uint8_t{0});
  EXPECT_EQ(to_string(job->spec.match[1]), "dst=10.0.0.5/32,dport=2222,proto=tcp");
}

TEST(StateFile, AFailedWriteLeavesTheOldFileIntact) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  const std::string old_text = state_file_text(one_job(), PolicyParams{}, two_classes(), 1);
  ASSERT_TRUE(write_state_text(path, old_text));
  // The temporary cannot be written whole (a file-size limit, as a full
  // disk would), while the file itself stays: a writer that writes in place
  // would lose the old state. In a child: the limit is the process's.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit small{16, 16};
    ::setrlimit(RLIMIT_FSIZE, &small);
    auto written = write_state_text(path, state_file_text(JobRegistry(8), PolicyParams{}, two_classes(), 2));
    ::_exit(!written && written.error().find("state file") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the write did not fail as a state file's";
  EXPECT_EQ(slurp(path), old_text);
  // No temporary left behind.
  for (const auto& e : std::filesystem::directory_iterator(t.dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

// A symbolic link planted at the temporary's name (a state directory others
// can write) had the state written over its target, and the rename made the
// link the state file, which the next start refused. The temporary is a new
// file, whatever is at its name.
TEST(StateFile, ALinkAtTheTemporarysNameIsNotFollowed) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json"), victim = t.path("victim");
  { std::ofstream(victim) << "not the state"; }
  ASSERT_EQ(::symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  const std::string text = state_file_text(one_job(), PolicyParams{}, two_classes(), 1);
  ASSERT_TRUE(write_state_text(path, text));
  EXPECT_EQ(slurp(victim), "not the state");
  struct stat st {};
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode)) << "the state file is a link";
  EXPECT_EQ(slurp(path), text);
  // A rules file's write that fails says it is a rules file's.
  const std::string not_a_dir = t.path("file");
  { std::ofstream(not_a_dir) << "x"; }
  auto failed = write_rules_file(not_a_dir, "job-3.0.json", rules_file_text(*one_job().find(3)));
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().rfind("rules file ", 0), 0u) << failed.error();
}

// Version 3: each job's rules in a file of its own under <state>.rules/,
// named by the state file; everything else in the state file.
TEST(StateFile, RulesLiveInTheirOwnFilesAndTheStateFileNamesThem) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  const std::string dir = rules_dir_path(path);
  JobRegistry jobs = one_job();
  JobRecord four;
  four.spec.id = 4;
  four.spec.match.push_back(*parse_match_rule("proto=udp"));
  four.spec.match.push_back(*parse_match_rule("dst=fd00::/64,dport=80"));
  ASSERT_TRUE(jobs.add(std::move(four), 0));
  JobProgress progress;
  progress.fraction = 0.25;
  ASSERT_TRUE(jobs.set_progress(3, progress));
  uint64_t serial = 5;
  for (uint32_t id : {3u, 4u}) {
    const std::string name = rules_file_name(id, serial++);
    ASSERT_TRUE(write_rules_file(dir, name, rules_file_text(*jobs.find(id))));
    jobs.set_rules_file(id, name);
  }
  ASSERT_TRUE(sync_directory(dir));
  PolicyParams policy;
  policy.kind = PolicyKind::kShortestFirst;
  const std::string text = state_file_text(jobs, policy, two_classes(), serial);
  EXPECT_EQ(text.find("proto=udp"), std::string::npos) << "rules belong in the rules files";
  ASSERT_TRUE(write_state_text(path, text));

  auto saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  const SavedState& s = **saved;
  EXPECT_EQ(s.rules_serial, 7u);
  ASSERT_EQ(s.jobs.size(), 2u);
  EXPECT_EQ(s.jobs.find(4)->spec.match, jobs.find(4)->spec.match);
  EXPECT_EQ(s.jobs.find(4)->spec.rank, 0u);
  EXPECT_EQ(s.jobs.find(3)->progress.fraction, 0.25);
  EXPECT_EQ(s.jobs.find(3)->rules_file, "job-3.5.json");
  EXPECT_EQ(s.policy.kind, PolicyKind::kShortestFirst);
  // Jobs come back in the order they were added (rule precedence).
  EXPECT_LT(s.jobs.find(3)->sequence, s.jobs.find(4)->sequence);

  // A rules_serial at or below a name the file uses (hand-edited down):
  // the next name still comes after every name in use, else a new job's
  // rules would be written over job 3's, and deleted with a removed job's.
  ASSERT_TRUE(write_state_text(path, state_file_text(jobs, policy, two_classes(), 0)));
  auto low = read_state_file(path, 8, 2);
  ASSERT_TRUE(low && low->has_value()) << (low ? "" : low.error());
  EXPECT_EQ((*low)->rules_serial, 7u);
  ASSERT_TRUE(write_state_text(path, text));

  // A rules file no state file names (a crash after writing it) is removed.
  ASSERT_TRUE(write_rules_file(dir, rules_file_name(9, 7), "{}"));
  remove_unnamed_rules_files(dir, s.jobs);
  struct stat st {};
  EXPECT_NE(::stat((dir + "/" + rules_file_name(9, 7)).c_str(), &st), 0);
  EXPECT_EQ(::stat((dir + "/job-3.5.json").c_str(), &st), 0);

  // Set aside twice under one name (two starts without a state file in the
  // same second): the second gets a directory of its own, the first's files
  // stay; the next serial is past every name left in the directory.
  ASSERT_TRUE(write_rules_file(dir, rules_file_name(9, 40), "first"));
  const RulesSetAside first = set_aside_unnamed_rules_files(dir, s.jobs, "unnamed-x");
  EXPECT_EQ(first.error, "");
  EXPECT_EQ(first.moved, 1u);
  EXPECT_EQ(first.directory, dir + "/unnamed-x");
  ASSERT_TRUE(write_rules_file(dir, rules_file_name(9, 40), "second"));
  const RulesSetAside second = set_aside_unnamed_rules_files(dir, s.jobs, "unnamed-x");
  EXPECT_EQ(second.error, "");
  EXPECT_EQ(second.moved, 1u);
  EXPECT_EQ(second.directory, dir + "/unnamed-x-2") << "the log must name where they went";
  auto text_of = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(text_of(dir + "/unnamed-x/" + rules_file_name(9, 40)), "first");
  EXPECT_EQ(text_of(dir + "/unnamed-x-2/" + rules_file_name(9, 40)), "second");
  EXPECT_EQ(::stat((dir + "/job-3.5.json").c_str(), &st), 0) << "a named file stays";
  // Past the set-aside job-9.40.json too: moved back by hand (operations.md)
  // it must replace no file a later start wrote.
  EXPECT_EQ(next_rules_serial_in(dir), 41u) << "past job-9.40.json, the largest set aside";
  // A name past what psgate counts to is none of its own: the next serial
  // is not pushed to the top (where counting on would wrap).
  ASSERT_TRUE(write_rules_file(dir, "job-9.18446744073709551614.json", "{}"));
  ASSERT_TRUE(write_rules_file(dir, "job-9.9999999999999999999.json", "{}"));
  EXPECT_EQ(next_rules_serial_in(dir), 41u);
  EXPECT_EQ(rules_file_serial("job-9.999999999999999999.json"), 999'999'999'999'999'999u);
  EXPECT_EQ(rules_file_serial("job-9.1000000000000000000.json"), std::nullopt);

  // A missing or foreign rules file is an error naming it; nothing is loaded.
  std::ofstream(dir + "/job-4.6.json") << R"({"job": 3, "match": ["proto=udp"]})";
  auto foreign = read_state_file(path, 8, 2);
  ASSERT_FALSE(foreign);
  EXPECT_NE(foreign.error().find("job-4.6.json"), std::string::npos) << foreign.error();
  ASSERT_EQ(::unlink((dir + "/job-4.6.json").c_str()), 0);
  auto missing = read_state_file(path, 8, 2);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("cannot read"), std::string::npos) << missing.error();

  // Not a regular file: a FIFO blocked the read (start and --check) for
  // ever; a directory said only "basic_filebuf::underflow". An empty or cut
  // file says so.
  const std::string rules = dir + "/job-4.6.json";
  ASSERT_EQ(::mkfifo(rules.c_str(), 0600), 0);
  auto fifo = read_state_file(path, 8, 2);
  ASSERT_FALSE(fifo);
  EXPECT_NE(fifo.error().find("job-4.6.json: not a regular file"), std::string::npos) << fifo.error();
  ASSERT_EQ(::unlink(rules.c_str()), 0);
  ASSERT_EQ(::mkdir(rules.c_str(), 0700), 0);
  auto directory = read_state_file(path, 8, 2);
  ASSERT_FALSE(directory);
  EXPECT_NE(directory.error().find("job-4.6.json: not a regular file"), std::string::npos) << directory.error();
  ASSERT_EQ(::rmdir(rules.c_str()), 0);
  std::ofstream(rules) << R"({"job": 4, "match": ["proto=u)";
  auto cut = read_state_file(path, 8, 2);
  ASSERT_FALSE(cut);
  EXPECT_NE(cut.error().find("job-4.6.json: not valid JSON"), std::string::npos) << cut.error();
  ASSERT_EQ(::unlink(rules.c_str()), 0);
}

// Rates became whole bytes per second, and names lost invisible characters,
// after such files were written: a police rate of any bit rate keeps running
// as its bucket ran it, truncated, and the name loads with the character
// shown, rather than refusing the start.
TEST(StateFile, AnOldPoliceRateOfPartBytesRunsAsItRan) {
  TempDir t("psgate-state");
  ConfigSpec config;
  config.classes.resize(2);
  for (ClassSpec& c : config.classes) c.depth = 64;
  std::ofstream(t.path("state.json"))
      << R"({"version": 1, "jobs": [{"id": 3, "name": "thr\u00adee", "rank": 0, "match": ["dst=10.0.0.5/32"],
            "police_bps": 12345, "police_burst_bytes": 1500}], "policy": {"name": "static"}})";
  auto saved = read_state_file(t.path("state.json"), 8, 2);
  ASSERT_TRUE(saved) << saved.error();
  ASSERT_TRUE(saved->has_value());
  const JobRecord* job = (*saved)->jobs.find(3);
  ASSERT_NE(job, nullptr);
  ASSERT_TRUE(job->spec.police.has_value());
  EXPECT_EQ(job->spec.police->rate_bps, 12344u);
  EXPECT_EQ(job->spec.name, "thr\\u00adee");
  EXPECT_TRUE(check_saved_state(**saved, config));
}

// A stray huge file at the state path is refused by its size, not read
// into memory whole (a 300 MiB file took 1.2 GB and 10 s to be called valid).
TEST(StateFile, AHugeFileIsRefusedBySize) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  std::ofstream(path) << R"({"version": 1, "jobs": []})";
  ASSERT_EQ(::truncate(path.c_str(), off_t{300} << 20), 0);  // sparse: no disk, no time
  auto saved = read_state_file(path, 8, 2);
  ASSERT_FALSE(saved.ok());
  EXPECT_NE(saved.error().find("larger than 256 MiB"), std::string::npos) << saved.error();
}

// A hand-edited state file is no way around the loader's checks: an ECN
// threshold at or above the class's depth is refused as the config refuses it.
TEST(StateFile, RestoredValuesMustPassTheLoadersChecks) {
  TempDir t("psgate-state");
  ConfigSpec config;
  config.classes.resize(2);
  for (ClassSpec& c : config.classes) c.depth = 64;
  config.control.state = t.path("state.json");
  auto live = two_classes();  // host class 1: ECN threshold 20, below 64
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1)));
  auto saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved);
  EXPECT_TRUE(check_saved_state(**saved, config));
  live[1].classes[1].actions.ecn_threshold = 64;
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1)));
  saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved);
  auto refused = check_saved_state(**saved, config);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("class 1 on host"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("ecn_threshold"), std::string::npos) << refused.error();
}

// A config of two classes of depth 64 whose state file is in `t`, and the
// record of a file with those classes (nothing set).
ConfigSpec two_class_config(const TempDir& t) {
  ConfigSpec config;
  config.classes.resize(2);
  for (ClassSpec& c : config.classes) c.depth = 64;
  config.control.state = t.path("state.json");
  return config;
}

FileSettings two_class_file() {
  FileSettings file;
  for (PortLive& p : file.ports) p.classes.resize(2);
  return file;
}

// A state file written when a config without [policy] recorded the static
// policy with a 20s interval: the same config now reads as static at 1s,
// which is no change of the file's, so the policy set on the socket stays.
TEST(StateFile, AnOldRecordOfTheDefaultPolicyIsNoChangeOfTheFiles) {
  TempDir t("psgate-state");
  const ConfigSpec config = two_class_config(t);
  FileSettings was = two_class_file();
  was.policy = PolicyParams{PolicyKind::kStatic, 20'000'000'000};
  ASSERT_TRUE(
      write_state_text(config.control.state,
                       state_file_text(one_job_stored(config.control.state),
                                       PolicyParams{PolicyKind::kRoundRobin, 20'000'000'000}, was.ports, 1, &was)));
  auto saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  FileSettings now = two_class_file();  // now.policy: a config without [policy]
  const auto taken = take_file_changes(**saved, now, config);
  EXPECT_TRUE(taken.empty()) << taken.front();
  EXPECT_EQ((*saved)->policy.kind, PolicyKind::kRoundRobin);
}

// A start with the config file's record: the file's edits are merged in
// first, and what the merge leaves failing the loader's checks comes from
// the file whole, so an edit followed by a restart never refuses the start.
// Wire class 0: a floor set on the socket (500 Mbit/s) under the file's cap
// of 1 Gbit/s, which the file then lowers to 200 Mbit/s. Host class 1: ECN
// threshold 100 with the file's old depth; the file's new depth is 64 with
// a threshold of 16.
TEST(StateFile, AStartTakesTheFilesEditsFirstAndWhatTheyLeaveUnfitFromTheFile) {
  TempDir t("psgate-state");
  const ConfigSpec config = two_class_config(t);
  FileSettings was = two_class_file();
  was.ports[0].classes[0].cap_bytes_per_sec = 125'000'000;
  was.ports[0].classes[0].cap_burst_bytes = 65536;
  was.ports[1].classes[1].actions.ecn_threshold = 100;
  auto live = was.ports;
  live[0].classes[0].floor_bytes_per_sec = 62'500'000;
  live[0].classes[0].floor_burst_bytes = 65536;
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1, &was)));
  FileSettings now = was;
  now.ports[0].classes[0].cap_bytes_per_sec = 25'000'000;
  now.ports[1].classes[1].actions.ecn_threshold = 16;

  auto saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved);
  ASSERT_TRUE((*saved)->file.has_value());
  EXPECT_FALSE(check_saved_state(**saved, config)) << "unmerged, the saved ECN threshold does not fit depth 64";
  const auto taken = take_file_changes(**saved, now, config);
  EXPECT_TRUE(check_saved_state(**saved, config));
  const auto& got = *(*saved)->live;
  EXPECT_EQ(got[0].classes[0], now.ports[0].classes[0]) << "cap 200M with the saved floor 500M: the file's class";
  EXPECT_EQ(got[1].classes[1].actions.ecn_threshold, 16u);
  // Each class named once, as the start-up log lists them: wire class 0 (its
  // cap merged, then the whole class taken), host class 1.
  EXPECT_EQ(taken,
            (std::vector<std::string>{
                "classes.1.host", "classes.0.wire (the whole class: the saved settings did not fit with the file's)"}));

  // A record of another classes.count (written after a reload of a file
  // that changed it) is left out: the saved values stand, the file loads.
  FileSettings four = was;
  for (PortLive& p : four.ports) p.classes.resize(4);
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1, &four)));
  saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  EXPECT_FALSE((*saved)->file.has_value());
  EXPECT_TRUE(take_file_changes(**saved, now, config).empty());
}

// A floor saved on the socket that no longer fits the shaper the file now
// sets (lower than it) takes the whole port from the file; the other port
// keeps its saved values.
TEST(StateFile, SavedFloorsThatNoLongerFitTheFilesShaperTakeThePortFromTheFile) {
  TempDir t("psgate-state");
  const ConfigSpec config = two_class_config(t);
  FileSettings was = two_class_file();
  auto live = was.ports;
  live[0].classes[1].floor_bytes_per_sec = 25'000'000;  // 200 Mbit/s, set on the socket
  live[0].classes[1].floor_burst_bytes = 65536;
  live[1].classes[1].actions.dscp = 10;  // likewise
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1, &was)));
  FileSettings now = was;
  for (PortLive& p : now.ports) {
    p.shaper_bytes_per_sec = 12'500'000;  // 100 Mbit/s, below the saved floor
    p.shaper_burst_bytes = 65536;
  }
  auto saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  const auto taken = take_file_changes(**saved, now, config);
  const auto& got = *(*saved)->live;
  EXPECT_EQ(got[0], now.ports[0]) << "the saved floor does not fit under the file's shaper";
  EXPECT_EQ(got[1].shaper_bytes_per_sec, 12'500'000u);
  EXPECT_EQ(got[1].classes[1].actions.dscp, 10) << "the other port's socket change stays";
  ASSERT_FALSE(taken.empty());
  EXPECT_NE(taken.back().find("the whole port"), std::string::npos) << taken.back();
  EXPECT_TRUE(check_saved_state(**saved, config));
}

// A saved class or port wrong by itself (a hand edit), where the file did
// not change it since: left as saved, so that the start is refused naming
// it (exit 2), not silently replaced by the file's, which dropped the
// acknowledged settings beside the bad one.
TEST(StateFile, AHandEditedClassTheFileDidNotChangeIsRefusedNotReplaced) {
  TempDir t("psgate-state");
  const ConfigSpec config = two_class_config(t);
  const FileSettings was = two_class_file();
  auto live = was.ports;
  live[0].classes[1].cap_bytes_per_sec = 12'500'000;  // set on the socket: cap 100 Mbit/s
  live[0].classes[1].cap_burst_bytes = 65536;
  live[0].classes[1].floor_bytes_per_sec = 25'000'000;  // then edited by hand: a floor above it
  live[0].classes[1].floor_burst_bytes = 65536;
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, live, 1, &was)));
  auto saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  EXPECT_TRUE(take_file_changes(**saved, was, config).empty());
  EXPECT_EQ((*(*saved)->live)[0].classes[1].cap_bytes_per_sec, 12'500'000u);
  const auto checked = check_saved_state(**saved, config);
  ASSERT_FALSE(checked);
  EXPECT_NE(checked.error().find("class 1 on wire"), std::string::npos) << checked.error();

  // Only an ECN threshold the depth does not fit (the depth is the config's,
  // and the file's record has none: it may have changed): the file's
  // threshold, and the acknowledged cap beside it stays.
  auto deep = was.ports;
  deep[0].classes[1].cap_bytes_per_sec = 12'500'000;
  deep[0].classes[1].cap_burst_bytes = 65536;
  deep[0].classes[1].actions.ecn_threshold = 100;  // the depth is 64
  ASSERT_TRUE(write_state_text(config.control.state,
                               state_file_text(one_job_stored(config.control.state), PolicyParams{}, deep, 1, &was)));
  saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  const auto ecn_taken = take_file_changes(**saved, was, config);
  ASSERT_EQ(ecn_taken.size(), 1u);
  EXPECT_EQ(ecn_taken[0].rfind("classes.1.wire.ecn_threshold", 0), 0u) << ecn_taken[0];
  EXPECT_EQ((*(*saved)->live)[0].classes[1].cap_bytes_per_sec, 12'500'000u) << "the acknowledged cap was dropped";
  EXPECT_EQ((*(*saved)->live)[0].classes[1].actions.ecn_threshold, was.ports[0].classes[1].actions.ecn_threshold);
  EXPECT_TRUE(check_saved_state(**saved, config));

  // Floors edited above a shaper the file did not change: refused too.
  FileSettings shaped = two_class_file();
  for (PortLive& p : shaped.ports) {
    p.shaper_bytes_per_sec = 12'500'000;
    p.shaper_burst_bytes = 65536;
  }
  auto over = shaped.ports;
  over[1].classes[1].floor_bytes_per_sec = 25'000'000;
  over[1].classes[1].floor_burst_bytes = 65536;
  ASSERT_TRUE(write_state_text(
      config.control.state, state_file_text(one_job_stored(config.control.state), PolicyParams{}, over, 1, &shaped)));
  saved = read_state_file(config.control.state, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  EXPECT_TRUE(take_file_changes(**saved, shaped, config).empty());
  const auto floors = check_saved_state(**saved, config);
  ASSERT_FALSE(floors);
  EXPECT_NE(floors.error().find("port host"), std::string::npos) << floors.error();
}

// A hand-edited file: each wrong value is refused with its field named, never
// thrown (an exception out of read_state_file aborted psgate at start-up
// instead of exiting 2), and never read as something else (a version of
// 2^32 + 1 read as 1, an interval of 0 stopping a rotation).
TEST(StateFile, HandEditedValuesOfTheWrongKindAreRefusedByName) {
  TempDir t("psgate-state");
  const std::string path = t.path("state.json");
  const std::string good =
      state_file_text(one_job_stored(path), PolicyParams{PolicyKind::kRoundRobin, 20'000'000'000}, two_classes(), 1);
  ASSERT_TRUE(write_state_text(path, good));
  auto saved = read_state_file(path, 8, 2);
  ASSERT_TRUE(saved && *saved) << (saved ? "" : saved.error());
  const struct {
    const char* from;
    const char* to;
    const char* named;
  } edits[] = {
      {"\"rotate_on\":\"time\"", "\"rotate_on\":1", "rotate_on"},
      {"\"rotate_on\":\"time\"", "\"rotate_on\":\"weekly\"", "rotate_on"},
      {"\"interval_ns\":20000000000", "\"interval_ns\":0", "interval_ns"},
      {"\"interval_ns\":20000000000", "\"interval_ns\":\"20s\"", "interval_ns"},
      {"\"version\": 3", "\"version\": 4294967299", "unknown format"},
      {"\"rank\":0", "\"rank\":0,\"progress_fraction\":7.5", "progress_fraction"},
      // 2^61 + 1 bytes/s is 8 bit/s once multiplied by 8 in 64 bits.
      {"\"shaper_bytes_per_sec\":125000000", "\"shaper_bytes_per_sec\":2305843009213693953", "shaper_bytes_per_sec"},
      // The rules directory itself, or its parent: not a file of rules.
      {"\"job-3.0.json\"", "\".\"", "not a rules file name"},
      {"\"job-3.0.json\"", "\"..\"", "not a rules file name"},
      // Past 2^63 (unsigned in JSON): not wrapped to -1, "keep".
      {"\"dscp\":-1", "\"dscp\":18446744073709551615", "classes[0].dscp: out of range"},
      {"\"ecn_threshold\":0", "\"ecn_threshold\":4294967296", "classes[0].ecn_threshold: out of range"},
      {"\"rules_serial\": 1", "\"rules_serial\": -5", "\"rules_serial\" missing or not a non-negative integer"},
      // Counting on from the top would wrap to 0 and reuse a live job's
      // rules file name (deleted a minute later with a removed job's).
      {"\"rules_serial\": 1", "\"rules_serial\": 18446744073709551615", "past the largest psgate counts to"},
      {"\"rules_serial\": 1", "\"rules_serial\": 1000000000000000000", "past the largest psgate counts to"},
  };
  for (const auto& e : edits) {
    std::string text = good;
    const size_t at = text.find(e.from);
    ASSERT_NE(at, std::string::npos) << e.from << " not in:\n" << good;
    text.replace(at, std::strlen(e.from), e.to);
    ASSERT_TRUE(write_state_text(path, text));
    std::optional<Result<std::optional<SavedState>>> read;
    EXPECT_NO_THROW(read.emplace(read_state_file(path, 8, 2))) << e.to;
    ASSERT_TRUE(read);
    ASSERT_FALSE(*read) << e.to;
    EXPECT_NE(read->error().find(e.named), std::string::npos) << e.to << ": " << read->error();
  }
}

// A rules directory this user may not write (made by a psgate run as root,
// psgate now run as another user): every add was refused while --check and
// the start said nothing. Now refused up front, like an unwritable state
// directory. Needs root (to be another user, whose rights differ).
TEST(StateFile, ARulesDirectoryThisUserMayNotWriteIsRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to check as another user";
  TempDir t("psgate-state");
  ASSERT_EQ(::chmod(t.dir.c_str(), 0777), 0);
  const std::string state = t.path("state.json");
  ASSERT_EQ(::mkdir(rules_dir_path(state).c_str(), 0755), 0);  // root's
  const pid_t child = ::fork();
  if (child == 0) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) ::_exit(3);
    const auto checked = check_state_dir_writable(state);
    ::_exit(!checked && checked.error().find("rules directory") != std::string::npos ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) GTEST_SKIP() << "cannot become nobody here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "an unwritable rules directory passed the check";
  EXPECT_TRUE(check_state_dir_writable(state)) << "root may write it";
}

TEST(StateFile, APathThatIsADirectoryIsRefusedWithAClearMessage) {
  TempDir t("psgate-state");
  ASSERT_EQ(::mkdir(t.path("state").c_str(), 0700), 0);
  auto usable = check_state_path(t.path("state"));
  ASSERT_FALSE(usable);
  EXPECT_NE(usable.error().find("is a directory"), std::string::npos) << usable.error();
  auto read = read_state_file(t.path("state"), 8, 2);
  EXPECT_FALSE(read);
  EXPECT_TRUE(check_state_path(t.path("state/state.json")));
  EXPECT_TRUE(check_state_path(t.path("not/yet/there/state.json")));
  EXPECT_TRUE(check_state_path(""));
  // Under a regular file: "not a directory", not "not writable: Permission denied".
  { std::ofstream(t.path("file")) << "x"; }
  auto under_file = check_state_path(t.path("file/state.json"));
  ASSERT_FALSE(under_file);
  EXPECT_NE(under_file.error().find(t.path("file") + " is not a directory"), std::string::npos) << under_file.error();
}

// The control plane renders the state file incrementally (StateTextRenderer
// keeps each job's line); after any sequence of changes its text must be the
// full render's, byte for byte. Random changes of every kind a job's line or
// the header shows, checked after each one.
TEST(StateFile, AnIncrementalRenderEqualsAFullRenderAfterEveryChange) {
  std::mt19937 rng(12);
  auto pick = [&](uint32_t n) { return static_cast<uint32_t>(rng() % n); };
  JobRegistry jobs(64);
  PolicyParams policy;
  auto live = two_classes();
  uint64_t serial = 0;
  StateTextRenderer renderer;
  std::optional<std::unordered_map<uint32_t, JobRanks>> cluster_ranks;
  std::vector<uint32_t> ids;
  for (int step = 0; step < 3000; ++step) {
    const uint32_t what = pick(9);
    if (what == 0 || ids.size() < 4) {  // add (an id may come back with other fields)
      JobRecord job;
      job.spec.id = 1 + pick(80);
      if (jobs.find(job.spec.id)) continue;
      job.spec.name = pick(2) ? "job" + std::to_string(pick(5)) : "";
      job.spec.match.push_back(*parse_match_rule("dst=10.0.0." + std::to_string(1 + pick(200)) + "/32"));
      if (pick(2)) job.spec.police = RateSpec{1'000'000ull * (1 + pick(5)), 1500ull * (1 + pick(3))};
      auto added = jobs.add(std::move(job), pick(2) ? std::optional<uint32_t>(pick(10)) : std::nullopt);
      if (!added) continue;
      ids.push_back((*added)->spec.id);
      jobs.set_rules_file(ids.back(), rules_file_name(ids.back(), serial++));
    } else if (what == 1) {  // remove
      const size_t k = pick(static_cast<uint32_t>(ids.size()));
      ASSERT_TRUE(jobs.remove(ids[k]));
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(k));
    } else if (what == 2 || what == 3) {  // re-rank
      ASSERT_TRUE(jobs.set_rank(ids[pick(static_cast<uint32_t>(ids.size()))], pick(10)));
    } else if (what == 4) {  // reorder
      std::vector<uint32_t> order = ids;
      std::shuffle(order.begin(), order.end(), rng);
      order.resize(1 + pick(static_cast<uint32_t>(order.size())));
      ASSERT_TRUE(jobs.set_order(order));
    } else if (what == 5) {  // progress; 0.0 and -0.0 compare equal yet print differently
      JobProgress p;
      const double fractions[] = {0.0, -0.0, 0.25, 0.5, 1.0 / 3};
      if (pick(3)) p.fraction = fractions[pick(5)];
      if (pick(2)) p.iteration = pick(4);
      if (pick(2)) p.batch = pick(4);
      ASSERT_TRUE(jobs.set_progress(ids[pick(static_cast<uint32_t>(ids.size()))], p));
    } else if (what == 6) {  // a new rules file
      const uint32_t id = ids[pick(static_cast<uint32_t>(ids.size()))];
      jobs.set_rules_file(id, rules_file_name(id, serial++));
    } else if (what == 7) {  // policy
      policy.kind = pick(2) ? PolicyKind::kRoundRobin : PolicyKind::kStatic;
      policy.interval_ns = 1'000'000'000ull * (1 + pick(3));
    } else {  // class and shaper settings
      live[pick(2)].classes[pick(2)].cap_bytes_per_sec = 1000ull * pick(4);
      live[0].shaper_burst_bytes = 1500ull * (1 + pick(3));
    }
    if (pick(5) == 0) {  // the cluster's ranks: none, or some jobs' (a leader's re-rank)
      if (pick(3) == 0) {
        cluster_ranks.reset();
      } else {
        if (!cluster_ranks) cluster_ranks.emplace();
        const uint32_t id = ids[pick(static_cast<uint32_t>(ids.size()))];
        (*cluster_ranks)[id] = JobRanks{id, pick(10), pick(10)};
      }
    }
    const auto* ranks = cluster_ranks ? &*cluster_ranks : nullptr;
    ASSERT_EQ(renderer.render(jobs, policy, live, serial, nullptr, ranks),
              state_file_text(jobs, policy, live, serial, nullptr, ranks))
        << "after step " << step;
  }
}

// Why a read failed, as a kind and not as words to search: a cluster gateway
// sets aside a file that does not load (a restart would refuse it again, for
// ever) but keeps one it could not read (it may be a sound copy).
TEST(StateFile, AFailedReadSaysWhetherTheFileCouldNotBeReadOrDoesNotLoad) {
  TempDir t("psgate-state");
  StateReadFailure why{};

  std::ofstream(t.path("plain")) << "x";
  EXPECT_FALSE(read_state_file(t.path("plain") + "/state.json", 8, 2, &why)) << "a path under a regular file";
  EXPECT_EQ(why, StateReadFailure::kCannotRead);

  std::ofstream(t.path("cut.json")) << R"({"version": 3, "rules_serial": 1, "jobs": [{"id": 3, "na)";
  EXPECT_FALSE(read_state_file(t.path("cut.json"), 8, 2, &why));
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad);

  // Larger than any state file psgate writes: read again, refused again.
  ASSERT_EQ(::truncate(t.path("cut.json").c_str(), off_t{257} << 20), 0);
  auto large = read_state_file(t.path("cut.json"), 8, 2, &why);
  ASSERT_FALSE(large);
  EXPECT_NE(large.error().find("larger than"), std::string::npos) << large.error();
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad);

  // Sound, but more jobs than this start's max_jobs.
  std::ofstream(t.path("two.json"))
      << R"({"version": 1, "jobs": [{"id": 3, "name": "a", "rank": 0, "match": ["dst=10.0.0.5/32"]},
            {"id": 4, "name": "b", "rank": 1, "match": ["dst=10.0.0.6/32"]}], "policy": {"name": "static"}})";
  ASSERT_TRUE(read_state_file(t.path("two.json"), 8, 2, &why));
  EXPECT_FALSE(read_state_file(t.path("two.json"), 1, 2, &why));
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad);
}

// The same for a state file's rules files: one that cannot be read for a
// reason that says nothing of its content (permissions, I/O) may be sound,
// so the state is "cannot read" and a cluster gateway keeps it; one missing
// or wrong, or a rules directory that is not one, makes a state that does
// not load.
TEST(StateFile, ARulesFileThatCannotBeReadIsNotOneThatDoesNotLoad) {
  TempDir t("psgate-state");
  const std::string state = t.path("state.json");
  const std::string dir = rules_dir_path(state);
  const std::string rules = dir + "/job-3.0.json";
  ASSERT_TRUE(write_state_text(state, state_file_text(one_job_stored(state), PolicyParams{}, two_classes(), 1)));
  std::string sound;
  {
    std::ifstream in(rules);
    sound.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(sound.empty());
  ASSERT_TRUE(read_state_file(state, 8, 2));
  StateReadFailure why{};

  // EACCES: root reads any file, so a child reads as nobody, for whom the
  // state file and the rules directory are readable and the rules file not.
  ASSERT_EQ(::chmod(t.dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(state.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(::chmod(rules.c_str(), 0600), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    StateReadFailure seen{};
    auto r = read_state_file(state, 8, 2, &seen);
    ::_exit(r ? 4
            : seen == StateReadFailure::kCannotRead && r.error().find("rules file") != std::string::npos &&
                    r.error().find("Permission denied") != std::string::npos
                ? 0
                : 5);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "3: could not become nobody, 4: read, 5: not \"cannot read\" (EACCES)";

  std::filesystem::remove_all(dir);
  std::ofstream(dir) << "not a directory";
  auto not_dir = read_state_file(state, 8, 2, &why);
  ASSERT_FALSE(not_dir);
  EXPECT_NE(not_dir.error().find("Not a directory"), std::string::npos) << not_dir.error();
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad) << "a rules directory that is a file: a broken layout";

  ASSERT_EQ(::unlink(dir.c_str()), 0);
  ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
  EXPECT_FALSE(read_state_file(state, 8, 2, &why)) << "the rules file is missing";
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad);

  std::ofstream(rules) << sound.substr(0, sound.size() / 2);
  EXPECT_FALSE(read_state_file(state, 8, 2, &why)) << "cut short";
  EXPECT_EQ(why, StateReadFailure::kDoesNotLoad);

  std::ofstream(rules, std::ios::trunc) << sound;
  auto loaded = read_state_file(state, 8, 2, &why);
  ASSERT_TRUE(loaded) << loaded.error();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ((*loaded)->jobs.size(), 1u);
}

}  // namespace
}  // namespace psgate

namespace psgate {
namespace {

// Many rules files in one change (a scheduler's thousands of jobs written to
// the cluster store at once) are made durable with one flush, not a sync
// each (4 ms apiece held the control thread 16 s for 4,000 jobs); what is
// written is the same (100 files: one syncfs).
TEST(StateFile, ManyRulesFilesAreWrittenWhole) {
  testing::TempDir t("psgate-state");
  const std::string dir = rules_dir_path(t.path("state.json"));
  std::vector<std::pair<std::string, std::string>> files;
  for (uint32_t id = 1; id <= 100; ++id)
    files.emplace_back(rules_file_name(id, id), "{\"job\": " + std::to_string(id) + "}");
  ASSERT_TRUE(write_rules_files(dir, files));
  for (const auto& [name, text] : files) {
    std::ifstream in(dir + "/" + name);
    std::stringstream got;
    got << in.rdbuf();
    EXPECT_EQ(got.str(), text) << name;
  }
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path() << " left behind";
  EXPECT_TRUE(write_rules_files(dir, {}));
  // A failure part-way (here a directory where the 40th file goes) takes
  // back what was written: no state file will name those files, and a
  // refused change must leave nothing behind. Both ways: a sync each (few
  // files) and one syncfs (many).
  for (const size_t count : {std::size_t{50}, std::size_t{100}}) {
    const std::string d = t.path("fail-" + std::to_string(count));
    std::vector<std::pair<std::string, std::string>> many;
    for (uint32_t id = 1; id <= count; ++id) many.emplace_back(rules_file_name(id, 1000 + id), "{}");
    std::filesystem::create_directories(d + "/" + many[39].first + "/x");
    auto failed = write_rules_files(d, many);
    ASSERT_FALSE(failed) << count;
    EXPECT_NE(failed.error().find(many[39].first), std::string::npos) << failed.error();
    for (size_t k = 0; k < 39; ++k) EXPECT_FALSE(std::filesystem::exists(d + "/" + many[k].first)) << count << " " << k;
  }
  std::ofstream(t.path("plain")) << "x";
  auto under_file = write_rules_files(t.path("plain") + "/rules", files);
  ASSERT_FALSE(under_file);
  EXPECT_NE(under_file.error().find("plain/rules"), std::string::npos) << under_file.error();
}

}  // namespace
// A start with a state file uses its jobs, not the config's [[jobs]]: an
// edit of [[jobs]] is said (at start and by --check), a rank is not (the
// socket's order changes ranks; the state's are meant).
TEST(StateFile, ConfigJobsUnlikeTheStateAreNamed) {
  const JobRegistry saved = one_job();
  JobSpec same = saved.find(3)->spec;
  EXPECT_EQ(config_jobs_unlike_state({same}, saved), "");
  same.rank = 5;
  EXPECT_EQ(config_jobs_unlike_state({same}, saved), "") << "a rank alone is the order's";
  JobSpec edited = saved.find(3)->spec;
  edited.match.push_back(*parse_match_rule("dst=10.0.0.6/32"));
  EXPECT_EQ(config_jobs_unlike_state({edited}, saved), "job 3 differs");
  JobSpec added;
  added.id = 9;
  added.match.push_back(*parse_match_rule("dst=10.0.0.9/32"));
  EXPECT_EQ(config_jobs_unlike_state({saved.find(3)->spec, added}, saved), "job 9 is not in the state file");
  EXPECT_EQ(config_jobs_unlike_state({}, saved), "job 3 is not in the config");
  std::vector<JobSpec> many;
  for (uint32_t id = 10; id < 20; ++id) {
    added.id = id;
    many.push_back(added);
  }
  EXPECT_EQ(config_jobs_unlike_state(many, saved),
            "job 10 is not in the state file, job 11 is not in the state file, job 12 is not in the state file, "
            "job 13 is not in the state file, job 14 is not in the state file and 6 more");
}

}  // namespace psgate
