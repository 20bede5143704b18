// SPDX-License-Identifier: BSD-3-Clause
// psemu worker role: every worker of every job, one TCP connection each, driven
// by one epoll loop (a thread per worker would cost 2 cores' worth of wakeups).
//
// Per worker and iteration:
//
//   compute C ms ──▶ push M bytes ──▶ wait ──▶ pull M bytes ──▶ next iteration
//   (timer)          (writev)         (the PS's barrier)  (read + checksum)
//
// The job's JCT runs from its scheduled start to the end of its last pull.
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include "protocol.h"
#include "runtime.h"

namespace psemu {

namespace {

struct IterTimes {  // ns, CLOCK_MONOTONIC; 0 = not reached
  int64_t compute_start = 0, push_start = 0, push_sent = 0, pull_first = 0, pull_done = 0;
};

enum class St { kConnecting, kHello, kReady, kComputing, kPushing, kWaitPull, kDone };

const char* st_name(St s) {
  switch (s) {
    case St::kConnecting:
      return "connecting";
    case St::kHello:
      return "sending hello";
    case St::kReady:
      return "waiting for the start";
    case St::kComputing:
      return "computing";
    case St::kPushing:
      return "pushing";
    case St::kWaitPull:
      return "waiting for / receiving the pull";
    case St::kDone:
      return "done";
  }
  return "?";
}

struct Conn {
  Conn(unsigned j, unsigned w, std::string l, uint64_t max_payload, bool verify)
      : job(j), worker(w), local(std::move(l)), reader(max_payload, verify) {}
  unsigned job, worker;
  std::string local;
  int fd = -1;
  St st = St::kConnecting;
  unsigned iter = 0;
  unsigned connect_attempts = 0;
  std::string last_connect_error;
  MessageReader reader;
  MessageWriter writer;
  std::vector<IterTimes> its;
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t checksum_errors = 0;
  int64_t done_at = 0;
};

class Workers {
 public:
  explicit Workers(const WorkerOptions& o) : o_(o), p_(o.p) {}
  int run();

 private:
  struct Sink {  // MessageReader callbacks for one connection
    Workers& w;
    Conn& c;
    void on_start() {
      if (c.st == St::kWaitPull && c.its[c.iter].pull_first == 0) c.its[c.iter].pull_first = w.now_;
    }
    bool on_header(const Header& h) { return w.check_pull(c, h); }
    void on_message(const Header&, bool checksum_ok) { w.pull_done(c, checksum_ok); }
  };

  void fail(std::string why, int code = kExitFailed) {
    if (error_.empty()) {
      error_ = std::move(why);
      exit_code_ = code;
    }
  }
  void start_connect(size_t i);
  void on_connected(size_t i);
  void on_timer(size_t i);
  void begin_iteration(size_t i);
  void push(size_t i);
  void pump_send(size_t i);
  void on_readable(size_t i);
  bool check_pull(Conn& c, const Header& h);
  void pull_done(Conn& c, bool checksum_ok);
  void watch(size_t i, bool want_write);
  void job_iteration_done(unsigned job, unsigned iters_done);
  void reap_progress(bool block);
  std::string stuck_report() const;
  std::string report() const;

  const WorkerOptions& o_;
  const Params& p_;
  Pattern pattern_;
  Loop loop_;
  std::vector<Conn> conns_;
  std::vector<int64_t> job_start_;
  std::vector<std::vector<unsigned>> pulled_;  // [job][iter]: workers done with that pull
  std::vector<pid_t> progress_children_;
  uint64_t progress_runs_ = 0, progress_failures_ = 0;
  int64_t now_ = 0;
  int64_t started_ = 0;
  int64_t connect_deadline_ = 0;
  int64_t last_progress_ = 0;
  size_t ready_ = 0, done_ = 0;
  std::string error_;
  int exit_code_ = kExitOk;
  std::vector<uint8_t> rxbuf_ = std::vector<uint8_t>(256 * 1024);
};

void Workers::watch(size_t i, bool want_write) {
  Conn& c = conns_[i];
  const int rc = loop_.mod(c.fd, EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0u), i);
  if (rc < 0) fail("epoll_ctl: " + errno_text(rc));
}

void Workers::start_connect(size_t i) {
  Conn& c = conns_[i];
  ++c.connect_attempts;
  const int fd = tcp_connect_start(c.local, o_.ps_addr, p_.base_port + c.job);
  if (fd < 0) {
    c.last_connect_error = errno_text(fd);
    if (fd == -EADDRNOTAVAIL || fd == -EINVAL) {
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": cannot use local address '" +
           c.local + "': " + c.last_connect_error);
      return;
    }
    if (now_ >= connect_deadline_) {
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": cannot connect to " +
           o_.ps_addr + ": " + c.last_connect_error);
      return;
    }
    loop_.at(now_ + 100'000'000, i);  // retry in 100 ms
    return;
  }
  c.fd = fd;
  if (const int rc = loop_.add(fd, EPOLLOUT, i); rc < 0) fail("epoll_ctl: " + errno_text(rc));
}

