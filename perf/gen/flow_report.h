// Per-flow results: the summary figures of a stream computed from its flows'
// receive state and sent counts. Pure (no DPDK), unit-tested.
#pragma once

#include <cstdint>

#include "report.h"
#include "rx_accounting.h"

namespace psgate::gen {

// Adds the per-flow figures of one stream's `n` flows to `s`: rx_unique,
// rx_excess (tally_flow), flows_seen, flows_with_loss, flows_reordered,
// flows_with_late and max_flow_loss. `sent[f]`: packets sent on flow f.
void summarize_flows(const FlowRx* flows, const uint64_t* sent, uint64_t n, StreamResult& s);

}  // namespace psgate::gen
