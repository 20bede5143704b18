// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/eal_start.h"

#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dataplane/eal_args.h"
#include "psgate/eal_prefix.h"
#include "psgate/eal_teardown.h"

namespace psgate {

int start_eal(const ConfigSpec& config) {
  // Kept for the process's life: EAL may hold on to its arguments' strings,
  // and it runs once a process.
  static std::vector<std::string> args;
  static std::vector<char*> argv;
  args = eal_arguments(config, "psgate");
  argv.clear();
  for (std::string& a : args) argv.push_back(a.data());
  spdlog::debug("EAL arguments: {}", fmt::join(args, " "));
  const int eal_used = rte_eal_init(static_cast<int>(argv.size()), argv.data());
  if (eal_used < 0) {
    // EAL's errno alone misleads: no hugepages reserved reads "Permission
    // denied" for root. Its own log above says which step failed.
    // EINVAL: EAL refused its arguments (an option of eal.args it does not
    // know, or one it cannot combine with the rest), or what they ask of
    // this machine (IOVA as PA without physical addresses, a driver plugin
    // that does not load): a restart repeats it, so a config error.
    if (rte_errno == EINVAL) {
      spdlog::error(
          "DPDK EAL refused its arguments ({}), or what they ask of this machine: see EAL's messages above; "
          "check eal.args in {}",
          fmt::join(args, " "), config.source);
      return 2;
    }
    // ENODEV: a device string EAL cannot parse (no driver of that name, a
    // malformed PCI address), or buses it could not scan (the machine's).
    // eal.args holds no device options (config.cc): a port's string that
    // does not parse now either is the configuration's (exit 2).
    if (rte_errno == ENODEV) {
      for (auto [key, spec] : {std::pair{"ports.wire.device", &config.wire}, {"ports.host.device", &config.host}}) {
        rte_devargs parsed{};
        // (Not reset: rte_devargs_reset is experimental in 22.11, and the
        // process ends here either way.)
        if (rte_devargs_parse(&parsed, spec->device.c_str()) != 0) {
          spdlog::error(
              "{}: {} \"{}\": DPDK knows no device of that name (a driver name it does not know: net_af_packet, "
              "net_af_xdp, net_memif, net_pcap, net_ring, net_null, net_tap...; or a malformed PCI address)",
              config.source, key, spec->device);
          return 2;
        }
      }
    }
    const bool huge = std::find(args.begin(), args.end(), "--no-huge") == args.end();
    if (const std::string in_use = eal_prefix_in_use(args); !in_use.empty()) {
      spdlog::error("DPDK EAL initialisation failed: {}: each psgate needs its own --file-prefix in eal.args", in_use);
      return 1;
    }
    spdlog::error(
        "DPDK EAL initialisation failed: {} (see EAL's messages above{})", rte_strerror(rte_errno),
        huge ? "; hugepages reserved and mounted? HugePages_Free in /proc/meminfo, dpdk-hugepages.py -s" : "");
    return 1;
  }
  // EAL reads options only (getopt moves the rest to the end): a word of
  // eal.args that is neither an option nor an option's value would be
  // ignored, unsaid.
  if (eal_used + 1 < static_cast<int>(argv.size())) {
    std::vector<std::string> unused(argv.begin() + eal_used + 1, argv.end());
    spdlog::error("eal.args in {}: EAL does not take {} (not an option, nor the value of one)", config.source,
                  fmt::join(unused, " "));
    eal_cleanup_after_interrupts();
    return 2;
  }
  return 0;
}

}  // namespace psgate
