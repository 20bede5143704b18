// SPDX-License-Identifier: BSD-3-Clause
// gen-smoke's stand-in for an lcore that cannot be started, loaded with
// LD_PRELOAD: the PSGATE_TEST_FAIL_LAUNCH'th call of rte_eal_remote_launch
// from the program (1: its first) fails with -EBUSY, as DPDK's does for a
// worker that is not waiting; every other call goes to DPDK's own. Nothing
// in EAL can be made to refuse a launch on demand.
#include <dlfcn.h>
#include <rte_launch.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>

extern "C" int rte_eal_remote_launch(lcore_function_t* f, void* arg, unsigned worker_id) {
  using Launch = int (*)(lcore_function_t*, void*, unsigned);
  static const auto dpdk = reinterpret_cast<Launch>(dlsym(RTLD_NEXT, "rte_eal_remote_launch"));
  if (dpdk == nullptr) return -ENOSYS;
  // EAL's own calls (rte_eal_init launches a no-op on every worker to see
  // it ready) are not counted: which call is the program's first would
  // otherwise depend on the number of lcores.
  Dl_info caller{}, eal{};
  if (dladdr(__builtin_return_address(0), &caller) != 0 && dladdr(reinterpret_cast<void*>(dpdk), &eal) != 0 &&
      caller.dli_fbase == eal.dli_fbase)
    return dpdk(f, arg, worker_id);
  static std::atomic<long> calls{0};
  const char* nth = std::getenv("PSGATE_TEST_FAIL_LAUNCH");
  if (nth != nullptr && ++calls == std::atol(nth)) return -EBUSY;
  return dpdk(f, arg, worker_id);
}
