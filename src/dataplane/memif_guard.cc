// SPDX-License-Identifier: BSD-3-Clause
// The memif teardown race, and how psgate closes it.
//
// DPDK 22.11's memif driver handles its peer going away on the EAL interrupt
// thread (memif_socket.c, memif_disconnect): it clears the CONNECTED flag, then
// closes the queue fds, then memif_free_regions() munmap()s the shared memory
// and NULLs the region pointers. Its rx/tx bursts (rte_eth_memif.c) run on
// our data lcores with nothing between them and that thread but one unlocked
// read of the flag at entry: an lcore that read the flag just before it was
// cleared goes on to copy from (RX) or into (TX) memory that is being
// unmapped, and dies with SIGSEGV in librte_net_memif.so. On a busy 2-CPU
// machine an lcore can be preempted inside a burst for milliseconds, which is
// why a SIGKILLed peer crashed psgate every few rounds.
//
// Nothing the driver calls back before the munmap tells psgate that the
// teardown has begun (memif raises no LSC event, and psgate's own link poll
// runs every 100 ms), so psgate interposes munmap itself: the executable
// exports `munmap` (meson: --export-dynamic-symbol), the dynamic linker binds
// the driver's call to it, and on the interrupt thread, while data lcores
// run, it first waits for every data lcore to start a new loop iteration
// (LoopEpochs::quiesce, psgate/loop_epochs.h). A burst that began before the flag was
// cleared has then returned, and every burst that begins after it sees the
// flag cleared and returns at once, before touching the regions; psgate's
// link poll then stops polling the port altogether. Only then is the memory
// unmapped.
//
// psgate-gen links it too, with its TX and RX loops as the loops waited
// for (the same race killed it when its memif peer, psgate, went away).
//
// Every other munmap in the process (and every munmap while no data lcore
// runs) goes straight to the system call. glibc's own allocator calls its
// internal munmap, not this one. The wait lasts one loop iteration of the
// slowest data lcore: microseconds, on the interrupt thread only, which the
// data path never waits for.
#include <rte_interrupts.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "psgate/loop_epochs.h"

extern "C" __attribute__((visibility("default"))) int munmap(void* addr, size_t length) noexcept {
  psgate::LoopEpochs* loops = psgate::g_teardown_guard.load(std::memory_order_acquire);
  if (loops != nullptr && rte_thread_is_intr()) {
    // A second is far beyond one loop iteration; if an lcore is stopped for
    // longer than that (a debugger), unmapping anyway is all that is left.
    (void)loops->quiesce(std::chrono::seconds(1));
  }
  return static_cast<int>(syscall(SYS_munmap, addr, length));
}
