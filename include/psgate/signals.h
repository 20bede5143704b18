// SPDX-License-Identifier: BSD-3-Clause
// Stop signals (SIGINT, SIGTERM, SIGHUP) for the programs that run DPDK lcores: the
// psgate daemon and psgate-gen.
//
// Call block_stop_signals() before rte_eal_init: the threads EAL starts
// inherit the signal mask, so a stop signal is never delivered to a data lcore
// (no handler runs there and no polling loop is interrupted). The main thread
// takes the signal synchronously with wait_for_stop_signal() instead.
// Header-only, like psgate/text.h: two short functions need no library.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <ctime>

namespace psgate {

// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread (and so in the
// threads it starts later); returns that set, for wait_for_stop_signal.
// SIGHUP's default action would kill the process undrained (the terminal
// that started it closes): taken here, it is psgate-gen's stop like SIGTERM
// (drain, counters, exit 0) and psgate's reload (daemon/gateway_run.cc).
inline sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Waits up to `wait` for a signal of `set`. Returns the signal taken, or 0
// when none came in time. A wait of zero or less still takes a signal
// already pending: a caller whose deadlines have all passed (a progress
// line due before the last one was written) must not go deaf to SIGINT.
inline int take_pending_signal(const sigset_t& set);
inline int wait_for_stop_signal(const sigset_t& set, std::chrono::steady_clock::duration wait) {
  if (wait <= std::chrono::steady_clock::duration::zero()) return take_pending_signal(set);
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(wait).count();
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  const int sig = sigtimedwait(&set, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// A signal of `set` already pending, taken without waiting; 0 when none is.
inline int take_pending_signal(const sigset_t& set) {
  timespec zero{0, 0};
  const int sig = sigtimedwait(&set, nullptr, &zero);
  return sig > 0 ? sig : 0;
}

}  // namespace psgate
