// SPDX-License-Identifier: BSD-3-Clause
// psgate-micro: each fast-path stage alone, as BESS's *_bench.cc measure
// theirs (perf/micro/README.md). DPDK's mempool, rte_malloc (flow cache) and
// rte_acl (classifier) need an EAL, so main starts one on --no-huge memory
// with a file prefix of its own, then hands the rest of argv to Google
// Benchmark.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "micro.h"

namespace psgate::micro {

namespace {
rte_mempool* g_pool = nullptr;
}

rte_mempool* mbuf_pool() { return g_pool; }

MbufBurst::MbufBurst(const std::vector<std::vector<uint8_t>>& frames) {
  for (unsigned i = 0; i < kBurst && !frames.empty(); ++i) {
    const auto& f = frames[i % frames.size()];
    rte_mbuf* mb = rte_pktmbuf_alloc(g_pool);
    if (mb == nullptr) return;
    char* p = rte_pktmbuf_append(mb, static_cast<uint16_t>(f.size()));
    if (p == nullptr) {
      rte_pktmbuf_free(mb);
      return;
    }
    std::copy(f.begin(), f.end(), p);
    m[i] = mb;
  }
}

MbufBurst::~MbufBurst() {
  for (rte_mbuf* mb : m)
    if (mb) rte_pktmbuf_free(mb);
}

}  // namespace psgate::micro

int main(int argc, char** argv) {
  // EAL first: its own arguments are fixed here, so argv is Google
  // Benchmark's alone. 1 GiB of --no-huge memory holds the 1,000,000-flow
  // cache (192 MiB) and the 100,000-rule ACL with room to spare.
  const std::string prefix = "--file-prefix=psgate-micro-" + std::to_string(getpid());
  const char* eal_argv[] = {"psgate-micro", "--no-huge", "-m", "1024", "--no-pci", "--log-level=3", prefix.c_str()};
  if (rte_eal_init(static_cast<int>(std::size(eal_argv)), const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "psgate-micro: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
    return 2;
  }
  int rc = 0;
  {
    using namespace psgate::micro;
    // 4,096 mbufs: a few bursts per benchmark, never the data path's pool size.
    g_pool = rte_pktmbuf_pool_create("micro_pool", 4096, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
    if (g_pool == nullptr) {
      std::fprintf(stderr, "psgate-micro: mbuf pool: %s\n", rte_strerror(rte_errno));
      rte_eal_cleanup();
      return 2;
    }
    register_parser();
    register_flow_cache();
    register_classify();
    register_sched();
    register_token_bucket();
    register_rewrite();
    register_counters();
    register_telemetry();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
      rc = 1;
    } else {
      benchmark::AddCustomContext("tsc_hz", std::to_string(rte_get_tsc_hz()));
      benchmark::RunSpecifiedBenchmarks();
      benchmark::Shutdown();
    }
  }
  rte_eal_cleanup();
  return rc;
}
