// SPDX-License-Identifier: BSD-3-Clause
// The Prometheus endpoint: GET /metrics over HTTP/1.1, when [metrics] listen
// is set. docs/metrics.md.
//
// Its own small responder, not a general HTTP server (Debian 12's
// cpp-httplib 0.11.4, used before, reads a request line, a header line and
// a chunked or unsized body without any bound, so one client could grow
// psgate's memory until the kernel killed the gateway; and its workers were
// held by clients that trickled bytes). What this one takes is bounded
// everywhere: at most kMaxConnections at once (past it a new connection
// takes the place of an idle one, else of one that stopped taking its
// reply, ...: make_room), kMaxRequestBytes of request
// head each, which must arrive within kRequestDeadline, a reply that must
// leave within kReplyDeadline; one request per connection (Connection:
// close); a body is never read. GET and HEAD of /metrics are answered (any
// query string ignored), any other path 404, any other method 405, what is
// not a request line 400, a head over the limit 431. No compression:
// Prometheus takes plain text, and a compressor is CPU on the main lcore's
// core.
//
// One thread, non-blocking sockets and epoll: no client can hold up another
// or the stop. Created by the main thread after the EAL started, so it
// inherits the main lcore's CPU set (never a polling lcore's, unless
// lcores.main shares a data lcore's CPU). A scrape calls render() on it: the
// caller's function, which must not make the data path wait
// (ControlPlane::metrics_view reads the lcores' counters as `stats` does,
// lock-free on their side).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "psgate/config.h"
#include "psgate/result.h"

namespace psgate {

class MetricsServer {
 public:
  static constexpr unsigned kMaxConnections = 64;
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr std::chrono::seconds kRequestDeadline{5};
  static constexpr std::chrono::seconds kReplyDeadline{10};
  // At the cap, a connection accepted less than this long ago that has not
  // sent its request yet, or one that took some of its reply within this
  // long, is replaced only after the others (make_room).
  static constexpr std::chrono::milliseconds kIdleGrace{500};
  // A connection given up on this long after its reply was all handed over,
  // its client having acknowledged less than kDrainProgressBytes of it
  // since, is reset (give_up): longer than a round trip to any scraper of a
  // data centre, and more than a non-reading client's kernel moves.
  static constexpr std::chrono::milliseconds kDrainProgressGrace{50};
  static constexpr int kDrainProgressBytes = 4096;
  // A page is rendered at most once in this long; the scrapes within it get
  // that one (shared, not copied: memory is about one page per kPageReuse
  // of kReplyDeadline, whatever the number of slow scrapers).
  static constexpr std::chrono::milliseconds kPageReuse{1000};
  // The listen backlog (the kernel caps it at net.core.somaxconn, 4,096 by
  // default since Linux 5.4). A burst of connections that comes while the
  // thread is off the CPU waits there, a scrape among them; past a full
  // backlog the kernel drops a handshake, and the scraper's kernel tries
  // again only after 1 s, then 3 s: 128 made a burst of 300 idle
  // connections cost scrapes seconds (perf/soak).
  static constexpr int kListenBacklog = 4096;

  // Binds spec's address and starts answering. The error names metrics.listen
  // and says why the address cannot be used (e.g. already in use).
  static Result<std::unique_ptr<MetricsServer>> start(const MetricsSpec& spec, std::function<std::string()> render);
  // Stops answering (render() is not called again), joins the thread (at
  // once, whatever clients are connected) and closes the listening socket:
  // a scrape during the drain that follows is refused, not left hanging.
  ~MetricsServer();
  void stop();

 private:
  MetricsServer() = default;
  void run();

  std::function<std::string()> render_;
  int listen_fd_ = -1;
  int stop_fd_ = -1;
  int epoll_fd_ = -1;  // made by start(), so that a failure is start()'s error
  std::thread thread_;
};

}  // namespace psgate
