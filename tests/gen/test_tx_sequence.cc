// SPDX-License-Identifier: BSD-3-Clause
// TxSequence: the frames a stream sends, and the rewind of frames a full TX
// ring refused. Whatever the ring refuses, the frames that did leave must be
// exactly the sequence a never-refused sender would have produced, and the
// per-flow sent counts must match them (else refused frames would count as
// network loss, or sent ones go unaccounted).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "tx_sequence.h"

namespace psgate::gen {
namespace {

// The ideal i-th frame: flows round robin, each flow's sequence numbers
// consecutive, the size pattern in order.
TxSequence::Frame ideal(uint64_t i, uint64_t flows, const std::vector<uint8_t>& pattern) {
  return {pattern[i % pattern.size()], static_cast<uint32_t>(i % flows), static_cast<uint32_t>(i / flows)};
}

TEST(TxSequence, TakeAndRewind) {
  TxSequence s(3, {0, 1, 1});
  std::vector<TxSequence::Frame> got;
  for (int i = 0; i < 5; ++i) got.push_back(s.take());
  // flows 0 1 2 0 1, sequence numbers 0 0 0 1 1, templates 0 1 1 0 1
  const uint32_t flows[] = {0, 1, 2, 0, 1}, seqs[] = {0, 0, 0, 1, 1};
  const uint8_t tmpls[] = {0, 1, 1, 0, 1};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(got[i].flow, flows[i]) << i;
    EXPECT_EQ(got[i].seq, seqs[i]) << i;
    EXPECT_EQ(got[i].tmpl, tmpls[i]) << i;
  }
  EXPECT_EQ(s.sent(), (std::vector<uint64_t>{2, 2, 1}));
  s.rewind(2);  // the ring took only the first three
  EXPECT_EQ(s.sent(), (std::vector<uint64_t>{1, 1, 1}));
  const TxSequence::Frame again = s.take();
  EXPECT_EQ(again.flow, 0u);
  EXPECT_EQ(again.seq, 1u);
  EXPECT_EQ(again.tmpl, 0);
  EXPECT_EQ(s.pattern_pos(), 1u);
}

TEST(TxSequence, RewindAcrossTheCursorWrap) {
  // One flow, and a burst rewound whole: every frame was that flow's.
  TxSequence one(1, {0});
  for (int i = 0; i < 32; ++i) one.take();
  one.rewind(32);
  EXPECT_EQ(one.sent()[0], 0u);
  EXPECT_EQ(one.take().seq, 0u);
  // Fewer flows than refused frames: the cursor goes round more than once.
  TxSequence few(3, {0, 1});
  for (int i = 0; i < 10; ++i) few.take();
  few.rewind(8);
  EXPECT_EQ(few.sent(), (std::vector<uint64_t>{1, 1, 0}));
  const TxSequence::Frame f = few.take();
  EXPECT_EQ(f.flow, 2u);
  EXPECT_EQ(f.seq, 0u);
  EXPECT_EQ(f.tmpl, 0);
}

TEST(TxSequence, AcceptedFramesAreTheIdealSequence) {
  std::mt19937_64 rng(31);
  for (int round = 0; round < 200; ++round) {
    const uint64_t flows = 1 + rng() % 70;
    std::vector<uint8_t> pattern(1 + rng() % 12);
    for (uint8_t& p : pattern) p = static_cast<uint8_t>(rng() % 4);
    TxSequence s(flows, pattern);
    std::vector<TxSequence::Frame> accepted;
    for (int burst = 0; burst < 100; ++burst) {
      const unsigned n = 1 + static_cast<unsigned>(rng() % 64);
      // Admission looks ahead at the templates without taking.
      std::vector<uint8_t> ahead;
      for (size_t pos = s.pattern_pos(), k = 0; k < n; ++k, pos = s.next_pos(pos)) ahead.push_back(s.template_at(pos));
      std::vector<TxSequence::Frame> taken;
      for (unsigned i = 0; i < n; ++i) taken.push_back(s.take());
      for (unsigned i = 0; i < n; ++i) ASSERT_EQ(taken[i].tmpl, ahead[i]);
      const unsigned ok = rng() % 3 == 0 ? static_cast<unsigned>(rng() % (n + 1)) : n;  // the ring takes the first ok
      accepted.insert(accepted.end(), taken.begin(), taken.begin() + ok);
      s.rewind(n - ok);
    }
    std::vector<uint64_t> per_flow(flows, 0);
    for (uint64_t i = 0; i < accepted.size(); ++i) {
      const TxSequence::Frame want = ideal(i, flows, pattern);
      ASSERT_EQ(accepted[i].flow, want.flow) << "round " << round << " frame " << i;
      ASSERT_EQ(accepted[i].seq, want.seq) << "round " << round << " frame " << i;
      ASSERT_EQ(accepted[i].tmpl, want.tmpl) << "round " << round << " frame " << i;
      ++per_flow[accepted[i].flow];
    }
    EXPECT_EQ(s.sent(), per_flow) << "round " << round;
  }
}

}  // namespace
}  // namespace psgate::gen
