// SPDX-License-Identifier: BSD-3-Clause
// Cluster mode's pure logic (cluster_layout.h): every document a gateway
// writes parses back to what it wrote, a bad document written by hand is
// reported and skipped without hiding the good ones, a control command's
// before/after registry becomes exactly the store writes it needs, and the
// leader ranks on telemetry combined over the gateways.
#include "psgate/cluster_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "psgate/control_request.h"
#include "psgate/job_registry.h"

namespace psgate {
namespace {

// A freeze is taken out of the watch's silence, and nothing else is: a sleep
// as planned, or late by up to the stall margin, leaves the last-heard time
// alone; a longer one moves it forward by the overshoot, never past now.
TEST(WatchSilence, AFreezeIsNotSilenceButASleepAsPlannedIs) {
  constexpr uint64_t kMs = 1'000'000;
  constexpr uint64_t planned = 20 * kMs, stall = 500 * kMs;
  const uint64_t heard = 1'000 * kMs;
  EXPECT_EQ(watch_heard_after_sleep(heard, planned, planned, stall, 2'000 * kMs), heard);
  EXPECT_EQ(watch_heard_after_sleep(heard, planned + stall, planned, stall, 2'000 * kMs), heard);
  // Frozen 10 s: heard 1 s, slept 10.02 s, now 11.1 s: 100 ms of real silence remain.
  EXPECT_EQ(watch_heard_after_sleep(heard, 10'020 * kMs, planned, stall, 11'100 * kMs), 11'000 * kMs);
  // The overshoot never moves it past now (heard during the sleep, say).
  EXPECT_EQ(watch_heard_after_sleep(10'900 * kMs, 10'020 * kMs, planned, stall, 11'100 * kMs), 11'100 * kMs);
}

const ClusterKeys kKeys{"/psgate/t"};
constexpr unsigned kClasses = 8;

MatchRule rule(const char* text) {
  auto r = parse_match_rule(text);
  EXPECT_TRUE(r.ok()) << text;
  return r ? *r : MatchRule{};
}

JobSpec spec(uint32_t id, std::string name = "") {
  JobSpec s;
  s.id = id;
  s.name = name.empty() ? "job-" + std::to_string(id) : name;
  s.match = RuleList{rule(("dst=10.0.0." + std::to_string(id % 250 + 1) + "/32,dport=2222,proto=tcp").c_str())};
  return s;
}

StoreEntry entry(std::string value, int64_t created, int64_t modified = 0) {
  return StoreEntry{std::move(value), created, modified ? modified : created, 0};
}

// A registration as a gateway writes it: under its lease.
StoreEntry registration(const GatewayInfo& g, int64_t created, int64_t modified = 0) {
  return StoreEntry{gateway_json(g).dump(), created, modified ? modified : created, 0x7f01};
}

bool contains_problem(const ClusterView& v, const std::string& key) {
  return std::any_of(v.problems.begin(), v.problems.end(),
                     [&](const std::string& p) { return p.rfind(key + ": ", 0) == 0; });
}

std::vector<uint32_t> ids(const ClusterView& v) {
  std::vector<uint32_t> out;
  for (const ClusterJob& j : v.jobs) out.push_back(j.spec.id);
  return out;
}

// ---- keys ------------------------------------------------------------------

TEST(ClusterKeys, PrefixRangeEnd) {
  EXPECT_EQ(prefix_range_end("/psgate/t/"), "/psgate/t0");  // '/' + 1 == '0'
  EXPECT_EQ(prefix_range_end("ab"), "ac");
  EXPECT_EQ(prefix_range_end(std::string("a\xff", 2)), "b");
  EXPECT_EQ(prefix_range_end(std::string("a\xfe\xff\xff", 4)), std::string("a\xff", 2));
  EXPECT_EQ(prefix_range_end(std::string("\xff\xff", 2)), std::string(1, '\0'));
  EXPECT_EQ(prefix_range_end(""), std::string(1, '\0'));
  EXPECT_EQ(kKeys.job(7), "/psgate/t/jobs/7");
  EXPECT_EQ(kKeys.progress(7), "/psgate/t/progress/7");
  EXPECT_EQ(kKeys.gateway("gw-a"), "/psgate/t/gateways/gw-a");
}

// ---- the mirror and its view ---------------------------------------------------

TEST(StoreMirror, JobDocumentRoundTrips) {
  JobSpec a = spec(5, "resnet-a");
  a.match.push_back(rule("src=10.0.0.5/32,sport=2222,proto=tcp"));
  a.match.push_back(rule("dst=fd00::1/128,dport=1000-2000"));
  a.police = RateSpec{300'000'000, 128 * 1024};
  JobSpec b = spec(9, "odd-rates");
  b.police = RateSpec{1'234'568, 1500};  // not a round number in any unit (whole bytes/s)
  JobSpec c = spec(4294967295u, "max-id");

  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(a.id), entry(job_document(a), 10));
  m.put(kKeys.job(b.id), entry(job_document(b), 11));
  m.put(kKeys.job(c.id), entry(job_document(c), 12));
  m.set_revision(12);
  const ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  EXPECT_EQ(v.revision, 12);
  ASSERT_EQ(v.jobs.size(), 3u);
  EXPECT_EQ(v.jobs[0].spec, a);
  EXPECT_EQ(v.jobs[1].spec, b);
  EXPECT_EQ(v.jobs[2].spec, c);
  EXPECT_EQ(v.jobs[0].created, 10);
}

TEST(StoreMirror, JobWithoutNameGetsTheRegistrysDefault) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(3), entry(R"({"schema":1,"job":3,"match":["dport=80"]})", 5));
  const ClusterView v = m.view();
  ASSERT_EQ(v.jobs.size(), 1u);
  EXPECT_EQ(v.jobs[0].spec.name, "job-3");
}

// A document an older psgate wrote, with what it accepted and this version
// refuses by a stricter rule: read as it ran, not dropped (the job would
// vanish from the upgraded gateways only). A new document is checked as
// jobs.add checks it (ControlRequest tests).
TEST(StoreMirror, AnOlderVersionsJobDocumentIsReadAsItRan) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(11),
        entry(R"({"schema":1,"job":11,"name":"bert\u200b","match":["dport=80"],"police":"12345bit/s"})", 5));
  const ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  ASSERT_EQ(v.jobs.size(), 1u);
  ASSERT_TRUE(v.jobs[0].spec.police.has_value());
  EXPECT_EQ(v.jobs[0].spec.police->rate_bps, 12344u) << "the rate its bucket ran";
  EXPECT_EQ(v.jobs[0].spec.name, "bert\\u200b") << "the invisible character shown";
}

// A job document's rules are read as jobs.add reads them: an IPv4-mapped
// prefix is the IPv4 one, proto=0 (a rule that never matched what it said)
// is a named problem.
TEST(StoreMirror, AJobDocumentsRulesAreReadAsJobsAddReadsThem) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(3), entry(R"({"schema":1,"job":3,"match":["dst=::ffff:10.0.0.5/128,dport=2222,proto=tcp"]})", 5));
  m.put(kKeys.job(4), entry(R"({"schema":1,"job":4,"match":["proto=0"]})", 6));
  const ClusterView v = m.view();
  ASSERT_EQ(ids(v), (std::vector<uint32_t>{3}));
  EXPECT_EQ(to_string(v.jobs[0].spec.match[0]), "dst=10.0.0.5/32,dport=2222,proto=tcp");
  ASSERT_TRUE(contains_problem(v, kKeys.job(4)));
  EXPECT_NE(v.refused_jobs.at(4).why.find("proto=0: not a protocol psgate can match"), std::string::npos)
      << v.refused_jobs.at(4).why;
}

TEST(StoreMirror, JobsAreOrderedByCreateRevision) {
  StoreMirror m(kKeys, kClasses);
  // Key order (lexical: "10" < "2" < "3") differs from age order.
  m.put(kKeys.job(3), entry(job_document(spec(3)), 30));
  m.put(kKeys.job(10), entry(job_document(spec(10)), 5));
  m.put(kKeys.job(2), entry(job_document(spec(2)), 20, 40));  // modified later: age is creation
  EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{10, 2, 3}));
}

TEST(StoreMirror, BadDocumentsAreNamedAndTheRestApply) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  m.put(kKeys.job(2), entry("{not json", 2));
  m.put(kKeys.job(3), entry(R"({"schema":2,"job":3,"match":["dport=80"]})", 3));
  m.put(kKeys.job(4), entry(R"({"schema":1,"job":40,"match":["dport=80"]})", 4));
  m.put(kKeys.job(5), entry(R"({"schema":1,"job":5,"match":["bogus=1"]})", 5));
  m.put(kKeys.job(6), entry(R"({"job":6,"match":["dport=80"]})", 6));
  m.put(kKeys.job(7), entry(R"({"schema":1,"job":7,"match":[]})", 7));
  m.put(kKeys.jobs() + "abc", entry(job_document(spec(8)), 8));
  m.put(kKeys.jobs() + "0", entry(R"({"schema":1,"job":0,"match":["dport=80"]})", 9));
  m.put(kKeys.job(11), entry(R"({"schema":1,"job":11,"match":["dport=80"],"colour":"red"})", 10));
  m.put(kKeys.job(12), entry(job_document(spec(12)), 11));
  // jobs.add takes a rank, the store does not (the order is P/order's): once
  // dropped without a word, the job ranked last with no sign. Applied, its
  // rank named as not applied.
  m.put(kKeys.job(13), entry(R"({"schema":1,"job":13,"match":["dport=80"],"rank":0})", 11));
  m.put(kKeys.order(), entry(R"({"schema":1,"order":"12"})", 12));
  m.put(kKeys.policy(), entry(R"({"schema":1,"name":"fastest"})", 13));
  m.put(kKeys.progress(1), entry(R"({"schema":1,"fraction":2})", 14));
  m.put(kKeys.progress(12), entry(R"({"schema":1,"fraction":0.5})", 15));
  m.put(kKeys.ranks(), entry(R"({"schema":1,"ranks":[[1,"x",0]]})", 16));
  m.put(kKeys.gateway("gw"), entry(R"({"schema":1})", 17));
  m.put(kKeys.leader(), entry(R"({"schema":1,"name":7})", 18));
  m.put(kKeys.all() + "stray", entry("{}", 19));

  const ClusterView v = m.view();
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{1, 12, 13}));
  for (uint32_t id : {2, 3, 4, 5, 6, 7, 11, 13}) EXPECT_TRUE(contains_problem(v, kKeys.job(id))) << id;
  EXPECT_TRUE(contains_problem(v, kKeys.jobs() + "abc"));
  EXPECT_TRUE(contains_problem(v, kKeys.jobs() + "0"));
  EXPECT_FALSE(contains_problem(v, kKeys.job(1)));
  EXPECT_FALSE(contains_problem(v, kKeys.job(12)));
  for (const std::string& key : {kKeys.order(), kKeys.policy(), kKeys.progress(1), kKeys.ranks(), kKeys.gateway("gw"),
                                 kKeys.leader(), kKeys.all() + "stray"})
    EXPECT_TRUE(contains_problem(v, key)) << key;
  // The key's id and the document's id disagree: the message says which.
  const auto p4 = std::find_if(v.problems.begin(), v.problems.end(),
                               [&](const std::string& p) { return p.rfind(kKeys.job(4), 0) == 0; });
  ASSERT_NE(p4, v.problems.end());
  EXPECT_NE(p4->find("40"), std::string::npos) << *p4;
  // The order document's field is named as the document names it.
  const auto order = std::find_if(v.problems.begin(), v.problems.end(),
                                  [&](const std::string& p) { return p.rfind(kKeys.order() + ": ", 0) == 0; });
  ASSERT_NE(order, v.problems.end());
  EXPECT_NE(order->find("\"order\" must be a list of job ids"), std::string::npos) << *order;
  EXPECT_TRUE(v.order.empty());
  EXPECT_FALSE(v.policy);
  EXPECT_FALSE(v.ranks);
  EXPECT_TRUE(v.gateways.empty());
  EXPECT_EQ(v.leader, "");
  ASSERT_EQ(v.progress.size(), 1u);
  EXPECT_EQ(v.progress.at(12).fraction, 0.5);
  EXPECT_EQ(v.problems.size(), 17u);
  // The job documents that never parsed, by the id their key names (what
  // `jobs rm` deletes): not "abc", nor 13 (applied, its rank ignored).
  std::vector<uint32_t> refused;
  for (const auto& [id, why] : v.refused_jobs) refused.push_back(id);
  EXPECT_EQ(refused, (std::vector<uint32_t>{2, 3, 4, 5, 6, 7, 11}));
  EXPECT_NE(v.refused_jobs.at(4).why.find("40"), std::string::npos) << v.refused_jobs.at(4).why;
  EXPECT_EQ(v.refused_jobs.at(4).mod_revision, 4);
}