void Workers::on_connected(size_t i) {
  Conn& c = conns_[i];
  const int err = socket_error(c.fd);
  if (err != 0) {
    // Refused (PS not listening yet) or unreachable (gateway still starting):
    // retry until the connect deadline.
    c.last_connect_error = errno_text(err);
    loop_.del(c.fd);
    close(c.fd);
    c.fd = -1;
    if (now_ >= connect_deadline_) {
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": cannot connect to " +
           o_.ps_addr + ":" + std::to_string(p_.base_port + c.job) + " after " + std::to_string(c.connect_attempts) +
           " attempts: " + c.last_connect_error);
      return;
    }
    loop_.at(now_ + 100'000'000, i);
    return;
  }
  // Hello: job, worker, K in `iter` and M in `checksum`, so a PS started with
  // other parameters refuses the connection instead of hanging at a barrier.
  Header h;
  h.type = MsgType::kHello;
  h.job = c.job;
  h.worker = c.worker;
  h.iter = p_.iters;
  h.length = 0;
  h.checksum = p_.bytes;
  c.writer.start(h, nullptr);
  c.st = St::kHello;
  pump_send(i);
}

void Workers::pump_send(size_t i) {
  Conn& c = conns_[i];
  const long n = c.writer.send_some(c.fd);
  if (n < 0) {
    fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": send failed in iteration " +
         std::to_string(c.iter) + ": " + errno_text(static_cast<int>(n)));
    return;
  }
  if (n > 0) last_progress_ = now_;
  c.bytes_sent += static_cast<uint64_t>(n);
  if (c.writer.active()) {
    watch(i, true);
    return;
  }
  watch(i, false);
  if (c.st == St::kHello) {
    c.st = St::kReady;
    if (++ready_ == conns_.size()) {
      // Everyone is connected: schedule every job's start.
      const int64_t t0 = now_ + static_cast<int64_t>(o_.start_delay_ms * 1e6);
      for (unsigned j = 0; j < p_.jobs; ++j) job_start_[j] = t0 + static_cast<int64_t>(j * o_.stagger_ms * 1e6);
      for (size_t k = 0; k < conns_.size(); ++k) loop_.at(job_start_[conns_[k].job], k);
    }
  } else if (c.st == St::kPushing) {
    c.its[c.iter].push_sent = now_;
    c.st = St::kWaitPull;
  }
}

void Workers::begin_iteration(size_t i) {
  Conn& c = conns_[i];
  c.its[c.iter].compute_start = now_;
  c.st = St::kComputing;
  if (o_.compute_ms <= 0) {
    push(i);
    return;
  }
  loop_.at(now_ + static_cast<int64_t>(o_.compute_ms * 1e6), i);
}

void Workers::push(size_t i) {
  Conn& c = conns_[i];
  c.its[c.iter].push_start = now_;
  Header h;
  h.type = MsgType::kPush;
  h.job = c.job;
  h.worker = c.worker;
  h.iter = c.iter;
  h.length = p_.bytes;
  h.checksum = pattern_.checksum;
  c.writer.start(h, pattern_.data.data());
  c.st = St::kPushing;
  pump_send(i);
}

void Workers::on_timer(size_t i) {
  Conn& c = conns_[i];
  last_progress_ = now_;
  switch (c.st) {
    case St::kConnecting:
      start_connect(i);
      break;
    case St::kReady:
      begin_iteration(i);
      break;
    case St::kComputing:
      push(i);
      break;
    default:
      break;  // a stale timer
  }
}

bool Workers::check_pull(Conn& c, const Header& h) {
  std::string why;
  if (c.st != St::kWaitPull) why = std::string("a message arrived while ") + st_name(c.st);
  else if (h.type != MsgType::kPull) why = std::string("expected a pull, got a ") + msg_type_name(h.type);
  else if (h.job != c.job || h.worker != c.worker)
    why = "pull addressed to job " + std::to_string(h.job) + " worker " + std::to_string(h.worker);
  else if (h.iter != c.iter) why = "pull for iteration " + std::to_string(h.iter);
  else if (h.length != p_.bytes)
    why = "pull of " + std::to_string(h.length) + " bytes, expected " + std::to_string(p_.bytes);
  if (why.empty()) return true;
  fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + " iteration " + std::to_string(c.iter) +
       ": protocol error: " + why);
  return false;
}

