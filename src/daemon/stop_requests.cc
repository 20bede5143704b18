// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/stop_requests.h"

#include <signal.h>
#include <string.h>

#include "psgate/signals.h"

namespace psgate {

// Whether a SIGINT or SIGTERM waits, blocked and not taken yet: a stop asked
// while the start is under way, which it asks between its long steps.
bool stop_signal_pending() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1;
}

// Takes the pending SIGINT or SIGTERM (a SIGHUP stays: a reload is no stop)
// and returns its name.
std::string take_stop_signal() {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  const int sig = take_pending_signal(stops);
  const char* name = sig ? sigabbrev_np(sig) : nullptr;
  return name ? std::string("SIG") + name : std::string("a stop signal");
}

}  // namespace psgate
