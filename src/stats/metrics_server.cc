// SPDX-License-Identifier: BSD-3-Clause
#include "stats/metrics_server.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <spdlog/spdlog.h>

#include "psgate/epoll_key.h"
#include "psgate/log_throttle.h"
#include "psgate/prometheus.h"

namespace psgate {

namespace {

using SteadyClock = std::chrono::steady_clock;

// The listening socket on spec's address, or errno. SO_REUSEADDR, not
// SO_REUSEPORT: with REUSEPORT a second psgate could share the port without
// an error; without REUSEADDR the connections this server closed first
// (TIME_WAIT, 60 s) would keep a restarted psgate from binding it.
int listen_on(const MetricsSpec& spec, int& err) {
  const bool v6 = spec.host.find(':') != std::string::npos;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    err = errno;
    return -1;
  }
  const int yes = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  // An address not (yet) on this host binds all the same, and is served
  // once it is assigned: the unit starts before the network is configured
  // (Before=network.target), and a start that failed on it would be retried
  // every 2 s until then. (IP_FREEBIND is honoured by IPv6 sockets too.)
  ::setsockopt(fd, IPPROTO_IP, IP_FREEBIND, &yes, sizeof(yes));
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
  if (rc != 0 || ::listen(fd, MetricsServer::kListenBacklog) != 0) {
    err = errno;
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string reply_text(int status, std::string_view reason, std::string_view type, const std::string& body,
                       bool with_body, std::string_view extra_headers = "") {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                    "\r\nContent-Type: " + std::string(type) + "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n" + std::string(extra_headers) + "\r\n";
  if (with_body) out += body;
  return out;
}

std::string error_reply(int status, std::string_view reason, bool with_body, std::string_view extra_headers = "") {
  return reply_text(status, reason, "text/plain; charset=utf-8", std::string(reason) + "\n", with_body, extra_headers);
}

// Empty lines a client may send before the request line (RFC 9112 2.2:
// ignored): how many bytes of them `in` starts with.
size_t leading_blank_lines(const std::string& in) { return std::min(in.find_first_not_of("\r\n"), in.size()); }

// Where the request head ends (the byte after its blank line), or npos. A
// line ends at LF, with or without CR, in any mix ("\r\n\r\n", "\n\n",
// "\n\r\n").
size_t head_end(const std::string& in) {
  for (size_t nl = in.find('\n', leading_blank_lines(in)); nl != std::string::npos; nl = in.find('\n', nl + 1)) {
    if (nl + 1 < in.size() && in[nl + 1] == '\n') return nl + 2;
    if (nl + 2 < in.size() && in[nl + 1] == '\r' && in[nl + 2] == '\n') return nl + 3;
  }
  return std::string::npos;
}

// Whether `in` cannot become an HTTP request: its first byte after blank
// lines is not a method's (a TLS ClientHello from a scraper set to https,
// binary junk). Answered 400 at once, not after the request deadline.
bool not_http(const std::string& in) {
  const size_t at = leading_blank_lines(in);
  return at < in.size() && (in[at] < 'A' || in[at] > 'Z');
}

}  // namespace

// Whether `host` (a numeric address) is one of this host's, or a wildcard.
static bool address_on_this_host(const std::string& host) {
  const bool v6 = host.find(':') != std::string::npos;
  unsigned char want[sizeof(in6_addr)] = {};
  if (::inet_pton(v6 ? AF_INET6 : AF_INET, host.c_str(), want) != 1) return true;  // not ours to judge
  const size_t n = v6 ? sizeof(in6_addr) : sizeof(in_addr);
  static const unsigned char kAny[sizeof(in6_addr)] = {};
  if (std::memcmp(want, kAny, n) == 0) return true;
  // Served at once though no interface lists them: all of 127/8 (lo has
  // 127.0.0.1 only), and IPv4-mapped IPv6 addresses.
  if (!v6 && want[0] == 127) return true;
  if (v6 && IN6_IS_ADDR_V4MAPPED(reinterpret_cast<const in6_addr*>(want))) {
    // ::ffff:a.b.c.d is served where a.b.c.d is: look for that instead.
    char v4[INET_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET, want + 12, v4, sizeof(v4));
    return address_on_this_host(v4);
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return true;
  bool found = false;
  for (const ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != (v6 ? AF_INET6 : AF_INET)) continue;
    const void* have = v6 ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ifa_addr)->sin6_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr);
    found = std::memcmp(have, want, n) == 0;
  }
  ::freeifaddrs(list);
  return found;
}

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(const MetricsSpec& spec,
                                                            std::function<std::string()> render) {
  using R = Result<std::unique_ptr<MetricsServer>>;
  const std::string where = "metrics.listen: cannot listen on " + spec.listen + ": ";
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  int err = 0;
  s->listen_fd_ = listen_on(spec, err);
  if (s->listen_fd_ < 0) return R::failure(where + std::strerror(err));
  if (!address_on_this_host(spec.host))
    spdlog::warn(
        "metrics.listen: {} is not an address of this host (yet): listening for it; /metrics answers once "
        "it is assigned",
        spec.host);
  s->stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->stop_fd_ < 0) return R::failure(where + "eventfd: " + std::strerror(errno));
  s->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (s->epoll_fd_ < 0) return R::failure(where + "epoll_create1: " + std::strerror(errno));
  for (const int fd : {s->stop_fd_, s->listen_fd_}) {
    if (!epoll_watch(s->epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN))
      return R::failure(where + "epoll_ctl: " + std::strerror(errno));
  }
  s->render_ = std::move(render);
  s->thread_ = std::thread([srv = s.get()] { srv->run(); });
  return R(std::move(s));
}

