// SPDX-License-Identifier: BSD-3-Clause
// What cluster mode's follow thread (etcd_link.cc) can say of its view of
// the store, as pure logic: whether the store answers, and whether the view
// is current. The two differ: a watch cancelled for silence or compacted
// ends with the store still answering, and until the prefix is read again
// and a new watch created, the view is the one from before, which no longer
// moves. The policy leader ranks and campaigns only on a current view: on a
// stale one it would rank on the old jobs and order, and rewrite its ranks
// at every evaluation, since its own writes never show in that view.
//
//   full read ok --> connected, not current
//   watch created --> current
//   watch ended (cancelled, compacted, failed) --> not current (still connected)
//   store lost --> neither
#pragma once

namespace psgate {

class StoreFollowState {
 public:
  // The whole prefix read: the store answers; the view is current only
  // once a watch follows it (watch_created).
  void read_whole() { connected_ = true; }
  // The watch from the read's revision + 1 is in place: every change after
  // the view will be delivered.
  void watch_created() {
    connected_ = true;
    current_ = true;
  }
  // The watch loop is over, for whatever reason: no change after the view
  // is delivered any more. The store may still answer (a silent or
  // compacted watch is cancelled, then the prefix read again).
  void watch_ended() { current_ = false; }
  // A read or the watch failed: the store does not answer.
  void lost() {
    connected_ = false;
    current_ = false;
  }

  bool connected() const { return connected_; }
  bool view_current() const { return current_; }

 private:
  bool connected_ = false;
  bool current_ = false;
};

}  // namespace psgate
