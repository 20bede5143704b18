// SPDX-License-Identifier: BSD-3-Clause
// FullReadFailures: a full read of the prefix compacted away under it is
// retried; once is routine, but one that keeps failing is said (health
// degraded) after a few in a row or a while, and a read that succeeds (a
// watch following it) clears it. The clock is passed in.
#include "psgate/full_read_failures.h"

#include <gtest/gtest.h>

namespace psgate {
namespace {

constexpr uint64_t kMs = 1'000'000;
const std::string kCompacted = "etcdserver: mvcc: required revision has been compacted";

TEST(FullReadFailures, NothingToSayWithoutFailures) {
  FullReadFailures f(3, 10'000 * kMs);
  EXPECT_EQ(f.problem(0), "");
  EXPECT_EQ(f.problem(1'000'000 * kMs), "");
  EXPECT_EQ(f.succeeded(), 0u);
}

// The auditor's case: compacted at every try, retried for ever, health ok.
TEST(FullReadFailures, AFewInARowAreTroubleUntilAReadSucceeds) {
  FullReadFailures f(3, 10'000 * kMs);
  EXPECT_FALSE(f.failed(1'000 * kMs, kCompacted));
  EXPECT_EQ(f.problem(1'000 * kMs), "") << "one compaction while paging is routine";
  EXPECT_FALSE(f.failed(1'100 * kMs, kCompacted));
  EXPECT_EQ(f.problem(1'100 * kMs), "");
  EXPECT_TRUE(f.failed(1'300 * kMs, kCompacted)) << "the third in a row is the one that makes it trouble";
  const std::string p = f.problem(1'300 * kMs);
  EXPECT_NE(p.find("3 full read(s)"), std::string::npos) << p;
  EXPECT_NE(p.find("300 ms"), std::string::npos) << p;
  EXPECT_NE(p.find(kCompacted), std::string::npos) << p;
  // Still failing: still trouble, said once (failed() says "now" only once).
  EXPECT_FALSE(f.failed(1'700 * kMs, kCompacted));
  EXPECT_NE(f.problem(1'700 * kMs).find("4 full read(s)"), std::string::npos);
  EXPECT_EQ(f.succeeded(), 4u);
  EXPECT_EQ(f.problem(1'700 * kMs), "") << "a read that succeeds clears it";
  // A new streak starts from nothing.
  EXPECT_FALSE(f.failed(2'000 * kMs, kCompacted));
  EXPECT_EQ(f.problem(2'000 * kMs), "");
}

// Each read of a large prefix may take long: a few failures can be minutes.
TEST(FullReadFailures, ALongTimeSinceTheFirstFailureIsTroubleToo) {
  FullReadFailures f(3, 10'000 * kMs);
  EXPECT_FALSE(f.failed(5'000 * kMs, kCompacted));
  EXPECT_EQ(f.problem(14'999 * kMs), "");
  EXPECT_NE(f.problem(15'000 * kMs), "") << "10 s since the first failure, none succeeded since";
  EXPECT_EQ(f.problem(4'000 * kMs), "") << "a clock read before the failure's stamp counts as no time";
  f.succeeded();
  EXPECT_EQ(f.problem(100'000 * kMs), "");
}

// Trouble reached by time is said by the next failure, once; losing the
// store starts the streak again (its failures are not compacted reads).
TEST(FullReadFailures, TroubleByTimeIsSaidOnceAndALostStoreStartsAfresh) {
  FullReadFailures f(3, 10'000 * kMs);
  EXPECT_FALSE(f.failed(5'000 * kMs, kCompacted));
  EXPECT_TRUE(f.failed(16'000 * kMs, kCompacted)) << "the second failure, 11 s after the first: trouble, said";
  EXPECT_FALSE(f.failed(17'000 * kMs, kCompacted)) << "said once";
  EXPECT_NE(f.problem(17'000 * kMs), "");
  f.reset();
  EXPECT_EQ(f.problem(30'000 * kMs), "");
  EXPECT_FALSE(f.failed(31'000 * kMs, kCompacted));
  EXPECT_FALSE(f.failed(32'000 * kMs, kCompacted));
  EXPECT_TRUE(f.failed(33'000 * kMs, kCompacted)) << "a new streak is said again";
}

}  // namespace
}  // namespace psgate
