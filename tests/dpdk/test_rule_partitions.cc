// SPDX-License-Identifier: BSD-3-Clause
// Rule partitions through the real control plane: jobs.load fills
// partitions in order; adding a job rebuilds only the newest partition,
// removing one only its own, a re-rank none (the same classifier objects stay
// in the published snapshot); and what the data plane matches is right at
// each step (the snapshot's matcher against the reference over all rules in
// job-age order).
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "config/compile.h"
#include "control/rule_merger.h"
#include "pipeline_harness.h"
#include "psgate/classifier.h"
#include "psgate/job_registry.h"

namespace psgate::testing {
namespace {

using json = nlohmann::json;

const char* kBody = R"([lcores]
main = 0
data = [1]
[classes]
count = 4
[dataplane]
max_jobs = 256
mbufs = 1024
[stats]
interval = "0s"
)";

constexpr unsigned kRulesPerJob = 100;

json job_json(uint32_t id) {
  json rules = json::array();
  for (unsigned r = 0; r < kRulesPerJob; ++r)
    rules.push_back("dst=10." + std::to_string(id % 256) + "." + std::to_string(r) +
                    ".0/24,dport=" + std::to_string(1000 + r) + ",proto=udp");
  // One rule every job shares: the oldest job's must win it.
  rules.push_back("dst=10.255.0.1/32,dport=7,proto=udp");
  return {{"job", id}, {"match", rules}};
}

ParsedPacket udp_to(const std::string& dst, uint16_t dport) {
  ParsedPacket p;
  p.l3 = L3Kind::kIpv4;
  unsigned a, b, c, d;
  std::sscanf(dst.c_str(), "%u.%u.%u.%u", &a, &b, &c, &d);
  p.dst = {static_cast<uint8_t>(a), static_cast<uint8_t>(b), static_cast<uint8_t>(c), static_cast<uint8_t>(d)};
  p.src = {192, 168, 0, 1};
  p.proto = 17;
  p.has_ports = true;
  p.sport = 5555;
  p.dport = dport;
  return p;
}

// Classifier objects of the published snapshot, by partition id.
std::map<uint32_t, const Classifier*> classifiers(PipelineHarness& h) {
  std::map<uint32_t, const Classifier*> out;
  for (const RulePartition& p : h.dataplane().snapshot().partitions) out[p.id] = p.classifier.get();
  return out;
}

// The job slot the data plane's matcher gives a packet, as a job id.
uint32_t matched_job(PipelineHarness& h, const ParsedPacket& p) {
  const Snapshot& snap = h.dataplane().snapshot();
  const ParsedPacket* ptr = &p;
  uint32_t slot = Classifier::kNoMatch;
  snap.matcher.classify(&ptr, 1, &slot);
  if (slot == Classifier::kNoMatch) return 0;
  for (const JobEntry& j : snap.jobs)
    if (j.slot == slot) return j.id;
  return UINT32_MAX;
}

TEST(RulePartitions, ChangesRebuildOnlyThePartitionTheyTouch) {
  PipelineHarness h(kBody, false);
  ASSERT_TRUE(h.ok()) << h.error();
  // 60 jobs x 101 rules: about 3 partitions of 20 jobs.
  json jobs = json::array();
  for (uint32_t id = 1; id <= 60; ++id) jobs.push_back(job_json(id));
  const json loaded = h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}});
  ASSERT_EQ(loaded["ok"], true) << loaded.dump().substr(0, 300);
  ASSERT_EQ(loaded["result"]["added"].size(), 60u);
  const auto before = classifiers(h);
  const size_t per_partition = kRulesPerPartition / (kRulesPerJob + 1);
  ASSERT_EQ(before.size(), (60 + per_partition - 1) / per_partition);
  EXPECT_EQ(h.dataplane().snapshot().matcher.rule_count(), 60u * (kRulesPerJob + 1));
  EXPECT_EQ(matched_job(h, udp_to("10.255.0.1", 7)), 1u) << "the oldest job's rule wins across partitions";
  EXPECT_EQ(matched_job(h, udp_to("10.59.3.9", 1003)), 59u);
  EXPECT_EQ(matched_job(h, udp_to("10.61.3.9", 1003)), 0u);
  const uint32_t rules_generation = h.dataplane().snapshot().rules_generation;

  // A re-rank: no partition is rebuilt, the flow cache stays valid.
  ASSERT_EQ(h.control().handle({{"cmd", "rank"}, {"job", 30}, {"rank", 0}})["ok"], true);
  EXPECT_EQ(classifiers(h), before);
  EXPECT_EQ(h.dataplane().snapshot().rules_generation, rules_generation);

  // Adding a job rebuilds the newest partition (or opens one); the others stay.
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.add"}, {"job", 61}, {"match", job_json(61)["match"]}})["ok"], true);
  auto after_add = classifiers(h);
  const uint32_t newest = before.rbegin()->first;
  for (const auto& [id, c] : before) {
    if (id != newest) {
      EXPECT_EQ(after_add.at(id), c) << "partition " << id << " was rebuilt by an add";
    }
  }
  EXPECT_NE(h.dataplane().snapshot().rules_generation, rules_generation);
  EXPECT_EQ(matched_job(h, udp_to("10.61.3.9", 1003)), 61u);

  // Removing the first job rebuilds only the oldest partition; its shared
  // rule now goes to the next oldest job.
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.remove"}, {"job", 1}})["ok"], true);
  const auto after_remove = classifiers(h);
  const uint32_t oldest = before.begin()->first;
  EXPECT_NE(after_remove.at(oldest), after_add.at(oldest));
  for (const auto& [id, c] : after_add) {
    if (id != oldest) {
      EXPECT_EQ(after_remove.at(id), c) << "partition " << id << " was rebuilt by a remove";
    }
  }
  EXPECT_EQ(matched_job(h, udp_to("10.255.0.1", 7)), 2u);
  EXPECT_EQ(matched_job(h, udp_to("10.1.3.9", 1003)), 0u);
}

