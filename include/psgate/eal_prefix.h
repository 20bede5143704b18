// SPDX-License-Identifier: BSD-3-Clause
// Why rte_eal_init failed, where EAL does not say: another primary DPDK
// process on the same runtime directory (file prefix) holds its config
// file's lock, and EAL says only "Cannot init config" with rte_errno 0
// ("failed: Success"). psgate and psgate-gen both ask.
#pragma once

#include <string>
#include <vector>

namespace psgate {

// After rte_eal_init failed with rte_errno 0: "another DPDK process runs with
// the file prefix P (it holds F)" when that is why, else "". `args` are the
// EAL arguments given (their --file-prefix, "rte" without one).
std::string eal_prefix_in_use(const std::vector<std::string>& args);

}  // namespace psgate