void Workers::pull_done(Conn& c, bool checksum_ok) {
  if (!checksum_ok) {
    ++c.checksum_errors;
    fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + " iteration " +
         std::to_string(c.iter) + ": pull payload checksum mismatch");
    return;
  }
  c.its[c.iter].pull_done = now_;
  if (++pulled_[c.job][c.iter] == p_.workers) job_iteration_done(c.job, c.iter + 1);
  if (++c.iter < p_.iters) {
    begin_iteration(static_cast<size_t>(&c - conns_.data()));
    return;
  }
  c.st = St::kDone;
  c.done_at = now_;
  loop_.del(c.fd);
  close(c.fd);
  c.fd = -1;
  ++done_;
}

void Workers::on_readable(size_t i) {
  Conn& c = conns_[i];
  Sink sink{*this, c};
  // A few reads per wakeup, then let the other connections have their turn.
  for (int reads = 0; reads < 4 && c.fd >= 0 && error_.empty(); ++reads) {
    const ssize_t n = recv(c.fd, rxbuf_.data(), rxbuf_.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": receive failed in iteration " +
           std::to_string(c.iter) + ": " + std::strerror(errno));
      return;
    }
    if (n == 0) {
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) +
           ": the PS closed the connection in iteration " + std::to_string(c.iter) + " (" + st_name(c.st) + ")");
      return;
    }
    last_progress_ = now_;
    c.bytes_received += static_cast<uint64_t>(n);
    if (!c.reader.feed(rxbuf_.data(), static_cast<size_t>(n), sink)) {
      fail("job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) +
           ": bad stream from the PS: " + c.reader.error());
      return;
    }
  }
}

void Workers::job_iteration_done(unsigned job, unsigned iters_done) {
  if (o_.progress_cmd.empty()) return;
  std::string cmd = o_.progress_cmd;
  char fraction[32];
  std::snprintf(fraction, sizeof fraction, "%.4f", static_cast<double>(iters_done) / p_.iters);
  const std::pair<const char*, std::string> vars[] = {{"{job}", std::to_string(job)},
                                                      {"{id}", std::to_string(job + 1)},
                                                      {"{iters}", std::to_string(p_.iters)},
                                                      {"{iter}", std::to_string(iters_done)},
                                                      {"{fraction}", fraction}};
  for (const auto& [key, value] : vars) {
    for (size_t pos = cmd.find(key); pos != std::string::npos; pos = cmd.find(key, pos + value.size()))
      cmd.replace(pos, std::strlen(key), value);
  }
  const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  ++progress_runs_;
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0) {
    ++progress_failures_;
    return;
  }
  progress_children_.push_back(pid);
}

void Workers::reap_progress(bool block) {
  for (size_t k = 0; k < progress_children_.size();) {
    int status = 0;
    const pid_t r = waitpid(progress_children_[k], &status, block ? 0 : WNOHANG);
    if (r == 0) {
      ++k;
      continue;
    }
    if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++progress_failures_;
    progress_children_[k] = progress_children_.back();
    progress_children_.pop_back();
  }
}

std::string Workers::stuck_report() const {
  std::string s;
  for (const Conn& c : conns_) {
    if (c.st == St::kDone) continue;
    s += "\n  job " + std::to_string(c.job) + " worker " + std::to_string(c.worker) + ": " + st_name(c.st) +
         ", iteration " + std::to_string(c.iter) + "/" + std::to_string(p_.iters) + ", sent " +
         std::to_string(c.bytes_sent) + " B, received " + std::to_string(c.bytes_received) + " B";
    if (c.st == St::kConnecting && !c.last_connect_error.empty()) s += ", last connect error: " + c.last_connect_error;
  }
  return s;
}

