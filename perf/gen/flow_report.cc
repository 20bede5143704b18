// SPDX-License-Identifier: BSD-3-Clause
#include "flow_report.h"

#include <algorithm>
#include <cinttypes>
#include <string>

#include "flow_map.h"

namespace psgate::gen {

void summarize_flows(const FlowRx* flows, const uint64_t* sent, uint64_t n, StreamResult& s) {
  for (uint64_t f = 0; f < n; ++f) {
    const FlowRx& fr = flows[f];
    const FlowTally t = tally_flow(sent[f], fr);
    s.rx_unique += t.unique;
    s.rx_excess += t.excess;
    s.flows_seen += fr.packets() != 0;
    s.flows_reordered += fr.reordered != 0;
    s.flows_with_duplicates += fr.duplicates != 0;
    s.flows_with_late += fr.late != 0;
    if (t.lost) {
      ++s.flows_with_loss;
      s.max_flow_loss = std::max(s.max_flow_loss, t.lost);
    }
  }
}

bool write_flows_csv(std::FILE* out, const JobProfile& job, Dir dir, const FlowRx* flows, const uint64_t* sent,
                     uint64_t n) {
  const FlowMap map(job);
  const std::string ps = format_addr(job.ps_addr);
  const char* proto = job.proto == Proto::kTcp ? "tcp" : "udp";
  for (uint64_t f = 0; f < n; ++f) {
    const FlowRx& fr = flows[f];
    const FlowTally t = tally_flow(sent[f], fr);
    const WorkerEnd w = map.at(f);
    const std::string worker = format_addr(w.addr);
    const bool push = dir == kPush;  // worker -> PS
    int rc = std::fprintf(out,
                          "%u,%s,%" PRIu64 ",%s,%u,%s,%u,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                          ",%u,%u,%u,%" PRIu64 ",",
                          job.id, kDirNames[dir], f, push ? worker.c_str() : ps.c_str(),
                          push ? unsigned{w.port} : unsigned{job.ps_port}, push ? ps.c_str() : worker.c_str(),
                          push ? unsigned{job.ps_port} : unsigned{w.port}, proto, sent[f], fr.packets(), fr.bytes,
                          t.unique, t.lost, fr.reordered, fr.duplicates, fr.late, fr.lat_samples());
    if (rc < 0) return false;
    const uint64_t samples = fr.lat_samples();
    rc = samples ? std::fprintf(out, "%u,%" PRIu64 ",%u\n", fr.lat_min_ns, (fr.lat_sum_ns + samples / 2) / samples,
                                fr.lat_max_ns)
                 : std::fprintf(out, ",,\n");
    if (rc < 0) return false;
  }
  return true;
}

}  // namespace psgate::gen
