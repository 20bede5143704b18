// SPDX-License-Identifier: BSD-3-Clause
// EAL's options as its getopt_long reads them (eal_arg_clash.h). The tables
// are DPDK 22.11's (lib/eal/common/eal_common_options.c), with what psgate
// and psgate-gen make of each.
#include "psgate/eal_arg_clash.h"

#include <string>
#include <utility>

namespace psgate {

namespace {

// getopt's has_arg: a required value is "=VALUE" or the next argument,
// whatever it looks like; an optional one only "=VALUE".
enum class Value { kNone, kRequired, kOptional };

struct EalOption {
  std::string_view name;
  Value value;
  EalArgClash clash = EalArgClash::kNone;
};

using enum EalArgClash;

// eal_short_options: "a:b:c:s:d:hl:S:m:n:r:v".
constexpr EalOption kShort[] = {
    {"a", Value::kRequired, kDevices}, {"b", Value::kRequired, kDevices}, {"c", Value::kRequired, kCores},
    {"s", Value::kRequired, kCores},   {"d", Value::kRequired},           {"h", Value::kNone, kHelp},
    {"l", Value::kRequired, kCores},   {"S", Value::kRequired, kCores},   {"m", Value::kRequired},
    {"n", Value::kRequired},           {"r", Value::kRequired},           {"v", Value::kNone},
};

// eal_long_options.
constexpr EalOption kLong[] = {
    {"base-virtaddr", Value::kRequired},
    {"create-uio-dev", Value::kNone},
    {"file-prefix", Value::kRequired},
    {"help", Value::kNone, kHelp},
    {"huge-dir", Value::kRequired},
    {"huge-unlink", Value::kOptional},
    {"iova-mode", Value::kRequired},
    {"lcores", Value::kRequired, kCores},
    {"log-level", Value::kRequired},
    {"trace", Value::kRequired},
    {"trace-dir", Value::kRequired},
    {"trace-bufsz", Value::kRequired},
    {"trace-mode", Value::kRequired},
    {"main-lcore", Value::kRequired, kCores},
    {"mbuf-pool-ops-name", Value::kRequired},
    {"no-hpet", Value::kNone},
    {"no-huge", Value::kNone},
    {"no-pci", Value::kNone},
    {"no-shconf", Value::kNone},
    {"in-memory", Value::kNone},
    {"block", Value::kRequired, kDevices},
    {"allow", Value::kRequired, kDevices},
    {"proc-type", Value::kRequired},
    {"socket-mem", Value::kRequired},
    {"socket-limit", Value::kRequired},
    {"syslog", Value::kRequired},
    {"vdev", Value::kRequired, kDevices},
    {"vfio-intr", Value::kRequired},
    {"vfio-vf-token", Value::kRequired},
    {"vmware-tsc-map", Value::kNone},
    {"legacy-mem", Value::kNone},
    {"single-file-segments", Value::kNone},
    {"match-allocations", Value::kNone},
    {"telemetry", Value::kNone},
    {"no-telemetry", Value::kNone},
    {"force-max-simd-bitwidth", Value::kRequired},
    {"huge-worker-stack", Value::kOptional},
};

const EalOption* short_option(char c) {
  for (const EalOption& o : kShort)
    if (o.name[0] == c) return &o;
  return nullptr;
}

// As getopt_long resolves a name: exactly, else by the one option it
// abbreviates. nullptr for an unknown or ambiguous one, which EAL refuses
// itself (it fails to start, printing its usage).
const EalOption* long_option(std::string_view name) {
  const EalOption* found = nullptr;
  for (const EalOption& o : kLong) {
    if (o.name == name) return &o;
    if (!o.name.starts_with(name)) continue;
    if (found != nullptr) return nullptr;
    found = &o;
  }
  return found;
}

}  // namespace

EalArgClash EalArgReader::next(std::string_view arg) {
  value_of_.clear();
  value_.clear();
  option_.clear();
  if (!awaiting_.empty()) {  // a value, whatever it looks like
    const bool log_level = log_level_;
    value_of_ = std::move(awaiting_name_);
    value_ = arg;
    awaiting_.clear();
    awaiting_name_.clear();
    log_level_ = false;
    return log_level && arg == "help" ? kHelp : kNone;
  }
  if (options_over_ || arg.size() < 2 || arg[0] != '-') return kNone;  // a word getopt leaves
  if (arg == "--") {
    options_over_ = true;
    return kEndOfOptions;
  }
  if (arg[1] != '-') {  // short options, bundled up to the first that takes a value
    for (size_t k = 1; k < arg.size(); ++k) {
      const EalOption* o = short_option(arg[k]);
      if (o == nullptr) continue;  // EAL refuses it itself
      // Its value is the rest of the argument, or the next one (also after
      // an option the caller lets through: psgate-gen's -l).
      const bool takes_value = o->value == Value::kRequired;
      if (takes_value && k + 1 == arg.size()) awaiting_ = std::string("-") + arg[k];
      if (o->clash != kNone || takes_value) return o->clash;
    }
    return kNone;
  }
  const size_t eq = arg.find('=');
  const std::string_view name = arg.substr(2, eq == std::string_view::npos ? std::string_view::npos : eq - 2);
  const EalOption* o = long_option(name);
  if (o == nullptr) return kNone;
  option_ = o->name;
  const bool log_level = o->name == "log-level";
  if (eq == std::string_view::npos && o->value == Value::kRequired) {
    awaiting_ = std::string(arg);
    awaiting_name_ = o->name;
    log_level_ = log_level;
  } else if (eq != std::string_view::npos && o->value != Value::kNone) {
    value_of_ = o->name;
    value_ = arg.substr(eq + 1);
  }
  if (o->clash != kNone) return o->clash;
  return log_level && eq != std::string_view::npos && arg.substr(eq + 1) == "help" ? kHelp : kNone;
}

std::vector<std::string> eal_option_values(const std::vector<std::string>& args, std::string_view name) {
  std::vector<std::string> values;
  EalArgReader reader;
  for (const std::string& arg : args) {
    reader.next(arg);
    if (reader.value_of() == name) values.push_back(reader.value());
  }
  return values;
}

bool eal_adds_huge_unlink(const std::vector<std::string>& args) {
  EalArgReader reader;
  for (const std::string& arg : args) {
    reader.next(arg);
    const std::string& o = reader.option();
    if (o == "huge-unlink" || o == "single-file-segments" || o == "no-huge" || o == "in-memory") return false;
  }
  return true;
}

}  // namespace psgate
