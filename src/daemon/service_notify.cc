// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/service_notify.h"

#ifdef PSGATE_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include <spdlog/spdlog.h>

#include <cstdlib>
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
void notify_status(const std::string& status) { notify("STATUS=" + status); }

std::string status_text(const nlohmann::json& health) {
  const auto jobs = health.value("jobs", 0u);
  std::string text = "forwarding; " + std::to_string(jobs) + (jobs == 1 ? " job; " : " jobs; ");
  if (health.value("status", "") == "ok") return text + "health ok";
  text += "degraded:";
  // The reasons health gives, each named as `psgatectl health` names it.
  const char* sep = " ";
  auto add = [&](const std::string& what) {
    text += sep + what;
    sep = "; ";
  };
  auto list = [](const nlohmann::json& names) {
    std::string out;
    for (const auto& n : names) out += (out.empty() ? "" : ",") + (n.is_string() ? n.get<std::string>() : n.dump());
    return out;
  };
  for (const char* key : {"ports_down", "ports_stalled", "ports_short_mtu", "lcores_stuck"}) {
    const auto it = health.find(key);
    if (it != health.end() && it->is_array() && !it->empty()) add(std::string(key) + " " + list(*it));
  }
  if (const std::string e = health.value("state_file_error", ""); !e.empty()) add("state_file_error: " + e);
  if (const auto c = health.find("cluster"); c != health.end() && c->is_object()) {
    if (const std::string t = c->value("trouble", ""); !t.empty()) add("cluster: " + t);
  }
  // One line (the protocol's messages are lines), and short: systemctl
  // status shows one line of it; psgatectl health has the rest.
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  constexpr size_t kMaxStatus = 400;
  if (text.size() > kMaxStatus) text = text.substr(0, kMaxStatus - 3) + "...";
  return text;
}

bool notify_wanted() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  return notify_supported() && socket && *socket;
}
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
