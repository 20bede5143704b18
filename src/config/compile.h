// SPDX-License-Identifier: BSD-3-Clause
// The one translation from what users state to what the lcores read (the
// third stage of the configuration, after TOML -> ConfigSpec):
//
//   ConfigSpec ([classes.N], [shaper.<port>]) --compile_ports-->  PortLive   (bytes/s)
//   live changes (`class`, `shaper`: bit/s)   --bytes_per_sec-->  PortLive
//   JobRecord (JobSpec + slot) + policy ranks --compile_snapshot--> Snapshot (SlotInfo: class, policer)
//   PortLive + [classes.N] depth + TSC        --compile_scheduler--> PortSchedConfig
//
// Every bit/s -> byte/s (units.h) and ns -> TSC tick conversion of the
// control path is here or called from here, so a unit is converted in one
// place. The snapshot is compiled once per control change (the first by the
// control plane's start(), or by the data plane itself when it runs without
// one), never twice for one state.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "psgate/class_scheduler.h"
#include "psgate/config.h"
#include "psgate/job_registry.h"
#include "psgate/policy.h"
#include "psgate/result.h"
#include "psgate/snapshot.h"
#include "psgate/units.h"  // bytes_per_sec, bits_per_sec

namespace psgate {

// A duration as TSC ticks at `tsc_hz`; 128-bit product: a drain timeout of
// minutes at 3 GHz would overflow 64 bits.
constexpr uint64_t ticks_from_ns(uint64_t ns, uint64_t tsc_hz) {
  return static_cast<uint64_t>(static_cast<unsigned __int128>(ns) * tsc_hz / 1'000'000'000ull);
}

// The shaper and class parameters of `config`, per port, as the schedulers take
// them. The control plane keeps these and applies live changes to them.
std::array<PortLive, kPortCount> compile_ports(const ConfigSpec& config);

// The egress scheduler's start-up parameters for port `port`: the live ones
// plus what never changes (queue depths, overhead, headroom).
PortSchedConfig compile_scheduler(const ConfigSpec& config, unsigned port, const PortLive& live, uint64_t tsc_hz);

// A job as a snapshot is compiled from: the registry's record (slot
// assigned) and the ranks the policy in force gives it.
struct RankedJob {
  const JobRecord* job = nullptr;
  JobRanks ranks;
};

// What compile_snapshot built: the rule partitions it compiled (not those
// it reused) and how long that took, wall clock; the longest one alone too,
// since one rte_acl_build cannot be cut short (a stop waits for the builds
// under way).
struct CompileReport {
  size_t partitions = 0;        // in the snapshot
  size_t partitions_built = 0;  // compiled now (the others reused)
  size_t rules_built = 0;
  uint64_t build_ns = 0;  // the partition builds, all together
  uint64_t longest_ns = 0;
  size_t longest_rules = 0;  // the rules of that longest build
};

// A compile that gives up when asked to: `stop_asked` (may be empty) is
// called before each rule partition is built, from the TBB workers, at
// once from several; once it says yes, no further partition is built, and
// the compile fails with an error that starts with kCompileStopped. The
// builds under way finish first (rte_acl_build has no way to stop): a stop
// waits for one partition's build per worker.
inline constexpr const char* kCompileStopped = "stopped while compiling rules";
struct CompileControl {
  std::function<bool()> stop_asked;
  CompileReport* report = nullptr;  // filled when given, failed or not
};

// Compiles a snapshot of `jobs` (in rank order; slots < max_jobs) and `ports`.
// Each rule partition of `previous` whose jobs are unchanged is reused (a
// re-rank costs no ACL build, a job added or removed rebuilds its partition);
// the others are built in parallel on TBB workers.
Result<std::unique_ptr<Snapshot>> compile_snapshot(const ConfigSpec& config, const std::vector<RankedJob>& jobs,
                                                   const std::array<PortLive, kPortCount>& ports, uint32_t generation,
                                                   const Snapshot* previous, const CompileControl& control = {});

// Puts `merged` in place of the partitions it covers in `snap`'s matcher, if
// it still covers exactly their jobs; else changes nothing. compile_snapshot
// carries the previous snapshot's merge over this way.
bool use_merged(Snapshot& snap, const std::shared_ptr<const MergedRules>& merged);

// The snapshot of the config's own [[jobs]] with the static policy (each
// job's configured rank) and the configured scheduler parameters: what the
// data plane runs when no control plane publishes one.
Result<std::unique_ptr<Snapshot>> compile_config_snapshot(const ConfigSpec& config, uint32_t generation);

}  // namespace psgate
