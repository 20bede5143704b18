// SPDX-License-Identifier: BSD-3-Clause
// EAL argument assembly: psgate owns lcore and device selection so that the
// config stays the single place they are named.
#include <algorithm>
#include <string>
#include <vector>

#include "dataplane/eal_args.h"
#include "psgate/eal_arg_clash.h"

namespace psgate {

std::vector<std::string> eal_arguments(const ConfigSpec& config, const std::string& program) {
  std::vector<std::string> args{program};
  args.insert(args.end(), config.eal_args.begin(), config.eal_args.end());
  // Hugepage files removed once mapped: a stop, a crash or a purge of the
  // package leaves none holding its page (eal_arg_clash.h).
  if (eal_adds_huge_unlink(config.eal_args)) args.push_back("--huge-unlink");
  // Lcore ids are CPUs (main() refused any the machine does not have), and a
  // data lcore runs alone on its CPU. The main lcore sleeps in the control
  // path, so it may share a data lcore's CPU: it then gets an EAL lcore id
  // no data lcore uses, pinned to that CPU.
  const auto used = [&](unsigned id) {
    return std::find(config.data_lcores.begin(), config.data_lcores.end(), id) != config.data_lcores.end();
  };
  unsigned main_id = config.main_lcore;
  if (used(main_id)) {
    main_id = 0;
    while (used(main_id)) ++main_id;
  }
  std::string lcores = "--lcores=" + std::to_string(main_id) + "@" + std::to_string(config.main_lcore);
  for (unsigned id : config.data_lcores) lcores += "," + std::to_string(id) + "@" + std::to_string(id);
  args.push_back(lcores);
  args.push_back("--main-lcore=" + std::to_string(main_id));
  for (const PortSpec* port : {&config.wire, &config.host}) {
    if (port->device.rfind("net_", 0) == 0) {
      args.push_back("--vdev=" + port->device);
    } else {
      args.push_back("-a");
      args.push_back(port->device);
    }
  }
  return args;
}

}  // namespace psgate
