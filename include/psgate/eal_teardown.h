// SPDX-License-Identifier: BSD-3-Clause
// Ending EAL without racing its interrupt thread.
//
// DPDK 22.11's rte_eal_cleanup() unmaps EAL's memory but leaves the interrupt
// thread running, and memif's close leaves its listening socket registered
// with that thread, its handle in EAL memory (memif_socket_remove_device
// never unregisters memif_listener_handler). Stopping a memif port whose
// peer is connected wakes the thread (memif_disconnect unregisters the
// control channel's callback); if the thread is not scheduled until after
// the unmap, it walks the stale handle and the process dies with SIGSEGV
// after its final report (psgate as memif server with psgate-gen connected:
// about one exit in a hundred on a 2-CPU machine). A callback registered
// last runs only once the thread has handled every earlier wake-up, so
// waiting for it first closes the race.
#pragma once

#include <chrono>

namespace psgate {

// Registers a callback on a fresh eventfd with the EAL interrupt thread,
// signals it and waits up to `timeout` for it to run: true once it has, so
// the thread has handled every change made before the call and sleeps.
// The handle and descriptor are left registered (an unregister would wake
// the thread again). Call after every port is stopped and closed.
bool wait_for_eal_interrupt_thread(std::chrono::milliseconds timeout = std::chrono::milliseconds(1000));

// rte_eal_cleanup() once the interrupt thread has caught up. When it has
// not answered in time, EAL's memory is left mapped for the process's exit
// (a leak, never a crash) and false is returned for the caller to say so.
bool eal_cleanup_after_interrupts();

}  // namespace psgate
