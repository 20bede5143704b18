// SPDX-License-Identifier: BSD-3-Clause
// Sequence accounting: table-driven cases, and random arrival orders checked
// against a reference that remembers every sequence number.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "rx_accounting.h"

namespace psgate::gen {
namespace {

using A = Arrival;

TEST(RxAccounting, Table) {
  struct Case {
    const char* what;
    std::vector<uint32_t> seqs;
    std::vector<Arrival> expect;
    uint64_t received, reordered, duplicates, late = 0;
  } cases[] = {
      {"in order", {0, 1, 2, 3}, {A::kNew, A::kNew, A::kNew, A::kNew}, 4, 0, 0},
      {"gap is not reorder", {0, 1, 5, 6}, {A::kNew, A::kNew, A::kNew, A::kNew}, 4, 0, 0},
      {"late fill of a gap", {0, 3, 1, 2}, {A::kNew, A::kNew, A::kReordered, A::kReordered}, 4, 2, 0},
      {"duplicate of highest", {0, 1, 1}, {A::kNew, A::kNew, A::kDuplicate}, 2, 0, 1},
      {"duplicate of older", {0, 1, 2, 0}, {A::kNew, A::kNew, A::kNew, A::kDuplicate}, 3, 0, 1},
      {"duplicate of a reordered one", {2, 1, 1}, {A::kNew, A::kReordered, A::kDuplicate}, 2, 1, 1},
      {"first packet not zero", {7, 8}, {A::kNew, A::kNew}, 2, 0, 0},
      {"edge of the window", {0, 64, 1}, {A::kNew, A::kNew, A::kReordered}, 3, 1, 0},
      {"older than the window is late", {0, 65, 0}, {A::kNew, A::kNew, A::kLate}, 2, 0, 0, 1},
      {"an old duplicate is late, not received",
       {0, 1, 70, 0, 1},
       {A::kNew, A::kNew, A::kNew, A::kLate, A::kLate},
       3,
       0,
       0,
       2},
      {"jump clears the window", {0, 1000, 999, 999}, {A::kNew, A::kNew, A::kReordered, A::kDuplicate}, 3, 1, 1},
      {"wrap of the 32-bit field", {0xfffffffe, 0xffffffff, 0, 1}, {A::kNew, A::kNew, A::kNew, A::kNew}, 4, 0, 0},
      {"reordered across the wrap",
       {0xfffffffe, 0, 0xffffffff, 0},
       {A::kNew, A::kNew, A::kReordered, A::kDuplicate},
       3,
       1,
       1},
  };
  for (const Case& c : cases) {
    FlowRx f;
    ASSERT_EQ(c.seqs.size(), c.expect.size()) << c.what;
    for (size_t i = 0; i < c.seqs.size(); ++i) {
      EXPECT_EQ(record_arrival(f, c.seqs[i]), c.expect[i]) << c.what << " arrival " << i;
    }
    EXPECT_EQ(f.received, c.received) << c.what;
    EXPECT_EQ(f.reordered, c.reordered) << c.what;
    EXPECT_EQ(f.duplicates, c.duplicates) << c.what;
    EXPECT_EQ(f.late, c.late) << c.what;
  }
}

TEST(RxAccounting, TallyNeverNegative) {
  FlowRx f;
  f.received = 10;
  FlowTally t = tally_flow(12, f);
  EXPECT_EQ(t.unique, 10u);
  EXPECT_EQ(t.lost, 2u);
  EXPECT_EQ(t.excess, 0u);
  t = tally_flow(10, f);
  EXPECT_EQ(t.lost, 0u);
  // More distinct sequence numbers than were sent (a stale frame of an
  // earlier run, a corrupt stamp): excess, not negative loss.
  t = tally_flow(7, f);
  EXPECT_EQ(t.unique, 7u);
  EXPECT_EQ(t.lost, 0u);
  EXPECT_EQ(t.excess, 3u);
}

TEST(RxAccounting, ExtendSeq) {
  struct Case {
    uint64_t next;
    uint32_t seq;
    uint64_t expect;
  } cases[] = {
      {0, 5, 5},
      {10, 12, 12},
      {10, 3, 3},
      {0x100000000ull, 0xffffffff, 0xffffffff},      // just below a wrap
      {0x100000000ull, 1, 0x100000001ull},           // just above it
      {0xfffffff0ull, 2, 0x100000002ull},            // forward across the wrap
      {0x100000005ull, 0xfffffff0u, 0xfffffff0ull},  // backward across it
      {0x300000000ull, 0x7fffffff, 0x27fffffffull},  // half-way: nearer below
  };
  for (const Case& c : cases) EXPECT_EQ(extend_seq(c.next, c.seq), c.expect) << c.next << " " << c.seq;
}

// Reference: remembers every sequence number seen. With reordering and
// duplicates within the window both must agree on every arrival.
TEST(RxAccounting, RandomOrdersMatchReference) {
  std::mt19937_64 rng(2024);
  for (int round = 0; round < 300; ++round) {
    const uint64_t base = rng() % 3 == 0 ? 0xffffffffull - rng() % 500 : rng() % 1000;  // some runs wrap
    const size_t n = 50 + rng() % 400;
    std::vector<uint64_t> order;
    for (size_t i = 0; i < n; ++i) {
      if (rng() % 10 == 0) continue;  // lost
      order.push_back(base + i);
    }
    // Local reordering: displacement well inside the 64-packet window.
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      if (rng() % 4 == 0) std::swap(order[i], order[std::min(order.size() - 1, i + 1 + rng() % 20)]);
    }
    // Duplicates shortly after the original.
    for (size_t i = 0; i < order.size(); ++i) {
      if (rng() % 15 == 0)
        order.insert(order.begin() + static_cast<long>(std::min(order.size(), i + 1 + rng() % 10)), order[i]);
    }
    // The first arrival defines the 64-bit numbering: like a real flow's, it
    // is below 2^32 (its sender started at 0); later ones may cross the wrap.
    order.insert(order.begin(), base);
    FlowRx f;
    std::set<uint64_t> seen;
    uint64_t highest = 0;
    bool any = false;
    uint64_t received = 0, reordered = 0, dups = 0, late = 0;
    for (uint64_t s : order) {
      // The documented rules, with perfect memory inside the window.
      Arrival want;
      if (!any || s > highest) {
        want = A::kNew;
        ++received;
      } else if (highest - s >= kDupWindow) {
        want = A::kLate;  // cannot tell a duplicate this old: not received
        ++late;
      } else if (seen.count(s)) {
        want = A::kDuplicate;
        ++dups;
      } else {
        want = A::kReordered;
        ++received;
        ++reordered;
      }
      seen.insert(s);
      if (!any || s > highest) highest = s;
      any = true;
      ASSERT_EQ(record_arrival(f, static_cast<uint32_t>(s)), want) << "round " << round << " seq " << s;
    }
    EXPECT_EQ(f.received, received);
    EXPECT_EQ(f.reordered, reordered);
    EXPECT_EQ(f.duplicates, dups);
    EXPECT_EQ(f.late, late);
    EXPECT_EQ(f.next, highest + 1);
  }
}

// Long delays and old duplicates: some arrivals come far more than the
// window behind their flow's highest, originals and copies alike. Against a
// reference that knows which sequence numbers truly arrived, the accounting
// must never report less loss than there was, and never more than the true
// loss plus the late arrivals it could not decide.
TEST(RxAccounting, LateArrivalsNeverHideLoss) {
  std::mt19937_64 rng(77);
  uint64_t total_late = 0, total_old_dups = 0;
  for (int round = 0; round < 500; ++round) {
    const uint64_t sent = 100 + rng() % 900;
    std::vector<uint64_t> order;
    std::vector<uint64_t> delayed;  // arrive at the end, far behind
    for (uint64_t i = 0; i < sent; ++i) {
      const uint64_t r = rng() % 100;
      if (r < 8) continue;  // lost
      if (r < 12) {
        delayed.push_back(i);  // a long-delayed original
        continue;
      }
      order.push_back(i);
      if (r < 16) delayed.push_back(i);  // and an old duplicate of it later
    }
    for (size_t i = 0; i + 1 < order.size(); ++i) {
      if (rng() % 5 == 0) std::swap(order[i], order[std::min(order.size() - 1, i + 1 + rng() % 30)]);
    }
    std::shuffle(delayed.begin(), delayed.end(), rng);
    // Interleave the delayed ones into the last third, or append them.
    for (uint64_t d : delayed) {
      const size_t lo = order.size() * 2 / 3;
      order.insert(order.begin() + static_cast<long>(lo + rng() % (order.size() - lo + 1)), d);
    }

    FlowRx f;
    std::set<uint64_t> arrived;  // truth: distinct sequence numbers that arrived
    uint64_t highest = 0, late = 0;
    bool any = false;
    for (uint64_t s : order) {
      const bool old = any && s < highest && highest - s >= kDupWindow;
      const Arrival a = record_arrival(f, static_cast<uint32_t>(s));
      EXPECT_EQ(a == A::kLate, old) << "round " << round << " seq " << s;
      late += old;
      total_old_dups += old && arrived.count(s);
      arrived.insert(s);
      if (!any || s > highest) highest = s;
      any = true;
    }
    const uint64_t true_lost = sent - arrived.size();
    const FlowTally t = tally_flow(sent, f);
    EXPECT_EQ(f.late, late) << "round " << round;
    EXPECT_GE(t.lost, true_lost) << "round " << round;
    EXPECT_LE(t.lost, true_lost + f.late) << "round " << round;
    EXPECT_EQ(t.unique + t.lost, sent) << "round " << round;
    EXPECT_EQ(t.excess, 0u) << "round " << round;
    total_late += late;
  }
  // The generated orders did exercise both kinds of late arrival.
  EXPECT_GT(total_late, 1000u);
  EXPECT_GT(total_old_dups, 100u);
}

// The single loop's RX must be able to take back, per round and port, at
// least twice what one TX round can send (a burst per job), so that it never
// falls behind its own TX for good.
TEST(RxAccounting, RxPollCapCoversTwoTxRounds) {
  for (size_t jobs : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{1000}, size_t{32768}}) {
    for (uint32_t burst : {1u, 2u, 31u, 32u, 33u, 64u}) {
      const unsigned cap = rx_bursts_per_round(jobs, burst);
      EXPECT_GE(cap, 2u) << jobs << " jobs, burst " << burst;
      EXPECT_GE(uint64_t{cap} * kRxBurst, 2 * uint64_t{jobs} * burst) << jobs << " jobs, burst " << burst;
      // ... and not much more: a flooded port must not starve TX.
      EXPECT_LE(uint64_t{cap} * kRxBurst, 2 * uint64_t{jobs} * burst + 2 * kRxBurst)
          << jobs << " jobs, burst " << burst;
    }
  }
}

}  // namespace
}  // namespace psgate::gen
