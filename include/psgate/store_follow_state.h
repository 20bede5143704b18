// SPDX-License-Identifier: BSD-3-Clause
// What cluster mode's follow thread (etcd_follow.cc) can say of its view of
// the store, as pure logic: whether the store answers, and whether the view
// is current. The two differ: a watch cancelled for silence or compacted
// ends with the store still answering, and until the prefix is read again
// and a new watch created, the view is the one from before, which no longer
// moves. The policy leader ranks and campaigns only on a current view: on a
// stale one it would rank on the old jobs and order, and rewrite its ranks
// at every evaluation, since its own writes never show in that view.
//
//   full read ok --> connected, not current
//   watch created at the store's head --> current
//   watch created behind it --> not current until it delivers (events, or a
//       progress notification that moves the view on)
//   watch ended (cancelled, compacted, failed) --> not current (still connected)
//   store lost --> neither
#pragma once

#include <cstdint>

namespace psgate {

class StoreFollowState {
 public:
  // The whole prefix read: the store answers; the view is current only
  // once a watch follows it (watch_created, watch_delivered).
  void read_whole() { connected_ = true; }
  // The watch from the read's revision + 1 is in place, created by etcd at
  // the store's revision `store_revision` (the reply's header) over a view
  // of `view_revision`. Returns whether the view is current now.
  // At the store's head (nothing written since the read) etcd counts the
  // watch among its synced ones, which no compaction cancels: every change
  // after the view will be delivered. Behind it, etcd's sync loop (every
  // 100 ms) first checks the watch's start against the store's compaction
  // and may cancel it ("compacted"); taken as current at its creation, the
  // leader ranked on the old view in between, and a cycle of reads each
  // compacted away before its watch caught up looked followed. Current once
  // the watch has delivered (watch_delivered): etcd sends it nothing before
  // that check. (Something comes within about a second: every gateway
  // rewrites its registration under the prefix that often.)
  bool watch_created(int64_t store_revision, int64_t view_revision) {
    connected_ = true;
    watching_ = true;
    current_ = store_revision <= view_revision;
    return current_;
  }
  // The watch delivered events, or a progress notification that moved the
  // view on (etcd sends those only to a watch it has synced). Returns
  // whether this made the view current (it was not before).
  bool watch_delivered() {
    const bool was = current_;
    current_ = watching_;
    return current_ && !was;
  }
  // The watch loop is over, for whatever reason: no change after the view
  // is delivered any more. The store may still answer (a silent or
  // compacted watch is cancelled, then the prefix read again).
  void watch_ended() {
    watching_ = false;
    current_ = false;
  }
  // A read or the watch failed: the store does not answer.
  void lost() {
    connected_ = false;
    watching_ = false;
    current_ = false;
  }

  bool connected() const { return connected_; }
  bool view_current() const { return current_; }

 private:
  bool connected_ = false;
  bool watching_ = false;  // a watch is in place (created, not ended)
  bool current_ = false;
};

}  // namespace psgate