void MetricsServer::stop() {
  if (!thread_.joinable()) return;
  const uint64_t one = 1;
  (void)!::write(stop_fd_, &one, sizeof one);
  thread_.join();  // every socket is non-blocking: the loop ends at its next wake-up
  ::close(listen_fd_);
  listen_fd_ = -1;
}

MetricsServer::~MetricsServer() {
  stop();
  for (const int fd : {listen_fd_, stop_fd_, epoll_fd_}) {
    if (fd >= 0) ::close(fd);
  }
}

void MetricsServer::run() {
  const int ep = epoll_fd_;
  // Connections are watched with their serial (psgate/epoll_key.h).
  auto watch = [ep](int op, int fd, uint32_t events, uint32_t serial) {
    return epoll_watch(ep, op, fd, events, serial);
  };
  // Stopped watching the listening socket for a second after an accept
  // error (out of descriptors: level-triggered, it would wake every round);
  // `resume_at` says until when. At the connection cap it stays watched: a
  // new connection takes the place of the one that has waited longest for
  // least (below), so that clients which connect and send nothing cannot
  // keep scrapes out by holding every place until their deadlines.
  bool accepting = true;
  SteadyClock::time_point resume_at{};
  LogThrottle accept_error_log(60'000'000'000);
  LogThrottle evicted_log(60'000'000'000);
  // A time as the log throttles take it.
  auto ns_of = [](SteadyClock::time_point t) {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
  };

  enum class Phase { kReading, kWriting, kDraining };
  struct Conn {
    uint32_t serial = 0;
    Phase phase = Phase::kReading;
    std::string in;
    // The reply; a page is shared by the scrapes that come within
    // kPageReuse of its rendering, so that many slow scrapers hold one copy
    // (a page of thousands of jobs is megabytes), not one each.
    std::shared_ptr<const std::string> out;
    size_t sent = 0;
    size_t drained = 0;
    SteadyClock::time_point deadline;
    SteadyClock::time_point accepted;
    SteadyClock::time_point progressed;  // accepted, or the reply's last bytes handed to the kernel
    int queued_at_drain = 0;             // SIOCOUTQ once the reply was all handed over (its FIN included)
  };
  std::unordered_map<int, Conn> conns;
  uint32_t next_serial = 0;
  std::shared_ptr<const std::string> page;  // the last 200 reply to a GET
  SteadyClock::time_point page_at{};

  auto close_conn = [&](int fd) {
    ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    ::close(fd);
    conns.erase(fd);
    if (!accepting && SteadyClock::now() >= resume_at) accepting = watch(EPOLL_CTL_MOD, listen_fd_, EPOLLIN, 0);
  };
  // Closes a connection that is given up on (evicted, or past a deadline).
  // One whose client is not taking its reply is reset, so that the kernel
  // does not keep the page for a client that may never read it (an orphaned
  // socket holds it for minutes: a flood of clients that ask and never read
  // held over a GiB of TCP memory so): one whose reply is still being
  // written (the page cannot be completed anyway), and one whose reply was
  // handed over kDrainProgressGrace ago or more and of which the client has
  // acknowledged under kDrainProgressBytes since (SIOCOUTQ: a reading client's kernel
  // acknowledges within a round trip, and a link of 1 Mbit/s carries more
  // in that time; a client that does not read moves it by a byte or so).
  // Any other is closed in order, so that a slow scraper gets the rest.
  auto give_up = [&](int fd, const Conn& c) {
    int queued = 0;
    const bool not_taken = c.phase == Phase::kWriting ||
                           (c.phase == Phase::kDraining && SteadyClock::now() - c.progressed >= kDrainProgressGrace &&
                            c.queued_at_drain > 1 && ::ioctl(fd, SIOCOUTQ, &queued) == 0 && queued > 0 &&
                            c.queued_at_drain - queued < kDrainProgressBytes);
    if (not_taken) {
      const linger reset{1, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    }
    close_conn(fd);
  };
  // At the cap, the connection a new one replaces, the oldest of the first
  // of these kinds that has one:
  //   0. accepted over half a second ago, no whole request sent (an idle or
  //      trickling client: a scraper sends its request as it connects, and
  //      each connection is read as it is accepted);
  //   1. taking its reply, but none of it handed to the kernel for half a
  //      second (the kernel takes more as the client reads: a client that
  //      asks and never reads would hold its place for the 10 s reply
  //      deadline; a scraper on a slow link with a large socket buffer may
  //      look so too, between the kernel's wake-ups);
  //   2. its reply all handed over, being drained (closed within a second);
  //   3. accepted less than half a second ago, no whole request yet (a
  //      scraper's may be on its way);
  //   4. taking its reply now (a scraper reading a large page).
  // So a flood must open kMaxConnections connections within the time a
  // scrape needs to send its request, or to take its page, to keep it out.
  // Closed as give_up says.
  auto make_room = [&] {
    const auto grace_from = SteadyClock::now() - kIdleGrace;
    auto rank = [&](const Conn& c) {
      if (c.phase == Phase::kReading) return c.accepted <= grace_from ? 0 : 3;
      if (c.phase == Phase::kWriting) return c.progressed <= grace_from ? 1 : 4;
      return 2;
    };
    auto victim = conns.end();
    int victim_rank = 5;
    for (auto it = conns.begin(); it != conns.end(); ++it) {
      const int r = rank(it->second);
      if (r < victim_rank || (r == victim_rank && it->second.accepted < victim->second.accepted)) {
        victim = it;
        victim_rank = r;
      }
    }
    if (victim == conns.end()) return;
    if (evicted_log.admit(ns_of(SteadyClock::now())))
      spdlog::warn(
          "metrics: more than {} connections at once: closing the oldest idle or slow ones to serve new scrapes ({} "
          "closed since start{})",
          kMaxConnections, evicted_log.total(), evicted_log.held_back_note());
    give_up(victim->first, victim->second);
  };
  // Sends what is left of the reply; then half-closes and reads what the
  // client may still send (a body never read), briefly, so that closing with
  // unread bytes does not reset the connection before the client read the
  // reply. False: close it now.
  auto send_rest = [&](int fd, Conn& c) -> bool {
    while (c.sent < c.out->size()) {
      const ssize_t n = ::send(fd, c.out->data() + c.sent, c.out->size() - c.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.sent += static_cast<size_t>(n);
        c.progressed = SteadyClock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return watch(EPOLL_CTL_MOD, fd, EPOLLOUT, c.serial);
      return false;
    }
    c.out.reset();
    ::shutdown(fd, SHUT_WR);
    if (::ioctl(fd, SIOCOUTQ, &c.queued_at_drain) != 0) c.queued_at_drain = 0;
    c.phase = Phase::kDraining;
    c.deadline = SteadyClock::now() + std::chrono::seconds(1);
    return watch(EPOLL_CTL_MOD, fd, EPOLLIN | EPOLLRDHUP, c.serial);
  };
  // The reply to a complete request head.
  auto answer = [&](const std::string& whole) -> std::shared_ptr<const std::string> {
    const std::string_view head = std::string_view(whole).substr(leading_blank_lines(whole));
    const size_t eol = head.find('\n');
    std::string_view line = head.substr(0, eol);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    auto shared = [](std::string text) { return std::make_shared<const std::string>(std::move(text)); };
    // HTTP-version is "HTTP/" DIGIT "." DIGIT (RFC 9112 2.3); a major
    // version other than 1 (0.9 has no version token, 2 a preface of its
    // own) is one this server does not speak: 505, not a 1.1 answer.
    const std::string_view version = sp2 == std::string_view::npos ? std::string_view() : line.substr(sp2 + 1);
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !digit(version[5]) || version[6] != '.' ||
        !digit(version[7]))
      return shared(error_reply(400, "Bad Request", true));
    if (version[5] != '1') return shared(error_reply(505, "HTTP Version Not Supported", true));
    const std::string_view method = line.substr(0, sp1);
    std::string_view path = line.substr(sp1 + 1, sp2 - sp1 - 1);
    // The absolute form (RFC 9112 3.2.2: "http://host:port/metrics"), which
    // a server must accept: its path.
    for (std::string_view scheme : {"http://", "https://"}) {
      if (path.rfind(scheme, 0) == 0) {
        const size_t slash = path.find('/', scheme.size());
        path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
      }
    }
    path = path.substr(0, path.find('?'));
    // OPTIONS: what may be asked, of the server ("*", RFC 9110 9.3.7) or of
    // /metrics (in any form of the target); "*" is no target for any other
    // method.
    const std::string allow = "Allow: GET, HEAD, OPTIONS\r\n";
    if (path == "*" && method != "OPTIONS") return shared(error_reply(400, "Bad Request", true));
    if (method == "OPTIONS" && (path == "*" || path == "/metrics"))
      return shared(reply_text(200, "OK", "text/plain; charset=utf-8", "", false, allow));
    const bool head_only = method == "HEAD";
    if (path != "/metrics") return shared(error_reply(404, "Not Found", !head_only));
    if (method != "GET" && !head_only) return shared(error_reply(405, "Method Not Allowed", true, allow));
    try {
      const auto now = SteadyClock::now();
      if (!page || now - page_at >= kPageReuse) {
        page.reset();  // the old one lives on only in the connections still sending it
        page = shared(reply_text(200, "OK", kPrometheusContentType, render_(), true));
        page_at = now;
      }
      if (!head_only) return page;
      return shared(page->substr(0, page->find("\r\n\r\n") + 4));  // the same head, no body
    } catch (const std::exception& e) {
      spdlog::error("metrics: rendering failed: {}", e.what());
      return shared(error_reply(500, "Internal Server Error", !head_only));
    }
  };
  auto on_readable = [&](int fd, Conn& c) -> bool {
    char buf[4096];
    for (;;) {
      const size_t room = c.phase == Phase::kReading ? kMaxRequestBytes + 1 - c.in.size() : sizeof buf;
      const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, room), MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      // The client half-closed after its reply was handed over: not watched
      // any more (its hang-up would be reported every round), and left to
      // the drain deadline, which resets it if it takes none of the reply.
      if (n == 0 && c.phase == Phase::kDraining) {
        ::epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
        return true;
      }
      if (n <= 0) return false;  // closed (before a whole request), or an error
      if (c.phase == Phase::kDraining) {
        c.drained += static_cast<size_t>(n);
        if (c.drained > 65536) return false;
        continue;
      }
      c.in.append(buf, static_cast<size_t>(n));
      const size_t end = head_end(c.in);
      if (end == std::string::npos && c.in.size() <= kMaxRequestBytes && !not_http(c.in)) continue;
      c.out = not_http(c.in) ? std::make_shared<const std::string>(error_reply(400, "Bad Request", true))
              : end == std::string::npos
                  ? std::make_shared<const std::string>(error_reply(431, "Request Header Fields Too Large", true))
                  : answer(c.in.substr(0, end));
      std::string().swap(c.in);
      c.phase = Phase::kWriting;
      c.deadline = SteadyClock::now() + kReplyDeadline;
      return send_rest(fd, c);
    }
  };

  bool running = true;
  while (running) {
    // Wake for the nearest deadline (at most a second away).
    const auto now = SteadyClock::now();
    auto wake = now + std::chrono::seconds(1);
    for (const auto& [fd, c] : conns) wake = std::min(wake, c.deadline);
    const int timeout_ms = static_cast<int>(
        std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));
    epoll_event events[64];
    const int n = ::epoll_wait(ep, events, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
      spdlog::error("metrics: epoll_wait: {}", std::strerror(errno));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (int i = 0; i < n; ++i) {
      const int fd = epoll_key_fd(events[i].data.u64);
      if (fd == stop_fd_) {
        running = false;
      } else if (fd == listen_fd_) {
        // A bounded number a round, so that a flood of connections cannot
        // keep the loop from the ones it has; at the cap each takes the place
        // of an idle or slow one (make_room).
        for (int accepted = 0; accepted < 2 * static_cast<int>(kMaxConnections); ++accepted) {
          const int c = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
              // Out of descriptors, say: not watched for a second (the sweep
              // below watches it again), logged at most once a minute.
              const auto t = SteadyClock::now();
              if (accept_error_log.admit(ns_of(t))) {
                spdlog::warn("metrics: accept: {}; new scrapes wait ({} since start{})", std::strerror(errno),
                             accept_error_log.total(), accept_error_log.held_back_note());
              }
              resume_at = t + std::chrono::seconds(1);
              if (accepting) accepting = !watch(EPOLL_CTL_MOD, listen_fd_, 0, 0);
            }
            break;
          }
          if (conns.size() >= kMaxConnections) make_room();
          const uint32_t serial = next_connection_serial(next_serial);
          Conn& added = conns[c];
          added.serial = serial;
          added.accepted = added.progressed = SteadyClock::now();
          added.deadline = added.accepted + kRequestDeadline;
          // Read at once: a request that came with the connection is
          // answered now, not left to be taken for idle by the next accepts.
          if (!watch(EPOLL_CTL_ADD, c, EPOLLIN | EPOLLRDHUP, serial) || !on_readable(c, added)) close_conn(c);
        }
      } else {
        auto it = conns.find(fd);
        if (it == conns.end() || it->second.serial != epoll_key_serial(events[i].data.u64)) continue;
        Conn& c = it->second;
        bool alive = true;
        if (c.phase == Phase::kWriting) {
          alive = (events[i].events & (EPOLLERR | EPOLLHUP)) == 0 && send_rest(fd, c);
        } else {
          alive = on_readable(fd, c);
          // (A hang-up while draining is the client's EOF, handled there.)
          if (alive && (events[i].events & (EPOLLERR | EPOLLHUP)) && c.phase != Phase::kDraining) alive = false;
        }
        if (!alive) close_conn(fd);
      }
    }
    // Whoever is past its deadline: a request too slow, a reply not taken,
    // a drain that lasts.
    const auto after = SteadyClock::now();
    std::vector<int> late;
    for (const auto& [fd, c] : conns) {
      if (after >= c.deadline) late.push_back(fd);
    }
    for (int fd : late) give_up(fd, conns.at(fd));
    if (!accepting && after >= resume_at) {
      accepting = watch(EPOLL_CTL_MOD, listen_fd_, EPOLLIN, 0);
    }
  }
  for (auto& [fd, c] : conns) ::close(fd);
}

}  // namespace psgate