TEST(RulePartitions, ABatchIsAllOrNothing) {
  PipelineHarness h(kBody, false);
  ASSERT_TRUE(h.ok()) << h.error();
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.add"}, {"job", 5}, {"match", {"proto=udp"}}})["ok"], true);
  const uint32_t generation = h.dataplane().snapshot().generation;
  json jobs = json::array({job_json(3), job_json(4), job_json(5), job_json(6)});
  const json reply = h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}});
  EXPECT_EQ(reply["ok"], false);
  EXPECT_NE(reply.value("error", "").find("jobs[2]: job 5 already exists; none added"), std::string::npos)
      << reply.dump();
  EXPECT_EQ(h.control().handle({{"cmd", "jobs.list"}})["result"]["jobs"].size(), 1u);
  EXPECT_EQ(h.dataplane().snapshot().generation, generation);
  // A job with a bad argument is named, with the nearest known one.
  jobs = json::array({job_json(7), {{"job", 8}, {"match", {"proto=tcp"}}, {"polic", "1Mbit/s"}}});
  const json typo = h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}});
  EXPECT_NE(typo.value("error", "").find("jobs[1]: unknown argument \"polic\" (did you mean \"police\"?)"),
            std::string::npos)
      << typo.dump();
}

// The compile asks for a stop before each partition it builds: once told
// yes it builds no more, fails with kCompileStopped and says how far it got
// (a start of 100,000 rules ends there, not seconds later). Asked never, it
// builds what it always built.
TEST(RulePartitions, ACompileStopsBetweenPartitionsWhenAsked) {
  std::string toml = std::string("[eal]\nargs = []\n[ports.wire]\ndevice = \"net_null0\"\n[ports.host]\ndevice = ") +
                     "\"net_null1\"\n" + kBody;
  for (uint32_t id = 1; id <= 60; ++id) {
    toml += "[[jobs]]\nid = " + std::to_string(id) + "\nmatch = ";
    toml += job_json(id)["match"].dump() + "\n";
  }
  auto config = parse_config(toml, "compile.toml");
  ASSERT_TRUE(config.ok()) << config.error();
  auto registry = JobRegistry::from_config(*config);
  ASSERT_TRUE(registry.ok()) << registry.error();
  std::vector<RankedJob> jobs;
  for (const JobRecord* j : registry->in_rank_order())
    jobs.push_back(RankedJob{j, JobRanks{j->spec.id, j->spec.rank, j->spec.rank}});
  const size_t per_partition = kRulesPerPartition / (kRulesPerJob + 1);
  const size_t partitions = (60 + per_partition - 1) / per_partition;
  ASSERT_GE(partitions, 4u);

  CompileReport whole;
  std::atomic<unsigned> asked{0};
  auto full = compile_snapshot(*config, jobs, compile_ports(*config), 1, nullptr,
                               CompileControl{[&] { return ++asked, false; }, &whole});
  ASSERT_TRUE(full.ok()) << full.error();
  EXPECT_EQ(asked.load(), partitions) << "asked once before each partition";
  EXPECT_EQ((*full)->partitions.size(), partitions);
  EXPECT_EQ((*full)->matcher.rule_count(), 60u * (kRulesPerJob + 1));
  EXPECT_EQ(whole.partitions, partitions);
  EXPECT_EQ(whole.partitions_built, partitions);
  EXPECT_EQ(whole.rules_built, 60u * (kRulesPerJob + 1));
  EXPECT_GT(whole.longest_rules, 0u);
  EXPECT_LE(whole.longest_ns, whole.build_ns);

  // Yes from the third question on: two partitions built, the rest not.
  CompileReport cut;
  asked = 0;
  auto stopped = compile_snapshot(*config, jobs, compile_ports(*config), 1, nullptr,
                                  CompileControl{[&] { return ++asked > 2; }, &cut});
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.error(),
            std::string(kCompileStopped) + " (2 of " + std::to_string(partitions) + " rule partitions built)");
  EXPECT_EQ(cut.partitions_built, 2u);

  // A re-compile that reuses every partition builds nothing, so it has
  // nothing to stop: it asks nothing.
  asked = 0;
  auto again = compile_snapshot(*config, jobs, compile_ports(*config), 2, full->get(),
                                CompileControl{[&] { return ++asked, true; }, nullptr});
  ASSERT_TRUE(again.ok()) << again.error();
  EXPECT_EQ(asked.load(), 0u);
}

