// SPDX-License-Identifier: BSD-3-Clause
// What EAL's getopt would make of one argument, for the programs that hand
// EAL arguments from their users (psgate's eal.args, psgate-gen's after
// "--") and must refuse those EAL acts on in a way the program cannot let it:
// --help, which makes EAL print its usage and exit 0 (a run that did nothing,
// reported as a success), and a second "--", after which EAL reads nothing.
#pragma once

#include <string>
#include <string_view>

namespace psgate {

// Short options bundled behind one dash ("-vl0" is -v -l 0) count up to the
// first that takes a value, long ones also by an abbreviation ("--lcor=..."
// is --lcores). Values of other options (the "512" of "-m", "512") are none,
// but for "help" after --log-level (`previous`, the argument before): EAL
// lists its log types and exits 0 for --log-level=help as for --help.
enum class EalArgClash { kNone, kCores, kDevices, kHelp, kEndOfOptions };
inline EalArgClash eal_arg_clash(const std::string& arg, std::string_view previous = {}) {
  auto is_log_level = [](std::string_view name) {
    return name.size() >= 2 && std::string_view("log-level").starts_with(name);
  };
  if (arg == "help" && previous.starts_with("--") && is_log_level(previous.substr(2))) return EalArgClash::kHelp;
  if (arg == "--") return EalArgClash::kEndOfOptions;
  if (arg.size() < 2 || arg[0] != '-') return EalArgClash::kNone;
  if (arg[1] != '-') {
    for (size_t k = 1; k < arg.size(); ++k) {
      const char o = arg[k];
      if (o == 'l' || o == 'c' || o == 's' || o == 'S') return EalArgClash::kCores;
      if (o == 'a' || o == 'b') return EalArgClash::kDevices;
      if (o == 'h') return EalArgClash::kHelp;
      if (o != 'v') return EalArgClash::kNone;  // every other short option takes a value: the rest is it
    }
    return EalArgClash::kNone;
  }
  const std::string name = arg.substr(2, arg.find('=') == std::string::npos ? std::string::npos : arg.find('=') - 2);
  if (name.empty()) return EalArgClash::kNone;
  for (std::string_view core : {"lcores", "main-lcore", "master-lcore"})
    if (core.starts_with(name)) return EalArgClash::kCores;
  for (std::string_view device : {"vdev", "allow", "block", "pci-whitelist", "pci-blacklist"})
    if (device.starts_with(name)) return EalArgClash::kDevices;
  if (name.size() >= 2 && std::string_view("help").starts_with(name)) return EalArgClash::kHelp;
  if (is_log_level(name) && arg.ends_with("=help") && arg.find('=') == arg.size() - 5) return EalArgClash::kHelp;
  return EalArgClash::kNone;
}

}  // namespace psgate
