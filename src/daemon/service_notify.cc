// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/service_notify.h"

#ifdef PSGATE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <spdlog/spdlog.h>

#include <cstring>

namespace psgate::service {
namespace {

void notify(const std::string& message) {
#ifdef PSGATE_HAVE_SYSTEMD
  // 0: nothing to notify (no NOTIFY_SOCKET); < 0: systemd is there but the
  // message did not reach it, which the unit's start timeout will show.
  if (const int rc = sd_notify(0, message.c_str()); rc < 0)
    spdlog::warn("systemd notification failed: {}", std::strerror(-rc));
#else
  (void)message;
#endif
}

}  // namespace

void notify_ready(const std::string& status) { notify("READY=1\nSTATUS=" + status); }
void notify_stopping(const std::string& status, uint64_t drain_ns) {
  // The margin: the final counters, the ports' stop and the process's exit.
  constexpr uint64_t kExitMarginUs = 10'000'000;
  notify("STOPPING=1\nSTATUS=" + status + "\nEXTEND_TIMEOUT_USEC=" + std::to_string(drain_ns / 1000 + kExitMarginUs));
}

void notify_watchdog() {
#ifdef PSGATE_HAVE_SYSTEMD
  // Asked once: the unit's setting does not change while the process runs.
  static const bool enabled = sd_watchdog_enabled(0, nullptr) > 0;
  if (enabled) notify("WATCHDOG=1");
#endif
}

bool notify_supported() {
#ifdef PSGATE_HAVE_SYSTEMD
  return true;
#else
  return false;
#endif
}

}  // namespace psgate::service
