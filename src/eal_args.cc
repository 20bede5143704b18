// EAL argument assembly: psgate owns lcore and device selection so that the
// config stays the single place they are named.
#include <unistd.h>

#include <string>
#include <vector>

#include "psgate/dataplane.h"

namespace psgate {

std::vector<std::string> eal_arguments(const ConfigSpec& config, const std::string& program) {
  std::vector<std::string> args{program};
  args.insert(args.end(), config.eal_args.begin(), config.eal_args.end());
  // Lcore ids are logical; map each to a CPU that exists. On a machine with
  // fewer CPUs than lcores, lcores share CPUs (correct, only slower).
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  std::string lcores = "--lcores=" + std::to_string(config.main_lcore) + "@" +
                       std::to_string(config.main_lcore % cpus);
  for (unsigned id : config.data_lcores) lcores += "," + std::to_string(id) + "@" + std::to_string(id % cpus);
  args.push_back(lcores);
  args.push_back("--main-lcore=" + std::to_string(config.main_lcore));
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
