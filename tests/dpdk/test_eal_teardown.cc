// SPDX-License-Identifier: BSD-3-Clause
// The barrier psgate and psgate-gen pass before rte_eal_cleanup
// (psgate/eal_teardown.h): it returns only once EAL's interrupt thread has
// handled every wake-up made before it. Here a callback of the test's own
// stands for memif's: it keeps the interrupt thread busy, as a thread not
// scheduled in time would be, and the barrier must wait for it.
#define ALLOW_EXPERIMENTAL_API 1  // rte_intr_instance_alloc and setters (DPDK 22.11)
#include <gtest/gtest.h>
#include <rte_interrupts.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "psgate/eal_teardown.h"

namespace psgate {
namespace {

struct Busy {
  int fd = -1;
  std::chrono::milliseconds hold{0};
  std::atomic<bool> done{false};
};

void busy_callback(void* arg) {
  auto* b = static_cast<Busy*>(arg);
  uint64_t v;
  (void)!read(b->fd, &v, sizeof(v));
  std::this_thread::sleep_for(b->hold);
  b->done.store(true, std::memory_order_release);
}

// Registers `b`'s callback and wakes the interrupt thread with it; returns
// the handle to unregister once the test is done.
rte_intr_handle* make_busy(Busy& b) {
  b.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  rte_intr_handle* h = rte_intr_instance_alloc(RTE_INTR_INSTANCE_F_PRIVATE);
  EXPECT_NE(h, nullptr);
  EXPECT_EQ(rte_intr_fd_set(h, b.fd), 0);
  EXPECT_EQ(rte_intr_type_set(h, RTE_INTR_HANDLE_EXT), 0);
  EXPECT_EQ(rte_intr_callback_register(h, busy_callback, &b), 0);
  const uint64_t one = 1;
  EXPECT_EQ(write(b.fd, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
  return h;
}

void release_busy(rte_intr_handle* h, Busy& b) {
  while (rte_intr_callback_unregister(h, busy_callback, &b) == -EAGAIN)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  rte_intr_instance_free(h);
  close(b.fd);
}

TEST(EalTeardown, TheBarrierWaitsForWhatTheInterruptThreadWasWokenForBefore) {
  Busy b;
  b.hold = std::chrono::milliseconds(200);
  rte_intr_handle* h = make_busy(b);
  const auto began = std::chrono::steady_clock::now();
  EXPECT_TRUE(wait_for_eal_interrupt_thread(std::chrono::milliseconds(2000)));
  EXPECT_TRUE(b.done.load(std::memory_order_acquire)) << "the barrier passed while the earlier callback still ran";
  EXPECT_GE(std::chrono::steady_clock::now() - began, std::chrono::milliseconds(150));
  release_busy(h, b);
}

TEST(EalTeardown, ABarrierTheThreadDoesNotReachInTimeSaysSo) {
  Busy b;
  b.hold = std::chrono::milliseconds(400);
  rte_intr_handle* h = make_busy(b);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the thread is in the callback
  EXPECT_FALSE(wait_for_eal_interrupt_thread(std::chrono::milliseconds(50)));
  while (!b.done.load(std::memory_order_acquire)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  release_busy(h, b);
  EXPECT_TRUE(wait_for_eal_interrupt_thread()) << "an idle thread answers at once";
}

}  // namespace
}  // namespace psgate
