// SPDX-License-Identifier: BSD-3-Clause
// When the policy leader compacts the store's history, and to which
// revision (cluster.compact_every; the etcd call is EtcdLink's
// compact_history), as pure logic with the clock passed in, so that a store
// that starts over and a new term are tested without etcd.
//
// Every `every_ns` the leader compacts the history before the revision it
// saw one period earlier: a watch that far behind reads the prefix again.
// Revisions are only comparable within one store epoch
// (ClusterView::store_epoch): a store wiped or restored from a snapshot
// starts its revisions over, low, and a revision compacted to in the old
// store says nothing of the new one. Kept across epochs, it stopped every
// compaction until the new store passed the old revision, while its history
// grew to etcd's space quota (NOSPACE).
#pragma once

#include <cstdint>

namespace psgate {

class HistoryCompaction {
 public:
  // `every_ns` 0: never compact.
  explicit HistoryCompaction(uint64_t every_ns) : every_ns_(every_ns) {}

  // Called on each of the leader's steps with the store's view (its epoch
  // and revision) at `now_ns`: the revision to compact the history before,
  // or 0 when none is due. A period's mark is taken whether or not a
  // compaction follows.
  int64_t due(uint64_t store_epoch, int64_t revision, uint64_t now_ns) {
    if (every_ns_ == 0) return 0;
    // (A clock read before the mark by another thread counts as no time.)
    if (mark_ns_ != 0 && (now_ns > mark_ns_ ? now_ns - mark_ns_ : 0) < every_ns_) return 0;
    const int64_t target = mark_revision_;
    // A mark from another epoch, or above the store's revision, is no
    // revision of this store.
    const bool same_store = store_epoch == mark_epoch_ && target <= revision;
    mark_revision_ = revision;
    mark_epoch_ = store_epoch;
    mark_ns_ = now_ns;
    if (!same_store || target <= 0) return 0;
    if (store_epoch == compacted_epoch_ && target <= compacted_to_) return 0;
    return target;
  }

  // The store's history before `revision` of epoch `store_epoch` is gone (we
  // compacted it, or someone compacted further).
  void compacted(uint64_t store_epoch, int64_t revision) {
    compacted_epoch_ = store_epoch;
    compacted_to_ = revision;
  }

  // A new term as leader: what this gateway saw or compacted in an earlier
  // term may be of a store since replaced; the first period's mark is taken
  // afresh.
  void restart() {
    mark_revision_ = 0;
    mark_epoch_ = 0;
    mark_ns_ = 0;
    compacted_to_ = 0;
    compacted_epoch_ = 0;
  }

 private:
  const uint64_t every_ns_;
  // The revision seen at the start of the current period, of which epoch, and when (0: none yet).
  int64_t mark_revision_ = 0;
  uint64_t mark_epoch_ = 0;
  uint64_t mark_ns_ = 0;
  // The last revision compacted to, and of which epoch.
  int64_t compacted_to_ = 0;
  uint64_t compacted_epoch_ = 0;
};

}  // namespace psgate
