// SPDX-License-Identifier: BSD-3-Clause
// EAL argument assembly (eal_args.cc).
#pragma once

#include <string>
#include <vector>

#include "psgate/config.h"

namespace psgate {

// EAL arguments for `config`: program name, [eal] args, --huge-unlink (unless
// they say otherwise: eal_adds_huge_unlink), --lcores, and one
// --vdev (net_* devices) or -a (PCI and other bus devices) per port.
std::vector<std::string> eal_arguments(const ConfigSpec& config, const std::string& program);

}  // namespace psgate