// The largest job a gateway writes (a jobs.add request of 64 KiB, of the
// rules that render longest) is read; a larger document, put by hand, is a
// problem, not seconds of every gateway's control thread building its rules.
TEST(StoreMirror, AJobDocumentLargerThanAGatewayWritesIsRefused) {
  JobSpec big;
  big.id = 7;
  big.name = "big";
  std::string request = R"({"cmd":"jobs.add","job":7,"match":[)";
  for (uint32_t i = 0; request.size() + 40 < kMaxRequestBytes; ++i) {
    char text[24];
    std::snprintf(text, sizeof(text), "src=::%x", i);  // rendered as src=::N/128
    request += (i ? ",\"" : "\"") + std::string(text) + "\"";
    big.match.push_back(rule(text));
  }
  request += "]}";
  ASSERT_LE(request.size(), kMaxRequestBytes);
  const std::string doc = job_document(big);
  EXPECT_GT(doc.size(), request.size()) << "the rendering is not longer: pick other rules";
  EXPECT_LE(doc.size(), kMaxJobDocumentBytes);
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(7), entry(doc, 5));
  ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  EXPECT_EQ(v.jobs.size(), 1u);

  std::string huge = R"({"schema":1,"job":8,"match":[)";
  for (uint32_t i = 0; huge.size() <= kMaxJobDocumentBytes; ++i)
    huge += (i ? ",\"dst=10.0." : "\"dst=10.0.") + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250) + "\"";
  huge += "]}";
  m.put(kKeys.job(8), entry(huge, 6));
  v = m.view();
  EXPECT_EQ(ids(v), std::vector<uint32_t>{7});
  ASSERT_TRUE(contains_problem(v, kKeys.job(8)));
  EXPECT_NE(v.problems.front().find("more than a job document may have"), std::string::npos) << v.problems.front();
}

// A document nested 100k levels deep under any key (a script's bug, or
// malice): refused like any bad document. Copying such a value recurses
// once per level, which overflowed the follow thread's stack.
TEST(StoreMirror, DeeplyNestedDocumentsAreProblemsNotACrash) {
  const std::string deep = std::string(100'000, '[') + std::string(100'000, ']');
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(R"({"schema":1,"job":1,"match":["dport=80"],"name":)" + deep + "}", 1));
  m.put(kKeys.order(), entry(R"({"schema":1,"order":)" + deep + "}", 2));
  m.put(kKeys.policy(), entry(R"({"schema":1,"name":)" + deep + "}", 3));
  m.put(kKeys.progress(1), entry(R"({"schema":1,"fraction":)" + deep + "}", 4));
  m.put(kKeys.ranks(), entry(R"({"schema":1,"ranks":)" + deep + "}", 5));
  m.put(kKeys.gateway("gw"), entry(R"({"schema":1,"name":"gw","jobs":)" + deep + "}", 6));
  m.put(kKeys.leader(), entry(R"({"schema":1,"name":)" + deep + "}", 7));
  const ClusterView v = m.view();
  for (const std::string& key : {kKeys.job(1), kKeys.order(), kKeys.policy(), kKeys.progress(1), kKeys.ranks(),
                                 kKeys.gateway("gw"), kKeys.leader()})
    EXPECT_TRUE(contains_problem(v, key)) << key;
  EXPECT_TRUE(v.jobs.empty());
  EXPECT_EQ(parse_json_bounded(deep).is_discarded(), true);
  EXPECT_EQ(parse_json_bounded(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']')).is_array(), true);
}

// A value too large to receive (a full read keeps its key with
// unreceived_value) is refused as every kind of document, naming its size;
// over a good one the good one stays in force.
TEST(StoreMirror, AValueTooLargeToReceiveIsRefusedNamingItsSize) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.order(), entry(R"({"schema":1,"order":[]})", 1));
  m.put(kKeys.job(9), entry(unreceived_value(300'000'000), 2));
  m.put(kKeys.order(), entry(unreceived_value(280'000'000), 1, 3));
  m.put(kKeys.policy(), entry(unreceived_value(290'000'000), 4));
  const ClusterView v = m.view();
  EXPECT_TRUE(v.jobs.empty());
  ASSERT_EQ(v.refused_jobs.count(9), 1u);
  EXPECT_NE(v.refused_jobs.at(9).why.find("300000000 bytes, more than a gateway can receive"), std::string::npos)
      << v.refused_jobs.at(9).why;
  ASSERT_EQ(v.held.size(), 1u);
  EXPECT_NE(v.held[0].find("280000000 bytes"), std::string::npos) << v.held[0];
  EXPECT_FALSE(v.policy);
  EXPECT_TRUE(contains_problem(v, kKeys.policy()));
}

// A bad document written over a good one (a script's bug) does not act as
// a delete on every gateway at once: the last good order, policy, job,
// progress and ranks stay in force, named in view.held, until a good
// document or a delete; a full read (a reconnect) keeps them too.
TEST(StoreMirror, ABadDocumentOverAGoodOneLeavesTheGoodOneInForce) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  m.put(kKeys.job(2), entry(job_document(spec(2)), 2));
  m.put(kKeys.order(), entry(R"({"schema":1,"order":[2,1]})", 3));
  m.put(kKeys.policy(), entry(R"({"schema":1,"name":"fifo"})", 4));
  m.put(kKeys.progress(1), entry(R"({"schema":1,"fraction":0.5})", 5));
  m.put(kKeys.ranks(), entry(R"({"schema":1,"policy":"fifo","ranks":[[1,0,0]]})", 6));
  ASSERT_TRUE(m.view().held.empty());
  const std::map<std::string, StoreEntry> bad = {
      {kKeys.order(), entry(R"({"schema":1,"order":[1,2],"by":"scheduler"})", 3, 7)},
      {kKeys.policy(), entry("not json", 4, 8)},
      {kKeys.job(2), entry(R"({"schema":1,"job":2,"match":["dport=80"],"colour":"red"})", 2, 9)},
      {kKeys.progress(1), entry(R"({"schema":1,"fraction":7})", 5, 10)},
      {kKeys.ranks(), entry(R"({"schema":1,"ranks":"none"})", 6, 11)}};
  for (const auto& [key, e] : bad) m.put(key, e);
  auto check = [&](const ClusterView& v) {
    EXPECT_EQ(v.order, (std::vector<uint32_t>{2, 1}));
    EXPECT_EQ(v.order_revision, 7) << "a new order is fenced on the newest revision";
    ASSERT_TRUE(v.policy);
    EXPECT_EQ(v.policy->kind, PolicyKind::kFifo);
    EXPECT_EQ(ids(v), (std::vector<uint32_t>{1, 2}));
    EXPECT_EQ(v.jobs[1].spec.match, spec(2).match);
    ASSERT_EQ(v.progress.count(1), 1u);
    EXPECT_EQ(v.progress.at(1).fraction, 0.5);
    ASSERT_TRUE(v.ranks);
    EXPECT_EQ(v.ranks->size(), 1u);
    EXPECT_EQ(v.held.size(), 5u);
    EXPECT_TRUE(v.refused_jobs.empty()) << "job 2's good document is in force";
    for (const std::string& key : {kKeys.order(), kKeys.policy(), kKeys.job(2), kKeys.progress(1), kKeys.ranks()})
      EXPECT_TRUE(contains_problem(v, key)) << key;
  };
  check(m.view());
  // A reconnect's full read finds the same bad documents.
  std::map<std::string, StoreEntry> read_again = m.entries();
  for (const auto& [key, e] : bad) read_again[key] = e;
  m.reset(read_again, 11);
  check(m.view());
  // A good document replaces the held one; a delete removes it.
  m.put(kKeys.order(), entry(R"({"schema":1,"order":[1]})", 3, 12));
  m.erase(kKeys.job(2));
  const ClusterView v = m.view();
  EXPECT_EQ(v.order, (std::vector<uint32_t>{1}));
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{1}));
  EXPECT_EQ(v.held.size(), 3u);
  // A key deleted and put again (a delete missed while reading the store
  // again) is a new key: a bad document there holds nothing.
  std::map<std::string, StoreEntry> recreated = m.entries();
  recreated[kKeys.order()] = entry(R"({"schema":1,"order":"1"})", 20, 20);
  m.reset(recreated, 20);
  EXPECT_TRUE(m.view().order.empty());
  EXPECT_TRUE(contains_problem(m.view(), kKeys.order()));
  EXPECT_FALSE(m.view().held_keys.count(kKeys.order()));
  // A store that started over (its revision went back) has no history with
  // this mirror's: nothing held from before.
  std::map<std::string, StoreEntry> restored = read_again;
  m.reset(restored, 5);
  EXPECT_TRUE(m.view().held.empty());
  // A bad document with no good one before it is no more than a problem.
  StoreMirror fresh(kKeys, kClasses);
  fresh.put(kKeys.order(), entry(R"({"schema":1,"order":"2"})", 1));
  EXPECT_TRUE(fresh.view().held.empty());
  EXPECT_TRUE(contains_problem(fresh.view(), kKeys.order()));
}