// At run time the stop (stop_background_work, at SIGTERM) ends a change's
// compile the same way: a jobs.load of many rules under way is refused,
// saying why, and changes nothing; one that builds no partition (a
// re-rank) still goes through until the control server stops.
TEST(RulePartitions, AStopRefusesAChangeWhoseRulesAreBeingCompiled) {
  PipelineHarness h(kBody, false);
  ASSERT_TRUE(h.ok()) << h.error();
  json jobs = json::array();
  for (uint32_t id = 1; id <= 20; ++id) jobs.push_back(job_json(id));
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}})["ok"], true);
  const uint32_t generation = h.dataplane().snapshot().generation;
  const json listed = h.control().handle({{"cmd", "jobs.list"}});
  h.control().stop_background_work();
  jobs = json::array();
  for (uint32_t id = 21; id <= 60; ++id) jobs.push_back(job_json(id));
  const json reply = h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}});
  EXPECT_EQ(reply["ok"], false) << reply.dump().substr(0, 300);
  const std::string error = reply.value("error", "");
  EXPECT_EQ(error.rfind(kCompileStopped, 0), 0u) << error;
  EXPECT_NE(error.find("psgate is stopping; the change is not applied"), std::string::npos) << error;
  EXPECT_TRUE(h.control().handle({{"cmd", "jobs.list"}}) == listed) << "the refused jobs.load changed the jobs";
  EXPECT_EQ(h.dataplane().snapshot().generation, generation);
  EXPECT_EQ(h.control().handle({{"cmd", "rank"}, {"job", 7}, {"rank", 0}})["ok"], true);
}

// Background merges: once enough partitions have settled, tick() gets them
// merged into one classifier off the control thread and publishes it in
// their place; a job removed under the merge sends the matcher back to the
// partitions at once (kept in the snapshot), and a later tick merges again.
// Classification is the same at every step.
TEST(RulePartitions, OldPartitionsAreMergedInTheBackgroundAndAStaleMergeIsDropped) {
  PipelineHarness h(kBody, false);
  ASSERT_TRUE(h.ok()) << h.error();
  json jobs = json::array();
  for (uint32_t id = 1; id <= 80; ++id) jobs.push_back(job_json(id));
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}})["ok"], true);
  const size_t parts = h.dataplane().snapshot().partitions.size();
  ASSERT_GT(parts, RuleMerger::kPartitionsToMerge) << "the test needs enough partitions to merge";
  EXPECT_EQ(h.dataplane().snapshot().matcher.partitions().size(), parts);
  const uint32_t rules_generation = h.dataplane().snapshot().rules_generation;

  auto tick_until = [&](auto done) {
    for (int i = 0; i < 600 && !done(); ++i) {
      h.control().tick(monotonic_ns());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  };
  auto merged = [&] { return h.dataplane().snapshot().merged != nullptr; };
  ASSERT_TRUE(tick_until(merged)) << "no merge within 30 s";
  // The merge and the newest partition, which is still filling.
  EXPECT_EQ(h.dataplane().snapshot().matcher.partitions().size(), 2u);
  EXPECT_EQ(h.dataplane().snapshot().partitions.size(), parts) << "the partitions are kept beside the merge";
  EXPECT_EQ(h.dataplane().snapshot().rules_generation, rules_generation) << "a merge changes no result";
  EXPECT_EQ(matched_job(h, udp_to("10.255.0.1", 7)), 1u);
  EXPECT_EQ(matched_job(h, udp_to("10.42.3.9", 1003)), 42u);
  EXPECT_EQ(matched_job(h, udp_to("10.80.3.9", 1003)), 80u);
  EXPECT_EQ(matched_job(h, udp_to("10.81.3.9", 1003)), 0u);

  // A re-rank keeps the merge.
  ASSERT_EQ(h.control().handle({{"cmd", "rank"}, {"job", 5}, {"rank", 0}})["ok"], true);
  EXPECT_TRUE(merged());
  // Removing a job under it: the partitions again, at once, and right.
  ASSERT_EQ(h.control().handle({{"cmd", "jobs.remove"}, {"job", 1}})["ok"], true);
  EXPECT_FALSE(merged());
  EXPECT_EQ(h.dataplane().snapshot().matcher.partitions().size(), h.dataplane().snapshot().partitions.size());
  EXPECT_EQ(matched_job(h, udp_to("10.255.0.1", 7)), 2u);
  EXPECT_EQ(matched_job(h, udp_to("10.1.3.9", 1003)), 0u);
  EXPECT_EQ(matched_job(h, udp_to("10.42.3.9", 1003)), 42u);
  // ... and merged again later.
  ASSERT_TRUE(tick_until(merged)) << "no second merge within 30 s";
  EXPECT_EQ(matched_job(h, udp_to("10.255.0.1", 7)), 2u);
  EXPECT_EQ(matched_job(h, udp_to("10.1.3.9", 1003)), 0u);
}

