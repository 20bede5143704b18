// SPDX-License-Identifier: BSD-3-Clause
// Flow id -> 5-tuple. A job's flows are numbered 0..flows-1 in each direction;
// the PS end of every flow is the job's endpoint, the worker end is computed,
// so millions of flows need no table:
//
//   w    = f % W,  c = f / W          worker, and connection number of that worker
//   port = worker_port + c % span     span = 65536 - worker_port
//   host = w + W * (c / span)         a worker with more than `span` connections
//                                     continues on further addresses (W, 2W, ... up)
//   addr = worker_addr + host
//
// (port, host) determines (w, c) and so f: distinct flows get distinct tuples.
// Push packets go worker -> PS, pull packets PS -> worker, on the same tuple.
#pragma once

#include <cstdint>

#include "profile.h"

namespace psgate::gen {

struct WorkerEnd {
  Addr addr;
  uint16_t port = 0;
};

// Worker addresses a job uses (the largest `host` + 1).
uint64_t worker_hosts_needed(uint32_t workers, uint16_t worker_port, uint64_t flows);

class FlowMap {
 public:
  FlowMap() = default;
  explicit FlowMap(const JobProfile& job)
      : base_(job.worker_addr), workers_(job.workers), port0_(job.worker_port), span_(65536u - job.worker_port) {}

  WorkerEnd at(uint64_t flow) const {
    const uint64_t w = flow % workers_;
    const uint64_t c = flow / workers_;
    WorkerEnd e;
    e.addr = base_;
    e.addr.lo += w + workers_ * (c / span_);  // no carry: checked by the profile
    e.port = static_cast<uint16_t>(port0_ + c % span_);
    return e;
  }

 private:
  Addr base_;
  uint64_t workers_ = 1;
  uint32_t port0_ = 0;
  uint32_t span_ = 1;
};

}  // namespace psgate::gen
