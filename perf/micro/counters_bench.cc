// SPDX-License-Identifier: BSD-3-Clause
// Counting alone (counters.h): a burst's job counters (admitted packets and
// bytes, as admit_burst counts them) and class counters (enqueued packets and
// bytes, as sched_accept_burst does), either one add per packet or one per
// run of packets with the same job or class (RunTotal, dataplane/
// run_total.h, what the data path does). One key per burst is the common
// case (one job's flow, one class); 8 interleaved keys break every run.
#include <string>
#include <vector>

#include "dataplane/run_total.h"
#include "micro.h"
#include "psgate/counters.h"

namespace psgate::micro {

namespace {

enum class Kind { kJob, kClass };

constexpr unsigned kJobs = 1024;   // job slots, as max_jobs allows
constexpr unsigned kClasses = 64;  // an egress port's classes

struct Pkt {
  uint32_t key;
  uint32_t len;
};

// kBurst packets over `keys` keys, interleaved (key = i % keys) so that
// more than one key breaks every run.
std::vector<Pkt> burst(unsigned keys, unsigned space) {
  std::vector<Pkt> v(kBurst);
  for (unsigned i = 0; i < kBurst; ++i) v[i] = {(i % keys) * (space / keys) + 3, i % 10 == 0 ? 66u : 1514u};
  return v;
}

void bench_counters(benchmark::State& state, Kind kind, unsigned keys, bool per_run) {
  const unsigned space = kind == Kind::kJob ? kJobs : kClasses;
  std::vector<JobCounters> jobs(kJobs);
  std::vector<ClassCounters> classes(kClasses);
  const std::vector<Pkt> pkts = burst(keys, space);
  constexpr unsigned dir = kPush;
  auto count = [&](uint32_t key, uint64_t packets, uint64_t bytes) {
    if (kind == Kind::kJob) {
      jobs[key].admitted_packets[dir].add(packets);
      jobs[key].admitted_bytes[dir].add(bytes);
    } else {
      classes[key].enqueued_packets.add(packets);
      classes[key].enqueued_bytes.add(bytes);
    }
  };
  PerPacket pp(state);
  for (auto _ : state) {
    if (per_run) {
      RunTotal run;
      auto flush = [&](const RunTotal& r) { count(r.key, r.packets, r.bytes); };
      for (const Pkt& p : pkts) run_add(run, p.key, p.len, flush);
      if (run.packets) flush(run);
    } else {
      for (const Pkt& p : pkts) count(p.key, 1, p.len);
    }
    benchmark::ClobberMemory();
  }
  pp.finish();
  uint64_t total = 0;
  for (const auto& j : jobs) total += j.admitted_packets[dir].get();
  for (const auto& c : classes) total += c.enqueued_packets.get();
  if (total != static_cast<uint64_t>(state.iterations()) * kBurst) state.SkipWithError("counted wrong");
}

}  // namespace

void register_counters() {
  for (Kind kind : {Kind::kJob, Kind::kClass}) {
    const std::string stage = kind == Kind::kJob ? "counters/job_" : "counters/class_";
    for (bool per_run : {false, true}) {
      for (unsigned keys : {1u, 8u}) {
        const std::string name =
            stage + (per_run ? "run_total/" : "per_packet/") + std::to_string(keys) +
            (kind == Kind::kJob ? (keys == 1 ? "_job" : "_jobs") : (keys == 1 ? "_class" : "_classes"));
        benchmark::RegisterBenchmark(name.c_str(), bench_counters, kind, keys, per_run);
      }
    }
  }
}

}  // namespace psgate::micro