// The auditor's case: job 7's document rewritten with a bad rule. The
// gateway that had job 7 in force holds it; one started after the write
// never has it; after a restart neither does. All of them must say the same
// trouble, naming the key, and so for a bad order, policy or ranks document
// whether a good one was in force before or not (it said "ok" where nothing
// was held: hosts disagreed with health ok everywhere).
TEST(StoreMirror, RefusedDocumentsAreTheSameTroubleOnEveryGatewayHeldOrNot) {
  const std::string bad_job = R"({"schema":1,"job":7,"match":["dst=10.0.0.7/33"]})";
  const std::string bad_order = R"({"schema":1,"order":[7],"by":"scheduler"})";
  const std::string bad_policy = R"({"schema":1,"name":"fastest"})";
  const std::string bad_ranks = R"({"schema":1,"ranks":"none"})";
  StoreMirror running(kKeys, kClasses);  // had the good documents in force
  running.put(kKeys.job(7), entry(job_document(spec(7)), 1));
  running.put(kKeys.order(), entry(R"({"schema":1,"order":[7]})", 2));
  running.put(kKeys.policy(), entry(R"({"schema":1,"name":"fifo"})", 3));
  running.put(kKeys.ranks(), entry(R"({"schema":1,"policy":"fifo","ranks":[[7,0,0]]})", 4));
  ASSERT_EQ(refused_documents_trouble(running.view(), kKeys), "") << "nothing refused: no trouble";
  running.put(kKeys.job(7), entry(bad_job, 1, 5));
  running.put(kKeys.order(), entry(bad_order, 2, 6));
  running.put(kKeys.policy(), entry(bad_policy, 3, 7));
  running.put(kKeys.ranks(), entry(bad_ranks, 4, 8));
  ASSERT_EQ(ids(running.view()), (std::vector<uint32_t>{7})) << "held: the good job stays in force";
  ASSERT_TRUE(running.view().refused_jobs.empty());
  StoreMirror started_since(kKeys, kClasses);  // a gateway started (or restarted) after the bad writes
  started_since.reset({{kKeys.job(7), entry(bad_job, 1, 5)},
                       {kKeys.order(), entry(bad_order, 2, 6)},
                       {kKeys.policy(), entry(bad_policy, 3, 7)},
                       {kKeys.ranks(), entry(bad_ranks, 4, 8)}},
                      8);
  ASSERT_TRUE(ids(started_since.view()).empty()) << "nothing to hold: job 7 is not there";
  ASSERT_TRUE(started_since.view().held.empty());
  const std::string trouble = refused_documents_trouble(running.view(), kKeys);
  EXPECT_EQ(refused_documents_trouble(started_since.view(), kKeys), trouble);
  for (const std::string& key : {kKeys.job(7), kKeys.order(), kKeys.policy(), kKeys.ranks()})
    EXPECT_NE(trouble.find(key), std::string::npos) << key << " not named in: " << trouble;
  // One bad document alone is trouble too.
  StoreMirror order_only(kKeys, kClasses);
  order_only.put(kKeys.order(), entry(bad_order, 1));
  EXPECT_NE(refused_documents_trouble(order_only.view(), kKeys).find(kKeys.order()), std::string::npos);
  // A bad progress or registration document or a stray key is a problem
  // (logged), not a disagreement on what the gateways apply.
  StoreMirror others(kKeys, kClasses);
  others.put(kKeys.progress(1), entry(R"({"schema":1,"fraction":7})", 1));
  others.put(kKeys.gateway("gw-a"), entry("not json", 2));
  others.put(kKeys.all() + "stray", entry("x", 3));
  EXPECT_FALSE(others.view().problems.empty());
  EXPECT_EQ(refused_documents_trouble(others.view(), kKeys), "");
  // Many refused jobs: a few named, all counted.
  StoreMirror many(kKeys, kClasses);
  for (uint32_t id = 1; id <= 50; ++id) many.put(kKeys.job(id), entry("{not json", id));
  const std::string many_trouble = refused_documents_trouble(many.view(), kKeys);
  EXPECT_NE(many_trouble.find("50 job document(s)"), std::string::npos) << many_trouble;
  EXPECT_LT(many_trouble.size(), 400u) << many_trouble;
}

// A document with a repeated key is refused, as the socket refuses such a
// request (read with its last value, the store would accept what the
// socket never does).
TEST(StoreMirror, ADocumentWithARepeatedKeyIsRefused) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(R"({"schema":1,"job":1,"match":["dport=80"],"match":["dport=81"]})", 1));
  m.put(kKeys.order(), entry(R"({"schema":1,"order":[1],"order":[2]})", 2));
  m.put(kKeys.policy(), entry(R"({"schema":1,"name":"fifo","name":"static"})", 3));
  m.put(kKeys.progress(1), entry(R"({"schema":1,"fraction":0.1,"fraction":0.9})", 4));
  m.put(kKeys.ranks(), entry(R"({"schema":1,"ranks":[],"ranks":[[1,0,0]]})", 5));
  const ClusterView v = m.view();
  for (const std::string& key : {kKeys.job(1), kKeys.order(), kKeys.policy(), kKeys.progress(1), kKeys.ranks()}) {
    EXPECT_TRUE(contains_problem(v, key)) << key;
    const auto p = std::find_if(v.problems.begin(), v.problems.end(),
                                [&](const std::string& x) { return x.rfind(key + ": ", 0) == 0; });
    if (p != v.problems.end()) {
      EXPECT_NE(p->find("duplicate key"), std::string::npos) << *p;
    }
  }
  EXPECT_TRUE(v.jobs.empty());
  EXPECT_TRUE(v.order.empty());
  EXPECT_FALSE(v.policy);
}

// Only the canonical spelling of a job id is a job key: "jobs/02" beside
// "jobs/2" was a second document for job 2, which a removal (of jobs/2)
// left to bring the job back.
TEST(StoreMirror, OnlyCanonicalJobIdsAreJobKeys) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(2), entry(job_document(spec(2)), 1));
  m.put(kKeys.jobs() + "02", entry(job_document(spec(2)), 2));
  m.put(kKeys.progresses() + "01", entry(R"({"schema":1,"fraction":0.5})", 3));
  const ClusterView v = m.view();
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(contains_problem(v, kKeys.jobs() + "02"));
  EXPECT_TRUE(v.progress.empty());
}

// A bad order document is still the order key: a new order is fenced on
// its revision and replaces it (fenced on 0, every write failed "changed
// meanwhile" for as long as the bad document stayed).
TEST(StoreMirror, ABadOrderDocumentIsStillFencedOn) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.order(), entry(R"({"schema":1,"order":"3,1"})", 4, 9));
  const ClusterView v = m.view();
  EXPECT_TRUE(contains_problem(v, kKeys.order()));
  EXPECT_TRUE(v.order.empty());
  EXPECT_EQ(v.order_revision, 9);
}

// A leader key psgate cannot read (by hand, or a later schema's) is a
// leadership all the same: the key's create revision and lease are in the
// view, so no gateway campaigns against it (each try is a raft proposal).
TEST(StoreMirror, AnUnreadableLeaderKeyIsStillALeadership) {
  StoreMirror m(kKeys, kClasses);
  StoreEntry e = entry(R"({"schema":2,"name":"gw-x","term":4})", 8, 12);
  e.lease = 77;
  m.put(kKeys.leader(), e);
  const ClusterView v = m.view();
  EXPECT_TRUE(contains_problem(v, kKeys.leader()));
  EXPECT_EQ(v.leader, "");
  EXPECT_EQ(v.leader_created, 8);
  EXPECT_EQ(v.leader_lease, 77);
  EXPECT_EQ(StoreMirror(kKeys, kClasses).view().leader_created, 0) << "no key: no leadership";
}

// A store restored from a snapshot (or another cluster at the same
// endpoints) starts its revisions over: a full read below the last revision
// seen starts a new epoch, and a view of a new epoch is newer than what a
// gateway applied whatever its revision. Compared on revisions alone, every
// change was ignored until the new store passed the old one's high-water
// mark (hours of writes), and a write's reply claimed it in force.
TEST(StoreMirror, AStoreThatStartedOverIsANewEpoch) {
  StoreMirror m(kKeys, kClasses);
  m.reset({{kKeys.order(), entry(order_document({1, 2}), 5, 100)}}, 100);
  const ClusterView before = m.view();
  m.reset({{kKeys.order(), entry(order_document({1, 2}), 5, 90)}}, 1000);  // a reconnect: the store moved on
  EXPECT_EQ(m.view().store_epoch, before.store_epoch);
  m.reset({{kKeys.order(), entry(order_document({2, 1}), 5, 30)}}, 40);  // restored
  const ClusterView after = m.view();
  EXPECT_NE(after.store_epoch, before.store_epoch);
  EXPECT_EQ(after.order, (std::vector<uint32_t>{2, 1}));
  EXPECT_TRUE(view_is_newer(after, before.store_epoch, 1000)) << "revision 40 of a new store is news";
  EXPECT_FALSE(view_is_newer(after, after.store_epoch, 40));
  EXPECT_TRUE(view_is_newer(after, after.store_epoch, 39));
  // Another store (its cluster id changed at every endpoint) already past
  // the old one's revision: a new epoch all the same.
  m.reset({{kKeys.order(), entry(order_document({1, 2}), 5, 2000)}}, 5000, /*replaced=*/true);
  EXPECT_NE(m.view().store_epoch, after.store_epoch);
  EXPECT_TRUE(view_is_newer(m.view(), after.store_epoch, 1'000'000));
}

// A key outside the layout is named as ignored, and its value is not kept:
// 280 MB of junk under the prefix must not be 280 MB in every gateway.
TEST(StoreMirror, AKeyOutsideTheLayoutKeepsNoValue) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.all() + "junk/1", entry(std::string(1 << 20, 'x'), 1));
  m.put(kKeys.progresses() + "x", entry(std::string(1000, 'y'), 2));
  m.put(kKeys.order(), entry(order_document({1}), 3));
  EXPECT_TRUE(m.entries().at(kKeys.all() + "junk/1").value.empty());
  EXPECT_TRUE(m.entries().at(kKeys.progresses() + "x").value.empty());
  EXPECT_FALSE(m.entries().at(kKeys.order()).value.empty());
  const ClusterView v = m.view();
  EXPECT_TRUE(contains_problem(v, kKeys.all() + "junk/1"));
  EXPECT_TRUE(contains_problem(v, kKeys.progresses() + "x"));
  EXPECT_EQ(v.order, (std::vector<uint32_t>{1}));
}

// Under P/jobs/ and P/gateways/, a key whose name does not parse as the
// layout says (a job id not canonical, a gateway name no cluster.name could
// be) is no job or registration: ignored as any key outside the layout. Its
// value was kept, and a write to a stray job key moved what a gateway
// applies (applied_part, jobs_part), so every gateway applied the store
// again at each one.
TEST(StoreMirror, StrayKeysUnderJobsAndGatewaysAreIgnored) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  GatewayInfo g;
  g.name = "gw-a";
  g.health = "ok";
  m.put(kKeys.gateway("gw-a"), registration(g, 2));
  const ClusterView before = m.view();
  const std::vector<std::string> stray = {kKeys.jobs() + "02",
                                          kKeys.jobs() + "x",
                                          kKeys.jobs() + "1/x",
                                          kKeys.jobs() + "0",
                                          kKeys.jobs(),
                                          kKeys.gateways(),
                                          kKeys.gateways() + "a/b",
                                          kKeys.gateways() + "gw\x01",
                                          kKeys.gateways() + std::string(65, 'g')};
  int64_t rev = 3;
  for (const std::string& key : stray) {
    EXPECT_FALSE(m.keeps_value(key)) << key;
    m.put(key, entry(std::string(1000, 'x'), rev, rev));
    ++rev;
  }
  // Written again, as documents that would parse under a layout key.
  for (const std::string& key : stray) {
    m.put(key, entry(key.rfind(kKeys.jobs(), 0) == 0 ? job_document(spec(2)) : gateway_json(g).dump(), 3, rev));
    ++rev;
    EXPECT_TRUE(m.entries().at(key).value.empty()) << key << ": its value kept";
  }
  const ClusterView v = m.view();
  EXPECT_EQ(v.applied_part, before.applied_part) << "nothing a gateway applies changed: no re-apply";
  EXPECT_EQ(v.jobs_part, before.jobs_part);
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{1}));
  EXPECT_TRUE(v.refused_jobs.empty());
  ASSERT_EQ(v.gateways.size(), 1u);
  EXPECT_EQ(v.gateways.count("gw-a"), 1u);
  EXPECT_EQ(refused_documents_trouble(v, kKeys), "") << "no document of the layout refused";
  for (const std::string& key : stray) {
    const auto p = std::find_if(v.problems.begin(), v.problems.end(),
                                [&](const std::string& text) { return text.rfind(key + ": ", 0) == 0; });
    ASSERT_NE(p, v.problems.end()) << key << " not reported";
    EXPECT_NE(p->find("ignored"), std::string::npos) << *p;
  }
  // The layout's own keys keep theirs.
  for (const std::string& key :
       {kKeys.job(2), kKeys.job(4294967295u), kKeys.gateway("gw-b"), kKeys.gateway(std::string(64, 'g'))})
    EXPECT_TRUE(m.keeps_value(key)) << key;
}

