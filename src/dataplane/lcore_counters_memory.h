// SPDX-License-Identifier: BSD-3-Clause
// Owns one data lcore's counters: its LcoreCounters and the per-class and
// per-job arrays that struct views, each allocated with rte_zmalloc_socket,
// cache-aligned, on the lcore's NUMA node. DPDK rounds every allocation up to
// whole cache lines, so no line holds two lcores' counters (std::vector's ends
// could share one with the next allocation), and each lcore writes to memory
// local to it.
#pragma once

#include <rte_malloc.h>

#include <cstddef>
#include <memory>

#include "psgate/counters.h"
#include "psgate/result.h"

namespace psgate {

namespace detail {
// Destroys `count` objects and gives their memory back with rte_free.
template <typename T>
struct RteArrayDelete {
  size_t count = 0;
  void operator()(T* p) const {
    std::destroy_n(p, count);
    rte_free(p);
  }
};
}  // namespace detail

// An array of T constructed in rte_malloc memory; empty when count is 0.
template <typename T>
using RteArray = std::unique_ptr<T[], detail::RteArrayDelete<T>>;

class LcoreCountersMemory {
 public:
  // `socket`: the lcore's NUMA node (rte_lcore_to_socket_id). Where that node
  // has no DPDK memory, any node's is used rather than failing.
  static Result<LcoreCountersMemory> create(unsigned class_count, unsigned max_jobs, int socket);

  LcoreCounters* get() const { return counters_.get(); }
  LcoreCounters* operator->() const { return counters_.get(); }

 private:
  LcoreCountersMemory() = default;
  RteArray<LcoreCounters> counters_;
  RteArray<ClassCounters> classes_;
  RteArray<LatencyHistogram> sojourn_;
  RteArray<JobCounters> jobs_;
};

}  // namespace psgate
