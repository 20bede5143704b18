// SPDX-License-Identifier: BSD-3-Clause
#include "runtime.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "protocol.h"

namespace psemu {

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", s);
  return buf;
}

bool parse_size(const std::string& s, uint64_t& out) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || errno != 0 || !(v >= 0)) return false;
  const std::string unit(end);
  double mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KB" || unit == "kB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  else if (unit == "KiB") mult = 1024.0;
  else if (unit == "MiB") mult = 1024.0 * 1024;
  else if (unit == "GiB") mult = 1024.0 * 1024 * 1024;
  else return false;
  const double bytes = v * mult;
  if (bytes > 1e12 || bytes != std::floor(bytes)) return false;
  out = static_cast<uint64_t>(bytes);
  return true;
}

Pattern make_pattern(uint64_t bytes, uint64_t seed) {
  Pattern p;
  p.data.resize(bytes);
  uint64_t x = seed | 1;
  for (uint64_t i = 0; i < bytes; i += 8) {
    x ^= x << 13;  // xorshift64: cheap, and no run of equal words for the checksum to miss
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p.data.data() + i, &x, std::min<uint64_t>(8, bytes - i));
  }
  p.checksum = checksum_of(p.data.data(), p.data.size());
  return p;
}

RunLimits::RunLimits(const Params& p, int64_t started_ns)
    : timeout_s_(p.timeout_s),
      idle_timeout_s_(p.idle_timeout_s),
      deadline_ns_(started_ns + static_cast<int64_t>(p.timeout_s * 1e9)),
      idle_ns_(static_cast<int64_t>(p.idle_timeout_s * 1e9)) {}

int64_t RunLimits::wake_at(int64_t last_progress_ns) const {
  return std::min(deadline_ns_, last_progress_ns + idle_ns_ + 1);
}

std::string RunLimits::reached(int64_t now, int64_t last_progress_ns) const {
  if (now >= deadline_ns_) return "global timeout of " + seconds(timeout_s_) + " reached";
  if (now - last_progress_ns > idle_ns_) return "no progress for " + seconds(idle_timeout_s_);
  return {};
}

int finish_run(const char* role, const std::string& error, const std::string& out, const std::string& report,
               int exit_code) {
  if (!error.empty()) std::fprintf(stderr, "psemu %s: %s\n", role, error.c_str());
  if (!write_text(out, report)) {
    std::fprintf(stderr, "psemu %s: cannot write %s\n", role, out.c_str());
    if (exit_code == kExitOk) exit_code = kExitFailed;
  }
  return exit_code;
}

bool write_text(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    return true;
  }
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return false;
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return false;
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

namespace {

bool to_sockaddr(const std::string& addr, unsigned port, sockaddr_in& sa) {
  std::memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) == 1;
}

// Pull and push are bulk transfers; Nagle would only delay the header. Both
// ends of every connection set it: the worker's connecting socket and the
// PS's accepted one.
void disable_nagle(int fd) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

std::string errno_text(int negative_errno) { return std::strerror(-negative_errno); }

int tcp_listen(const std::string& addr, unsigned port) {
  sockaddr_in sa;
  if (!to_sockaddr(addr, port, sa)) return -EINVAL;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || listen(fd, 1024) != 0) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

int tcp_connect_start(const std::string& local, const std::string& remote, unsigned port) {
  sockaddr_in ra;
  if (!to_sockaddr(remote, port, ra)) return -EINVAL;
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  disable_nagle(fd);
  if (!local.empty()) {
    sockaddr_in la;
    if (!to_sockaddr(local, 0, la)) {
      close(fd);
      return -EINVAL;
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&la), sizeof la) != 0) {
      const int e = errno;
      close(fd);
      return -e;
    }
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&ra), sizeof ra) != 0 && errno != EINPROGRESS) {
    const int e = errno;
    close(fd);
    return -e;
  }
  return fd;
}

int tcp_accept(int listen_fd) {
  for (;;) {
    const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      disable_nagle(fd);
      return fd;
    }
    // Interrupted, or a client that gave up before being accepted: try the next.
    if (errno != EINTR && errno != ECONNABORTED) return -errno;
  }
}

int socket_error(int fd) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -errno;
  return -err;
}

Loop::Loop() : ep_(epoll_create1(EPOLL_CLOEXEC)) {}
Loop::~Loop() {
  if (ep_ >= 0) close(ep_);
}

int Loop::add(int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  return epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

int Loop::mod(int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  return epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev) == 0 ? 0 : -errno;
}

void Loop::del(int fd) { epoll_ctl(ep_, EPOLL_CTL_DEL, fd, nullptr); }

int Loop::wait(int64_t until_ns, std::vector<epoll_event>& events, std::vector<uint64_t>& fired) {
  events.resize(256);
  fired.clear();
  int64_t wake = until_ns;
  if (!timers_.empty()) wake = std::min(wake, timers_.top().t);
  const int64_t now = now_ns();
  // epoll_pwait2 takes a timespec: timers fire on time instead of on the next
  // millisecond, which matters for a 20 ms compute step.
  const int64_t left = std::max<int64_t>(0, wake - now);
  timespec ts{static_cast<time_t>(left / 1'000'000'000), static_cast<long>(left % 1'000'000'000)};
  const int n = epoll_pwait2(ep_, events.data(), static_cast<int>(events.size()), &ts, nullptr);
  if (n < 0) {
    events.clear();
    if (errno != EINTR) return -errno;
  } else {
    events.resize(static_cast<size_t>(n));
  }
  const int64_t after = now_ns();
  while (!timers_.empty() && timers_.top().t <= after) {
    fired.push_back(timers_.top().tag);
    timers_.pop();
  }
  return 0;
}

}  // namespace psemu
