// SPDX-License-Identifier: BSD-3-Clause
// Fast path: a burst through the partitions, oldest first (see job_matcher.h).
#include "psgate/job_matcher.h"

namespace psgate {

namespace {
constexpr unsigned kChunk = 64;  // Classifier::classify's burst limit
}

void JobMatcher::classify(const ParsedPacket* const pkts[], unsigned n, uint32_t out[]) const {
  while (n > kChunk) {
    classify(pkts, kChunk, out);
    pkts += kChunk;
    out += kChunk;
    n -= kChunk;
  }
  const size_t parts = partitions_.size();
  if (parts == 0) {
    for (unsigned i = 0; i < n; ++i) out[i] = Classifier::kNoMatch;
    return;
  }
  // The common case, up to a few thousand rules: one partition, no merging.
  if (parts == 1) {
    partitions_[0].classifier->classify(pkts, n, out);
    return;
  }
  // Packets not matched yet, compacted after each partition: an older
  // partition's match is final.
  const ParsedPacket* pending[kChunk];
  uint8_t where[kChunk];
  uint32_t res[kChunk];
  unsigned left = n;
  for (unsigned i = 0; i < n; ++i) {
    pending[i] = pkts[i];
    where[i] = static_cast<uint8_t>(i);
    out[i] = Classifier::kNoMatch;
  }
  for (size_t p = 0; p < parts && left != 0; ++p) {
    partitions_[p].classifier->classify(pending, left, res);
    unsigned still = 0;
    for (unsigned k = 0; k < left; ++k) {
      if (res[k] != Classifier::kNoMatch) {
        out[where[k]] = res[k];
      } else {
        pending[still] = pending[k];
        where[still++] = where[k];
      }
    }
    left = still;
  }
}

size_t JobMatcher::rule_count() const {
  size_t n = 0;
  for (const RulePartition& p : partitions_) n += p.classifier->rule_count();
  return n;
}

}  // namespace psgate
