// SPDX-License-Identifier: BSD-3-Clause
// The class scheduler alone (class_scheduler.h): per burst, 32 enqueues spread
// over the classes and one dequeue of up to 32 at the burst's TSC, as the
// scheduler stage does (sched_stage.cc), with a pointer-sized item (the data
// path's is an rte_mbuf*). The queues stay short, so this is the per-packet
// cost of choosing, not of holding a backlog.
//
// Variants: plain (strict priority only); caps on the odd classes and floors
// on every fourth, all at rates that never hold a packet back (what is
// measured is the cost of checking them); the port shaper at a rate that never
// holds a packet back; and the shaper at 10 Gbit/s, which does (queues fill,
// enqueues are refused: what a shaped overload costs per offered packet).
#include <string>
#include <vector>

#include "micro.h"
#include "psgate/class_scheduler.h"

namespace psgate::micro {

namespace {

enum class Variant { kPlain, kCapsFloors, kShaped, kShapedBlocking };

constexpr uint64_t kNeverLimits = 1'000'000'000'000;  // bytes/s: ~100x what one core can offer here
constexpr uint64_t kTenGbit = 1'250'000'000;          // bytes/s

struct Offer {
  uint8_t cls;
  uint16_t len;
};

// 1,024 packets: classes uniform over n (a burst spans many), lengths as a
// training job's traffic (9 in 10 full-size, the rest ACK-sized).
std::vector<Offer> offers(unsigned classes) {
  FastRng rng(classes);
  std::vector<Offer> v(1024);
  for (auto& o : v) {
    o.cls = static_cast<uint8_t>(rng.below(classes));
    o.len = rng.below(10) == 0 ? 66 : 1514;
  }
  return v;
}

void bench_sched(benchmark::State& state, unsigned classes, Variant variant) {
  const uint64_t hz = rte_get_tsc_hz();
  uint64_t now = rte_rdtsc();
  PortSchedConfig cfg;
  cfg.classes.resize(classes);
  cfg.tick_hz = hz;
  cfg.overhead_bytes = 24;  // the config's default (preamble, IFG, FCS)
  cfg.priority_headroom_permille = 250;
  if (variant == Variant::kShaped || variant == Variant::kShapedBlocking) {
    cfg.shaper_bytes_per_sec = variant == Variant::kShaped ? kNeverLimits : kTenGbit;
    cfg.shaper_burst_bytes = 1 << 20;
  }
  if (variant == Variant::kCapsFloors) {
    for (unsigned c = 0; c < classes; ++c) {
      if (c % 2 == 1 || classes == 1) {
        cfg.classes[c].cap_bytes_per_sec = kNeverLimits;
        cfg.classes[c].cap_burst_bytes = 1 << 20;
      }
      if (c % 4 == 0) {
        cfg.classes[c].floor_bytes_per_sec = kNeverLimits;
        cfg.classes[c].floor_burst_bytes = 1 << 20;
      }
    }
  }
  PortScheduler<uint64_t> sched(cfg, now);
  const std::vector<Offer> offer = offers(classes);
  ScheduledItem<uint64_t> out[kBurst];
  size_t at = 0;
  uint64_t item = 0, sent = 0, refused = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    now = rte_rdtsc();  // once per burst, as the stage reads its clock
    for (unsigned i = 0; i < kBurst; ++i) {
      const Offer& o = offer[at++ & (offer.size() - 1)];
      refused += !sched.enqueue(o.cls, ++item, o.len, 0);
    }
    const unsigned n = sched.dequeue(now, out, kBurst);
    sent += n;
    benchmark::DoNotOptimize(out);
  }
  pp.finish();
  const double offered = static_cast<double>(state.iterations()) * kBurst;
  state.counters["sent_ratio"] = offered > 0 ? static_cast<double>(sent) / offered : 0;
  state.counters["refused_ratio"] = offered > 0 ? static_cast<double>(refused) / offered : 0;
}

}  // namespace

void register_sched() {
  const std::pair<const char*, Variant> variants[] = {
      {"plain", Variant::kPlain}, {"caps_floors", Variant::kCapsFloors}, {"shaped", Variant::kShaped}};
  for (const auto& [name, variant] : variants) {
    for (unsigned classes : {1u, 8u, 64u}) {
      const std::string full =
          std::string("sched/") + name + "/" + std::to_string(classes) + (classes == 1 ? "_class" : "_classes");
      benchmark::RegisterBenchmark(full.c_str(), bench_sched, classes, variant);
    }
  }
  benchmark::RegisterBenchmark("sched/shaped_blocking/8_classes", bench_sched, 8u, Variant::kShapedBlocking);
}

}  // namespace psgate::micro