int Workers::run() {
  started_ = now_ = now_ns();
  last_progress_ = now_;
  const RunLimits limits(p_, started_);
  connect_deadline_ = started_ + static_cast<int64_t>(o_.connect_timeout_s * 1e9);
  if (!loop_.ok()) fail("epoll_create: " + std::string(std::strerror(errno)));
  pattern_ = make_pattern(p_.bytes, 0x5053454D55ull);  // "PSEMU"
  job_start_.assign(p_.jobs, 0);
  pulled_.assign(p_.jobs, std::vector<unsigned>(p_.iters, 0));
  conns_.reserve(static_cast<size_t>(p_.jobs) * p_.workers);
  for (unsigned j = 0; j < p_.jobs; ++j) {
    for (unsigned w = 0; w < p_.workers; ++w) {
      const std::string local = o_.local_addrs.empty() ? "" : o_.local_addrs[w % o_.local_addrs.size()];
      conns_.emplace_back(j, w, local, p_.bytes, p_.verify);
      conns_.back().its.resize(p_.iters);
    }
  }
  for (size_t i = 0; i < conns_.size() && error_.empty(); ++i) start_connect(i);

  std::vector<epoll_event> events;
  std::vector<uint64_t> fired;
  while (error_.empty() && done_ < conns_.size()) {
    const int rc = loop_.wait(limits.wake_at(last_progress_), events, fired);
    now_ = now_ns();
    if (rc < 0) {
      fail("epoll_wait: " + errno_text(rc));
      break;
    }
    for (const epoll_event& ev : events) {
      const size_t i = ev.data.u64;
      Conn& c = conns_[i];
      if (c.fd < 0 || !error_.empty()) continue;
      if (c.st == St::kConnecting) {
        on_connected(i);
        continue;
      }
      if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(i);
      if (c.fd >= 0 && error_.empty() && (ev.events & EPOLLOUT) && c.writer.active()) pump_send(i);
    }
    for (uint64_t tag : fired) {
      if (!error_.empty()) break;
      on_timer(static_cast<size_t>(tag));
    }
    reap_progress(false);
    if (!error_.empty()) break;
    if (const std::string why = limits.reached(now_, last_progress_); !why.empty()) {
      fail(why + "; unfinished:" + stuck_report(), kExitTimeout);
    }
  }
  for (Conn& c : conns_) {
    if (c.fd >= 0) close(c.fd);
    c.fd = -1;
  }
  reap_progress(true);  // the commands are short (a control-socket request); the caller bounds the run
  return finish_run("worker", error_, p_.out, report(), exit_code_);
}

std::string Workers::report() const {
  using nlohmann::json;
  json out;
  out["role"] = "worker";
  out["ok"] = error_.empty();
  out["error"] = error_;
  out["clock"] = "CLOCK_MONOTONIC, microseconds";
  out["params"] = {{"jobs", p_.jobs},
                   {"workers", p_.workers},
                   {"bytes", p_.bytes},
                   {"iters", p_.iters},
                   {"base_port", p_.base_port},
                   {"compute_ms", o_.compute_ms},
                   {"stagger_ms", o_.stagger_ms},
                   {"ps_addr", o_.ps_addr},
                   {"verify", p_.verify},
                   {"local_addrs", o_.local_addrs}};
  out["started_us"] = to_us(started_);
  out["progress_cmd"] = o_.progress_cmd;
  out["progress_cmd_runs"] = progress_runs_;
  out["progress_cmd_failures"] = progress_failures_;
  out["jobs"] = json::array();
  for (unsigned j = 0; j < p_.jobs; ++j) {
    json job;
    job["job"] = j;
    job["port"] = p_.base_port + j;
    job["start_us"] = to_us(job_start_[j]);
    int64_t end = 0;
    bool complete = true;
    uint64_t sent = 0, received = 0;
    json workers = json::array();
    for (const Conn& c : conns_) {
      if (c.job != j) continue;
      complete = complete && c.st == St::kDone;
      end = std::max(end, c.done_at);
      sent += c.bytes_sent;
      received += c.bytes_received;
      json its = json::array();
      for (const IterTimes& t : c.its) {
        its.push_back(
            {to_us(t.compute_start), to_us(t.push_start), to_us(t.push_sent), to_us(t.pull_first), to_us(t.pull_done)});
      }
      workers.push_back({{"worker", c.worker},
                         {"local_addr", c.local},
                         {"complete", c.st == St::kDone},
                         {"iterations_done", c.iter},
                         {"bytes_sent", c.bytes_sent},
                         {"bytes_received", c.bytes_received},
                         {"pull_messages", c.reader.messages()},
                         {"checksum_errors", c.checksum_errors},
                         {"connect_attempts", c.connect_attempts},
                         {"iterations", its}});
    }
    job["complete"] = complete;
    job["end_us"] = complete ? to_us(end) : 0;
    job["jct_ms"] = complete ? static_cast<double>(end - job_start_[j]) / 1e6 : 0.0;
    job["bytes_sent"] = sent;
    job["bytes_received"] = received;
    // What a complete job must have moved: a hello, then K pushes up and K pulls down.
    job["expected_bytes_sent"] = p_.workers * (kHeaderSize + p_.iters * (kHeaderSize + p_.bytes));
    job["expected_bytes_received"] = p_.workers * (p_.iters * (kHeaderSize + p_.bytes));
    job["iteration_fields"] = {"compute_start_us", "push_start_us", "push_sent_us", "pull_first_us", "pull_done_us"};
    job["workers"] = workers;
    out["jobs"].push_back(job);
  }
  return out.dump(1) + "\n";
}

}  // namespace

int run_workers(const WorkerOptions& o) {
  Workers w(o);
  return w.run();
}

}  // namespace psemu
