// SPDX-License-Identifier: BSD-3-Clause
// The Prometheus endpoint: GET /metrics over HTTP (cpp-httplib, Debian's
// libcpp-httplib-dev), when [metrics] listen is set. docs/metrics.md.
//
// Threads: one accepting, kWorkers answering; created by the main thread
// after the EAL started, so they inherit its CPU set (the main lcore's),
// never a data lcore's. A scrape renders render(): the caller's function,
// which must not make the data path wait (ControlPlane::metrics_view reads
// the lcores' counters as `stats` does, lock-free on their side).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "psgate/config.h"
#include "psgate/result.h"

namespace httplib {
class Server;
}

namespace psgate {

class MetricsServer {
 public:
  // Two: a scrape is rendered in about a millisecond, and a second worker
  // keeps one slow client from holding up Prometheus.
  static constexpr unsigned kWorkers = 2;

  // Binds spec's address and starts answering. The error names metrics.listen
  // and says why the address cannot be used (e.g. already in use).
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsSpec& spec, std::function<std::string()> render);
  // Stops accepting, waits for the requests being answered, joins the threads.
  ~MetricsServer();
  void stop();

 private:
  MetricsServer();
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace psgate