TEST(StoreMirror, WronglyTypedSchemaIsAProblemNotAnException) {
  // "schema" of the wrong JSON type, in every document kind that checks it.
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(R"({"schema":"1","job":1,"match":["dport=80"]})", 1));
  m.put(kKeys.order(), entry(R"({"schema":"1","order":[1]})", 2));
  m.put(kKeys.policy(), entry(R"({"schema":[1],"name":"fifo"})", 3));
  m.put(kKeys.progress(1), entry(R"({"schema":null,"fraction":0.5})", 4));
  m.put(kKeys.ranks(), entry(R"({"schema":"1","ranks":[]})", 5));
  m.put(kKeys.gateway("gw"), entry(R"({"schema":"1","name":"gw"})", 6));
  ClusterView v;
  ASSERT_NO_THROW(v = m.view());
  for (const std::string& key :
       {kKeys.job(1), kKeys.order(), kKeys.policy(), kKeys.progress(1), kKeys.ranks(), kKeys.gateway("gw")})
    EXPECT_TRUE(contains_problem(v, key)) << key;
  EXPECT_TRUE(v.gateways.empty());
  EXPECT_TRUE(v.order.empty());
  EXPECT_FALSE(v.ranks);
  EXPECT_TRUE(parse_gateway(R"({"schema":"1","name":"gw"})").error().size() > 0);
}

TEST(StoreMirror, EraseAndResetForgetWhatVanished) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  m.put(kKeys.job(2), entry(job_document(spec(2)), 2));
  m.put(kKeys.job(3), entry("garbage", 3));
  m.put(kKeys.order(), entry(order_document({2, 1}), 4));
  m.erase(kKeys.job(1));
  m.erase(kKeys.job(3));
  ClusterView v = m.view();
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(v.problems.empty()) << "an erased bad job is no problem any more";
  EXPECT_EQ(v.full_order(), (std::vector<uint32_t>{2}));

  // A re-put with the same key replaces the parse.
  m.put(kKeys.job(2), entry(job_document(spec(2, "renamed")), 2, 9));
  EXPECT_EQ(m.view().jobs.at(0).spec.name, "renamed");

  std::map<std::string, StoreEntry> full;
  full[kKeys.job(7)] = entry(job_document(spec(7)), 20);
  full[kKeys.policy()] = entry(policy_document(PolicyParams{PolicyKind::kFifo, 1'000'000'000}), 21);
  m.reset(full, 25);
  v = m.view();
  EXPECT_EQ(v.revision, 25);
  EXPECT_EQ(ids(v), (std::vector<uint32_t>{7}));
  EXPECT_TRUE(v.order.empty());
  EXPECT_EQ(v.order_revision, 0);
  ASSERT_TRUE(v.policy);
  EXPECT_EQ(v.policy->kind, PolicyKind::kFifo);
  EXPECT_EQ(m.entries().size(), 2u);
  EXPECT_EQ(m.entries().count(kKeys.job(2)), 0u);
}

TEST(StoreMirror, AppliedPartChangesOnlyForWhatAGatewayApplies) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  m.put(kKeys.job(2), entry(job_document(spec(2)), 2));
  auto part = [&] { return m.view().applied_part; };
  const auto base = part();
  EXPECT_EQ(base, (std::pair<int64_t, size_t>{2, 2}));

  GatewayInfo g;
  g.name = "gw-a";
  g.health = "ok";
  m.put(kKeys.gateway("gw-a"), registration(g, 3));
  m.put(kKeys.gateway("gw-a"), registration(g, 3, 4));  // heartbeat
  m.put(kKeys.leader(), entry(leader_document("gw-a"), 5));
  EXPECT_EQ(part(), base) << "registrations and leadership are not applied state";

  auto changes = [&](const std::string& key, const std::string& value, int64_t rev) {
    const auto before = part();
    m.put(key, entry(value, rev));
    EXPECT_NE(part(), before) << key;
  };
  changes(kKeys.job(3), job_document(spec(3)), 6);
  changes(kKeys.order(), order_document({3, 1}), 7);
  changes(kKeys.policy(), policy_document(PolicyParams{PolicyKind::kProgress, 1'000'000'000}), 8);
  changes(kKeys.progress(1), progress_document(JobProgress{0.25, {}, {}}), 9);
  changes(kKeys.ranks(), ranks_document({{1, 0, 0}}, "progress", 0, "gw-a"), 10);

  // Deleting the newest key still changes it (the count drops).
  const auto before = part();
  m.erase(kKeys.ranks());
  EXPECT_NE(part(), before);
  const auto before2 = part();
  m.erase(kKeys.job(2));  // an older key
  EXPECT_NE(part(), before2);
}

TEST(ClusterView, FullOrder) {
  ClusterView v;
  for (uint32_t id : {4, 1, 3, 2}) v.jobs.push_back(ClusterJob{spec(id), static_cast<int64_t>(v.jobs.size() + 1)});
  v.order = {2, 99, 3, 2};  // 99 unknown, 2 twice
  EXPECT_EQ(v.full_order(), (std::vector<uint32_t>{2, 3, 4, 1}));
  v.order = {};
  EXPECT_EQ(v.full_order(), (std::vector<uint32_t>{4, 1, 3, 2}));
}

TEST(ClusterDocuments, OrderPolicyProgressRanksLeaderParseBack) {
  StoreMirror m(kKeys, kClasses);
  for (uint32_t id : {1, 2, 3}) m.put(kKeys.job(id), entry(job_document(spec(id)), id));
  m.put(kKeys.order(), entry(order_document({3, 1}), 4, 17));
  m.put(kKeys.progress(1), entry(progress_document(JobProgress{0.125, 7, {}}), 5));
  m.put(kKeys.progress(2), entry(progress_document(JobProgress{{}, {}, 123456789012ull}), 6));
  m.put(kKeys.ranks(), entry(ranks_document({{3, 0, 1}, {1, 2, 3}}, "batch", 42, "gw-b"), 7));
  m.put(kKeys.leader(), entry(leader_document("gw-b"), 8, 12));
  ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  EXPECT_EQ(v.order, (std::vector<uint32_t>{3, 1}));
  EXPECT_EQ(v.order_revision, 17);
  EXPECT_EQ(v.full_order(), (std::vector<uint32_t>{3, 1, 2}));
  ASSERT_EQ(v.progress.size(), 2u);
  EXPECT_EQ(v.progress.at(1).fraction, 0.125);
  EXPECT_EQ(v.progress.at(1).iteration, 7u);
  EXPECT_FALSE(v.progress.at(1).batch);
  EXPECT_EQ(v.progress.at(2).batch, 123456789012ull);
  EXPECT_FALSE(v.progress.at(2).fraction);
  ASSERT_TRUE(v.ranks);
  EXPECT_EQ(*v.ranks, (std::vector<JobRanks>{{3, 0, 1}, {1, 2, 3}}));
  EXPECT_EQ(v.ranks_policy, "batch");
  EXPECT_EQ(v.ranks_rotation, 42u);
  EXPECT_EQ(v.leader, "gw-b");
  EXPECT_EQ(v.leader_created, 8);

  // Every policy, with an interval that is not a round number.
  for (const PolicyName& n : kPolicyNames) {
    for (RotateOn rot : {RotateOn::kTime, RotateOn::kIteration}) {
      if (rot == RotateOn::kIteration && n.kind != PolicyKind::kRoundRobin) continue;
      const PolicyParams p{n.kind, 1'500'000'001, rot};
      m.put(kKeys.policy(), entry(policy_document(p), 20));
      v = m.view();
      ASSERT_TRUE(v.policy) << n.name << ": " << (v.problems.empty() ? "" : v.problems.front());
      EXPECT_EQ(v.policy->kind, p.kind) << n.name;
      EXPECT_EQ(v.policy->interval_ns, p.interval_ns) << n.name;
      EXPECT_EQ(v.policy->rotate_on, p.rotate_on) << n.name;
    }
  }
  // No interval stored: the policy's default.
  m.put(kKeys.policy(), entry(R"({"schema":1,"name":"progress"})", 21));
  EXPECT_EQ(m.view().policy->interval_ns, default_policy_interval_ns(PolicyKind::kProgress));
}

TEST(ClusterDocuments, EmptyOrderParses) {
  // What store_write writes when the last listed job is removed.
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.order(), entry(order_document({}), 3));
  const ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  EXPECT_TRUE(v.order.empty());
  EXPECT_EQ(v.order_revision, 3);
}

TEST(ClusterDocuments, GatewayRoundTrips) {
  GatewayInfo g;
  g.name = "gw-a";
  g.version = "1.2.3";
  g.address = "10.0.0.9";
  g.health = "degraded";
  g.applied_revision = 1234;
  g.degraded_since_s = 1700000000.25;
  g.top_job = "7";
  g.policy = "round-robin";
  g.rx_packets = 1ull << 40;
  g.tx_packets = 5;
  g.dropped = 6;
  g.jobs[7] = JobMeasure{3, 1'000'000, 250'000};
  g.jobs[4294967295u] = JobMeasure{0, 0, 1};
  auto back = parse_gateway(gateway_json(g).dump());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, g);

  g.degraded_since_s.reset();
  g.jobs.clear();
  back = parse_gateway(gateway_json(g).dump());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, g);

  // Round-robin's parameters go with its name; the other policies have none.
  describe_policy(g, PolicyParams{PolicyKind::kRoundRobin, 500'000'000, RotateOn::kIteration});
  EXPECT_EQ(gateway_json(g)["policy_params"], nlohmann::json({{"interval", "500ms"}, {"rotate_on", "iteration"}}));
  back = parse_gateway(gateway_json(g).dump());
  ASSERT_TRUE(back.ok()) << back.error();
  EXPECT_EQ(*back, g);
  EXPECT_EQ(policy_label(*back), "round-robin(iteration,500ms)");
  describe_policy(g, PolicyParams{PolicyKind::kProgress, 1'000'000'000, RotateOn::kTime});
  EXPECT_FALSE(gateway_json(g).contains("policy_params"));
  EXPECT_EQ(policy_label(g), "progress");

  // A registration written by hand with round-robin's parameters on another
  // policy: they are ignored (no "progress(20s)", no false mismatch with
  // gateways that run progress), even malformed ones.
  for (const nlohmann::json& params :
       {nlohmann::json({{"interval", "20s"}, {"rotate_on", "time"}}), nlohmann::json("not an object")}) {
    nlohmann::json doc = gateway_json(g);
    doc["policy_params"] = params;
    back = parse_gateway(doc.dump());
    ASSERT_TRUE(back.ok()) << back.error();
    EXPECT_EQ(*back, g) << params;
    EXPECT_EQ(policy_label(*back), "progress") << params;
  }

  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.gateway("gw-a"), registration(g, 2));
  const ClusterView v = m.view();
  ASSERT_EQ(v.gateways.count("gw-a"), 1u);
  EXPECT_EQ(v.gateways.at("gw-a"), g);

  // Under another gateway's key: refused, the real one kept.
  GatewayInfo other = g;
  other.name = "gw-b";
  other.rx_packets = 1;
  m.put(kKeys.gateway("gw-a") + "x", registration(other, 3));
  m.put(kKeys.gateway("gw-b"), registration(g, 4));
  const ClusterView v2 = m.view();
  EXPECT_EQ(v2.gateways.size(), 1u);
  EXPECT_EQ(v2.gateways.at("gw-a"), g);
  EXPECT_TRUE(contains_problem(v2, kKeys.gateway("gw-a") + "x"));
  EXPECT_TRUE(contains_problem(v2, kKeys.gateway("gw-b")));

  EXPECT_FALSE(parse_gateway("[]").ok());
  EXPECT_FALSE(parse_gateway(R"({"schema":1})").ok()) << "no name";
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[[1,2]]})").ok()) << "short job entry";
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[["a",1,2,3]]})").ok());
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[[-1,1,2,3]]})").ok()) << "negative id";
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[[4294967296,1,2,3]]})").ok()) << "id over 32 bits";
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[[1,-5,2,3]]})").ok()) << "negative count";
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","jobs":[[1,1.5,2,3]]})").ok()) << "fraction";
}

