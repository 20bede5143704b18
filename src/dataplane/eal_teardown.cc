// SPDX-License-Identifier: BSD-3-Clause
// Ending EAL without racing its interrupt thread (see eal_teardown.h).
// rte_intr_instance_alloc and the handle's setters are experimental in DPDK
// 22.11 (the handle became opaque in 21.11): allowed for this file only.
#define ALLOW_EXPERIMENTAL_API 1
#include "psgate/eal_teardown.h"

#include <rte_eal.h>
#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <thread>

namespace psgate {

namespace {

struct Barrier {
  int fd = -1;
  std::atomic<bool> passed{false};
};

// On the interrupt thread. The descriptor is level-triggered and EAL does
// not read external ones: read here, or the thread would wake for ever.
void on_barrier(void* arg) {
  auto* b = static_cast<Barrier*>(arg);
  uint64_t v;
  (void)!read(b->fd, &v, sizeof(v));
  b->passed.store(true, std::memory_order_release);
}

}  // namespace

bool wait_for_eal_interrupt_thread(std::chrono::milliseconds timeout) {
  // Never freed: the callback stays registered (see the header), so what it
  // reads must outlive the process's teardown. The handle is private (libc
  // memory), not in EAL's, which rte_eal_cleanup unmaps.
  auto* b = new Barrier;
  b->fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  rte_intr_handle* handle = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  if (b->fd < 0 || handle == nullptr || rte_intr_fd_set(handle, b->fd) != 0 ||
      rte_intr_type_set(handle, RTE_INTR_HANDLE_EXT) != 0 || rte_intr_callback_register(handle, on_barrier, b) < 0)
    return false;
  const uint64_t one = 1;
  if (write(b->fd, &one, sizeof(one)) != sizeof(one)) return false;
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (!b->passed.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

bool eal_cleanup_after_interrupts() {
  if (!wait_for_eal_interrupt_thread()) return false;
  rte_eal_cleanup();
  return true;
}

}  // namespace psgate