// The nice values of this process's threads now.
std::vector<int> thread_nices() {
  std::vector<int> out;
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return out;
  while (const dirent* e = readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream in(std::string("/proc/self/task/") + e->d_name + "/stat");
    std::string stat;
    std::getline(in, stat);
    // Fields after the command's closing parenthesis: state is field 3, nice field 19.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i)
      if (i == 19) out.push_back(std::stoi(field));
  }
  closedir(dir);
  return out;
}

// A stop waits for a running merge (its ACL memory is DPDK's, freed after
// it), for a result nobody will use: from the stop on none starts, and one
// that runs leaves the lowest CPU priority, behind which it took 20 s of a
// loaded host's CPU (systemd's TimeoutStopSec is 30 s).
TEST(RulePartitions, AStopStartsNoMergeAndHurriesTheOneThatRuns) {
  if (geteuid() != 0) GTEST_SKIP() << "raising a thread's priority needs CAP_SYS_NICE";
  json jobs = json::array();
  for (uint32_t id = 1; id <= 80; ++id) jobs.push_back(job_json(id));
  auto merge_state = [](PipelineHarness& h) {
    return h.control().handle({{"cmd", "health"}})["result"]["rules"]["merge"].get<std::string>();
  };
  {
    PipelineHarness h(kBody, false);
    ASSERT_TRUE(h.ok()) << h.error();
    ASSERT_EQ(h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}})["ok"], true);
    h.control().stop_background_work();
    // Past the settling time, and a tick after it: a merge would start here.
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(RuleMerger::kSettleNs) +
                       std::chrono::milliseconds(500);
    while (std::chrono::steady_clock::now() < until) {
      h.control().tick(monotonic_ns());
      EXPECT_EQ(merge_state(h), "none");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  // A merge under way at the stop: its thread runs at nice 19 until then,
  // at the stopping thread's priority after. Tried a few times: a merge of
  // these 8,080 rules may end before the stop is asked.
  bool seen_running = false;
  for (int attempt = 0; attempt < 5 && !seen_running; ++attempt) {
    PipelineHarness h(kBody, false);
    ASSERT_TRUE(h.ok()) << h.error();
    ASSERT_EQ(h.control().handle({{"cmd", "jobs.load"}, {"jobs", jobs}})["ok"], true);
    for (int i = 0; i < 600 && merge_state(h) == "none"; ++i) {
      h.control().tick(monotonic_ns());
      if (merge_state(h) == "none") std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    h.control().stop_background_work();
    // The merge thread may be between its own setpriority and its look at
    // the stop flag: a few reads, each while the merge is seen running
    // after it (a merge that ended proves nothing either way).
    const int own = getpriority(PRIO_PROCESS, static_cast<id_t>(gettid()));
    std::vector<int> nices;
    bool hurried = false, running = true;
    for (int i = 0; i < 50 && running && !hurried; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      nices = thread_nices();
      running = merge_state(h) == "running";  // after the read: the merge's thread was among them
      hurried = std::all_of(nices.begin(), nices.end(), [&](int n) { return n <= own; });
    }
    if (!running) continue;
    seen_running = true;
    for (int nice : nices) EXPECT_LE(nice, own) << "a thread still at nice " << nice << " after the stop";
  }
  if (!seen_running) GTEST_SKIP() << "every merge ended before the stop: nothing to hurry on this host";
}

}  // namespace
}  // namespace psgate::testing
