// SPDX-License-Identifier: BSD-3-Clause
// Control socket server (control thread).
#include "control/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "psgate/control_commands.h"
#include "psgate/epoll_key.h"
#include "psgate/log_throttle.h"
#include "psgate/request_lines.h"

namespace psgate {

namespace {

using json = nlohmann::json;

struct Connection {
  RequestLines in{kMaxRequestBytes};
  std::string out;
  // The client shut down its side (EOF): no more requests, but the replies
  // it is owed still go out before the connection is closed.
  bool eof = false;
  // Waiting for the client to read (kPauseReadingBytes pending, or EOF with
  // replies pending), since `waiting_ns` or the last byte it took, whichever
  // is later; past Options::unread_timeout_ns (kStalledReaderNs) it is
  // disconnected.
  bool waiting = false;
  uint64_t waiting_ns = 0;
  // Paused for all clients' unsent replies (over kRepliesBudgetBytes), not
  // its own: held (nothing of its own to send) or waiting for what it has.
  // Listed in ControlServer::run's `budget_paused` (looked at again when the
  // replies drain under the budget) or, held only because the reserve is
  // spent too, `reserve_paused` (when they drain under budget + reserve);
  // `listed_*`: it is in that list, which it is put in once.
  bool paused_by_budget = false;
  bool listed_for_budget = false;
  bool listed_for_reserve = false;
  // The budget episode (ControlServer::run) in which it was owed replies
  // for over prompt_reader_ns while the budget was spent: the reserve is not
  // for it until the next. A client pipelining requests that it reads
  // slowly, owed nothing for a moment each time its replies drain, would
  // otherwise take a reply from the reserve each time, and with others like
  // it keep the reserve spent; one whose replies leave as they come (a
  // psgatectl) keeps it. `owing_ns`: since when it is owed replies.
  uint64_t waited_in_episode = 0;
  uint64_t owing_ns = 0;
  // A reply could not be sent (EPIPE, ECONNRESET): muted (replies dropped,
  // requests still taken) until it closes.
  bool peer_gone = false;
  // When it last sent anything (accepted, or a request's bytes): idle since.
  uint64_t active_ns = 0;
  // Which connection on this descriptor (psgate/epoll_key.h).
  uint32_t serial = 0;
};

std::string errno_text() { return std::strerror(errno); }

int make_timer(uint64_t period_ns) {
  const int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (fd < 0) return -1;
  itimerspec spec{};
  spec.it_interval.tv_sec = static_cast<time_t>(period_ns / 1'000'000'000);
  spec.it_interval.tv_nsec = static_cast<long>(period_ns % 1'000'000'000);
  spec.it_value = spec.it_interval;
  timerfd_settime(fd, 0, &spec, nullptr);
  return fd;
}

// A reload's reply in the log, as psgatectl would show it (SIGHUP has no
// client to show it to).
// Every reload's outcome goes to the log, whoever asked (SIGHUP, or a client
// on the socket: systemctl reload's psgatectl, a script, one that gave up
// waiting and whose reply nobody reads), so the journal says what it did.
void log_reload(const nlohmann::json& reply, const char* source) {
  if (!reply.is_object()) return;
  if (!reply.value("ok", false)) {
    spdlog::error("reload ({}): refused, nothing changed: {}", source, reply.value("error", std::string("?")));
    return;
  }
  const nlohmann::json& r = reply["result"];
  auto keys = [](const nlohmann::json& list) {
    std::string out;
    for (const auto& k : list) {
      const std::string key = k.is_string() ? k.get<std::string>() : k.value("key", std::string("?"));
      out += (out.empty() ? "" : ", ") + key + (k.is_object() ? " (" + k.value("why", std::string()) + ")" : "");
    }
    return out.empty() ? std::string("none") : out;
  };
  spdlog::info("reload ({}) of {}: applied: {}; needs a restart: {}; not applied: {}", source,
               r.value("file", std::string("?")), keys(r["applied"]), keys(r["restart_needed"]),
               keys(r["not_applied"]));
}

void drain_fd(int fd) {
  uint64_t v;
  while (read(fd, &v, sizeof v) > 0) {
  }
}

// Is a live server listening on `path`?
bool socket_in_use(const std::string& path) {
  // Non-blocking: a live server whose backlog is full (its control thread
  // busy) would hold a blocking connect for as long; EAGAIN is a live one.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 || errno == EAGAIN;
  close(fd);
  return live;
}

// Memory a connection's reply buffer may keep beyond twice what it holds.
constexpr size_t kKeptReplyBufferBytes = 16 * 1024;

json error_reply(const std::string& message) { return {{"ok", false}, {"error", message}}; }

// Opens and locks PATH.lock: the descriptor, -1 when it cannot be had (the
// server then runs as before the lock, with only the stale check), or -2
// when another process holds it. Read-only and without O_CREAT first, as
// StateLock does: a lock file another user made still locks, and
// fs.protected_regular refuses O_CREAT on one in a sticky directory.
int lock_socket_path(const std::string& path) {
  const std::string lock = path + ".lock";
  int fd = open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0 && errno == ENOENT) fd = open(lock.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    spdlog::warn("control socket {}: cannot open {}: {}; two starts on a stale socket could both take it", path, lock,
                 errno_text());
    return -1;
  }
  while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const bool held = errno == EWOULDBLOCK;
    if (!held) spdlog::warn("control socket {}: cannot lock {}: {}", path, lock, errno_text());
    close(fd);
    return held ? -2 : -1;
  }
  return fd;
}

// Descriptors the process has open now (0 if /proc is not mounted).
size_t open_fd_count() {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

// Descriptors kept from clients beyond the `held` the gateway had at start:
// kReservedFds, less where the limit leaves fewer than kReservedFds plus
// kFewClients, so that a low limit still serves a few clients (health,
// reload) rather than none: then kFewClients places (half of what is left,
// below that).
constexpr size_t kFewClients = 4;
size_t reserved_fds(size_t limit, size_t held) {
  const size_t room = limit > held ? limit - held : 0;
  if (room >= kReservedFds + kFewClients) return kReservedFds;
  return room > 2 * kFewClients ? room - kFewClients : room / 2;
}

// How many clients may be connected now: kMaxClients, or fewer so that the
// reserve stays free. Read at every accept: prlimit may change the limit
// under a running gateway.
// RLIMIT_NOFILE now (SIZE_MAX: none).
size_t client_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return static_cast<size_t>(lim.rlim_cur);
}
size_t client_cap(size_t held) {
  const size_t limit = client_limit();
  if (limit == SIZE_MAX) return kMaxClients;
  const size_t kept = held + reserved_fds(limit, held);
  return limit > kept ? std::min(kMaxClients, limit - kept) : 0;
}

}  // namespace

bool ControlServer::in_use(const std::string& path) { return socket_in_use(path); }

Result<bool> ControlServer::check_path(const std::string& path) {
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    return Result<bool>::failure("control socket path must be 1.." + std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                 " bytes");
  // A path that ends in "/" (or ".", "..") names a directory, which psgate
  // would create and then find is no socket.
  if (const std::string name = std::filesystem::path(path).filename().string();
      name.empty() || name == "." || name == "..")
    return Result<bool>::failure("control socket " + path + ": must name a socket file, not a directory");
  struct stat st {};
  // The nearest ancestor that exists must be a directory (the rest is
  // created at start): one that is a file makes every path under it fail,
  // however deep (stat says ENOTDIR, not "missing", below it).
  for (std::filesystem::path dir = std::filesystem::path(path).parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    if (::stat(dir.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Result<bool>::failure("control socket " + path + ": " + dir.string() + " is not a directory");
      break;
    }
    if (errno != ENOENT && errno != ENOTDIR) break;  // not ours to judge here (EACCES: checked as another user)
  }
  // A path that names anything but a socket (a mistyped state file, say)
  // is the operator's to fix, not to delete.
  if (lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
    return Result<bool>::failure("control socket " + path +
                                 ": exists and is not a socket; [control] socket must name a path psgate may create");
  return true;
}

Result<bool> ControlServer::check_writable(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  struct stat st {};
  while (::stat(dir.c_str(), &st) != 0 && dir.has_parent_path() && dir.parent_path() != dir) dir = dir.parent_path();
  if (::stat(dir.c_str(), &st) != 0) dir = ".";  // a relative path's first part: made in the working directory
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    return Result<bool>::failure("control socket " + path + ": " + dir.string() +
                                 " is not writable: " + std::strerror(err) +
                                 (err == EROFS ? " (a read-only filesystem: name a path under /run)" : ""));
  }
  return true;
}

Result<std::unique_ptr<ControlServer>> ControlServer::start(ControlPlane& control, Options options) {
  using R = Result<std::unique_ptr<ControlServer>>;
  const std::string path = options.socket_path;  // a copy: options is moved into the server below
  sockaddr_un addr{};
  if (auto usable = check_path(path); !usable) return R::failure(usable.error());
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return R::failure("control socket " + path + ": cannot create " + dir.string() + ": " + ec.message());
  }
  // Another start between its stale check and its bind holds the lock:
  // without it, both could find the socket stale, and the later unlink
  // would remove the socket the earlier one just bound and serves.
  const int lock_fd = lock_socket_path(path);
  if (lock_fd == -2) return R::failure("control socket " + path + " is in use by another process");
  struct FdGuard {  // until the server owns it
    int fd;
    ~FdGuard() {
      if (fd >= 0) close(fd);
    }
  } lock_guard{lock_fd};
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    // check_path found a socket there, unless it changed since.
    if (!S_ISSOCK(st.st_mode)) return R::failure("control socket " + path + ": exists and is not a socket");
    if (socket_in_use(path)) return R::failure("control socket " + path + " is in use by another process");
    unlink(path.c_str());  // stale, from a process that died
    // Said: the only trace of a gateway that did not stop cleanly (SIGKILL,
    // a crash, the OOM killer), for an operator wondering why it restarted.
    spdlog::warn(
        "control socket {}: replaced a stale socket (the psgate that made it did not stop cleanly: killed "
        "or crashed)",
        path);
  }
  auto server = std::unique_ptr<ControlServer>(new ControlServer());
  server->control_ = &control;
  server->options_ = std::move(options);
  server->lock_fd_ = std::exchange(lock_guard.fd, -1);
  server->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return R::failure("control socket: " + errno_text());
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  // Create the socket file without group/other permissions, then open it to
  // the group: never a moment when anybody may connect.
  const mode_t old_mask = umask(0177);
  const int bound = bind(server->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old_mask);
  if (bound != 0) return R::failure("control socket " + path + ": cannot bind: " + errno_text());
  server->bound_ = true;
  struct stat created {};
  if (stat(path.c_str(), &created) == 0) server->bound_file_ = {created.st_dev, created.st_ino};
  // Listening before the chmod: a second start that finds the socket in
  // between must find it answering (owner-only until the chmod), not refused
  // and so "stale", which it would unlink and take over.
  if (listen(server->listen_fd_, kListenBacklog) != 0)
    return R::failure("control socket " + path + ": listen: " + errno_text());
  if (chmod(path.c_str(), 0660) != 0) return R::failure("control socket " + path + ": chmod: " + errno_text());
  server->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (server->stop_fd_ < 0) return R::failure("control socket: eventfd: " + errno_text());
  server->epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (server->epoll_fd_ < 0) return R::failure("control socket: epoll_create1: " + errno_text());
  server->tick_fd_ = make_timer(server->options_.tick_ns);
  if (server->tick_fd_ < 0) return R::failure("control socket: timerfd: " + errno_text());
  if (server->options_.report_ns) {
    server->report_fd_ = make_timer(server->options_.report_ns);
    if (server->report_fd_ < 0) return R::failure("control socket: timerfd: " + errno_text());
  }
  server->thread_ = std::thread([s = server.get()] { s->run(); });
  return server;
}

