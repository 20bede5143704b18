// The immutable state the RX stage classifies with: jobs, their rules compiled
// into a Classifier, and the job -> class map. The control path builds a new
// Snapshot and publishes it with one pointer store (SnapshotPublisher); data
// lcores never see a half-built one and never take a lock.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <rte_rcu_qsbr.h>

#include "psgate/classifier.h"
#include "psgate/config.h"
#include "psgate/counters.h"
#include "psgate/result.h"

namespace psgate {

struct JobEntry {
  uint32_t slot = 0;       // stable index for counters while the job exists
  uint32_t id = 0;
  std::string name;
  uint32_t rank = 0;       // the operator's rank
  // The ranks in force, by Direction: the policy's result (equal to `rank`
  // under the static policy; `batch` ranks a job's pull above its push).
  std::array<uint32_t, 2> effective_rank{};
  std::vector<MatchRule> match;
  std::optional<RateSpec> police;
  // When the job was added: rules are matched in this order (earlier jobs'
  // rules win), independent of rank, so a re-rank changes no rule.
  uint64_t sequence = 0;
};

// What the fast path reads for a job slot.
struct SlotInfo {
  std::array<uint8_t, 2> cls{};  // by Direction (push, pull)
  uint8_t active = 0;
  uint64_t police_bytes_per_sec = 0;  // 0: not policed
  uint64_t police_burst_bytes = 0;
};

// Scheduler parameters that can change while running ([shaper.*], [classes.N]),
// in the units the scheduler takes. Scheduler lcores apply them when they see a
// new generation.
struct ClassLive {
  uint64_t cap_bytes_per_sec = 0, cap_burst_bytes = 0;      // 0: none
  uint64_t floor_bytes_per_sec = 0, floor_burst_bytes = 0;  // 0: none
  uint32_t ecn_threshold = 0;
  int dscp = kNoDscp;
  bool operator==(const ClassLive&) const = default;
};
struct PortLive {
  uint64_t shaper_bytes_per_sec = 0, shaper_burst_bytes = 0;  // 0: unshaped
  std::vector<ClassLive> classes;
};

struct Snapshot {
  uint32_t generation = 0;
  std::vector<JobEntry> jobs;            // in rank order (ties: control order)
  std::vector<SlotInfo> slots;           // max_jobs entries
  // Compiled rules, shared between snapshots while the rules do not change: a
  // re-rank costs no ACL build. The flow cache stores job slots, which a
  // re-rank does not change either, so it is keyed by rules_generation.
  std::shared_ptr<const Classifier> classifier;  // values are job slots
  std::vector<ClassifierRule> rules;
  uint32_t rules_generation = 0;
  std::array<PortLive, kPortCount> ports;
};

// The scheduler parameters of `config` (shapers and per-class settings).
std::array<PortLive, kPortCount> live_params(const ConfigSpec& config);

// Builds a snapshot for `jobs` (slots already assigned, < max_jobs). When
// `previous` has the same rules, its classifier is reused.
Result<std::unique_ptr<Snapshot>> build_snapshot(const ConfigSpec& config, std::vector<JobEntry> jobs,
                                                 uint32_t generation, const Snapshot* previous = nullptr);

// Job entries for the config's static [[jobs]], slots in order, effective
// ranks equal to the configured ranks.
std::vector<JobEntry> jobs_from_config(const ConfigSpec& config);

// Holds the current snapshot. Readers (RX lcores) load it once per burst and
// report quiescence after each loop; publish() swaps the pointer and frees the
// old snapshot once every reader has passed a quiescent state.
class SnapshotPublisher {
 public:
  // `qsbr` must outlive the publisher; reader thread ids are registered by the lcores.
  SnapshotPublisher(std::unique_ptr<Snapshot> initial, rte_rcu_qsbr* qsbr);
  ~SnapshotPublisher();

  // Acquire pairs with publish's release store: the reader sees a fully built snapshot.
  const Snapshot* current() const { return current_.load(std::memory_order_acquire); }
  // Control thread only. Blocks the caller (never a data lcore) until the old
  // snapshot is unreachable, then frees it.
  void publish(std::unique_ptr<Snapshot> next);

 private:
  std::atomic<const Snapshot*> current_;
  rte_rcu_qsbr* qsbr_;
};

}  // namespace psgate
