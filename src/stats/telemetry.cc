// SPDX-License-Identifier: BSD-3-Clause
// DPDK telemetry commands (run on DPDK's telemetry thread).
#include "stats/telemetry.h"

#include <rte_telemetry.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "psgate/text.h"
#include "stats/stats_json.h"

namespace psgate {

namespace {

// Cleared before the control plane goes away; the mutex keeps a callback
// that already started from outliving it.
std::mutex g_mutex;
ControlPlane* g_control = nullptr;

// Adds every unsigned number of a flat JSON object as a u64 entry.
void add_numbers(rte_tel_data* d, const nlohmann::json& obj, const std::string& prefix = "") {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = prefix + it.key();
    if (it.value().is_number_unsigned()) {
      rte_tel_data_add_dict_u64(d, key.c_str(), it.value().get<uint64_t>());
    } else if (it.value().is_object()) {
      add_numbers(d, it.value(), key + "_");
    }
  }
}

// A job name as DPDK 22.11's telemetry can write it: ASCII. Its JSON writer
// tests each byte as a signed char against its table of control characters,
// so a byte of a UTF-8 character (negative) indexed before the table and
// the reply was not JSON ("résnet" came out as "r\1\2snet"). Other
// characters are written \uXXXX, or \UXXXXXXXX above U+FFFF (as C and
// Python write them). At most RTE_TEL_MAX_STRING_LEN - 1 bytes: a longer
// escaped name ends in "..." at a character's boundary, never mid-escape.
std::string telemetry_name(std::string_view name) {
  static const char kHex[] = "0123456789abcdef";
  constexpr size_t kMax = RTE_TEL_MAX_STRING_LEN - 1;
  std::string out;
  while (!name.empty()) {
    const auto cp = decode_utf8(name);
    const size_t length = cp ? cp->length : 1;
    const uint32_t v = cp ? cp->value : static_cast<unsigned char>(name[0]);
    char one[10];  // a character, or its escape (\u and 4 digits, \U and 8)
    size_t n = 0;
    if (v < 0x80) {
      one[n++] = static_cast<char>(v);
    } else {
      const int digits = v > 0xffff ? 8 : 4;
      one[n++] = '\\';
      one[n++] = v > 0xffff ? 'U' : 'u';
      for (int d = digits - 1; d >= 0; --d) one[n++] = kHex[(v >> (4 * d)) & 15];
    }
    name.remove_prefix(length);
    const size_t room = kMax - (name.empty() ? 0 : 3);  // "..." if more follows
    if (out.size() + n > room) {
      out += "...";
      break;
    }
    out.append(one, n);
  }
  return out;
}

nlohmann::json stats() {
  // The counters and the jobs on one side of any commit that gave a slot to
  // a new job (ControlPlane::totals_and_snapshot). With the sojourn
  // histograms: /psgate/class shows them as `stats` does (without, every
  // class read a count of 0 beside its packets).
  nlohmann::json out;
  g_control->totals_and_snapshot(
      true, [&](const Totals& totals, const Snapshot& snap) { out = totals_to_json(totals, snap); });
  return out;
}

int cmd_totals(const char*, const char*, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_control) return -1;
  rte_tel_data_start_dict(d);
  const nlohmann::json s = stats();
  add_numbers(d, s["totals"]);
  return 0;
}

int cmd_port(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_control || !params) return -1;
  const nlohmann::json s = stats();
  if (!s["ports"].contains(params)) return -1;
  rte_tel_data_start_dict(d);
  add_numbers(d, s["ports"][params]);
  return 0;
}

int cmd_class(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_control || !params) return -1;
  const std::string p(params);
  const size_t comma = p.find(',');
  if (comma == std::string::npos) return -1;
  const std::string port = p.substr(0, comma);
  const long cls = std::strtol(p.c_str() + comma + 1, nullptr, 10);
  const nlohmann::json s = stats();
  for (const auto& c : s["classes"]) {
    if (c["port"] == port && c["class"].get<long>() == cls) {
      rte_tel_data_start_dict(d);
      add_numbers(d, c);
      return 0;
    }
  }
  return -1;
}

int cmd_jobs(const char*, const char*, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_control) return -1;
  rte_tel_data_start_array(d, RTE_TEL_U64_VAL);
  const nlohmann::json s = stats();  // named: a range-for over stats()["jobs"] would dangle
  // At most RTE_TEL_MAX_ARRAY_ENTRIES (512) ids: the help says so.
  for (const auto& j : s["jobs"])
    if (rte_tel_data_add_array_u64(d, j["id"].get<uint64_t>()) != 0) break;
  return 0;
}

int cmd_job(const char*, const char* params, rte_tel_data* d) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (!g_control || !params) return -1;
  const uint64_t id = std::strtoull(params, nullptr, 10);
  const nlohmann::json s = stats();
  for (const auto& j : s["jobs"]) {
    if (j["id"].get<uint64_t>() == id) {
      rte_tel_data_start_dict(d);
      rte_tel_data_add_dict_string(d, "name", telemetry_name(j["name"].get<std::string>()).c_str());
      add_numbers(d, j);
      return 0;
    }
  }
  return -1;
}

}  // namespace

void register_telemetry(ControlPlane& control) {
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_control = &control;
  }
  static std::once_flag once;
  std::call_once(once, [] {
    rte_telemetry_register_cmd("/psgate/totals", cmd_totals, "psgate: received, transmitted, dropped");
    rte_telemetry_register_cmd("/psgate/port", cmd_port, "psgate: one port's counters. Parameter: wire or host");
    rte_telemetry_register_cmd("/psgate/class", cmd_class, "psgate: one egress class. Parameters: port,class");
    rte_telemetry_register_cmd("/psgate/jobs", cmd_jobs,
                               "psgate: job ids, the first 512 (DPDK telemetry's array limit; psgatectl jobs list "
                               "has all)");
    rte_telemetry_register_cmd("/psgate/job", cmd_job, "psgate: one job's counters. Parameter: job id");
  });
}

void unregister_telemetry() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_control = nullptr;
}

}  // namespace psgate