ControlServer::~ControlServer() {
  if (thread_.joinable()) {
    stopping_.store(true);
    const uint64_t one = 1;
    (void)!write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  // Only the file this server created: after a failed bind the path may be
  // another process's socket, and so may it be after ours was removed and
  // another psgate bound the path (a stop removed the live one's socket).
  struct stat now {};
  if (bound_ && stat(options_.socket_path.c_str(), &now) == 0 && std::pair{now.st_dev, now.st_ino} == bound_file_)
    unlink(options_.socket_path.c_str());
  if (stop_fd_ >= 0) close(stop_fd_);
  // After the unlink: a start waiting for the path finds it free. The lock
  // file stays: removed, a start could lock a new one while another still
  // held the old.
  for (int fd : {epoll_fd_, tick_fd_, report_fd_, lock_fd_}) {
    if (fd >= 0) close(fd);
  }
}

void ControlServer::run() {
  const int ep = epoll_fd_;
  const int tick_fd = tick_fd_;
  const int report_fd = report_fd_;
  auto watch = [ep](int fd, uint32_t events, uint32_t serial = 0) {
    return epoll_watch(ep, EPOLL_CTL_ADD, fd, events, serial);
  };
  uint32_t next_serial = 0;
  watch(listen_fd_, EPOLLIN);
  watch(stop_fd_, EPOLLIN);
  watch(tick_fd, EPOLLIN);
  if (report_fd >= 0) watch(report_fd, EPOLLIN);
  if (options_.wake_fd >= 0) watch(options_.wake_fd, EPOLLIN);
  if (options_.reload_fd >= 0) watch(options_.reload_fd, EPOLLIN);
  std::unordered_map<int, Connection> conns;
  // A spare descriptor, given up for a moment to refuse a client when the
  // process has no other (see the accept loop).
  int reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  LogThrottle refused_for_fds_log(1'000'000'000);
  // Out of descriptors with no spare to refuse a client with: the pending
  // connection keeps the listening socket readable, and this thread spun
  // on accept (millions of EMFILE a second, the control socket's own work
  // starved). The socket is not watched until the next tick then.
  bool listen_paused = false;
  // What the gateway holds without clients; client_cap keeps kReservedFds
  // more free for its own use.
  const size_t held_fds = open_fd_count();

  // Replies built and not yet sent, all clients together, and the clients
  // paused until that is under kRepliesBudgetBytes again, or under it plus
  // kRepliesReserveBytes (flush()).
  size_t unsent = 0;
  std::vector<int> budget_paused, reserve_paused;
  // Counts the times `unsent` went over the budget (from 1: a connection's
  // waited_in_episode starts at 0, no episode).
  uint64_t budget_episode = 1;
  // A new episode since the clients held for the budget were last looked at:
  // the reserve is open to them again (reserve_open).
  bool episode_unseen = false;
  uint64_t episode_start_ns = 0;  // when the budget was last spent
  LogThrottle over_budget_log(60'000'000'000);
  auto append_out = [&](Connection& c, const std::string& text) {
    if (c.out.empty()) c.owing_ns = monotonic_ns();
    if (unsent < kRepliesBudgetBytes && unsent + text.size() >= kRepliesBudgetBytes) {
      ++budget_episode;
      episode_unseen = true;
      episode_start_ns = monotonic_ns();
    }
    c.out += text;
    unsent += text.size();
  };
  // Where the reserve ends: unsent replies past it hold every client.
  constexpr size_t kReserveEnd = kRepliesBudgetBytes + kRepliesReserveBytes;
  // Whether a client may have a request read from the reserve past the
  // budget: owed nothing, and not owed replies too long this episode.
  auto reserve_open = [&](const Connection& c) { return c.out.empty() && c.waited_in_episode != budget_episode; };
  auto drop_out = [&](Connection& c) {
    unsent -= c.out.size();
    c.out.clear();
  };
  auto close_conn = [&](int fd) {
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, nullptr);
    close(fd);
    if (auto it = conns.find(fd); it != conns.end()) drop_out(it->second);
    conns.erase(fd);
  };
  // Every place taken, or no descriptor left: closes the client idle longest,
  // if it has sent nothing for kIdleEvictNs and is owed nothing. False: none.
  uint64_t evicted = 0;  // for the log
  auto evict_idle = [&]() -> bool {
    const uint64_t now = monotonic_ns();
    int victim = -1;
    uint64_t oldest = now;
    for (const auto& [cfd, conn] : conns) {
      // Not one held by the replies budget (not read from: it may well have
      // sent), nor one with requests waiting unread in its socket.
      if (!conn.out.empty() || conn.eof || conn.paused_by_budget || conn.active_ns >= oldest) continue;
      int unread = 0;
      if (ioctl(cfd, FIONREAD, &unread) == 0 && unread > 0) continue;
      oldest = conn.active_ns;
      victim = cfd;
    }
    if (victim < 0 || now - oldest < kIdleEvictNs) return false;
    if (evicted++ % 100 == 0)
      spdlog::warn("control: no client place left; one idle for {} s closed for a new one ({} since start)",
                   (now - oldest) / 1'000'000'000, evicted);
    close_conn(victim);
    return true;
  };
  // Sends what is buffered and sets what to wait for: more requests while
  // few replies are pending, only EPOLLOUT while many are (a client that
  // does not read is not read from either), and after EOF only the rest of
  // the replies. While all clients' unsent replies are over the budget, a
  // client with some of its own unsent waits for them to leave, and one with
  // none is held: nothing to wait for but the others (re-armed when they
  // drain). False: close the connection (peer gone, or done).
  auto flush = [&](int fd, Connection& c) -> bool {
    bool progress = false;
    while (!c.out.empty()) {
      const ssize_t n = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
        unsent -= static_cast<size_t>(n);
        progress = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // Peer gone (it closed, or shut down its reading side, between sending
      // and our reply): nobody reads a reply again, but the requests it sends
      // are still taken, until it closes (EOF or a hang-up).
      if (!c.eof) {
        c.peer_gone = true;
        drop_out(c);
        break;
      }
      return false;
    }
    // Everything it asked for was sent, and it will ask for nothing more.
    if (c.eof && c.out.empty()) return false;
    // A buffer that drained gives its memory back: erasing what was sent
    // keeps the capacity, so a client that once had a large reply pending
    // (a `config` of 100k rules is megabytes; up to kPauseReadingBytes are
    // built in one round) would otherwise hold that much as long as it stays
    // connected, and the budget would bound what is unsent but not what is
    // held.
    if (progress && c.out.capacity() > 2 * c.out.size() + kKeptReplyBufferBytes) {
      if (c.out.empty()) {
        std::string().swap(c.out);
      } else {
        c.out.shrink_to_fit();
      }
    }
    const bool over_budget = unsent >= kRepliesBudgetBytes;
    const bool own_pause = c.eof || c.out.size() >= kPauseReadingBytes;
    const bool waiting = own_pause || (over_budget && !c.out.empty());
    if (waiting && (!c.waiting || progress)) c.waiting_ns = monotonic_ns();
    c.waiting = waiting;
    // Owed nothing (else it would be waiting while over the budget): its
    // next request may still be read, from the reserve, until that is spent,
    // unless it was owed replies too long this episode (waited_in_episode).
    const bool may_use_reserve = reserve_open(c);
    // (Never one whose replies are dropped, peer_gone: its requests cost
    // no budget, and are taken until it closes.)
    const bool hold = over_budget && !waiting && !c.peer_gone && (!may_use_reserve || unsent >= kReserveEnd);
    const bool for_reserve = hold && may_use_reserve;
    const bool for_budget = (hold && !may_use_reserve) || (over_budget && !own_pause && !c.out.empty());
    if (for_budget && !c.listed_for_budget) {
      budget_paused.push_back(fd);
      c.listed_for_budget = true;
    }
    if (for_reserve && !c.listed_for_reserve) {
      reserve_paused.push_back(fd);
      c.listed_for_reserve = true;
    }
    c.paused_by_budget = for_budget || for_reserve;
    // Held: no event but a hang-up or an error (always reported).
    const uint32_t events = waiting ? EPOLLOUT
                            : hold  ? 0u
                                    : EPOLLIN | EPOLLRDHUP | (c.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
    epoll_watch(ep, EPOLL_CTL_MOD, fd, events, c.serial);
    return true;
  };
  // Said at most once a second: a flood of clients that never read (a
  // script's loop) would otherwise write a line per client.
  LogThrottle stalled_log(1'000'000'000);
  // The control plane's periodic work (policy re-ranks, state file retries,
  // the cluster's views, reports) may throw as a request may: a thread that
  // cannot be started, memory that cannot be had. It must cost that step,
  // not the gateway: an exception leaving this thread would terminate the
  // process and stop forwarding. Snapshots are published whole or not at
  // all, so what ran before is still in force.
  // Logged when first seen and then at most once a minute (a policy re-ranks
  // every 100 ms), with the count since start.
  LogThrottle step_failure_log(60'000'000'000);
  auto guarded = [&](const char* what, auto&& step) {
    try {
      step();
    } catch (const std::exception& e) {
      if (step_failure_log.admit(monotonic_ns())) {
        spdlog::error("control: {} failed: {}; the gateway goes on with what was in force ({} failures since start)",
                      what, e.what(), step_failure_log.total());
      }
    }
  };
  // Handles one request; its reply is dropped when nobody can read it (a
  // hung-up client), so such a client's requests are all taken whatever
  // their replies' size.
  auto answer = [&](Connection& c, const std::string& line, bool keep_reply) {
    json reply;
    try {
      const CommandSpec* ran = nullptr;
      reply = control_->handle_line(line, keep_reply, &ran);
      if (ran != nullptr && std::string_view(ran->name) == "reload") log_reload(reply, "control socket");
    } catch (const std::exception& e) {
      // A handler bug must cost one request, not the gateway.
      reply = error_reply(std::string("internal error: ") + e.what());
      spdlog::error("control: request failed: {}", e.what());
    }
    if (!keep_reply) return;
    const size_t before = unsent;
    append_out(c, reply.dump(-1, ' ', false, json::error_handler_t::replace) + '\n');
    if (before < kRepliesBudgetBytes && unsent >= kRepliesBudgetBytes) {
      // Just went over (not at every reply while over); at most once a minute.
      if (over_budget_log.admit(monotonic_ns())) {
        spdlog::warn(
            "control: {} MiB of replies unsent to clients; clients owed replies are not read until they drain ({} "
            "times since start)",
            unsent >> 20, over_budget_log.total());
      }
    }
  };

  uint64_t wait_error_logged_ns = 0;
  // At most once a second: a failure that repeats comes back every round.
  LogThrottle accept_error_log(1'000'000'000);
  for (;;) {
    epoll_event events[64];
    const int n = epoll_wait(ep, events, 64, -1);
    // A stop is acted on at once, not after the rest of the round: a cluster
    // write or a client's turn before it in the batch can take seconds.
    if (stopping_.load()) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      // Not expected of a valid set; never a busy loop, and said (rarely).
      const uint64_t now = monotonic_ns();
      if (now - wait_error_logged_ns > 60'000'000'000 || wait_error_logged_ns == 0) {
        wait_error_logged_ns = now;
        spdlog::error("control: epoll_wait: {}", errno_text());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      const int fd = epoll_key_fd(events[i].data.u64);
      if (fd == stop_fd_) {
        continue;  // read through stopping_ (set before the eventfd is written)
      } else if (fd == options_.wake_fd) {
        drain_fd(fd);
        guarded("applying the cluster's view", [&] { control_->wake(monotonic_ns()); });
      } else if (fd == options_.reload_fd) {
        drain_fd(fd);
        guarded("the reload SIGHUP asked for",
                [&] { log_reload(control_->handle_line(R"({"cmd":"reload"})"), "SIGHUP"); });
      } else if (fd == tick_fd) {
        drain_fd(tick_fd);
        if (listen_paused) {
          if (reserve_fd < 0) reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
          epoll_watch(ep, EPOLL_CTL_MOD, listen_fd_, EPOLLIN, 0);
          listen_paused = false;
        }
        const uint64_t now = monotonic_ns();
        guarded("the periodic control step", [&] { control_->tick(now); });
        if (options_.after_tick) guarded("the watchdog and status step", [&] { options_.after_tick(); });
        // Clients that stopped reading their replies.
        std::vector<int> stalled;
        std::vector<int> owing;  // over the budget: replies unsent, not yet waiting
        const bool over_budget = unsent >= kRepliesBudgetBytes;
        const uint64_t prompt_reader = prompt_reader_ns(options_.unread_timeout_ns);
        for (auto& [cfd, conn] : conns) {
          // (Owed since before the episode began counts from its start: a
          // reply that waited while nobody waited for it is no sign.)
          if (over_budget && !conn.out.empty() && now - std::max(conn.owing_ns, episode_start_ns) > prompt_reader)
            conn.waited_in_episode = budget_episode;
          if (conn.waiting && now - conn.waiting_ns > options_.unread_timeout_ns) stalled.push_back(cfd);
          else if (over_budget && !conn.waiting && !conn.out.empty()) owing.push_back(cfd);
        }
        for (int cfd : stalled) {
          auto it = conns.find(cfd);
          if (it == conns.end()) continue;
          // A last try before the verdict: a client that read while this
          // thread could not run (the process stopped, or starved for longer
          // than the timeout) takes bytes now, and its wait starts again.
          // Its socket's EPOLLOUT may lie behind this tick in the same batch
          // of events: judged first, it was disconnected with its replies
          // flowing.
          if (!flush(cfd, it->second)) {
            close_conn(cfd);
            continue;
          }
          // (flush restarted the wait at a clock read after `now`.)
          if (!it->second.waiting || it->second.waiting_ns + options_.unread_timeout_ns >= now) continue;
          if (stalled_log.admit(now)) {
            spdlog::warn("control: a client left {} KiB of replies unread for {:g} s; disconnected ({} since start{})",
                         it->second.out.size() >> 10, static_cast<double>(options_.unread_timeout_ns) / 1e9,
                         stalled_log.total(), stalled_log.held_back_note());
          }
          close_conn(cfd);
        }
        // A client whose replies went partly out before the total crossed the
        // budget, and that reads no more, would hold its share of it for
        // good: neither its requests nor its socket ever wake it. Flushed
        // now, it waits for its replies like any other and the rule above
        // applies to it.
        for (int cfd : owing) {
          auto it = conns.find(cfd);
          if (it != conns.end() && !flush(cfd, it->second)) close_conn(cfd);
        }
      } else if (fd == report_fd) {
        drain_fd(report_fd);
        if (options_.report) guarded("the statistics report", [&] { options_.report(); });
      } else if (fd == listen_fd_) {
        // Accept until the queue is empty, or kMaxAcceptsPerWakeup: one
        // wake-up may stand for many clients, and a backlog left full
        // refuses new ones (EAGAIN).
        for (unsigned taken = 0; taken < kMaxAcceptsPerWakeup; ++taken) {
          int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          // Out of descriptors: an idle client's may be had (evict_idle).
          if (c < 0 && (errno == EMFILE || errno == ENFILE) && evict_idle()) continue;
          bool out_of_fds = false;
          if (c < 0 && (errno == EMFILE || errno == ENFILE) && reserve_fd >= 0) {
            // Out of file descriptors (RLIMIT_NOFILE below kMaxClients plus
            // what DPDK holds). Left in the queue, the connection would keep
            // the listening socket readable and this thread spinning, and its
            // client waiting for nothing: free the spare descriptor, take the
            // connection, refuse it with a reason, take the spare back.
            close(reserve_fd);
            c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
            reserve_fd = -1;
            out_of_fds = true;
          }
          if (c < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            const bool no_fd = errno == EMFILE || errno == ENFILE;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
              if (accept_error_log.admit(monotonic_ns())) {
                spdlog::warn("control: accept: {} ({} since start{})", errno_text(), accept_error_log.total(),
                             accept_error_log.held_back_note());
              }
            }
            if (reserve_fd < 0) reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (no_fd && reserve_fd < 0 && !listen_paused) {
              epoll_watch(ep, EPOLL_CTL_MOD, listen_fd_, 0, 0);
              listen_paused = true;
            }
            break;
          }
          const size_t cap = client_cap(held_fds);
          if (!out_of_fds && conns.size() >= cap) (void)evict_idle();
          // Refused for the descriptor limit rather than kMaxClients: the
          // reserve's descriptors stay the gateway's.
          const bool fd_cap = !out_of_fds && conns.size() >= cap && cap < kMaxClients;
          if (out_of_fds || conns.size() >= cap) {
            if (out_of_fds && refused_for_fds_log.admit(monotonic_ns()))
              spdlog::warn(
                  "control: out of file descriptors with {} clients (raise RLIMIT_NOFILE); a client refused "
                  "({} since start{})",
                  conns.size(), refused_for_fds_log.total(), refused_for_fds_log.held_back_note());
            if (fd_cap && refused_for_fds_log.admit(monotonic_ns()))
              spdlog::warn(
                  "control: {} clients, as many as RLIMIT_NOFILE allows with {} descriptors kept for the gateway "
                  "(raise RLIMIT_NOFILE); a client refused ({} since start{})",
                  conns.size(), held_fds + reserved_fds(client_limit(), held_fds), refused_for_fds_log.total(),
                  refused_for_fds_log.held_back_note());
            const std::string msg =
                error_reply(out_of_fds ? "too many control clients (the daemon is out of file descriptors)"
                            : fd_cap   ? "too many control clients (the daemon's file descriptor limit)"
                                       : "too many control clients")
                    .dump() +
                "\n";
            (void)!send(c, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            close(c);
            if (reserve_fd < 0) reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
            continue;
          }
          Connection& added = conns.emplace(c, Connection{}).first->second;
          added.active_ns = monotonic_ns();
          added.serial = next_connection_serial(next_serial);
          if (!watch(c, EPOLLIN | EPOLLRDHUP, added.serial)) {
            // Never polled, it would wait for a reply that never comes: refused with why.
            const std::string msg =
                error_reply("control socket: cannot watch the connection: " + errno_text()).dump() + "\n";
            spdlog::warn("control: epoll_ctl: {}; a client refused", errno_text());
            (void)!send(c, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            conns.erase(c);
            close(c);
          }
        }
      } else {
        auto it = conns.find(fd);
        // Closed earlier in this round (its descriptor maybe reused since).
        if (it == conns.end() || it->second.serial != epoll_key_serial(events[i].data.u64)) continue;
        Connection& c = it->second;
        bool alive = true;
        bool capped = false;  // stopped at kMaxPiecesPerWakeup with more to read
        // Hung up both ways: no reply can reach it, but the requests it sent
        // before closing are still taken (a script that sends and closes),
        // over as many rounds as the cap needs; their replies are dropped.
        // An error is a hang-up too: a peer that closes with replies unread
        // in its socket is reported as one (ECONNRESET), and recv still
        // returns what it sent before the error.
        const bool hung_up = (events[i].events & (EPOLLHUP | EPOLLERR)) != 0;
        // No reply can reach it: hung up, or it shut down its reading side
        // (a send failed, peer_gone) while it may go on sending requests,
        // which are taken until it closes.
        const bool mute = hung_up || c.peer_gone;
        if (mute) {
          drop_out(c);
          c.waiting = false;
        }
        // A hung-up client's requests are taken even if it was held or
        // waiting (EPOLLIN not asked for): its replies are dropped, so they
        // cost no budget.
        if (((events[i].events & EPOLLIN) || hung_up) && !c.waiting) {
          char buf[16384];
          auto on_line = [&](std::string&& line) { answer(c, line, !mute); };
          auto on_oversized = [&] {
            if (!mute) append_out(c, error_reply("request longer than 64 KiB").dump() + "\n");
          };
          // Reading stops at this client's pause or at the budget of all (a
          // mute client's replies are dropped: neither applies); a client
          // owed nothing reads from the reserve past the budget, so one
          // request's reply at most (then it is owed that).
          auto full = [&] {
            return c.out.size() >= kPauseReadingBytes ||
                   (!mute && unsent >= (reserve_open(c) ? kReserveEnd : kRepliesBudgetBytes));
          };
          // Requests are taken one line at a time (peek, then consume through
          // each newline as that line is handled), and none while
          // kPauseReadingBytes of replies wait unsent: the rest stay in the
          // kernel's buffers until the client reads (flush() then waits for
          // EPOLLOUT alone). So a client that sends without reading costs at
          // most that plus one reply, and every request it sent is still
          // answered once it reads. Each piece goes through the line framer,
          // so a connection also holds at most one request's bytes however
          // long a line is. At most kMaxPiecesPerWakeup pieces are taken per
          // wake-up: epoll is level-triggered, so the rest waits for the next
          // round, after the other clients and the tick, not behind a client
          // that never stops sending (even blank lines, which get no reply).
          // Also at most kMaxTurnNs: 64 requests that each take long (a
          // stats of thousands of jobs) from each of many clients made one
          // round last minutes, past the tick, a stop and the watchdog.
          unsigned pieces = 0;
          const uint64_t turn_ends = monotonic_ns() + kMaxTurnNs;
          auto turn_over = [&] {
            return pieces == kMaxPiecesPerWakeup || (pieces != 0 && monotonic_ns() >= turn_ends);
          };
          for (;;) {
            if (turn_over()) {
              capped = true;
              break;
            }
            if (full()) break;
            const ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT | MSG_PEEK);
            if (r > 0) {
              for (size_t at = 0; at < static_cast<size_t>(r);) {
                if (turn_over() || full()) break;
                const size_t left = static_cast<size_t>(r) - at;
                const char* nl = static_cast<const char*>(std::memchr(buf + at, '\n', left));
                const size_t take = nl != nullptr ? static_cast<size_t>(nl - (buf + at)) + 1 : left;
                // Consumes the bytes just peeked (only this thread reads the socket).
                const ssize_t got = recv(fd, buf + at, take, MSG_DONTWAIT);
                if (got <= 0) break;
                // Active when a request is complete, not at every byte: a
                // client trickling one byte every few seconds (or only
                // blank lines) is idle, and its place can go to another
                // when all are taken (evict_idle).
                const bool blank = got == 1 && nl != nullptr && c.in.buffered() == 0;
                if (nl != nullptr && !blank) c.active_ns = monotonic_ns();
                c.in.feed(std::string_view(buf + at, static_cast<size_t>(got)), on_line, on_oversized);
                at += static_cast<size_t>(got);
                ++pieces;
              }
              continue;
            }
            if (r < 0 && errno == EINTR) continue;
            // After a hang-up, an error (ECONNRESET: it closed with replies
            // unread) is its end of stream like EOF, last line included.
            if (r == 0 || (r < 0 && hung_up && errno != EAGAIN && errno != EWOULDBLOCK)) {
              c.eof = true;  // its replies still go out (flush)
              // A last request without its newline (printf '...' | socat) is
              // a request all the same, not silently dropped.
              c.in.feed("\n", on_line, on_oversized);
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) alive = false;
            break;
          }
        }
        // Hung up (or an error) with nothing left to take: done. Capped, the
        // rest is taken next round: epoll reports the hang-up again.
        if (hung_up && !capped) alive = false;
        if (!alive || !flush(fd, c)) close_conn(fd);
      }
    }
    // Clients paused for the budget or the reserve, looked at again: flush
    // re-arms a held one for its requests, which wake the next round,
    // level-triggered (as far as the reserve's room goes; those it does not
    // reach are held again); one waiting for its replies only because of the
    // budget goes back to its own 256 KiB rule.
    auto look_again = [&](std::vector<int>& list, bool Connection::*listed) {
      std::vector<int> again;
      again.swap(list);
      for (int fd : again) {
        auto it = conns.find(fd);
        if (it == conns.end()) continue;  // closed
        it->second.*listed = false;
        if (!it->second.paused_by_budget) continue;  // no longer paused
        it->second.paused_by_budget = false;
        if (!flush(fd, it->second)) close_conn(fd);
      }
    };
    // Those held only for the reserve, once it has room again.
    if (!reserve_paused.empty() && unsent < kReserveEnd) look_again(reserve_paused, &Connection::listed_for_reserve);
    // Under the budget, or in a new episode (the budget drained and was
    // spent again within this round): the clients held for the budget, which
    // the reserve may now serve.
    if (budget_paused.empty()) {
      episode_unseen = false;
    } else if (unsent < kRepliesBudgetBytes || (episode_unseen && unsent < kReserveEnd)) {
      episode_unseen = false;
      look_again(budget_paused, &Connection::listed_for_budget);
    }
  }
  for (auto& [fd, c] : conns) close(fd);
  if (reserve_fd >= 0) close(reserve_fd);
}

}  // namespace psgate
