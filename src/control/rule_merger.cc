// SPDX-License-Identifier: BSD-3-Clause
// Background merges of rule partitions (see rule_merger.h).
#include "control/rule_merger.h"

#include <rte_lcore.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include <spdlog/spdlog.h>

namespace psgate {

namespace {
constexpr uint64_t kRetryAfterFailureNs = 60'000'000'000;
}

RuleMerger::~RuleMerger() {
  if (pending_.valid()) {
    spdlog::info("waiting for the background rule merge to finish");
    pending_.wait();
  }
}

bool RuleMerger::maybe_start(const std::vector<RulePartition>& partitions, const JobRegistry& jobs,
                             const std::shared_ptr<const MergedRules>& in_force, uint64_t rules_changed_ns,
                             uint64_t now_ns) {
  if (stopped_.load() || pending_.valid() || now_ns < retry_after_ns_ || partitions.size() < 2 ||
      now_ns < rules_changed_ns + kSettleNs)
    return false;
  const uint32_t last = partitions[partitions.size() - 2].id;  // all but the newest
  // `in_force` is the current snapshot's merge: null when there is none or
  // it went stale (a job removed under it), and then it covers nothing.
  size_t uncovered = 0;
  for (const RulePartition& p : partitions)
    if (p.id <= last && (!in_force || p.id > in_force->last_partition)) ++uncovered;
  if (uncovered < kPartitionsToMerge) return false;

  // The rules, copied here on the control thread: the registry is not the
  // merge thread's to read. In age order, as the partitions hold them.
  auto merged = std::make_shared<MergedRules>();
  merged->last_partition = last;
  std::vector<ClassifierRule> rules;
  for (const RulePartition& p : partitions)
    if (p.id <= last) merged->members.insert(merged->members.end(), p.members.begin(), p.members.end());
  for (const JobRecord* j : jobs.in_age_order())
    if (j->partition <= last)
      for (const MatchRule& r : j->spec.match) rules.push_back(ClassifierRule{r, j->slot});
  const int socket = static_cast<int>(rte_socket_id());
  const std::string name = "mrg" + std::to_string(serial_++);
  spdlog::info("merging {} rule partitions ({} rules) in the background", uncovered, rules.size());
  // A thread of its own (it inherits the control thread's CPUs, never a
  // data lcore's); the control thread goes on serving meanwhile.
  merge_tid_.store(0);
  pending_ = std::async(std::launch::async, [this, rules = std::move(rules), merged, name, socket]() mutable {
    using R = Result<std::shared_ptr<const MergedRules>>;
    // The lowest CPU priority: it shares the control thread's CPUs, and the
    // control thread's answers come first (Linux: nice is per thread).
    // Until a stop, which waits for it (stop()).
    const auto tid = static_cast<id_t>(::gettid());
    ::setpriority(PRIO_PROCESS, tid, 19);
    merge_tid_.store(static_cast<pid_t>(tid));
    if (stopped_.load()) ::setpriority(PRIO_PROCESS, tid, stop_nice_.load());
    // Cleared as the thread ends: stop() then has nothing to hurry (and no
    // thread id that another thread may take next).
    struct Done {
      std::atomic<pid_t>& tid;
      ~Done() { tid.store(0); }
    } done{merge_tid_};
    const auto t0 = std::chrono::steady_clock::now();
    auto built = Classifier::build(rules, name, socket);
    if (!built) return R::failure(built.error());
    merged->classifier = std::shared_ptr<const Classifier>(std::move(*built));
    spdlog::info("rule merge of {} rules built in {} ms", rules.size(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
    return R(std::shared_ptr<const MergedRules>(merged));
  });
  return true;
}

void RuleMerger::stop() {
  errno = 0;
  const int nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  stop_nice_.store(errno == 0 ? nice : 0);
  stopped_.store(true);
  // A merge thread that set its priority before the flag: given it back
  // here (one that sets it after reads the flag and gives it back itself).
  // Raising a priority needs CAP_SYS_NICE (root has it): without it the
  // merge goes on at the lowest, as before.
  if (const pid_t tid = merge_tid_.load(); tid != 0)
    if (::setpriority(PRIO_PROCESS, static_cast<id_t>(tid), stop_nice_.load()) == 0)
      spdlog::info(
          "stopping: the background rule merge runs on at the control thread's priority; the exit waits for it");
}

std::shared_ptr<const MergedRules> RuleMerger::take(uint64_t now_ns) {
  if (!pending_.valid() || pending_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
  auto result = pending_.get();
  if (!result) {
    spdlog::warn("background rule merge failed: {}; partitions stay as they are, next try in a minute", result.error());
    retry_after_ns_ = now_ns + kRetryAfterFailureNs;
    return nullptr;
  }
  return *result;
}

}  // namespace psgate
