// SPDX-License-Identifier: BSD-3-Clause
// The gateway's log lines, once it runs, go through a queue to a thread of
// their own that writes them: a standard error nobody reads (a stalled
// journal, `psgate 2>&1 | less` left paused) then holds that thread only.
// Written on the thread that logged, a full pipe held the control thread
// at its periodic summary (the socket and the watchdog's pings stopped)
// and the main thread at "SIGTERM received" (the stop hung until systemd's
// SIGKILL, the final counters lost).
#pragma once

#include <chrono>

namespace psgate {

// Makes the default logger queue its lines (same name, sinks and level).
// Called once EAL runs: the writer thread then takes the main lcore's CPU
// affinity and the blocked stop signals, as the control thread does. A
// full queue (8,192 lines) drops its oldest line, never waits. DPDK's log
// stream is routed into the queue too, under the logger name "dpdk".
void queue_log_lines();

// Before exit: waits up to `limit` for the queued lines to be written, and
// says how many were dropped. False when the writer is still in a write
// (standard error not read): it is never joined, and the caller must leave
// with _exit, since an exit's flush of stderr would wait for it too.
bool drain_log_lines(std::chrono::milliseconds limit);

}  // namespace psgate
