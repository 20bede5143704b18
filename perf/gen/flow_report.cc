#include "flow_report.h"

#include <algorithm>

namespace psgate::gen {

void summarize_flows(const FlowRx* flows, const uint64_t* sent, uint64_t n, StreamResult& s) {
  for (uint64_t f = 0; f < n; ++f) {
    const FlowRx& fr = flows[f];
    const FlowTally t = tally_flow(sent[f], fr);
    s.rx_unique += t.unique;
    s.rx_excess += t.excess;
    s.flows_seen += fr.next != 0 || fr.late != 0;
    s.flows_reordered += fr.reordered != 0;
    s.flows_with_late += fr.late != 0;
    if (t.lost) {
      ++s.flows_with_loss;
      s.max_flow_loss = std::max(s.max_flow_loss, t.lost);
    }
  }
}

}  // namespace psgate::gen
