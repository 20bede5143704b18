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
//
// With several PS hosts (--ps A,B,..) a worker has one connection per host
// (a shard): it pushes each host its share of M, and its iteration ends when
// the last shard's pull has arrived; only then does it compute again. A
// worker's connections form a Group, which owns the compute timer.
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

enum class St { kConnecting, kHello, kReady, kComputing, kPushing, kWaitPull, kWaitShards, kDone };

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
    case St::kWaitShards:
      return "pulled; waiting for the other shards' pulls";
    case St::kDone:
      return "done";
  }
  return "?";
}

struct Conn {
  Conn(unsigned j, unsigned w, unsigned s, std::string l, uint64_t b, bool verify)
      : job(j), worker(w), shard(s), bytes(b), local(std::move(l)), reader(b, verify) {}
  unsigned job, worker, shard;
  uint64_t bytes;  // this shard's push and pull size
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

// One worker of one job: its connections (one per shard, consecutive in
// conns_), the iteration they are in, and how many shards have pulled it.
struct Group {
  size_t first = 0;  // index of shard 0's connection
  unsigned iter = 0;
  unsigned pulled = 0;
  bool computing = false;
};

// Timer tags: a connection's index, or a group's index with this bit.
constexpr uint64_t kGroupTag = 1ull << 40;

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
  void on_group_timer(size_t g);
  void begin_iteration(size_t g);
  void push(size_t i);
  std::string who(const Conn& c) const;
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
  unsigned shards_ = 1;
  std::vector<Pattern> patterns_;  // per shard
  Loop loop_;
  std::vector<Conn> conns_;
  std::vector<Group> groups_;  // [job * workers + worker]
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

std::string Workers::who(const Conn& c) const {
  std::string s = "job " + std::to_string(c.job) + " worker " + std::to_string(c.worker);
  if (shards_ > 1) s += " shard " + std::to_string(c.shard) + " (" + o_.ps_addrs[c.shard] + ")";
  return s;
}

void Workers::watch(size_t i, bool want_write) {
  Conn& c = conns_[i];
  const int rc = loop_.mod(c.fd, EPOLLIN | EPOLLRDHUP | (want_write ? EPOLLOUT : 0u), i);
  if (rc < 0) fail("epoll_ctl: " + errno_text(rc));
}

void Workers::start_connect(size_t i) {
  Conn& c = conns_[i];
  ++c.connect_attempts;
  const int fd = tcp_connect_start(c.local, o_.ps_addrs[c.shard], p_.base_port + c.job);
  if (fd < 0) {
    c.last_connect_error = errno_text(fd);
    if (fd == -EADDRNOTAVAIL || fd == -EINVAL) {
      fail(who(c) + ": cannot use local address '" + c.local + "': " + c.last_connect_error);
      return;
    }
    if (now_ >= connect_deadline_) {
      fail(who(c) + ": cannot connect to " + o_.ps_addrs[c.shard] + ": " + c.last_connect_error);
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
      fail(who(c) + ": cannot connect to " + o_.ps_addrs[c.shard] + ":" + std::to_string(p_.base_port + c.job) +
           " after " + std::to_string(c.connect_attempts) + " attempts: " + c.last_connect_error);
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
  h.checksum = c.bytes;
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
      for (size_t g = 0; g < groups_.size(); ++g) loop_.at(job_start_[conns_[groups_[g].first].job], kGroupTag | g);
    }
  } else if (c.st == St::kPushing) {
    c.its[c.iter].push_sent = now_;
    c.st = St::kWaitPull;
  }
}

// A worker computes once per iteration, then pushes every shard.
void Workers::begin_iteration(size_t g) {
  Group& gr = groups_[g];
  gr.pulled = 0;
  gr.computing = true;
  for (unsigned s = 0; s < shards_; ++s) {
    Conn& c = conns_[gr.first + s];
    c.its[c.iter].compute_start = now_;
    c.st = St::kComputing;
  }
  if (o_.compute_ms <= 0) {
    on_group_timer(g);
    return;
  }
  loop_.at(now_ + static_cast<int64_t>(o_.compute_ms * 1e6), kGroupTag | g);
}

void Workers::on_group_timer(size_t g) {
  Group& gr = groups_[g];
  last_progress_ = now_;
  if (conns_[gr.first].st == St::kReady) {  // the job's start
    begin_iteration(g);
    return;
  }
  if (!gr.computing) return;  // a stale timer
  gr.computing = false;
  for (unsigned s = 0; s < shards_ && error_.empty(); ++s) push(gr.first + s);
}

void Workers::push(size_t i) {
  Conn& c = conns_[i];
  c.its[c.iter].push_start = now_;
  Header h;
  h.type = MsgType::kPush;
  h.job = c.job;
  h.worker = c.worker;
  h.iter = c.iter;
  h.length = c.bytes;
  h.checksum = patterns_[c.shard].checksum;
  c.writer.start(h, patterns_[c.shard].data.data());
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
  else if (h.length != c.bytes)
    why = "pull of " + std::to_string(h.length) + " bytes, expected " + std::to_string(c.bytes);
  if (why.empty()) return true;
  fail(who(c) + " iteration " + std::to_string(c.iter) + ": protocol error: " + why);
  return false;
}

void Workers::pull_done(Conn& c, bool checksum_ok) {
  if (!checksum_ok) {
    ++c.checksum_errors;
    fail(who(c) + " iteration " + std::to_string(c.iter) + ": pull payload checksum mismatch");
    return;
  }
  c.its[c.iter].pull_done = now_;
  if (++c.iter < p_.iters) {
    c.st = St::kWaitShards;
  } else {
    c.st = St::kDone;
    c.done_at = now_;
    loop_.del(c.fd);
    close(c.fd);
    c.fd = -1;
    ++done_;
  }
  // The worker's iteration ends with its last shard's pull.
  const size_t g = static_cast<size_t>(c.job) * p_.workers + c.worker;
  Group& gr = groups_[g];
  if (++gr.pulled < shards_) return;
  if (++pulled_[c.job][gr.iter] == p_.workers) job_iteration_done(c.job, gr.iter + 1);
  if (++gr.iter < p_.iters) begin_iteration(g);
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
      fail(who(c) + ": receive failed in iteration " + std::to_string(c.iter) + ": " + std::strerror(errno));
      return;
    }
    if (n == 0) {
      fail(who(c) + ": the PS closed the connection in iteration " + std::to_string(c.iter) + " (" + st_name(c.st) +
           ")");
      return;
    }
    last_progress_ = now_;
    c.bytes_received += static_cast<uint64_t>(n);
    if (!c.reader.feed(rxbuf_.data(), static_cast<size_t>(n), sink)) {
      fail(who(c) + ": bad stream from the PS: " + c.reader.error());
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
    s += "\n  " + who(c) + ": " + st_name(c.st) + ", iteration " + std::to_string(c.iter) + "/" +
         std::to_string(p_.iters) + ", sent " + std::to_string(c.bytes_sent) + " B, received " +
         std::to_string(c.bytes_received) + " B";
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
  shards_ = static_cast<unsigned>(o_.ps_addrs.size());
  for (unsigned s = 0; s < shards_; ++s)
    patterns_.push_back(make_pattern(shard_bytes(p_.bytes, shards_, s), 0x5053454D55ull));  // "PSEMU"
  job_start_.assign(p_.jobs, 0);
  pulled_.assign(p_.jobs, std::vector<unsigned>(p_.iters, 0));
  conns_.reserve(static_cast<size_t>(p_.jobs) * p_.workers * shards_);
  for (unsigned j = 0; j < p_.jobs; ++j) {
    for (unsigned w = 0; w < p_.workers; ++w) {
      groups_.push_back(Group{conns_.size()});
      for (unsigned s = 0; s < shards_; ++s) {
        const auto& addrs =
            o_.local_addrs.empty() ? std::vector<std::string>{} : o_.local_addrs[o_.local_addrs.size() == 1 ? 0 : s];
        const std::string local = addrs.empty() ? "" : addrs[w % addrs.size()];
        conns_.emplace_back(j, w, s, local, shard_bytes(p_.bytes, shards_, s), p_.verify);
        conns_.back().its.resize(p_.iters);
      }
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
      if (tag & kGroupTag) on_group_timer(static_cast<size_t>(tag & ~kGroupTag));
      else on_timer(static_cast<size_t>(tag));
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
  out["params"] = {
      {"jobs", p_.jobs},           {"workers", p_.workers},       {"bytes", p_.bytes},           {"iters", p_.iters},
      {"base_port", p_.base_port}, {"compute_ms", o_.compute_ms}, {"stagger_ms", o_.stagger_ms}, {"verify", p_.verify}};
  // One PS host: the single-host report, unchanged. Several: every address.
  if (shards_ == 1) {
    out["params"]["ps_addr"] = o_.ps_addrs[0];
    out["params"]["local_addrs"] = o_.local_addrs.empty() ? json::array() : json(o_.local_addrs[0]);
  } else {
    out["params"]["ps_addrs"] = o_.ps_addrs;
    out["params"]["local_addrs"] = o_.local_addrs;
  }
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
    auto iterations = [](const Conn& c) {
      json its = json::array();
      for (const IterTimes& t : c.its) {
        its.push_back(
            {to_us(t.compute_start), to_us(t.push_start), to_us(t.push_sent), to_us(t.pull_first), to_us(t.pull_done)});
      }
      return its;
    };
    for (unsigned w = 0; w < p_.workers; ++w) {
      const Group& gr = groups_[static_cast<size_t>(j) * p_.workers + w];
      bool w_complete = true;
      uint64_t w_sent = 0, w_received = 0, w_messages = 0, w_errors = 0, w_attempts = 0;
      json shards = json::array();
      for (unsigned s = 0; s < shards_; ++s) {
        const Conn& c = conns_[gr.first + s];
        w_complete = w_complete && c.st == St::kDone;
        end = std::max(end, c.done_at);
        w_sent += c.bytes_sent;
        w_received += c.bytes_received;
        w_messages += c.reader.messages();
        w_errors += c.checksum_errors;
        w_attempts += c.connect_attempts;
        if (shards_ > 1) {
          shards.push_back({{"shard", s},
                            {"ps_addr", o_.ps_addrs[s]},
                            {"local_addr", c.local},
                            {"bytes", c.bytes},
                            {"complete", c.st == St::kDone},
                            {"bytes_sent", c.bytes_sent},
                            {"bytes_received", c.bytes_received},
                            {"iterations", iterations(c)}});
        }
      }
      complete = complete && w_complete;
      sent += w_sent;
      received += w_received;
      // Several shards: the worker's iteration runs from its compute start to
      // its last shard's pull (the per-shard times are under "shards").
      json its = iterations(conns_[gr.first]);
      for (unsigned s = 1; s < shards_; ++s) {
        const Conn& c = conns_[gr.first + s];
        for (unsigned i = 0; i < p_.iters; ++i) {
          const IterTimes& t = c.its[i];
          its[i][1] = std::min(its[i][1].get<int64_t>(), to_us(t.push_start));
          its[i][2] = std::max(its[i][2].get<int64_t>(), to_us(t.push_sent));
          its[i][3] = std::min(its[i][3].get<int64_t>(), to_us(t.pull_first));
          its[i][4] = std::max(its[i][4].get<int64_t>(), to_us(t.pull_done));
        }
      }
      json entry = {{"worker", w},
                    {"local_addr", conns_[gr.first].local},
                    {"complete", w_complete},
                    {"iterations_done", gr.iter},
                    {"bytes_sent", w_sent},
                    {"bytes_received", w_received},
                    {"pull_messages", w_messages},
                    {"checksum_errors", w_errors},
                    {"connect_attempts", w_attempts},
                    {"iterations", its}};
      if (shards_ > 1) entry["shards"] = shards;
      workers.push_back(entry);
    }
    job["complete"] = complete;
    job["end_us"] = complete ? to_us(end) : 0;
    job["jct_ms"] = complete ? static_cast<double>(end - job_start_[j]) / 1e6 : 0.0;
    job["bytes_sent"] = sent;
    job["bytes_received"] = received;
    // What a complete job must have moved: per shard a hello, then K pushes
    // up and K pulls down; the shards' payloads add up to M.
    job["expected_bytes_sent"] = p_.workers * (shards_ * kHeaderSize + p_.iters * (shards_ * kHeaderSize + p_.bytes));
    job["expected_bytes_received"] = p_.workers * (p_.iters * (shards_ * kHeaderSize + p_.bytes));
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
