// SPDX-License-Identifier: BSD-3-Clause
// Per-flow results: the summary figures of a stream computed from its flows'
// receive state and sent counts, and the per-flow CSV (--flows-csv). Pure (no
// DPDK), unit-tested.
#pragma once

#include <cstdint>
#include <cstdio>

#include "profile.h"
#include "report.h"
#include "rx_accounting.h"

namespace psgate::gen {

// Adds the per-flow figures of one stream's `n` flows to `s`: rx_unique,
// rx_excess (tally_flow), flows_seen, flows_with_loss, flows_reordered,
// flows_with_duplicates, flows_with_late and max_flow_loss. `sent[f]`:
// packets sent on flow f.
void summarize_flows(const FlowRx* flows, const uint64_t* sent, uint64_t n, StreamResult& s);

// One CSV record per flow (columns: kFlowsCsvHeader). Latency columns are
// empty for a flow without latency samples.
inline constexpr const char* kFlowsCsvHeader =
    "job,direction,flow,src,sport,dst,dport,proto,tx_packets,rx_packets,rx_bytes,rx_unique,lost,reordered,"
    "duplicates,late,latency_samples,latency_min_ns,latency_mean_ns,latency_max_ns\n";
// Returns false when writing failed.
bool write_flows_csv(std::FILE* out, const JobProfile& job, Dir dir, const FlowRx* flows, const uint64_t* sent,
                     uint64_t n);

}  // namespace psgate::gen
