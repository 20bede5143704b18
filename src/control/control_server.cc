// SPDX-License-Identifier: BSD-3-Clause
// Control socket server (control thread): the socket's start and stop, and
// the thread's loop, one step a member function. The socket's path and lock
// are in control_socket_path.cc, the clients' share of the descriptor limit
// in client_limits.cc, a connection's replies and the budget of all of them
// in control_connection.cc.
//
//   epoll_wait --> on_event -+- stop_fd_     nothing (stopping_ says it)
//                            +- wake_fd      ControlPlane::wake
//                            +- reload_fd    a reload, its outcome logged
//                            +- tick_fd_     on_tick --> disconnect_stalled
//                            +- report_fd_   Options::report
//                            +- listen_fd_   accept_clients --> admit_client
//                            +- deferred fd  nothing (the round's end collects)
//                            +- a client's   read_client --> take_requests --> answer
//   after each round: deliver_deferred (replies to changes sent to the
//   cluster store), look_again_at_paused (the clients the replies budget held)
#include "control/control_server.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "control/client_limits.h"
#include "control/control_connection.h"
#include "control/control_socket_path.h"
#include "psgate/control_commands.h"
#include "psgate/epoll_key.h"
#include "psgate/log_throttle.h"

namespace psgate {

namespace {

using json = nlohmann::json;

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

json error_reply(const std::string& message) { return {{"ok", false}, {"error", message}}; }

// The control plane's periodic work (policy re-ranks, state file retries,
// the cluster's views, reports) may throw as a request may: a thread that
// cannot be started, memory that cannot be had. It must cost that step,
// not the gateway: an exception leaving this thread would terminate the
// process and stop forwarding. Snapshots are published whole or not at
// all, so what ran before is still in force.
// Logged when first seen and then at most once a minute (a policy re-ranks
// every 100 ms), with the count since start.
template <typename Step>
void guarded(LogThrottle& step_failure_log, const char* what, Step&& step) {
  try {
    step();
  } catch (const std::exception& e) {
    if (step_failure_log.admit(monotonic_ns())) {
      spdlog::error("control: {} failed: {}; the gateway goes on with what was in force ({} failures since start)",
                    what, e.what(), step_failure_log.total());
    }
  }
}

}  // namespace

// What the control thread keeps while it serves (run()).
struct ControlServer::Serving {
  explicit Serving(int epoll_fd) : replies(epoll_fd) {}
  std::unordered_map<int, ControlConnection> conns;
  uint32_t next_serial = 0;
  // A spare descriptor, given up for a moment to refuse a client when the
  // process has no other (see accept_clients).
  int reserve_fd = -1;
  LogThrottle refused_for_fds_log{1'000'000'000};
  // Out of descriptors with no spare to refuse a client with: the pending
  // connection keeps the listening socket readable, and this thread spun
  // on accept (millions of EMFILE a second, the control socket's own work
  // starved). The socket is not watched until the next tick then.
  bool listen_paused = false;
  // What the gateway holds without clients; client_cap keeps kReservedFds
  // more free for its own use.
  size_t held_fds = 0;
  // Replies built and not yet sent, and the clients paused for them.
  ReplyBudget replies;
  LogThrottle over_budget_log{60'000'000'000};
  uint64_t evicted = 0;  // by evict_idle, for the log
  // Said at most once a second: a flood of clients that never read (a
  // script's loop) would otherwise write a line per client.
  LogThrottle stalled_log{1'000'000'000};
  // Logged when first seen and then at most once a minute (a policy re-ranks
  // every 100 ms), with the count since start (guarded).
  LogThrottle step_failure_log{60'000'000'000};
  uint64_t wait_error_logged_ns = 0;
  // At most once a second: a failure that repeats comes back every round.
  LogThrottle accept_error_log{1'000'000'000};
};

Result<std::unique_ptr<ControlServer>> ControlServer::start(ControlPlane& control, Options options) {
  using R = Result<std::unique_ptr<ControlServer>>;
  const std::string path = options.socket_path;  // a copy: options is moved into the server below
  auto lock_fd = claim_socket_path(path);
  if (!lock_fd) return R::failure(lock_fd.error());
  auto server = std::unique_ptr<ControlServer>(new ControlServer());
  server->control_ = &control;
  server->options_ = std::move(options);
  server->lock_fd_ = *lock_fd;
  server->listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (server->listen_fd_ < 0) return R::failure("control socket: " + errno_text());
  sockaddr_un addr{};
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
  for (int fd : {listen_fd_, stop_fd_, tick_fd_}) epoll_watch(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN);
  for (int fd : {report_fd_, options_.wake_fd, options_.reload_fd, control_->deferred_fd()})
    if (fd >= 0) epoll_watch(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN);
  Serving s(epoll_fd_);
  s.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  s.held_fds = open_fd_count();
  for (;;) {
    epoll_event events[64];
    const int n = epoll_wait(epoll_fd_, events, 64, -1);
    // A stop is acted on at once, not after the rest of the round: a cluster
    // write or a client's turn before it in the batch can take seconds.
    if (stopping_.load()) break;
    if (n < 0) {
      on_wait_error(s);
      continue;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) on_event(s, events[i]);
    deliver_deferred(s);
    look_again_at_paused(s);
  }
  // Replies still owed for changes sent to the cluster store: the writer
  // learns whether its change was written (waited for briefly), or that it
  // may have been, rather than seeing its connection close; one last send
  // each, without waiting for a slow reader.
  for (ControlPlane::DeferredReply& d : control_->end_store_writes(kStopWriteWaitNs)) {
    auto it = s.conns.find(epoll_key_fd(d.token));
    if (it == s.conns.end() || it->second.serial != epoll_key_serial(d.token)) continue;
    if (!it->second.peer_gone && !d.reply.is_null()) add_reply(s, it->second, d.reply);
    (void)!send(it->first, it->second.out.data(), it->second.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  for (auto& [fd, c] : s.conns) close(fd);
  if (s.reserve_fd >= 0) close(s.reserve_fd);
}

void ControlServer::on_wait_error(Serving& s) {
  if (errno == EINTR) return;
  // Not expected of a valid set; never a busy loop, and said (rarely).
  const uint64_t now = monotonic_ns();
  if (now - s.wait_error_logged_ns > 60'000'000'000 || s.wait_error_logged_ns == 0) {
    s.wait_error_logged_ns = now;
    spdlog::error("control: epoll_wait: {}", errno_text());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

void ControlServer::on_event(Serving& s, const epoll_event& event) {
  const int fd = epoll_key_fd(event.data.u64);
  if (fd == stop_fd_) {
    return;  // read through stopping_ (set before the eventfd is written)
  } else if (fd == options_.wake_fd) {
    drain_fd(fd);
    guarded(s.step_failure_log, "applying the cluster's view", [&] { control_->wake(monotonic_ns()); });
  } else if (fd == options_.reload_fd) {
    drain_fd(fd);
    guarded(s.step_failure_log, "the reload SIGHUP asked for",
            [&] { log_reload(control_->handle_line(R"({"cmd":"reload"})"), "SIGHUP"); });
  } else if (fd == tick_fd_) {
    on_tick(s);
  } else if (fd == report_fd_) {
    drain_fd(report_fd_);
    if (options_.report) guarded(s.step_failure_log, "the statistics report", [&] { options_.report(); });
  } else if (fd == listen_fd_) {
    accept_clients(s);
  } else if (fd == control_->deferred_fd()) {
    drain_fd(fd);  // the replies are collected at the round's end (deliver_deferred)
  } else {
    read_client(s, fd, event);
  }
}

void ControlServer::on_tick(Serving& s) {
  drain_fd(tick_fd_);
  if (s.listen_paused) {
    if (s.reserve_fd < 0) s.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    epoll_watch(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, EPOLLIN, 0);
    s.listen_paused = false;
  }
  const uint64_t now = monotonic_ns();
  guarded(s.step_failure_log, "the periodic control step", [&] { control_->tick(now); });
  if (options_.after_tick) guarded(s.step_failure_log, "the watchdog and status step", [&] { options_.after_tick(); });
  disconnect_stalled(s, now);
}

void ControlServer::disconnect_stalled(Serving& s, uint64_t now) {
  ReplyBudget& replies = s.replies;
  // Clients that stopped reading their replies.
  std::vector<int> stalled;
  std::vector<int> owing;  // over the budget: replies unsent, not yet waiting
  const bool over_budget = replies.unsent >= kRepliesBudgetBytes;
  const uint64_t prompt_reader = prompt_reader_ns(options_.unread_timeout_ns);
  for (auto& [cfd, conn] : s.conns) {
    // (Owed since before the episode began counts from its start: a
    // reply that waited while nobody waited for it is no sign.)
    if (over_budget && !conn.out.empty() && now - std::max(conn.owing_ns, replies.episode_start_ns) > prompt_reader)
      conn.waited_in_episode = replies.budget_episode;
    if (conn.waiting && now - conn.waiting_ns > options_.unread_timeout_ns) stalled.push_back(cfd);
    else if (over_budget && !conn.waiting && !conn.out.empty()) owing.push_back(cfd);
  }
  for (int cfd : stalled) {
    auto it = s.conns.find(cfd);
    if (it == s.conns.end()) continue;
    // A last try before the verdict: a client that read while this
    // thread could not run (the process stopped, or starved for longer
    // than the timeout) takes bytes now, and its wait starts again.
    // Its socket's EPOLLOUT may lie behind this tick in the same batch
    // of events: judged first, it was disconnected with its replies
    // flowing.
    if (!replies.flush(cfd, it->second)) {
      close_client(s, cfd);
      continue;
    }
    // (flush restarted the wait at a clock read after `now`.)
    if (!it->second.waiting || it->second.waiting_ns + options_.unread_timeout_ns >= now) continue;
    if (s.stalled_log.admit(now)) {
      spdlog::warn("control: a client left {} KiB of replies unread for {:g} s; disconnected ({} since start{})",
                   it->second.out.size() >> 10, static_cast<double>(options_.unread_timeout_ns) / 1e9,
                   s.stalled_log.total(), s.stalled_log.held_back_note());
    }
    close_client(s, cfd);
  }
  // A client whose replies went partly out before the total crossed the
  // budget, and that reads no more, would hold its share of it for
  // good: neither its requests nor its socket ever wake it. Flushed
  // now, it waits for its replies like any other and the rule above
  // applies to it.
  for (int cfd : owing) {
    auto it = s.conns.find(cfd);
    if (it != s.conns.end() && !replies.flush(cfd, it->second)) close_client(s, cfd);
  }
}

void ControlServer::accept_clients(Serving& s) {
  // Accept until the queue is empty, or kMaxAcceptsPerWakeup: one
  // wake-up may stand for many clients, and a backlog left full
  // refuses new ones (EAGAIN).
  for (unsigned taken = 0; taken < kMaxAcceptsPerWakeup; ++taken) {
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    // Out of descriptors: an idle client's may be had (evict_idle).
    if (c < 0 && (errno == EMFILE || errno == ENFILE) && evict_idle(s)) continue;
    bool out_of_fds = false;
    if (c < 0 && (errno == EMFILE || errno == ENFILE) && s.reserve_fd >= 0) {
      // Out of file descriptors (RLIMIT_NOFILE below kMaxClients plus
      // what DPDK holds). Left in the queue, the connection would keep
      // the listening socket readable and this thread spinning, and its
      // client waiting for nothing: free the spare descriptor, take the
      // connection, refuse it with a reason, take the spare back.
      close(s.reserve_fd);
      c = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      s.reserve_fd = -1;
      out_of_fds = true;
    }
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      const bool no_fd = errno == EMFILE || errno == ENFILE;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        if (s.accept_error_log.admit(monotonic_ns())) {
          spdlog::warn("control: accept: {} ({} since start{})", errno_text(), s.accept_error_log.total(),
                       s.accept_error_log.held_back_note());
        }
      }
      if (s.reserve_fd < 0) s.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (no_fd && s.reserve_fd < 0 && !s.listen_paused) {
        epoll_watch(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, 0, 0);
        s.listen_paused = true;
      }
      break;
    }
    admit_client(s, c, out_of_fds);
  }
}

void ControlServer::admit_client(Serving& s, int c, bool out_of_fds) {
  const size_t cap = client_cap(s.held_fds);
  if (!out_of_fds && s.conns.size() >= cap) (void)evict_idle(s);
  // Refused for the descriptor limit rather than kMaxClients: the
  // reserve's descriptors stay the gateway's.
  const bool fd_cap = !out_of_fds && s.conns.size() >= cap && cap < kMaxClients;
  if (out_of_fds || s.conns.size() >= cap) {
    if (out_of_fds && s.refused_for_fds_log.admit(monotonic_ns()))
      spdlog::warn(
          "control: out of file descriptors with {} clients (raise RLIMIT_NOFILE); a client refused "
          "({} since start{})",
          s.conns.size(), s.refused_for_fds_log.total(), s.refused_for_fds_log.held_back_note());
    if (fd_cap && s.refused_for_fds_log.admit(monotonic_ns()))
      spdlog::warn(
          "control: {} clients, as many as RLIMIT_NOFILE allows with {} descriptors kept for the gateway "
          "(raise RLIMIT_NOFILE); a client refused ({} since start{})",
          s.conns.size(), s.held_fds + reserved_fds(client_limit(), s.held_fds), s.refused_for_fds_log.total(),
          s.refused_for_fds_log.held_back_note());
    const std::string msg = error_reply(out_of_fds ? "too many control clients (the daemon is out of file descriptors)"
                                        : fd_cap   ? "too many control clients (the daemon's file descriptor limit)"
                                                   : "too many control clients")
                                .dump() +
                            "\n";
    (void)!send(c, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    close(c);
    if (s.reserve_fd < 0) s.reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return;
  }
  ControlConnection& added = s.conns.emplace(c, ControlConnection{}).first->second;
  added.active_ns = monotonic_ns();
  added.serial = next_connection_serial(s.next_serial);
  if (!epoll_watch(epoll_fd_, EPOLL_CTL_ADD, c, EPOLLIN | EPOLLRDHUP, added.serial)) {
    // Never polled, it would wait for a reply that never comes: refused with why.
    const std::string msg = error_reply("control socket: cannot watch the connection: " + errno_text()).dump() + "\n";
    spdlog::warn("control: epoll_ctl: {}; a client refused", errno_text());
    (void)!send(c, msg.data(), msg.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    s.conns.erase(c);
    close(c);
  }
}

// Every place taken, or no descriptor left: closes the client idle longest,
// if it has sent nothing for kIdleEvictNs and is owed nothing. False: none.
bool ControlServer::evict_idle(Serving& s) {
  const uint64_t now = monotonic_ns();
  int victim = -1;
  uint64_t oldest = now;
  for (const auto& [cfd, conn] : s.conns) {
    // Not one held by the replies budget (not read from: it may well have
    // sent), nor one with requests waiting unread in its socket.
    // Nor one owed a deferred reply.
    if (!conn.out.empty() || conn.eof || conn.paused_by_budget || conn.deferred || conn.active_ns >= oldest) continue;
    int unread = 0;
    if (ioctl(cfd, FIONREAD, &unread) == 0 && unread > 0) continue;
    oldest = conn.active_ns;
    victim = cfd;
  }
  if (victim < 0 || now - oldest < kIdleEvictNs) return false;
  if (s.evicted++ % 100 == 0)
    spdlog::warn("control: no client place left; one idle for {} s closed for a new one ({} since start)",
                 (now - oldest) / 1'000'000'000, s.evicted);
  close_client(s, victim);
  return true;
}

void ControlServer::close_client(Serving& s, int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  if (auto it = s.conns.find(fd); it != s.conns.end()) s.replies.drop(it->second);
  s.conns.erase(fd);
}

void ControlServer::read_client(Serving& s, int fd, const epoll_event& event) {
  auto it = s.conns.find(fd);
  // Closed earlier in this round (its descriptor maybe reused since).
  if (it == s.conns.end() || it->second.serial != epoll_key_serial(event.data.u64)) return;
  ControlConnection& c = it->second;
  bool alive = true;
  bool capped = false;  // stopped at kMaxPiecesPerWakeup with more to read
  // Hung up both ways: no reply can reach it, but the requests it sent
  // before closing are still taken (a script that sends and closes),
  // over as many rounds as the cap needs; their replies are dropped.
  // An error is a hang-up too: a peer that closes with replies unread
  // in its socket is reported as one (ECONNRESET), and recv still
  // returns what it sent before the error.
  const bool hung_up = (event.events & (EPOLLHUP | EPOLLERR)) != 0;
  // No reply can reach it: hung up, or it shut down its reading side
  // (a send failed, peer_gone) while it may go on sending requests,
  // which are taken until it closes.
  const bool mute = hung_up || c.peer_gone;
  if (mute) {
    s.replies.drop(c);
    c.waiting = false;
  }
  // A hung-up client's requests are taken even if it was held or
  // waiting (EPOLLIN not asked for): its replies are dropped, so they
  // cost no budget.
  if (((event.events & EPOLLIN) || hung_up) && !c.waiting && !c.deferred)
    alive = take_requests(s, fd, c, hung_up, mute, capped);
  if (alive && c.deferred && hung_up) {
    // Owed a deferred reply (nobody reads it now): out of the epoll set, or
    // its hang-up comes back every round, until the reply is in; then
    // what it sent after that request is taken (deliver_deferred).
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    c.unwatched = true;
    c.peer_gone = true;
    return;
  }
  // Hung up (or an error) with nothing left to take: done. Capped, the
  // rest is taken next round: epoll reports the hang-up again.
  if (hung_up && !capped && !c.deferred) alive = false;
  if (!alive || !s.replies.flush(fd, c)) close_client(s, fd);
}

bool ControlServer::take_requests(Serving& s, int fd, ControlConnection& c, bool hung_up, bool mute, bool& capped) {
  bool alive = true;
  char buf[16384];
  auto on_line = [&](std::string&& line) { answer(s, fd, c, line, !mute); };
  auto on_oversized = [&] {
    if (!mute) s.replies.append(c, error_reply("request longer than 64 KiB").dump() + "\n");
  };
  // Reading stops at this client's pause or at the budget of all (a
  // mute client's replies are dropped: neither applies); a client
  // owed nothing reads from the reserve past the budget, so one
  // request's reply at most (then it is owed that).
  // (Nor past a request whose reply is deferred: the next waits for it.)
  auto full = [&] {
    return c.deferred || c.out.size() >= kPauseReadingBytes ||
           (!mute && s.replies.unsent >= (s.replies.reserve_open(c) ? kReserveEnd : kRepliesBudgetBytes));
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
  auto turn_over = [&] { return pieces == kMaxPiecesPerWakeup || (pieces != 0 && monotonic_ns() >= turn_ends); };
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
  return alive;
}

// Handles one request; its reply is dropped when nobody can read it (a
// hung-up client), so such a client's requests are all taken whatever
// their replies' size.
void ControlServer::answer(Serving& s, int fd, ControlConnection& c, const std::string& line, bool keep_reply) {
  json reply;
  try {
    const CommandSpec* ran = nullptr;
    auto now = control_->handle_line_deferred(line, epoll_key(fd, c.serial), keep_reply, &ran);
    if (!now) {
      c.deferred = true;  // deliver_deferred brings the reply
      return;
    }
    reply = std::move(*now);
    if (ran != nullptr && std::string_view(ran->name) == "reload") log_reload(reply, "control socket");
  } catch (const std::exception& e) {
    // A handler bug must cost one request, not the gateway.
    reply = error_reply(std::string("internal error: ") + e.what());
    spdlog::error("control: request failed: {}", e.what());
  }
  if (keep_reply) add_reply(s, c, reply);
}

void ControlServer::deliver_deferred(Serving& s) {
  for (ControlPlane::DeferredReply& d : control_->take_deferred_replies(monotonic_ns())) {
    auto it = s.conns.find(epoll_key_fd(d.token));
    // Closed meanwhile (its descriptor maybe another client's since).
    if (it == s.conns.end() || it->second.serial != epoll_key_serial(d.token)) continue;
    ControlConnection& c = it->second;
    c.deferred = false;
    if (!c.peer_gone && !d.reply.is_null()) add_reply(s, c, d.reply);
    if (c.unwatched) {
      // Hung up meanwhile: watched again, its hang-up (and what it sent
      // before) is taken next round, and it is closed then.
      c.unwatched = false;
      if (!epoll_watch(epoll_fd_, EPOLL_CTL_ADD, it->first, EPOLLIN | EPOLLRDHUP, c.serial)) {
        close_client(s, it->first);
        continue;
      }
    }
    if (!s.replies.flush(it->first, c)) close_client(s, it->first);
  }
}

void ControlServer::add_reply(Serving& s, ControlConnection& c, const json& reply) {
  const size_t before = s.replies.unsent;
  s.replies.append(c, reply.dump(-1, ' ', false, json::error_handler_t::replace) + '\n');
  if (before < kRepliesBudgetBytes && s.replies.unsent >= kRepliesBudgetBytes) {
    // Just went over (not at every reply while over); at most once a minute.
    if (s.over_budget_log.admit(monotonic_ns())) {
      spdlog::warn(
          "control: {} MiB of replies unsent to clients; clients owed replies are not read until they drain ({} "
          "times since start)",
          s.replies.unsent >> 20, s.over_budget_log.total());
    }
  }
}

void ControlServer::look_again_at_paused(Serving& s) {
  ReplyBudget& replies = s.replies;
  // Clients paused for the budget or the reserve, looked at again: flush
  // re-arms a held one for its requests, which wake the next round,
  // level-triggered (as far as the reserve's room goes; those it does not
  // reach are held again); one waiting for its replies only because of the
  // budget goes back to its own 256 KiB rule.
  auto look_again = [&](std::vector<int>& list, bool ControlConnection::*listed) {
    std::vector<int> again;
    again.swap(list);
    for (int fd : again) {
      auto it = s.conns.find(fd);
      if (it == s.conns.end()) continue;  // closed
      it->second.*listed = false;
      if (!it->second.paused_by_budget) continue;  // no longer paused
      it->second.paused_by_budget = false;
      if (!replies.flush(fd, it->second)) close_client(s, fd);
    }
  };
  // Those held only for the reserve, once it has room again.
  if (!replies.reserve_paused.empty() && replies.unsent < kReserveEnd)
    look_again(replies.reserve_paused, &ControlConnection::listed_for_reserve);
  // Under the budget, or in a new episode (the budget drained and was
  // spent again within this round): the clients held for the budget, which
  // the reserve may now serve.
  if (replies.budget_paused.empty()) {
    replies.episode_unseen = false;
  } else if (replies.unsent < kRepliesBudgetBytes || (replies.episode_unseen && replies.unsent < kReserveEnd)) {
    replies.episode_unseen = false;
    look_again(replies.budget_paused, &ControlConnection::listed_for_budget);
  }
}

}  // namespace psgate
