// SPDX-License-Identifier: BSD-3-Clause
// The flow cache alone, driven as the RX stage drives it (rx_stage.cc,
// classify_burst): per packet a key, its hash and a prefetch of its two sets,
// then one lookup4 over the burst; misses are inserted with insert4.
//
// Keys are computed from a flow number with a few ALU operations (the RX
// stage loads them from the frame it just received, which is in cache), so
// the cost measured is the table's. Each burst picks its flows pseudo-randomly
// over the active set: with 100,000 and 1,000,000 flows the sets a burst
// touches are mostly not in any CPU cache, as on a gateway that sees that
// many flows.
#include <bit>
#include <map>
#include <memory>
#include <string>

#include "micro.h"
#include "psgate/flow_cache.h"
#include "psgate/flow_key.h"

namespace psgate::micro {

namespace {

constexpr uint32_t kGeneration = 1;

// Flow n as the key of a TCP packet: 10.x.y.z -> 10.0.0.5, its own source port.
inline FlowKey4 flow(uint32_t n) {
  const uint32_t src = 10u | (n & 0xffffffu) << 8;  // 10.<n> in wire order
  const uint32_t dst = 10u | 5u << 24;              // 10.0.0.5
  const uint64_t sport = __builtin_bswap16(static_cast<uint16_t>(1024 + (n >> 24)));
  const uint64_t dport = __builtin_bswap16(uint16_t{2222});
  return FlowKey4{{src | uint64_t{dst} << 32, sport | dport << 16 | uint64_t{6} << 32 | uint64_t{4} << 40}};
}

inline uint64_t mix64(uint64_t x) {  // splitmix64's finaliser
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Flow n with both addresses and the source port spread over their whole
// range. CRC32-C is linear, so flow()'s consecutive addresses land in
// distinct sets almost perfectly, and the benchmark's captures' too; flows
// of many clients and ports spread as random keys do, and some share a set.
inline FlowKey4 scattered_flow(uint32_t n) {
  const uint64_t a = mix64(n + 0x9e3779b97f4a7c15ull);
  const uint64_t ports = mix64(a) & 0xffffffffu;
  return FlowKey4{{a, ports | uint64_t{6} << 32 | uint64_t{4} << 40}};
}

using KeyOf = FlowKey4 (*)(uint32_t);

// The cache the daemon would give that many flows (dataplane.flow_cache):
// the default 65,536 entries, or about twice the flows.
uint32_t entries_for(uint32_t flows) { return flows <= 32768 ? 65536 : std::bit_ceil(flows) * 2; }

// One filled cache per flow count, built on first use and kept: building the
// 1,000,000-flow one takes longer than measuring it. Never freed: the EAL's
// memory goes with the process.
template <KeyOf key_of>
FlowCache* filled_cache(uint32_t flows) {
  static std::map<uint32_t, FlowCache*> caches;
  auto it = caches.find(flows);
  if (it != caches.end()) return it->second;
  const std::string name = (key_of == flow ? "micro_fc" : "micro_fc_scattered") + std::to_string(flows);
  auto fc = FlowCache::create(entries_for(flows), name, SOCKET_ID_ANY);
  if (!fc) return nullptr;
  for (uint32_t n = 0; n < flows; ++n) {
    const FlowKey4 k = key_of(n);
    (*fc)->insert4(k, FlowCache::hash(k), kGeneration, n);
  }
  return caches[flows] = fc->release();
}

// Bursts of wire-key lookups as the RX stage makes them (key, hash, prefetch
// of the first set, then lookup4) in `fc`, each key key_of(first + a random
// index below `span`); reports the share of packets that hit.
template <KeyOf key_of>
void bench_lookups(benchmark::State& state, FlowCache* fc, uint32_t first, uint32_t span, uint64_t seed) {
  FastRng rng(seed);
  FlowKey4 keys[kBurst];
  uint32_t hashes[kBurst];
  uint32_t out[kBurst];
  uint64_t hits = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i) {
      keys[i] = key_of(first + rng.below(span));
      hashes[i] = FlowCache::hash(keys[i]);
      fc->prefetch4(hashes[i]);
    }
    hits += static_cast<uint64_t>(
        __builtin_popcountll(fc->lookup4(keys, hashes, ~uint64_t{0} >> (64 - kBurst), kGeneration, out)));
    benchmark::DoNotOptimize(out);
  }
  pp.finish();
  state.counters["hit_ratio"] = static_cast<double>(hits) / (static_cast<double>(state.iterations()) * kBurst);
}

// bench_lookups with the next burst's keys hashed and their first sets
// prefetched before this burst's lookup4: what the RX stage would gain by
// holding each received burst until the next poll (perf/README.md, "Where
// the 1,000,000-flow cost goes"). The prefetches then have a whole burst's
// lookups to land in, rather than the rest of their own burst's key loop.
template <KeyOf key_of>
void bench_hit_ahead(benchmark::State& state, uint32_t flows) {
  FlowCache* fc = filled_cache<key_of>(flows);
  if (fc == nullptr) return state.SkipWithError("FlowCache::create failed");
  FastRng rng(flows);
  FlowKey4 keys[2][kBurst];
  uint32_t hashes[2][kBurst];
  uint32_t out[kBurst];
  uint64_t hits = 0;
  auto key_burst = [&](unsigned b) {
    for (unsigned i = 0; i < kBurst; ++i) {
      keys[b][i] = key_of(rng.below(flows));
      hashes[b][i] = FlowCache::hash(keys[b][i]);
      fc->prefetch4(hashes[b][i]);
    }
  };
  unsigned now = 0;
  key_burst(now);
  PerPacket pp(state);
  for (auto _ : state) {
    key_burst(now ^ 1u);
    hits += static_cast<uint64_t>(
        __builtin_popcountll(fc->lookup4(keys[now], hashes[now], ~uint64_t{0} >> (64 - kBurst), kGeneration, out)));
    benchmark::DoNotOptimize(out);
    now ^= 1u;
  }
  pp.finish();
  state.counters["hit_ratio"] = static_cast<double>(hits) / (static_cast<double>(state.iterations()) * kBurst);
}

// Lookups of the cached flows. hit_ratio is below 1 where both of a flow's
// sets were full while filling (evictions): those lookups were misses, and
// the figure is a little lower than pure hits.
template <KeyOf key_of>
void bench_hit(benchmark::State& state, uint32_t flows) {
  FlowCache* fc = filled_cache<key_of>(flows);
  if (fc == nullptr) return state.SkipWithError("FlowCache::create failed");
  bench_lookups<key_of>(state, fc, 0, flows, flows);
}

// Lookups of flows the cache never saw (the ACL's customers), without insert.
void bench_miss(benchmark::State& state) {
  constexpr uint32_t kFlows = 100000;
  FlowCache* fc = filled_cache<flow>(kFlows);
  if (fc == nullptr) return state.SkipWithError("FlowCache::create failed");
  bench_lookups<flow>(state, fc, kFlows, 1u << 23, 3);  // beyond the cached flows
}

// A flood of new flows into a cache of the daemon's default size: every
// lookup misses and every insert4 finds its sets full once the cache has
// filled (so it evicts), the path a SYN flood or a burst of new jobs takes.
void bench_miss_insert(benchmark::State& state) {
  auto created = FlowCache::create(65536, "micro_fc_insert", SOCKET_ID_ANY);
  if (!created) return state.SkipWithError("FlowCache::create failed");
  std::unique_ptr<FlowCache> fc = std::move(*created);
  uint32_t next = 0;
  FlowKey4 keys[kBurst];
  uint32_t hashes[kBurst];
  uint32_t out[kBurst];
  PerPacket pp(state);
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i) {
      keys[i] = flow(next++);
      hashes[i] = FlowCache::hash(keys[i]);
      fc->prefetch4(hashes[i]);
    }
    uint64_t miss = ~fc->lookup4(keys, hashes, ~uint64_t{0} >> (64 - kBurst), kGeneration, out);
    miss &= ~uint64_t{0} >> (64 - kBurst);
    for (; miss != 0; miss &= miss - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctzll(miss));
      fc->insert4(keys[i], hashes[i], kGeneration, i);
    }
    benchmark::DoNotOptimize(out);
  }
  pp.finish();
  state.counters["evictions_per_pkt"] =
      static_cast<double>(fc->evictions()) / (static_cast<double>(state.iterations()) * kBurst);
}

}  // namespace

void register_flow_cache() {
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit/8_flows", bench_hit<flow>, 8u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit/100k_flows", bench_hit<flow>, 100000u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit/1m_flows", bench_hit<flow>, 1000000u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit_next_burst_prefetched/1m_flows", bench_hit_ahead<flow>,
                               1000000u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit/100k_scattered_flows", bench_hit<scattered_flow>, 100000u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_hit/1m_scattered_flows", bench_hit<scattered_flow>, 1000000u);
  benchmark::RegisterBenchmark("flow_cache/lookup4_miss/100k_flows", bench_miss);
  benchmark::RegisterBenchmark("flow_cache/miss_insert4/new_flows", bench_miss_insert);
}

}  // namespace psgate::micro
