// SPDX-License-Identifier: BSD-3-Clause
// Lcores that exist on this machine: the configuration parser is
// machine-independent, so main() checks the lcores against the CPUs the
// process may run on before EAL starts (EAL itself would map a missing one
// onto some other CPU and run "on lcore 99" of a 2-CPU machine).
#pragma once

#include <string>
#include <vector>

#include "psgate/config.h"
#include "psgate/result.h"

namespace psgate {

// The CPUs of the calling thread's affinity set, ascending. Once EAL has
// started, each of psgate's threads is pinned to its lcore's CPU (the
// control thread to lcores.main's): this is then no longer the set psgate
// was started with.
std::vector<unsigned> affinity_cpus();

// The CPUs psgate was started with, ascending: affinity_cpus() at the first
// call, which main() makes before EAL pins any thread; the same set on every
// later call, from any thread. A reload checks the lcores a restart would
// use against it: the control thread's own affinity (lcores.main's CPU
// alone) would call every other lcore, the running data lcores too,
// "outside psgate's CPU affinity".
const std::vector<unsigned>& start_affinity_cpus();

// The CPUs the kernel has online (/sys/devices/system/cpu/online), ascending;
// empty when that file cannot be read.
std::vector<unsigned> online_cpus();

// "0-1", "0,2-5,7": a CPU list as the kernel writes one.
std::string cpu_list_text(const std::vector<unsigned>& cpus);
// The reverse: the CPUs of such a list, ascending; empty for text that is
// not one.
std::vector<unsigned> parse_cpu_list(const std::string& text);

// Fails, naming the key, for the first lcore (lcores.main, then lcores.data[i])
// that is not in `cpus` (the affinity): "<source>: lcores.data[0]: lcore 99
// does not exist (this machine has CPUs 0-1)". A CPU that is `online` but
// outside the affinity (a cpuset, taskset, systemd's CPUAffinity=, or
// isolcpus, which PID 1 and so every service inherit) is named as such, so
// that the operator is not told that an existing CPU does not exist; a
// missing CPU's message then lists both sets.
Result<bool> check_lcores_exist(const ConfigSpec& config, const std::vector<unsigned>& cpus, const std::string& source,
                                const std::vector<unsigned>& online = {});

}  // namespace psgate
