// SPDX-License-Identifier: BSD-3-Clause
// systemd's notify protocol (sd_notify(3)) for the Type=notify unit
// (debian/psgate.service): READY=1 once the ports forward and the control
// socket listens, so `systemctl start` returns when psgatectl can connect;
// STOPPING=1 when the gateway drains; STATUS= for `systemctl status`. A
// process not started by systemd (no NOTIFY_SOCKET) sends nothing. Built
// without libsystemd (meson -Dsystemd=disabled), every call does nothing.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace psgate::service {

void notify_ready(const std::string& status);
// STATUS= alone: `systemctl status` shows what health says now, not what it
// said at start (the control thread sends it when the text changes).
void notify_status(const std::string& status);
// The STATUS= text for a health reply: jobs, and ok or what is degraded.
std::string status_text(const nlohmann::json& health);
// Whether a service manager listens (NOTIFY_SOCKET) and this build speaks to it.
bool notify_wanted();
// `drain_ns`: how long the drain may take (dataplane.drain_timeout). The unit's
// stop timeout is extended to that plus a margin for the rest of the exit,
// so that a drain_timeout above TimeoutStopSec is not cut by SIGKILL
// (EXTEND_TIMEOUT_USEC only ever lengthens it).
void notify_stopping(const std::string& status, uint64_t drain_ns);
// WATCHDOG=1, for a unit with WatchdogSec=: the control thread sends it
// every tick while no data lcore is stuck, so that systemd restarts a
// gateway whose lcore or control thread stopped (a driver call that never
// returns). Nothing without WatchdogSec= (no WATCHDOG_USEC).
void notify_watchdog();
// True when this build speaks the protocol (--version says; a start under
// systemd warns when it does not).
bool notify_supported();

}  // namespace psgate::service
