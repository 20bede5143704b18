// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/eal_prefix.h"

#include "psgate/eal_arg_clash.h"

#include <rte_eal.h>
#include <rte_errno.h>
#include <unistd.h>

#include <cstdlib>

namespace psgate {

std::string eal_prefix_in_use(const std::vector<std::string>& args) {
  // Asked of the lock itself, since other failures leave rte_errno at 0 too.
  if (rte_errno != 0) return "";
  // As EAL read it: the last one given, also abbreviated (--file-pre=x).
  const std::vector<std::string> given = eal_option_values(args, "file-prefix");
  const std::string prefix = given.empty() ? "rte" : given.back();
  const char* xdg = std::getenv("XDG_RUNTIME_DIR");
  const std::string runtime = ::geteuid() == 0 ? "/var/run" : (xdg != nullptr ? xdg : "/tmp");
  const std::string eal_config = runtime + "/dpdk/" + prefix + "/config";
  if (rte_eal_primary_proc_alive(eal_config.c_str()) != 1) return "";
  return "another DPDK process runs with the file prefix " + prefix + " (it holds " + eal_config + ")";
}

}  // namespace psgate
