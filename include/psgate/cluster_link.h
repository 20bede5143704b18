// SPDX-License-Identifier: BSD-3-Clause
// What the control plane needs from cluster mode's store connection, as an
// interface: the control plane stays free of gRPC (a build without the
// cluster feature still links), and tests can stand in for the store.
// The etcd implementation is src/cluster/etcd_link.h.
#pragma once

#include <cstdint>
#include <memory>

#include <nlohmann/json.hpp>

#include "psgate/cluster_layout.h"
#include "psgate/result.h"

namespace psgate {

class ClusterLink {
 public:
  virtual ~ClusterLink() = default;
  // The newest view read from the store if it is newer than `revision` of
  // store epoch `epoch` (view_is_newer), else null. Thread-safe; cheap (a
  // shared pointer copy under a lock).
  virtual std::shared_ptr<const ClusterView> newer_than(uint64_t epoch, int64_t revision) = 0;
  // Applies `write` as one transaction. Returns the store revision it
  // created, or why nothing was written (a fence failed, the store is
  // unreachable within the write deadline). Blocks at most about a second
  // per endpoint tried. Called from a thread of its own (the control
  // plane's deferred writes) while the control thread calls the others:
  // safe against all of them.
  virtual Result<int64_t> write(const StoreWrite& write) = 0;
  // The gateway stops: every call in flight (a write among them) ends at
  // once, cancelled, and so does every later one. Any thread.
  virtual void cancel_calls() = 0;
  // This gateway's registration, refreshed by the control thread every tick.
  virtual void report(const GatewayInfo& info) = 0;
  // Whether the store answers now (the last read or watch message is recent).
  virtual bool connected() const = 0;
  // For `health` and `cluster`: connection, leadership, counters.
  virtual nlohmann::json status() const = 0;
  // A descriptor that becomes readable when a newer view is available (an
  // eventfd: the control thread polls it instead of waiting for its tick).
  virtual int wake_fd() const = 0;
};

}  // namespace psgate
