// SPDX-License-Identifier: BSD-3-Clause
// psemu PS role: the parameter servers of every job, one listening port per
// job (base_port + job), one epoll loop.
//
// Per job and iteration:
//
//   pushes arrive from W workers ──▶ barrier (the last one) ──▶ pull M bytes to all W
//   (arrive_first .. arrive_done)     barrier_us                (pull_start .. pull_sent)
//
// Every push must carry the job's current iteration, once per worker; anything
// else is a protocol error that ends the run with a message naming the job,
// worker and iteration.
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "protocol.h"
#include "runtime.h"

namespace psemu {

namespace {

struct WorkerTimes {  // ns, CLOCK_MONOTONIC; 0 = not reached
  int64_t arrive_first = 0, arrive_done = 0, pull_start = 0, pull_sent = 0;
};

struct Iteration {
  int64_t barrier = 0;
  std::vector<WorkerTimes> w;
};

struct Job {
  unsigned id = 0;
  int listen_fd = -1;
  std::vector<int> conn_of;  // worker -> connection index, -1 before its hello
  unsigned iter = 0;         // the barrier being collected
  unsigned arrived = 0;
  unsigned closed = 0;  // connections ended after the last pull
  std::vector<Iteration> its;
  uint64_t bytes_received = 0, bytes_sent = 0;
  uint64_t push_messages = 0, checksum_errors = 0;
  int64_t done_at = 0;
  bool complete() const { return closed == conn_of.size(); }
};

struct Conn {
  Conn(unsigned j, int f, uint64_t max_payload, bool verify) : job(j), fd(f), reader(max_payload, verify) {}
  unsigned job;
  int fd;
  int worker = -1;  // known after the hello
  MessageReader reader;
  MessageWriter writer;
  unsigned pull_iter = 0;
  bool finished = false;  // EOF after the last pull
  uint64_t bytes_received = 0, bytes_sent = 0;
};

// Tags: listeners are tagged kListenTag + job, connections by their index.
constexpr uint64_t kListenTag = 1ull << 40;

class Servers {
 public:
  explicit Servers(const PsOptions& o) : o_(o), p_(o.p) {}
  int run();

 private:
  struct Sink {
    Servers& s;
    Conn& c;
    void on_start() {
      if (c.worker < 0) return;
      Job& job = s.jobs_[c.job];
      if (job.iter < job.its.size()) {
        WorkerTimes& t = job.its[job.iter].w[static_cast<size_t>(c.worker)];
        if (t.arrive_first == 0) t.arrive_first = s.now_;
      }
    }
    bool on_header(const Header& h) { return s.check_message(c, h); }
    void on_message(const Header& h, bool ok) { s.message_done(c, h, ok); }
  };

  void fail(std::string why, int code = kExitFailed) {
    if (error_.empty()) {
      error_ = std::move(why);
      exit_code_ = code;
    }
  }
  std::string who(const Conn& c) const {
    return "job " + std::to_string(c.job) + (c.worker >= 0 ? " worker " + std::to_string(c.worker) : " (before hello)");
  }
  void accept_all(unsigned job);
  void on_readable(size_t i);
  void pump_send(size_t i);
  bool check_message(Conn& c, const Header& h);
  void message_done(Conn& c, const Header& h, bool checksum_ok);
  void barrier(Job& job);
  std::string stuck_report() const;
  std::string report() const;

