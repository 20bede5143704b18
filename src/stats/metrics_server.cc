// SPDX-License-Identifier: BSD-3-Clause
#include "stats/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <spdlog/spdlog.h>

#include "psgate/prometheus.h"

namespace psgate {

namespace {

// bind() the address once, to learn errno: httplib reports only that binding
// failed, and "Address already in use" is what an operator needs to read.
// Same options as the server's socket (SO_REUSEADDR, set below), so a
// success here means its bind succeeds too, short of a race with another
// process.
int try_bind(const MetricsSpec& spec) {
  const bool v6 = spec.host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  int rc;
  if (v6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(spec.port);
    ::inet_pton(AF_INET6, spec.host.c_str(), &a.sin6_addr);
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(spec.port);
    ::inet_pton(AF_INET, spec.host.c_str(), &a.sin_addr);
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  const int err = rc == 0 ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

MetricsServer::MetricsServer() : server_(std::make_unique<httplib::Server>()) {}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsSpec& spec,
                                                            std::function<std::string()> render) {
  using R = Result<std::unique_ptr<MetricsServer>>;
  const std::string where = "metrics.listen: cannot listen on " + spec.listen + ": ";
  if (const int err = try_bind(spec)) return R::failure(where + std::strerror(err));
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  httplib::Server& http = *s->server_;
  http.new_task_queue = [] { return new httplib::ThreadPool(kWorkers); };
  // SO_REUSEADDR, not httplib's default SO_REUSEPORT: with REUSEPORT a
  // second psgate could share the port without an error, and the connections
  // this server closed (TIME_WAIT, 60 s, without REUSEADDR) would keep a
  // restarted psgate from binding it.
  http.set_socket_options([](socket_t sock) {
    const int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // One request per connection: a keep-alive client would otherwise park a
  // worker between its scrapes. Timeouts bound what a stalled client holds.
  http.set_keep_alive_max_count(1);
  http.set_read_timeout(5, 0);
  http.set_write_timeout(5, 0);
  http.set_payload_max_length(4096);
  s->gate_ = std::make_shared<Gate>();
  s->gate_->render = std::move(render);
  http.Get("/metrics", [gate = s->gate_](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(gate->mutex);
    if (!gate->open) {
      res.status = 503;  // psgate is stopping
      return;
    }
    res.set_content(gate->render(), kPrometheusContentType);
  });
  // Anything else: httplib answers 404 (or 400 for what is not HTTP).
  if (!http.bind_to_port(spec.host, spec.port)) return R::failure(where + "bind failed");
  s->listening_done_ = std::make_shared<std::atomic<bool>>(false);
  s->thread_ = std::thread([&http, done = s->listening_done_] {
    if (!http.listen_after_bind() && http.is_valid()) spdlog::warn("metrics: the HTTP endpoint stopped accepting");
    done->store(true);
  });
  // stop() before listen_after_bind() set is_running would be missed: wait
  // for it (it is set before the first accept).
  for (int i = 0; i < 1000 && !http.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return R(std::move(s));
}

void MetricsServer::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(gate_->mutex);  // waits for a render under way (milliseconds)
    gate_->open = false;
  }
  server_->stop();  // closes the listening socket; the pool finishes its requests and is joined
  const auto deadline = std::chrono::steady_clock::now() + kStopWait;
  while (!listening_done_->load() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (listening_done_->load()) {
    thread_.join();
    return;
  }
  // A client still holds a worker. Leave the threads and the server they use
  // behind (the process is stopping); render() is off, so they touch nothing
  // psgate is about to free.
  spdlog::warn("metrics: a client still holds a connection after {} ms; not waiting for it", kStopWait.count());
  thread_.detach();
  (void)server_.release();
}

MetricsServer::~MetricsServer() { stop(); }

}  // namespace psgate
