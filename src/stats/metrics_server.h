// SPDX-License-Identifier: BSD-3-Clause
// The Prometheus endpoint: GET /metrics over HTTP (cpp-httplib, Debian's
// libcpp-httplib-dev), when [metrics] listen is set. docs/metrics.md.
//
// Threads: one accepting, kWorkers answering; created by the main thread
// after the EAL started, so they inherit its CPU set (the main lcore's CPU;
// never a polling lcore's, unless lcores.main shares a data lcore's CPU).
// A scrape renders render(): the caller's function, which must not make the
// data path wait (ControlPlane::metrics_view reads the lcores' counters as
// `stats` does, lock-free on their side).
//
// Stopping never waits on a client: render() is shut off first (a request
// still arriving gets 503 and never touches what render() reads), then the
// threads get a bounded time to finish. A client that trickles its request
// (each recv() has its own 5 s timeout) could otherwise hold a worker, and
// with it psgate's drain, for as long as it likes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
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
  // A scrape is rendered in milliseconds (tens with thousands of jobs); more
  // than one worker keeps a few slow clients from holding up Prometheus.
  static constexpr unsigned kWorkers = 4;
  // How long stop() waits for the threads before leaving them behind.
  static constexpr std::chrono::milliseconds kStopWait{2000};

  // Binds spec's address and starts answering. The error names metrics.listen
  // and says why the address cannot be used (e.g. already in use).
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsSpec& spec, std::function<std::string()> render);
  // Shuts render() off, stops accepting, and joins the threads if they end
  // within kStopWait; otherwise leaves them (and the server they use) behind,
  // harmless, since render() is no longer called.
  ~MetricsServer();
  void stop();

  // render() behind a switch: off, a request gets 503 and render() is not
  // called. Shared with the request handler, which may outlive this object.
  struct Gate {
    std::mutex mutex;
    bool open = true;
    std::function<std::string()> render;
  };

 private:
  MetricsServer();
  std::unique_ptr<httplib::Server> server_;
  std::shared_ptr<Gate> gate_;
  std::shared_ptr<std::atomic<bool>> listening_done_;
  std::thread thread_;
};

}  // namespace psgate