// A registration's numbers are taken only in range, and its errors name the
// field: json's own conversion read -1 as 2^64-1 packets.
TEST(ClusterDocuments, RegistrationFieldsAreCheckedByName) {
  const std::pair<const char*, const char*> bad[] = {
      {R"({"schema":1,"name":"x","counters":{"rx_packets":-1}})", "\"counters.rx_packets\""},
      {R"({"schema":1,"name":"x","counters":{"dropped":1.5}})", "\"counters.dropped\""},
      {R"({"schema":1,"name":"x","counters":[]})", "\"counters\""},
      {R"({"schema":1,"name":"x","applied_revision":-3})", "\"applied_revision\""},
      {R"({"schema":1,"name":"x","health":7})", "\"health\""},
      {R"({"schema":1,"name":"x","policy":["static"]})", "\"policy\""},
      {R"({"schema":1,"name":7})", "\"name\""},
      {R"({"schema":1,"name":"x","degraded_since":"yesterday"})", "\"degraded_since\""},
      {R"({"schema":1,"name":"x","jobs":{}})", "\"jobs\""},
      {R"({"schema":1,"name":"x","jobs":[[1,2,3,4],[1,2]]})", "\"jobs\"[1]"},
      {R"({"schema":1,"name":"x","jobs":[[1,-2,3,4]]})", "\"jobs\"[0]"},
  };
  for (const auto& [doc, field] : bad) {
    auto g = parse_gateway(doc);
    ASSERT_FALSE(g.ok()) << doc;
    EXPECT_NE(g.error().find(field), std::string::npos) << doc << ": " << g.error();
  }
  auto g =
      parse_gateway(R"({"schema":1,"name":"x","degraded_since":null,"counters":{"rx_packets":18446744073709551615}})");
  ASSERT_TRUE(g.ok()) << g.error();
  EXPECT_EQ(g->rx_packets, UINT64_MAX);
  EXPECT_FALSE(g->degraded_since_s);
  EXPECT_EQ(g->policy, "") << "an older gateway's registration names no policy";
  // A policy is a name (said in every gateway's health), not a document.
  EXPECT_TRUE(parse_gateway(R"({"schema":1,"name":"x","policy":")" + std::string(64, 'p') + "\"}").ok());
  EXPECT_FALSE(parse_gateway(R"({"schema":1,"name":"x","policy":")" + std::string(65, 'p') + "\"}").ok());
}

// A registration written without a lease (by hand: gateways register under
// their lease) never expires: it was listed among the gateways for ever,
// its telemetry summed by the leader. Now it is named apart, and logged.
TEST(ClusterDocuments, RegistrationsWithoutALeaseAreNotListed) {
  StoreMirror m(kKeys, kClasses);
  GatewayInfo live, stale;
  live.name = "gw-live";
  stale.name = "gw-stale";
  stale.jobs[1] = JobMeasure{9, 9, 9};
  m.put(kKeys.gateway(live.name), registration(live, 2));
  m.put(kKeys.gateway(stale.name), entry(gateway_json(stale).dump(), 3));
  const ClusterView v = m.view();
  ASSERT_EQ(v.gateways.size(), 1u);
  EXPECT_EQ(v.gateways.count("gw-live"), 1u);
  EXPECT_EQ(v.unleased_gateways, (std::vector<std::string>{"gw-stale"}));
  ASSERT_TRUE(contains_problem(v, kKeys.gateway("gw-stale")));
  EXPECT_EQ(refused_documents_trouble(v, kKeys), "") << "not a disagreement on what the gateways apply";
  // Written again under a lease (the gateway of that name registering over it): listed.
  m.put(kKeys.gateway(stale.name), registration(stale, 3, 4));
  EXPECT_EQ(m.view().gateways.size(), 2u);
  EXPECT_TRUE(m.view().unleased_gateways.empty());
}

// Without P/policy each gateway runs its own [policy]. With a static leader
// (which writes no ranks) the round-robin gateways ranked by themselves,
// and every gateway said ok: the registrations did not say what each runs.
TEST(ClusterPolicy, MixedPoliciesWithoutAStorePolicyAreSaid) {
  ClusterView v;
  auto reg = [&v](const std::string& name, const std::string& policy) {
    v.gateways[name].name = name;
    v.gateways[name].policy = policy;
  };
  // This gateway's own policy, known by name (no parameters).
  auto named = [](const std::string& policy) {
    GatewayInfo own;
    own.policy = policy;
    return own;
  };
  reg("gw-a", "static");
  reg("gw-b", "static");
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", named("static")), "");
  reg("gw-old", "");  // an older gateway: says nothing
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", named("static")), "");
  reg("gw-c", "round-robin");
  const std::string said = policy_mismatch_trouble(v, "gw-a", named("static"));
  EXPECT_NE(said.find("\"round-robin\" on gw-c"), std::string::npos) << said;
  EXPECT_NE(said.find("\"static\" on gw-a, gw-b"), std::string::npos) << said;
  EXPECT_NE(said.find("psgatectl policy NAME"), std::string::npos) << said;
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-c", named("round-robin")), said) << "the same words on every gateway";
  // This gateway's own policy counts over its registration (which may lag).
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-c", named("static")), "");
  // Many gateways: a few named, the rest counted.
  for (int i = 0; i < 10; ++i) reg("gw-s" + std::to_string(i), "static");
  EXPECT_NE(policy_mismatch_trouble(v, "gw-a", named("static")).find("and 9 more"), std::string::npos);
  // P/policy in the store: every gateway runs it, whatever its [policy].
  v.policy = PolicyParams{};
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", named("static")), "");
}

// Round-robin gateways with different intervals (or rotate_on) and no
// P/policy: every registration said "round-robin" and every gateway said
// ok, though when the order rotates depended on which of them led. Their
// parameters differ as two policies do, said in the same words.
TEST(ClusterPolicy, MixedRoundRobinParametersAreSaid) {
  ClusterView v;
  auto rr = [](uint64_t interval_ns, RotateOn on) {
    GatewayInfo g;
    describe_policy(g, PolicyParams{PolicyKind::kRoundRobin, interval_ns, on});
    return g;
  };
  auto reg = [&v](const std::string& name, GatewayInfo g) {
    g.name = name;
    v.gateways[name] = g;
  };
  const GatewayInfo fast = rr(500'000'000, RotateOn::kTime), slow = rr(2'000'000'000, RotateOn::kTime);
  reg("gw-a", fast);
  reg("gw-b", fast);
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", fast), "");
  reg("gw-old", GatewayInfo{});
  v.gateways["gw-old"].policy = "round-robin";  // an older psgate: the name only, no parameters
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", fast), "") << "no parameters: compared by name";
  reg("gw-c", slow);
  const std::string said = policy_mismatch_trouble(v, "gw-a", fast);
  EXPECT_NE(said.find("\"round-robin(500ms)\" on gw-a, gw-b"), std::string::npos) << said;
  EXPECT_NE(said.find("\"round-robin(2s)\" on gw-c"), std::string::npos) << said;
  EXPECT_NE(said.find("run different policies"), std::string::npos) << said;
  EXPECT_NE(said.find("psgatectl policy NAME"), std::string::npos) << said;
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-c", slow), said) << "the same words on every gateway";
  // rotate_on alone differs too.
  v.gateways.erase("gw-c");
  reg("gw-d", rr(500'000'000, RotateOn::kIteration));
  EXPECT_NE(policy_mismatch_trouble(v, "gw-a", fast).find("\"round-robin(iteration,500ms)\" on gw-d"),
            std::string::npos);
  // This gateway's own parameters count over its registration (which may lag).
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-d", fast), "");
  v.policy = PolicyParams{PolicyKind::kRoundRobin, 1'000'000'000, RotateOn::kTime};
  EXPECT_EQ(policy_mismatch_trouble(v, "gw-a", fast), "");
}

// A registration's policy parameters are checked as its other fields are,
// naming the field.
TEST(ClusterPolicy, BadPolicyParametersAreRefusedByName) {
  const auto reg = [](const std::string& params) {
    return parse_gateway(R"({"schema":1,"name":"gw-a","policy":"round-robin","policy_params":)" + params + "}");
  };
  EXPECT_TRUE(reg(R"({"interval":"1s","rotate_on":"time"})").ok());
  EXPECT_TRUE(reg("null").ok());
  for (const char* bad :
       {R"("1s")", R"({"interval":"0s","rotate_on":"time"})", R"({"interval":"soon","rotate_on":"time"})",
        R"({"interval":"1s","rotate_on":"sometimes"})", R"({"rotate_on":"time"})", R"({"interval":"1s"})"}) {
    auto r = reg(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("policy_params"), std::string::npos) << r.error();
  }
}

// Registrations under names no gateway could be configured with (written
// by hand) are problems, not gateways.
TEST(ClusterDocuments, RegistrationsUnderUnconfigurableNamesAreRefused) {
  StoreMirror m(kKeys, kClasses);
  for (const std::string& name : std::vector<std::string>{"", "a/b", "gw\x01", std::string(65, 'g')}) {
    GatewayInfo g;
    g.name = name;
    m.put(kKeys.gateway(name), registration(g, 2));
  }
  GatewayInfo ok;
  ok.name = std::string(64, 'g');
  m.put(kKeys.gateway(ok.name), registration(ok, 3));
  const ClusterView v = m.view();
  ASSERT_EQ(v.gateways.size(), 1u);
  EXPECT_EQ(v.gateways.begin()->first, ok.name);
  EXPECT_EQ(v.problems.size(), 4u);
  EXPECT_TRUE(contains_problem(v, kKeys.gateway("a/b")));
}

TEST(ClusterDocuments, RanksOutOfRangeAreRefused) {
  for (const char* bad : {R"([[1,-1,0]])", R"([[1,0,4294967296]])", R"([[-3,0,0]])", R"([[1,0]])", R"([[1,0.5,0]])"}) {
    StoreMirror m(kKeys, kClasses);
    m.put(kKeys.ranks(), entry(std::string(R"({"schema":1,"policy":"fifo","ranks":)") + bad + "}", 1));
    ClusterView v;
    ASSERT_NO_THROW(v = m.view()) << bad;
    EXPECT_FALSE(v.ranks) << bad;
    EXPECT_TRUE(contains_problem(v, kKeys.ranks())) << bad;
  }
}

// Each field of a ranks document is checked and named: rotation -1 was read
// as 2^64-1 (the next leader resumed its round-robin from it), a missing or
// unknown policy and a job ranked twice were taken, and errors were the JSON
// library's, naming no field.
TEST(ClusterDocuments, RanksDocumentFieldsAreCheckedByName) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"schema":1,"policy":"round-robin","rotation":-1,"ranks":[[1,0,0]]})", "\"rotation\" is not an integer"},
      {R"({"schema":1,"policy":"round-robin","rotation":"3","ranks":[[1,0,0]]})", "\"rotation\" is not an integer"},
      {R"({"schema":1,"ranks":[[1,0,0]]})", "\"policy\" is missing"},
      {R"({"schema":1,"policy":"nonsense","ranks":[[1,0,0]]})", "\"policy\" is not one of"},
      {R"({"schema":1,"policy":"fifo","ranks":[[1,0,0],[1,1,1]]})", "\"ranks\"[1]: job 1 again"},
      {R"({"schema":1,"policy":"fifo","ranks":"bad"})", "\"ranks\" is not a list"},
      {R"({"schema":1,"policy":"fifo"})", "\"ranks\" is missing"},
      {R"({"schema":1,"policy":"fifo","ranks":[[1,0]]})", "\"ranks\"[0]: not a list"},
      {R"({"schema":1,"policy":"fifo","ranks":[[1,0,-2]]})", "\"ranks\"[0]: entry 2 is not an integer"},
  };
  for (const auto& [doc, expected] : cases) {
    StoreMirror m(kKeys, kClasses);
    m.put(kKeys.ranks(), entry(doc, 1));
    const ClusterView v = m.view();
    EXPECT_FALSE(v.ranks) << doc;
    ASSERT_TRUE(contains_problem(v, kKeys.ranks())) << doc;
    const std::string& p = v.problems.front();
    EXPECT_NE(p.find(expected), std::string::npos) << doc << " -> " << p;
  }
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.ranks(), entry(R"({"schema":1,"policy":"round-robin","rotation":18,"ranks":[[1,0,2],[2,1,1]]})", 1));
  const ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  ASSERT_TRUE(v.ranks);
  EXPECT_EQ(v.ranks->size(), 2u);
  EXPECT_EQ(v.ranks_policy, "round-robin");
}

