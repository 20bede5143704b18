// SPDX-License-Identifier: BSD-3-Clause
#include "dataplane/lcore_counters_memory.h"

#include <rte_common.h>
#include <rte_memory.h>

#include <string>

namespace psgate {

namespace {

// Zeroed, cache-aligned memory on `socket`, or on any node when that one has none.
template <typename T>
Result<RteArray<T>> make_array(const char* what, size_t count, int socket) {
  if (count == 0) return RteArray<T>(nullptr, detail::RteArrayDelete<T>{0});
  const size_t size = sizeof(T) * count;
  void* mem = rte_zmalloc_socket(what, size, RTE_CACHE_LINE_SIZE, socket);
  if (!mem && socket != SOCKET_ID_ANY) mem = rte_zmalloc_socket(what, size, RTE_CACHE_LINE_SIZE, SOCKET_ID_ANY);
  if (!mem) {
    return Result<RteArray<T>>::failure(std::string("cannot allocate ") + what + " (" + std::to_string(size) +
                                        " bytes)");
  }
  T* first = static_cast<T*>(mem);
  std::uninitialized_value_construct_n(first, count);  // histograms start at min = UINT64_MAX
  return RteArray<T>(first, detail::RteArrayDelete<T>{count});
}

}  // namespace

Result<LcoreCountersMemory> LcoreCountersMemory::create(unsigned class_count, unsigned max_jobs, int socket) {
  LcoreCountersMemory m;
  const size_t per_port_classes = size_t{kPortCount} * class_count;
  auto counters = make_array<LcoreCounters>("psgate_lcore_counters", 1, socket);
  auto classes = make_array<ClassCounters>("psgate_class_counters", per_port_classes, socket);
  auto sojourn = make_array<LatencyHistogram>("psgate_sojourn", per_port_classes, socket);
  auto jobs = make_array<JobCounters>("psgate_job_counters", max_jobs, socket);
  if (!counters.ok()) return Result<LcoreCountersMemory>::failure(counters.error());
  if (!classes.ok()) return Result<LcoreCountersMemory>::failure(classes.error());
  if (!sojourn.ok()) return Result<LcoreCountersMemory>::failure(sojourn.error());
  if (!jobs.ok()) return Result<LcoreCountersMemory>::failure(jobs.error());
  m.counters_ = std::move(*counters);
  m.classes_ = std::move(*classes);
  m.sojourn_ = std::move(*sojourn);
  m.jobs_ = std::move(*jobs);
  LcoreCounters& lc = m.counters_[0];
  lc.classes = {m.classes_.get(), per_port_classes};
  lc.sojourn = {m.sojourn_.get(), per_port_classes};
  lc.jobs = {m.jobs_.get(), max_jobs};
  lc.class_count = class_count;
  return m;
}

}  // namespace psgate
