// SPDX-License-Identifier: BSD-3-Clause
// Port link state, shared between the control path (which watches the links)
// and the data lcores (which stop touching a port whose link is down).
//
//   control thread (every 100 ms, or an LSC event)      data lcore, every loop iteration
//   ───────────────────────────────────────────────     ─────────────────────────────────
//   link_up[p].store(0, release)                         e = epoch.load(acquire)
//   quiesce(): E = epoch.fetch_add(1, acq_rel) + 1  ───▶ seen[me].store(e, release)
//              wait until every seen[l] >= E             up = link_up[0..1].load(acquire)
//   (now no lcore is inside a burst on p, and none         rx/tx bursts only on ports that are up
//    will start one: tear the port down, re-probe it)
//
// An lcore reports the epoch at the top of its loop, outside every rx/tx
// burst. Once it has reported E it has acquired the control thread's release
// of E, so the link-down store (and, for memif, the driver's own
// "disconnected" flag, which was cleared before) is visible to every burst it
// starts afterwards; and every burst it started before has returned, because
// the report comes after them in program order (release). That is the
// handshake: quiesce() returning means the port is no longer being polled.
// It costs the lcore one load of a read-mostly line and one store to a line
// it owns per iteration, no fence and no lock; the control thread spins only
// for as long as one loop iteration takes (microseconds).
//
// An lcore that has left its loops (for good, or to sleep while idle:
// dataplane.idle_sleep) stores kOffline, so quiesce() never waits for it.
// Coming back is the one place a fence is needed: go_online() stores 0 (a
// report quiesce() must wait for) and fences before the first
// report_and_read, and quiesce() fences between its epoch increment and its
// reads of `seen`. Either quiesce() then sees the 0 and waits for the
// lcore's report, or the lcore's epoch load sees the new epoch, and with it
// the link-down. Without the fences the lcore's store could still sit in its
// store buffer while quiesce() read kOffline and the lcore read "up".
#pragma once

#include <array>
#include <atomic>

#include "psgate/counters.h"
#include "psgate/loop_epochs.h"

namespace psgate {

// The loops' epochs (loop_epochs.h: quiesce, go_offline, go_online) and
// which ports they may touch.
class LinkShared : public LoopEpochs {
 public:
  // Lcores count as offline until they enter their loop: a port torn down
  // before then has nobody to wait for.
  explicit LinkShared(unsigned lcores) : LoopEpochs(lcores) {
    for (auto& l : link_up_) l.store(1, std::memory_order_relaxed);
  }

  // Data lcore side, once per loop iteration (outside every burst). Returns
  // the up-mask: bit p set when port p may be polled and transmitted on.
  unsigned report_and_read(unsigned lcore_index) {
    report(lcore_index);
    // Acquire: a port brought back up (re-probed, new port id) was set up
    // before the release that published it.
    return link_up_[0].load(std::memory_order_acquire) | (link_up_[1].load(std::memory_order_acquire) << 1);
  }

  // Control side.
  void set_up(unsigned port, bool up) { link_up_[port].store(up ? 1 : 0, std::memory_order_release); }
  bool up(unsigned port) const { return link_up_[port].load(std::memory_order_acquire) != 0; }

 private:
  alignas(64) std::array<std::atomic<unsigned>, kPortCount> link_up_;
};

}  // namespace psgate