  const PsOptions& o_;
  const Params& p_;
  Pattern pattern_;
  Loop loop_;
  std::vector<Job> jobs_;
  std::vector<std::unique_ptr<Conn>> conns_;
  size_t jobs_done_ = 0;
  int64_t now_ = 0, started_ = 0, last_progress_ = 0;
  std::string error_;
  int exit_code_ = kExitOk;
  std::vector<uint8_t> rxbuf_ = std::vector<uint8_t>(256 * 1024);
};

void Servers::accept_all(unsigned j) {
  for (;;) {
    const int fd = tcp_accept(jobs_[j].listen_fd);
    if (fd < 0) {
      if (fd != -EAGAIN && fd != -EWOULDBLOCK)
        fail("accept on port " + std::to_string(p_.base_port + j) + ": " + errno_text(fd));
      return;
    }
    conns_.push_back(std::make_unique<Conn>(j, fd, p_.bytes, p_.verify));
    if (const int rc = loop_.add(fd, EPOLLIN | EPOLLRDHUP, conns_.size() - 1); rc < 0)
      fail("epoll_ctl: " + errno_text(rc));
    last_progress_ = now_;
  }
}

bool Servers::check_message(Conn& c, const Header& h) {
  Job& job = jobs_[c.job];
  std::string why;
  if (c.worker < 0) {
    if (h.type != MsgType::kHello) why = std::string("expected a hello, got a ") + msg_type_name(h.type);
    else if (h.job != c.job)
      why = "hello for job " + std::to_string(h.job) + " on job " + std::to_string(c.job) + "'s port";
    else if (h.worker >= p_.workers)
      why = "hello from worker " + std::to_string(h.worker) + ", the PS expects " + std::to_string(p_.workers) +
            " per job";
    else if (job.conn_of[h.worker] >= 0) why = "second connection from worker " + std::to_string(h.worker);
    else if (h.iter != p_.iters || h.checksum != p_.bytes)
      why = "worker runs K=" + std::to_string(h.iter) + " M=" + std::to_string(h.checksum) +
            ", the PS K=" + std::to_string(p_.iters) + " M=" + std::to_string(p_.bytes);
    else if (h.length != 0) why = "hello with a payload";
  } else if (h.type != MsgType::kPush) {
    why = std::string("expected a push, got a ") + msg_type_name(h.type);
  } else if (h.job != c.job || h.worker != static_cast<unsigned>(c.worker)) {
    why = "push labelled job " + std::to_string(h.job) + " worker " + std::to_string(h.worker);
  } else if (h.iter != job.iter || job.iter >= p_.iters) {
    why = "push for iteration " + std::to_string(h.iter) + " while the barrier is at " + std::to_string(job.iter);
  } else if (job.its[job.iter].w[h.worker].arrive_done != 0) {
    why = "second push in iteration " + std::to_string(h.iter);
  } else if (h.length != p_.bytes) {
    why = "push of " + std::to_string(h.length) + " bytes, expected " + std::to_string(p_.bytes);
  }
  if (why.empty()) return true;
  fail(who(c) + ": protocol error: " + why);
  return false;
}

void Servers::message_done(Conn& c, const Header& h, bool checksum_ok) {
  Job& job = jobs_[c.job];
  if (h.type == MsgType::kHello) {
    c.worker = static_cast<int>(h.worker);
    job.conn_of[h.worker] = static_cast<int>(
        std::find_if(conns_.begin(), conns_.end(), [&](const auto& p) { return p.get() == &c; }) - conns_.begin());
    return;
  }
  if (!checksum_ok) {
    ++job.checksum_errors;
    fail(who(c) + " iteration " + std::to_string(h.iter) + ": push payload checksum mismatch");
    return;
  }
  ++job.push_messages;
  job.its[job.iter].w[h.worker].arrive_done = now_;
  if (++job.arrived == p_.workers) barrier(job);
}

void Servers::barrier(Job& job) {
  Iteration& it = job.its[job.iter];
  it.barrier = now_;
  for (unsigned w = 0; w < p_.workers; ++w) {
    const size_t i = static_cast<size_t>(job.conn_of[w]);
    Conn& c = *conns_[i];
    if (c.writer.active()) {  // the worker pushed before its previous pull completed: impossible
      fail(who(c) + ": internal error: pull " + std::to_string(job.iter) + " while the previous one is unsent");
      return;
    }
    Header h;
    h.type = MsgType::kPull;
    h.job = job.id;
    h.worker = w;
    h.iter = job.iter;
    h.length = p_.bytes;
    h.checksum = pattern_.checksum;
    c.writer.start(h, pattern_.data.data());
    c.pull_iter = job.iter;
    it.w[w].pull_start = now_;
    pump_send(i);
  }
  job.arrived = 0;
  ++job.iter;
}

void Servers::pump_send(size_t i) {
  Conn& c = *conns_[i];
  const long n = c.writer.send_some(c.fd);
  if (n < 0) {
    fail(who(c) + ": send of pull " + std::to_string(c.pull_iter) + " failed: " + errno_text(static_cast<int>(n)));
    return;
  }
  if (n > 0) last_progress_ = now_;
  c.bytes_sent += static_cast<uint64_t>(n);
  jobs_[c.job].bytes_sent += static_cast<uint64_t>(n);
  if (!c.writer.active()) jobs_[c.job].its[c.pull_iter].w[static_cast<size_t>(c.worker)].pull_sent = now_;
  const int rc = loop_.mod(c.fd, EPOLLIN | EPOLLRDHUP | (c.writer.active() ? EPOLLOUT : 0u), i);
  if (rc < 0) fail("epoll_ctl: " + errno_text(rc));
}

void Servers::on_readable(size_t i) {
  Conn& c = *conns_[i];
  Job& job = jobs_[c.job];
  Sink sink{*this, c};
  for (int reads = 0; reads < 4 && error_.empty(); ++reads) {
    const ssize_t n = recv(c.fd, rxbuf_.data(), rxbuf_.size(), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      fail(who(c) + ": receive failed at iteration " + std::to_string(job.iter) + ": " + std::strerror(errno));
      return;
    }
    if (n == 0) {
      // A worker closes after its last pull: that is the job's normal end.
      const bool normal = c.worker >= 0 && job.iter == p_.iters && !c.writer.active() && c.reader.between_messages();
      if (!normal) {
        fail(who(c) + ": the worker closed the connection at iteration " + std::to_string(job.iter) + "/" +
             std::to_string(p_.iters));
        return;
      }
      loop_.del(c.fd);
      close(c.fd);
      c.fd = -1;
      c.finished = true;
      if (++job.closed == p_.workers) {
        job.done_at = now_;
        ++jobs_done_;
      }
      return;
    }
    last_progress_ = now_;
    c.bytes_received += static_cast<uint64_t>(n);
    job.bytes_received += static_cast<uint64_t>(n);
    if (!c.reader.feed(rxbuf_.data(), static_cast<size_t>(n), sink)) {
      if (error_.empty()) fail(who(c) + ": bad stream from the worker: " + c.reader.error());
      return;
    }
  }
}

std::string Servers::stuck_report() const {
  std::string s;
  for (const Job& job : jobs_) {
    if (job.complete()) continue;
    unsigned hellos = 0;
    for (int ci : job.conn_of) hellos += ci >= 0;
    s += "\n  job " + std::to_string(job.id) + ": " + std::to_string(hellos) + "/" + std::to_string(p_.workers) +
         " workers connected, barrier " + std::to_string(job.iter) + "/" + std::to_string(p_.iters) + " has " +
         std::to_string(job.arrived) + " pushes, received " + std::to_string(job.bytes_received) + " B, sent " +
         std::to_string(job.bytes_sent) + " B";
  }
  return s;
}

int Servers::run() {
  started_ = now_ = last_progress_ = now_ns();
  const RunLimits limits(p_, started_);
  if (!loop_.ok()) fail("epoll_create: " + std::string(std::strerror(errno)));
  pattern_ = make_pattern(p_.bytes, 0x50534D4F44ull);  // "PSMOD": the model differs from the gradients
  jobs_.resize(p_.jobs);
  for (unsigned j = 0; j < p_.jobs && error_.empty(); ++j) {
    Job& job = jobs_[j];
    job.id = j;
    job.conn_of.assign(p_.workers, -1);
    job.its.resize(p_.iters);
    for (Iteration& it : job.its) it.w.resize(p_.workers);
    job.listen_fd = tcp_listen(o_.listen, p_.base_port + j);
    if (job.listen_fd < 0) {
      fail("cannot listen on " + o_.listen + ":" + std::to_string(p_.base_port + j) + ": " + errno_text(job.listen_fd));
      break;
    }
    if (const int rc = loop_.add(job.listen_fd, EPOLLIN, kListenTag + j); rc < 0) fail("epoll_ctl: " + errno_text(rc));
  }
  if (error_.empty()) {
    std::fprintf(stderr, "psemu ps: %u jobs listening on %s:%u..%u\n", p_.jobs, o_.listen.c_str(), p_.base_port,
                 p_.base_port + p_.jobs - 1);
  }
  std::vector<epoll_event> events;
  std::vector<uint64_t> fired;
  while (error_.empty() && jobs_done_ < jobs_.size()) {
    const int rc = loop_.wait(limits.wake_at(last_progress_), events, fired);
    now_ = now_ns();
    if (rc < 0) {
      fail("epoll_wait: " + errno_text(rc));
      break;
    }
    for (const epoll_event& ev : events) {
      if (!error_.empty()) break;
      if (ev.data.u64 >= kListenTag) {
        accept_all(static_cast<unsigned>(ev.data.u64 - kListenTag));
        continue;
      }
      const size_t i = ev.data.u64;
      if (conns_[i]->fd < 0) continue;
      if (ev.events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) on_readable(i);
      if (conns_[i]->fd >= 0 && error_.empty() && (ev.events & EPOLLOUT) && conns_[i]->writer.active()) pump_send(i);
    }
    if (!error_.empty()) break;
    if (const std::string why = limits.reached(now_, last_progress_); !why.empty()) {
      fail(why + "; unfinished:" + stuck_report(), kExitTimeout);
    }
  }
  for (auto& c : conns_) {
    if (c->fd >= 0) close(c->fd);
  }
  for (Job& job : jobs_) {
    if (job.listen_fd >= 0) close(job.listen_fd);
  }
  return finish_run("ps", error_, p_.out, report(), exit_code_);
}

std::string Servers::report() const {
  using nlohmann::json;
  json out;
  out["role"] = "ps";
  out["ok"] = error_.empty();
  out["error"] = error_;
  out["clock"] = "CLOCK_MONOTONIC, microseconds";
  out["params"] = {{"jobs", p_.jobs},           {"workers", p_.workers}, {"bytes", p_.bytes},  {"iters", p_.iters},
                   {"base_port", p_.base_port}, {"listen", o_.listen},   {"verify", p_.verify}};
  out["started_us"] = to_us(started_);
  out["jobs"] = json::array();
  for (const Job& job : jobs_) {
    json its = json::array();
    for (const Iteration& it : job.its) {
      json ws = json::array();
      for (const WorkerTimes& t : it.w) {
        ws.push_back({to_us(t.arrive_first), to_us(t.arrive_done), to_us(t.pull_start), to_us(t.pull_sent)});
      }
      its.push_back({{"barrier_us", to_us(it.barrier)}, {"workers", ws}});
    }
    json per_worker = json::array();
    for (unsigned w = 0; w < p_.workers; ++w) {
      const int ci = job.conn_of[w];
      if (ci < 0) {
        per_worker.push_back({{"worker", w}, {"connected", false}});
        continue;
      }
      const Conn& c = *conns_[static_cast<size_t>(ci)];
      per_worker.push_back({{"worker", w},
                            {"connected", true},
                            {"finished", c.finished},
                            {"bytes_received", c.bytes_received},
                            {"bytes_sent", c.bytes_sent},
                            {"messages_received", c.reader.messages()}});
    }
    out["jobs"].push_back({{"job", job.id},
                           {"port", p_.base_port + job.id},
                           {"complete", job.complete()},
                           {"barriers_done", job.iter},
                           {"done_us", to_us(job.done_at)},
                           {"bytes_received", job.bytes_received},
                           {"bytes_sent", job.bytes_sent},
                           {"push_messages", job.push_messages},
                           {"checksum_errors", job.checksum_errors},
                           {"worker_fields", {"arrive_first_us", "arrive_done_us", "pull_start_us", "pull_sent_us"}},
                           {"workers", per_worker},
                           {"iterations", its}});
  }
  return out.dump(1) + "\n";
}

}  // namespace

int run_ps(const PsOptions& o) {
  Servers s(o);
  return s.run();
}

}  // namespace psemu
