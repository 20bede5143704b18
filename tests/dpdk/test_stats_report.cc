// SPDX-License-Identifier: BSD-3-Clause
// The daemon's periodic per-job rate table (stats_report.h).
#include <gtest/gtest.h>

#include <string>

#include "stats/stats_report.h"

namespace psgate {
namespace {

// A slot that changed owner between two reports restarted from 0 (its
// baseline was reset): the new job's rate is what it counted since, not the
// difference with the previous owner's lifetime counts, which wrapped to
// about 1.5e14 Mb/s.
TEST(StatsReport, AJobInAReusedSlotShowsItsOwnRateNotAWrappedDifference) {
  Totals prev, cur;
  prev.jobs.resize(1);
  cur.jobs.resize(1);
  prev.jobs[0].sent_bytes[kPull] = 1'000'000'000;  // the slot's previous owner
  prev.jobs[0].drops = 50;
  cur.jobs[0].sent_bytes[kPull] = 125'000;  // the new owner since its reset: 1 Mbit in 1 s
  Snapshot snap;
  snap.slots.resize(1);
  snap.jobs.push_back(JobEntry{0, 3, "three", 0});
  const std::string out = format_job_rates(prev, cur, 1.0, snap, 10.0);
  EXPECT_NE(out.find("     1.0 Mb/s"), std::string::npos) << out;
  EXPECT_EQ(out.find("1475739"), std::string::npos) << out;
  EXPECT_EQ(out.find("18446744"), std::string::npos) << out;
}

}  // namespace
}  // namespace psgate