// ---- store_write ------------------------------------------------------------------

JobRecord record(uint32_t id) {
  JobRecord r;
  r.spec = spec(id);
  return r;
}

// A registry holding `ids` in that order (age and rank), ranked from 1 so a
// job given rank 0 goes above all of them (equal ranks keep age order).
JobRegistry registry(const std::vector<uint32_t>& ids) {
  JobRegistry reg(64);
  uint32_t rank = 1;
  for (uint32_t id : ids) EXPECT_TRUE(reg.add(record(id), rank++).ok());
  return reg;
}

std::vector<std::string> put_keys(const StoreWrite& w) {
  std::vector<std::string> out;
  for (const auto& [k, v] : w.puts) out.push_back(k);
  return out;
}

const std::string* put_value(const StoreWrite& w, const std::string& key) {
  for (const auto& [k, v] : w.puts)
    if (k == key) return &v;
  return nullptr;
}

// The order a write stores, read back as a gateway would.
std::vector<uint32_t> written_order(const StoreWrite& w) {
  const std::string* doc = put_value(w, kKeys.order());
  if (!doc) return {};
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.order(), entry(*doc, 1));
  const ClusterView v = m.view();
  EXPECT_TRUE(v.problems.empty()) << v.problems.front();
  return v.order;
}

TEST(StoreWrite, NothingChangedWritesNothing) {
  const JobRegistry reg = registry({1, 2});
  const PolicyParams p;
  const StoreWrite w = store_write(kKeys, ClusterView{}, reg, p, reg, p);
  EXPECT_TRUE(w.empty());
  EXPECT_TRUE(w.absent.empty());
  EXPECT_TRUE(w.unchanged_since.empty());
}

// psgatectl policy NAME writes P/policy where the store has none, even when
// this gateway runs NAME already (its [policy]): it is health's remedy for
// gateways of mixed [policy], and wrote nothing there. Where the store holds
// it, nothing; other commands write no policy the store lacks.
TEST(StoreWrite, NamingThePolicyWritesItWhereTheStoreHasNone) {
  const JobRegistry reg = registry({1});
  const PolicyParams running;  // static: this gateway's [policy]
  const StoreWrite w = store_write(kKeys, ClusterView{}, reg, running, reg, running, /*policy_named=*/true);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.policy()}));
  EXPECT_EQ(*put_value(w, kKeys.policy()), policy_document(running));
  ClusterView stored;
  stored.policy = running;
  EXPECT_TRUE(store_write(kKeys, stored, reg, running, reg, running, true).empty());
  ClusterView other;
  other.policy = PolicyParams{PolicyKind::kRoundRobin, default_policy_interval_ns(PolicyKind::kRoundRobin)};
  EXPECT_EQ(put_keys(store_write(kKeys, other, reg, running, reg, running, true)),
            (std::vector<std::string>{kKeys.policy()}));
  EXPECT_TRUE(store_write(kKeys, ClusterView{}, reg, running, reg, running).empty());
}

// A job document that never parsed, removed: as a removal does, its key
// (fenced on the revision seen), its progress and its place in the stored
// order (fenced on the order seen), so that the id added again takes none of
// them; a job the order does not name leaves the order alone.
TEST(StoreWrite, RemovingARefusedJobDocumentTakesItsProgressAndPlaceToo) {
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(1), entry(job_document(spec(1)), 1));
  m.put(kKeys.job(9), entry(job_document(spec(9)), 2));
  m.put(kKeys.order(), entry(R"({"schema":1,"order":[9,1]})", 3));
  m.put(kKeys.progress(9), entry(R"({"schema":1,"fraction":0.5})", 4));
  m.put(kKeys.job(7), entry("{not json", 5));
  // A gateway that never saw 9's good document: a bad one over it is all
  // it reads (one that saw it keeps it in force, and removes job 9 as any).
  std::map<std::string, StoreEntry> now = m.entries();
  now[kKeys.job(9)] = entry("{not json either", 2, 6);
  StoreMirror fresh(kKeys, kClasses);
  fresh.reset(now, 6);
  const ClusterView v = fresh.view();
  ASSERT_EQ(v.refused_jobs.count(9), 1u);
  ASSERT_EQ(v.refused_jobs.count(7), 1u);
  const StoreWrite w = refused_job_removal(kKeys, v, 9);
  EXPECT_EQ(w.deletes, (std::vector<std::string>{kKeys.job(9), kKeys.progress(9)}));
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.order()}));
  EXPECT_EQ(*put_value(w, kKeys.order()), order_document({1}));
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.job(9), 6}, {kKeys.order(), 3}}));
  const StoreWrite w7 = refused_job_removal(kKeys, v, 7);
  EXPECT_EQ(w7.deletes, (std::vector<std::string>{kKeys.job(7), kKeys.progress(7)}));
  EXPECT_TRUE(w7.puts.empty()) << "the order does not name 7";
  EXPECT_EQ(w7.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.job(7), 5}}));
  StoreWrite both;
  append_store_write(both, w);
  append_store_write(both, w7);
  EXPECT_EQ(both.deletes.size(), 4u);
  EXPECT_EQ(both.unchanged_since.size(), 3u);
}

TEST(StoreWrite, AddAJobAtTheEnd) {
  const JobRegistry before = registry({1, 2});
  JobRegistry after = before;
  JobRecord r = record(3);
  r.spec.police = RateSpec{8'000'000, 4096};
  ASSERT_TRUE(after.add(r, std::nullopt).ok());
  const PolicyParams p;
  const StoreWrite w = store_write(kKeys, ClusterView{}, before, p, after, p);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.job(3)}));
  EXPECT_EQ(w.absent, (std::vector<std::string>{kKeys.job(3)}));
  EXPECT_TRUE(w.deletes.empty());
  EXPECT_TRUE(w.unchanged_since.empty()) << "appending changes no stored order";
  // The document is the job.
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.job(3), entry(*put_value(w, kKeys.job(3)), 1));
  ASSERT_EQ(m.view().jobs.size(), 1u);
  JobSpec want = after.find(3)->spec;
  want.rank = 0;  // the order, not the document, ranks it
  EXPECT_EQ(m.view().jobs[0].spec, want);
}

TEST(StoreWrite, AddAJobOnTopWritesTheOrderFenced) {
  const JobRegistry before = registry({1, 2});
  JobRegistry after = before;
  ASSERT_TRUE(after.add(record(3), 0u).ok());
  ClusterView seen;
  seen.order = {2};
  seen.order_revision = 41;
  const PolicyParams p;
  const StoreWrite w = store_write(kKeys, seen, before, p, after, p);
  EXPECT_NE(put_value(w, kKeys.job(3)), nullptr);
  EXPECT_EQ(w.absent, (std::vector<std::string>{kKeys.job(3)}));
  std::vector<uint32_t> want;
  for (const JobRecord* j : after.in_rank_order()) want.push_back(j->spec.id);
  ASSERT_EQ(want.front(), 3u);
  EXPECT_EQ(written_order(w), want);
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.order(), 41}}));
}

TEST(StoreWrite, JobsLoadedInOneTransactionKeepTheirOrder) {
  // Several new jobs, last, share one create revision in the store: the view
  // orders them by id ("jobs/9" sorts after "jobs/10" as a key).
  StoreMirror m(kKeys, kClasses);
  for (uint32_t id : {9, 10, 11}) m.put(kKeys.job(id), entry(job_document(spec(id)), 5));
  EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{9, 10, 11}));
  EXPECT_EQ(m.view().full_order(), (std::vector<uint32_t>{9, 10, 11}));

  // Loaded in ascending order: the view's order is theirs, nothing to write.
  const JobRegistry before = registry({1});
  const PolicyParams p;
  JobRegistry after = before;
  for (uint32_t id : {9, 10, 11}) ASSERT_TRUE(after.add(record(id), std::nullopt).ok());
  StoreWrite w = store_write(kKeys, ClusterView{}, before, p, after, p);
  EXPECT_EQ(w.absent.size(), 3u);
  EXPECT_EQ(put_value(w, kKeys.order()), nullptr);
  // In another order: the order is written, or the cluster would rank them by id.
  after = before;
  for (uint32_t id : {11, 9, 10}) ASSERT_TRUE(after.add(record(id), std::nullopt).ok());
  w = store_write(kKeys, ClusterView{}, before, p, after, p);
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{1, 11, 9, 10}));
}

