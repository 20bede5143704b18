// SPDX-License-Identifier: BSD-3-Clause
// What one stream sends next, and how refused frames are taken back: the
// position in the stream's frame-size pattern, the round-robin flow cursor
// and each flow's next sequence number. Pure (no DPDK), unit-tested; the TX
// loop (tx_loop.cc) keeps one per stream.
//
// A burst takes n frames; when the TX ring accepts only the first k, the
// last n - k are undone newest first (rewind), so the next burst sends the
// same flows, sequence numbers and sizes again: the frames that leave form
// exactly the sequence a never-refused sender would have sent, and a refused
// frame can never look like a lost one.
#pragma once

#include <cstdint>
#include <vector>

namespace psgate::gen {

class TxSequence {
 public:
  struct Frame {
    uint8_t tmpl;   // index into the stream's templates
    uint32_t flow;  // < 2^24 (profile limit)
    uint32_t seq;   // low 32 bits of the flow's sequence number
  };

  TxSequence() = default;
  // `pattern`: template index per position of the size sequence (not empty).
  TxSequence(uint64_t flows, std::vector<uint8_t> pattern)
      : flows_(flows), next_seq_(flows, 0), pattern_(std::move(pattern)) {}

  // The template of the frame `pos` would send; admission walks the pattern
  // ahead of take() with next_pos().
  size_t pattern_pos() const { return pattern_pos_; }
  uint8_t template_at(size_t pos) const { return pattern_[pos]; }
  size_t next_pos(size_t pos) const { return pos + 1 == pattern_.size() ? 0 : pos + 1; }

  Frame take() {
    const Frame f{pattern_[pattern_pos_], static_cast<uint32_t>(cursor_), static_cast<uint32_t>(next_seq_[cursor_]++)};
    pattern_pos_ = next_pos(pattern_pos_);
    if (++cursor_ == flows_) cursor_ = 0;
    return f;
  }

  // Undoes the last `k` take()s, newest first.
  void rewind(unsigned k) {
    for (; k; --k) {
      cursor_ = cursor_ == 0 ? flows_ - 1 : cursor_ - 1;
      --next_seq_[cursor_];
      pattern_pos_ = pattern_pos_ == 0 ? pattern_.size() - 1 : pattern_pos_ - 1;
    }
  }

  uint64_t flows() const { return flows_; }
  // Packets sent per flow (= its next sequence number), indexed by flow id.
  const std::vector<uint64_t>& sent() const { return next_seq_; }

 private:
  uint64_t flows_ = 0;
  uint64_t cursor_ = 0;             // next flow, round robin
  std::vector<uint64_t> next_seq_;  // per flow: packets sent = next sequence number
  std::vector<uint8_t> pattern_;
  size_t pattern_pos_ = 0;
};

}  // namespace psgate::gen