// A gateway that holds only some of the store's jobs (a smaller max_jobs,
// slots draining) rewrites the order for its own change: the jobs it does
// not hold keep their places. It once wrote its own jobs alone, and the
// others fell to the bottom on every gateway.
TEST(StoreWrite, AGatewayHoldingSomeJobsMovesOnlyThoseInTheOrder) {
  ClusterView seen;
  for (uint32_t id : {1, 2, 3, 9, 20}) seen.jobs.push_back(ClusterJob{spec(id), id});
  seen.order = {20, 9, 3, 2, 1};
  seen.order_revision = 7;
  const PolicyParams p;
  const JobRegistry before = registry({9, 2, 1});  // max_jobs 3: 20 and 3 refused here

  JobRegistry removed = before;
  ASSERT_TRUE(removed.remove(9).ok());
  StoreWrite w = store_write(kKeys, seen, before, p, removed, p);
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{20, 3, 2, 1}));
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.order(), 7}}));

  // Its own jobs re-ranked (1 over 9): each job it does not hold stays
  // behind the one it followed (3 behind 9), or on top (20).
  JobRegistry reranked(64);
  for (uint32_t id : {1, 9, 2}) ASSERT_TRUE(reranked.add(*before.find(id), std::nullopt).ok());
  w = store_write(kKeys, seen, before, p, reranked, p);
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{20, 1, 9, 3, 2}));

  // A job added on top of its own: above them, below the one it does not hold.
  JobRegistry added = before;
  ASSERT_TRUE(added.add(record(30), 0u).ok());
  w = store_write(kKeys, seen, before, p, added, p);
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{20, 30, 9, 3, 2, 1}));
}

TEST(StoreWrite, RemoveDeletesJobAndProgress) {
  const JobRegistry before = registry({1, 2, 3});
  JobRegistry after = before;
  ASSERT_TRUE(after.remove(2).ok());
  const PolicyParams p;
  // The stored order does not name job 2: no order write.
  ClusterView seen;
  seen.order = {3};
  seen.order_revision = 9;
  StoreWrite w = store_write(kKeys, seen, before, p, after, p);
  EXPECT_TRUE(w.puts.empty()) << put_keys(w).front();
  std::vector<std::string> dels = w.deletes;
  std::sort(dels.begin(), dels.end());
  EXPECT_EQ(dels, (std::vector<std::string>{kKeys.job(2), kKeys.progress(2)}));
  EXPECT_TRUE(w.unchanged_since.empty());
  EXPECT_FALSE(w.empty());

  // It does: the order is rewritten without it, fenced.
  seen.order = {2, 3};
  w = store_write(kKeys, seen, before, p, after, p);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.order()}));
  const std::vector<uint32_t> order = written_order(w);
  EXPECT_EQ(std::count(order.begin(), order.end(), 2u), 0);
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.order(), 9}}));

  // The last job, named in the order: an empty order (which parses).
  const JobRegistry one = registry({5});
  JobRegistry none = one;
  ASSERT_TRUE(none.remove(5).ok());
  seen.order = {5};
  w = store_write(kKeys, seen, one, p, none, p);
  ASSERT_NE(put_value(w, kKeys.order()), nullptr);
  EXPECT_TRUE(written_order(w).empty());

  // The last jobs, no order stored: an empty order too, fenced on its
  // absence, so that the prefix is not left empty. An empty prefix is one
  // wiped, which the gateways that had jobs say (health degraded); this
  // removal through psgatectl is not.
  w = store_write(kKeys, ClusterView{}, before, p, JobRegistry(64), p);
  ASSERT_NE(put_value(w, kKeys.order()), nullptr);
  EXPECT_TRUE(written_order(w).empty());
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.order(), 0}}));
  // Not while a job stays.
  w = store_write(kKeys, ClusterView{}, before, p, after, p);
  EXPECT_EQ(put_value(w, kKeys.order()), nullptr);
}

TEST(StoreWrite, ReorderWritesTheOrder) {
  const JobRegistry before = registry({1, 2, 3});
  JobRegistry after = before;
  ASSERT_TRUE(after.set_order({3, 1}).ok());
  ClusterView seen;
  seen.order_revision = 0;  // none stored yet: fenced on "absent"
  const PolicyParams p;
  StoreWrite w = store_write(kKeys, seen, before, p, after, p);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.order()}));
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{3, 1, 2}));
  EXPECT_EQ(w.unchanged_since, (std::vector<std::pair<std::string, int64_t>>{{kKeys.order(), 0}}));
  EXPECT_TRUE(w.absent.empty());

  JobRegistry ranked = before;
  ASSERT_TRUE(ranked.set_rank(3, 0).ok());
  w = store_write(kKeys, seen, before, p, ranked, p);
  EXPECT_EQ(written_order(w), (std::vector<uint32_t>{3, 1, 2}));
}

TEST(StoreWrite, PolicyAndProgress) {
  const JobRegistry reg = registry({1, 2});
  PolicyParams p;
  PolicyParams q{PolicyKind::kRoundRobin, 5'000'000'000, RotateOn::kIteration};
  StoreWrite w = store_write(kKeys, ClusterView{}, reg, p, reg, q);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.policy()}));
  StoreMirror m(kKeys, kClasses);
  m.put(kKeys.policy(), entry(*put_value(w, kKeys.policy()), 1));
  ASSERT_TRUE(m.view().policy);
  EXPECT_EQ(m.view().policy->kind, q.kind);
  EXPECT_EQ(m.view().policy->interval_ns, q.interval_ns);
  EXPECT_EQ(m.view().policy->rotate_on, q.rotate_on);
  // Only the rotation trigger differs: still a change.
  PolicyParams q2 = q;
  q2.rotate_on = RotateOn::kTime;
  EXPECT_EQ(put_keys(store_write(kKeys, ClusterView{}, reg, q, reg, q2)), (std::vector<std::string>{kKeys.policy()}));

  JobRegistry after = reg;
  ASSERT_TRUE(after.set_progress(2, JobProgress{0.75, 3, {}}).ok());
  w = store_write(kKeys, ClusterView{}, reg, p, after, p);
  EXPECT_EQ(put_keys(w), (std::vector<std::string>{kKeys.progress(2)}));
  m.put(kKeys.progress(2), entry(*put_value(w, kKeys.progress(2)), 2));
  ASSERT_EQ(m.view().progress.count(2), 1u);
  EXPECT_EQ(m.view().progress.at(2).fraction, 0.75);
  EXPECT_EQ(m.view().progress.at(2).iteration, 3u);
  // The same progress again: nothing.
  EXPECT_TRUE(store_write(kKeys, ClusterView{}, after, p, after, p).empty());
}

// What store_write writes, applied to a store, must make the cluster's
// order the registry's: random commands from a registry in step with the
// store, each write applied as etcd would (fences checked), the view's
// jobs and full_order() compared with the registry after.
TEST(StoreWrite, AppliedWritesKeepTheStoreInStepWithTheRegistry) {
  std::mt19937 rng(13);
  JobRegistry reg(256);
  StoreMirror m(kKeys, kClasses);
  int64_t revision = 0;
  uint32_t next_id = 1;
  PolicyParams policy;
  for (int step = 0; step < 3000; ++step) {
    const ClusterView seen = m.view();
    JobRegistry after = reg;
    PolicyParams policy_after = policy;
    std::vector<uint32_t> live;
    for (const JobRecord* j : reg.in_rank_order()) live.push_back(j->spec.id);
    const unsigned op = rng() % 7;
    if (op <= 1 || live.empty()) {  // jobs.add / jobs.load, with or without ranks
      std::vector<uint32_t> load(1 + rng() % (op == 1 ? 4 : 1));
      for (uint32_t& id : load) id = next_id++;
      std::shuffle(load.begin(), load.end(), rng);  // jobs.load's array, in any id order
      for (uint32_t id : load) {
        if (after.size() >= 200) break;
        std::optional<uint32_t> rank;
        if (rng() % 2) rank = rng() % (live.size() + 2);
        ASSERT_TRUE(after.add(record(id), rank).ok());
      }
    } else if (op == 2) {
      ASSERT_TRUE(after.remove(live[rng() % live.size()]).ok());
    } else if (op == 3) {
      std::vector<uint32_t> ids = live;
      std::shuffle(ids.begin(), ids.end(), rng);
      ids.resize(rng() % (ids.size() + 1));
      ASSERT_TRUE(after.set_order(ids).ok());
    } else if (op == 4) {
      ASSERT_TRUE(after.set_rank(live[rng() % live.size()], rng() % (live.size() + 1)).ok());
    } else if (op == 5) {
      ASSERT_TRUE(after.set_progress(live[rng() % live.size()], JobProgress{(rng() % 101) / 100.0, {}, {}}).ok());
    } else {
      policy_after.kind = kPolicyNames[rng() % std::size(kPolicyNames)].kind;
      policy_after.interval_ns = default_policy_interval_ns(policy_after.kind);
    }
    const StoreWrite w = store_write(kKeys, seen, reg, policy, after, policy_after);
    for (const std::string& key : w.absent) ASSERT_EQ(m.entries().count(key), 0u) << key;
    for (const auto& [key, rev] : w.unchanged_since) {
      auto it = m.entries().find(key);
      ASSERT_EQ(it == m.entries().end() ? 0 : it->second.mod_revision, rev) << key;
    }
    if (!w.empty()) ++revision;  // one transaction
    for (const std::string& key : w.deletes) m.erase(key);
    for (const auto& [key, value] : w.puts) {
      auto it = m.entries().find(key);
      const int64_t created = it == m.entries().end() ? revision : it->second.create_revision;
      m.put(key, entry(value, created, revision));
    }
    m.set_revision(revision);
    reg = std::move(after);
    policy = policy_after;
    // A removed job's slot is free once its packets have left (the control
    // plane's release_drained_slots): here, at once.
    for (const uint32_t slot : std::vector<uint32_t>(reg.draining_slots())) reg.release_slot(slot);

    const ClusterView v = m.view();
    ASSERT_TRUE(v.problems.empty()) << step << ": " << v.problems.front();
    std::vector<uint32_t> want;
    for (const JobRecord* j : reg.in_rank_order()) want.push_back(j->spec.id);
    ASSERT_EQ(v.full_order(), want) << "step " << step << " op " << op;
    // Age: the order of the writes, and by id within one (rule precedence
    // among jobs of one jobs.load is by id in the cluster).
    std::vector<std::pair<int64_t, uint32_t>> by_age;
    for (const JobRecord* j : reg.in_age_order())
      by_age.emplace_back(m.entries().at(kKeys.job(j->spec.id)).create_revision, j->spec.id);
    std::sort(by_age.begin(), by_age.end());
    std::vector<uint32_t> want_age;
    for (const auto& [rev, id] : by_age) want_age.push_back(id);
    ASSERT_EQ(ids(v), want_age) << "step " << step;
    for (const JobRecord* j : reg.in_age_order()) {
      auto p = v.progress.find(j->spec.id);
      ASSERT_EQ(p != v.progress.end() ? p->second.fraction : std::nullopt, j->progress.fraction) << step;
    }
    ASSERT_EQ(v.policy ? v.policy->kind : PolicyKind::kStatic, policy.kind) << step;
  }
}

// ---- the leader's policy ----------------------------------------------------------

ClusterView three_jobs() {
  ClusterView v;
  for (uint32_t id : {1, 2, 3}) v.jobs.push_back(ClusterJob{spec(id), id});
  return v;
}

uint32_t top(const std::vector<JobRanks>& ranks) {
  const auto it =
      std::min_element(ranks.begin(), ranks.end(), [](auto& a, auto& b) { return a.pull_rank < b.pull_rank; });
  return it == ranks.end() ? 0 : it->id;
}

TEST(ClusterRanks, ShortestFirstSumsBytesOverGateways) {
  ClusterView v = three_jobs();
  GatewayInfo a, b;
  a.name = "a";
  b.name = "b";
  // Per gateway job 1 looks shortest (40 left on each) but in all it has 80
  // left; job 2 has 60 left, all on gateway a; job 3 nothing measured.
  a.jobs[1] = JobMeasure{1, 100, 60};
  b.jobs[1] = JobMeasure{1, 100, 60};
  a.jobs[2] = JobMeasure{1, 100, 40};
  v.gateways = {{"a", a}, {"b", b}};
  PolicyState state;
  const auto ranks = cluster_ranks(v, PolicyParams{PolicyKind::kShortestFirst, 1'000'000'000}, state, 0);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(top(ranks), 2u);
  auto rank_of = [&](uint32_t id) {
    return std::find_if(ranks.begin(), ranks.end(), [&](auto& r) { return r.id == id; })->pull_rank;
  };
  EXPECT_LT(rank_of(2), rank_of(1));
  EXPECT_LT(rank_of(1), rank_of(3)) << "unknown size goes last";
}

TEST(ClusterRanks, BytesSummedOverGatewaysSaturate) {
  ClusterView v = three_jobs();
  GatewayInfo a, b;
  a.name = "a";
  b.name = "b";
  // Job 1's bytes left overflow 64 bits summed: wrapped, they would be
  // 94 per iteration, 74 left, and rank it first.
  a.jobs[1] = JobMeasure{1, UINT64_MAX - 5, 10};
  b.jobs[1] = JobMeasure{1, 100, 10};
  a.jobs[2] = JobMeasure{1, 1000, 40};
  v.gateways = {{"a", a}, {"b", b}};
  PolicyState state;
  const auto ranks = cluster_ranks(v, PolicyParams{PolicyKind::kShortestFirst, 1'000'000'000}, state, 0);
  EXPECT_EQ(top(ranks), 2u);
}

TEST(ClusterRanks, ProgressPolicyUsesStoredProgressAndOrder) {
  ClusterView v = three_jobs();
  v.order = {3, 2};
  v.progress[3] = JobProgress{0.9, {}, {}};
  v.progress[2] = JobProgress{0.2, {}, {}};
  v.progress[1] = JobProgress{0.5, {}, {}};
  PolicyState state;
  auto ranks = cluster_ranks(v, PolicyParams{PolicyKind::kProgress, 1'000'000'000}, state, 0);
  EXPECT_EQ(top(ranks), 2u);
  // Static: the cluster's order (3, 2, then 1).
  ranks = cluster_ranks(v, PolicyParams{}, state, 0);
  ASSERT_EQ(ranks.size(), 3u);
  EXPECT_EQ(ranks[0], (JobRanks{3, 0, 0}));
  EXPECT_EQ(ranks[1], (JobRanks{2, 1, 1}));
  EXPECT_EQ(ranks[2], (JobRanks{1, 2, 2}));
}

TEST(ClusterRanks, RoundRobinOnIterationTakesTheMostAnyGatewaySaw) {
  ClusterView v = three_jobs();
  GatewayInfo a, b;
  a.name = "a";
  b.name = "b";
  a.jobs[1] = JobMeasure{5, 0, 0};
  b.jobs[1] = JobMeasure{2, 0, 0};
  v.gateways = {{"a", a}, {"b", b}};
  const PolicyParams rr{PolicyKind::kRoundRobin, 3'600'000'000'000, RotateOn::kIteration};
  PolicyState state;
  EXPECT_EQ(top(cluster_ranks(v, rr, state, 1)), 1u);  // baseline: 5 iterations
  // Gateway b catches up to 5: the max did not move, no rotation. (A sum
  // would have moved from 7 to 10 and rotated.)
  v.gateways["b"].jobs[1].iterations_seen = 5;
  EXPECT_EQ(top(cluster_ranks(v, rr, state, 2)), 1u);
  // Gateway a sees iteration 6: the top job finished one, rotate.
  v.gateways["a"].jobs[1].iterations_seen = 6;
  EXPECT_EQ(top(cluster_ranks(v, rr, state, 3)), 2u);
}

// ---- the watch -----------------------------------------------------------------

TEST(WatchMessages, EventsApplyAndMoveTheRevision) {
  StoreMirror m(kKeys, kClasses);
  m.reset({{kKeys.job(1), entry(job_document(spec(1)), 5)}}, 5);
  WatchMessage msg;
  msg.revision = 7;
  msg.events.push_back(WatchEvent{true, kKeys.job(2), entry(job_document(spec(2)), 6)});
  msg.events.push_back(WatchEvent{false, kKeys.job(1), StoreEntry{"", 0, 7, 0}});
  EXPECT_EQ(apply_watch_message(m, msg), WatchOutcome::kChanged);
  EXPECT_EQ(m.revision(), 7);
  EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{2}));
}

// A watch catching up gets its events in batches, each under the store's
// current revision (etcd's syncWatchers): the mirror is complete up to the
// newest event it has, not the header's revision, or the next batch would be
// published at a revision already applied (and skipped), and a write would
// be reported in force before it was. The creation's header says nothing.
TEST(WatchMessages, ACatchingUpWatchIsCompleteUpToItsNewestEvent) {
  StoreMirror m(kKeys, kClasses);
  m.reset({}, 10);
  WatchMessage created;
  created.created = true;
  created.revision = 2000;
  EXPECT_EQ(apply_watch_message(m, created), WatchOutcome::kNothing);
  EXPECT_EQ(m.revision(), 10);
  WatchMessage batch;
  batch.revision = 2000;
  batch.events.push_back(WatchEvent{true, kKeys.job(2), entry(job_document(spec(2)), 11)});
  EXPECT_EQ(apply_watch_message(m, batch), WatchOutcome::kChanged);
  EXPECT_EQ(m.revision(), 11);
  batch.events = {WatchEvent{true, kKeys.job(3), entry(job_document(spec(3)), 1500)}};
  EXPECT_EQ(apply_watch_message(m, batch), WatchOutcome::kChanged);
  EXPECT_EQ(m.revision(), 1500) << "the second batch must be a newer view than the first";
  EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{2, 3}));
}

TEST(WatchMessages, ProgressMovesTheRevisionOnlyForward) {
  StoreMirror m(kKeys, kClasses);
  m.reset({}, 10);
  WatchMessage created;
  created.created = true;
  created.revision = 10;
  EXPECT_EQ(apply_watch_message(m, created), WatchOutcome::kNothing);
  WatchMessage progress;
  progress.revision = 12;
  EXPECT_EQ(apply_watch_message(m, progress), WatchOutcome::kChanged);
  EXPECT_EQ(m.revision(), 12);
  progress.revision = 11;  // an older header never moves it back
  EXPECT_EQ(apply_watch_message(m, progress), WatchOutcome::kNothing);
  EXPECT_EQ(m.revision(), 12);
}

// The reply to a progress request (watch id -1) may come ahead of events
// still queued for the watch (etcd 3.4.23, etcd #15220): taking its revision
// made those events a view at a revision already applied, not applied until
// the next write.
TEST(WatchMessages, AReplyToAProgressRequestDoesNotMoveTheRevision) {
  StoreMirror m(kKeys, kClasses);
  m.reset({}, 10);
  WatchMessage reply;
  reply.requested_progress = true;
  reply.revision = 12;
  EXPECT_EQ(apply_watch_message(m, reply), WatchOutcome::kNothing);
  EXPECT_EQ(m.revision(), 10);
  WatchMessage late;
  late.revision = 12;
  late.events.push_back(WatchEvent{true, kKeys.job(2), entry(job_document(spec(2)), 11)});
  EXPECT_EQ(apply_watch_message(m, late), WatchOutcome::kChanged);
  EXPECT_EQ(m.revision(), 11) << "the late event's view must be newer than what was applied before it";
}

TEST(WatchMessages, CompactedOrCancelledMeansReadEverythingAgain) {
  for (bool compacted : {true, false}) {
    StoreMirror m(kKeys, kClasses);
    m.reset({{kKeys.job(1), entry(job_document(spec(1)), 5)}}, 5);
    WatchMessage msg;
    msg.revision = 9;
    if (compacted) msg.compact_revision = 8;
    else msg.canceled = true;
    // Whatever the message carries, nothing is applied from it: skipping ahead
    // would keep jobs deleted in the revisions the watch never delivered.
    msg.events.push_back(WatchEvent{false, kKeys.job(1), {}});
    EXPECT_EQ(apply_watch_message(m, msg), WatchOutcome::kReadAgain) << compacted;
    EXPECT_EQ(m.revision(), 5);
    EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{1}));
    // The full read that follows replaces the mirror: job 1 vanished meanwhile.
    m.reset({{kKeys.job(3), entry(job_document(spec(3)), 8)}}, 9);
    EXPECT_EQ(ids(m.view()), (std::vector<uint32_t>{3}));
  }
}

// ---- store_identity -----------------------------------------------------------------

// A gateway whose endpoints reach two etcd clusters switched between them on
// a failover, silently: the other's jobs applied; and at the start it
// followed whichever answered first. A first read is followed only where no
// endpoint answers for another cluster; a new cluster id only where no
// endpoint answers for another, and every endpoint answers for it, or most
// do, one of which answered for the cluster followed (a store restored with
// a member fewer than the config names was followed only after a restart).
TEST(StoreIdentity, AnotherClusterIsFollowedOnlyWhereTheEndpointsAgree) {
  struct Case {
    uint64_t followed, read;
    std::vector<uint64_t> endpoints;
    std::vector<bool> served;  // answered for the cluster followed before
    StoreIdentity want;
    const char* why;
  };
  const std::vector<Case> cases = {
      {0, 7, {}, {}, StoreIdentity::kSame, "the first read, nothing probed"},
      {0, 7, {7, 7, 0}, {}, StoreIdentity::kSame, "the first read, a member down"},
      {0, 7, {7, 9}, {}, StoreIdentity::kForeign, "the first read, endpoints of two clusters"},
      {0, 9, {7, 9, 9}, {}, StoreIdentity::kForeign, "the first read, endpoints of two clusters, most of the other"},
      {7, 7, {7, 9, 0}, {}, StoreIdentity::kSame, "the same cluster, whatever the others say"},
      {7, 0, {0, 0, 0}, {}, StoreIdentity::kSame, "no identity in the read: not a replaced store"},
      {7, 9, {9, 9, 9}, {}, StoreIdentity::kReplaced, "restored or wiped: every member agrees"},
      {7, 9, {9, 9, 0}, {true, true, true}, StoreIdentity::kReplaced, "restored with a member fewer"},
      {7, 9, {9, 9, 0}, {false, true, false}, StoreIdentity::kReplaced, "one of them answered for ours"},
      {7, 9, {9, 9, 0}, {false, false, true}, StoreIdentity::kForeign, "another cluster's members, ours down"},
      {7, 9, {9, 0, 0}, {true, true, true}, StoreIdentity::kForeign, "too few answer for it"},
      {7, 9, {7, 9}, {true, false}, StoreIdentity::kForeign, "two clusters"},
      {7, 9, {0, 9}, {true, false}, StoreIdentity::kForeign, "the followed one's member down: failover"},
      {7, 9, {0, 9}, {true, true}, StoreIdentity::kForeign, "half is not most"},
  };
  for (const Case& c : cases) EXPECT_EQ(store_identity(c.followed, c.read, c.endpoints, c.served), c.want) << c.why;
}

}  // namespace
}  // namespace psgate
