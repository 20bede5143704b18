// SPDX-License-Identifier: BSD-3-Clause
// What both psemu roles share: options, the clock, the payload pattern, an
// epoll loop with timers, and socket helpers.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

namespace psemu {

// Parameters both roles must agree on (the worker's hello carries K and M so
// the PS can refuse a mismatch with a clear error).
struct Params {
  unsigned jobs = 6;
  unsigned workers = 4;         // per job
  uint64_t bytes = 4ull << 20;  // M: push and pull message size, bytes
  unsigned iters = 30;          // K
  unsigned base_port = 2222;    // job j listens on base_port + j
  double timeout_s = 300;       // whole run; never hang forever
  double idle_timeout_s = 60;   // no byte moved and no timer fired for this long: stuck
  bool verify = true;           // checksum every payload
  std::string out = "-";        // JSON report, "-" = stdout
};

struct PsOptions {
  Params p;
  std::string listen = "0.0.0.0";
};

struct WorkerOptions {
  Params p;
  // The PS hosts. One: the job's whole model at that host. Several: the
  // job's parameters are sharded over them (MXNet's kvstore, BytePS): a
  // worker pushes shard_bytes(M, H, k) to host k, pulls as much back from
  // every host, and its iteration ends when the last shard's pull arrived.
  std::vector<std::string> ps_addrs;
  double compute_ms = 20;         // C: "compute" (sleep) before every push
  double stagger_ms = 0;          // job j starts j * stagger_ms after job 0
  double start_delay_ms = 200;    // after every connection is up, before job 0 starts
  double connect_timeout_s = 20;  // keep retrying a refused connect this long
  // Per PS host (one list for all, or one per host): worker w's connection
  // to host k binds local_addrs[k][w % n].
  std::vector<std::vector<std::string>> local_addrs;
  // Run through /bin/sh each time a job completes an iteration (every worker
  // pulled it), as a cluster scheduler reporting progress would; {job} {id}
  // (= job + 1, the id the testbed gives the job in psgate), {iter}
  // (iterations done), {iters} and {fraction} are substituted. Asynchronous:
  // a slow command never delays the training loop.
  std::string progress_cmd;
};

int run_ps(const PsOptions& o);
int run_workers(const WorkerOptions& o);

// Exit codes of both roles.
inline constexpr int kExitOk = 0, kExitFailed = 1, kExitUsage = 2, kExitTimeout = 3;

// CLOCK_MONOTONIC in ns. Network namespaces share it, so the PS's and the
// workers' timestamps are directly comparable.
int64_t now_ns();
inline int64_t to_us(int64_t ns) { return ns / 1000; }
std::string seconds(double s);  // "2.5 s"

// Host k's share of an M-byte model sharded over H hosts: M / H, the
// remainder spread over the first hosts. Both roles and the testbed use it.
inline uint64_t shard_bytes(uint64_t m, unsigned hosts, unsigned k) { return m / hosts + (k < m % hosts ? 1 : 0); }

// Parses "4MiB", "4MB", "512KiB", "1000000", "1.5GB" into bytes.
bool parse_size(const std::string& s, uint64_t& out);

// Deterministic pseudo-random payload, and its checksum.
struct Pattern {
  std::vector<uint8_t> data;
  uint64_t checksum = 0;
};
Pattern make_pattern(uint64_t bytes, uint64_t seed);

// Writes text to `path` ("-" = stdout) through a temporary file and rename, so
// a reader never sees half a report.
bool write_text(const std::string& path, const std::string& text);

// The two limits that keep a run from hanging: the whole run (timeout_s) and
// progress (idle_timeout_s: no byte moved and no timer fired). Both roles
// check them after every pass of their loop.
class RunLimits {
 public:
  RunLimits(const Params& p, int64_t started_ns);
  // The latest time the loop must wake to check them.
  int64_t wake_at(int64_t last_progress_ns) const;
  // Empty within both; otherwise which one was reached ("no progress for 60 s").
  std::string reached(int64_t now_ns, int64_t last_progress_ns) const;

 private:
  double timeout_s_, idle_timeout_s_;
  int64_t deadline_ns_, idle_ns_;
};

// The end of a role's run: logs its error (if any) as "psemu <role>: ...",
// writes its report to `out`, and returns the exit code, kExitFailed when
// the report cannot be written and the run had gone well.
int finish_run(const char* role, const std::string& error, const std::string& out, const std::string& report,
               int exit_code);

// Nonblocking TCP helpers; they return -errno on failure.
int tcp_listen(const std::string& addr, unsigned port);
int tcp_connect_start(const std::string& local, const std::string& remote, unsigned port);  // EINPROGRESS is success
int tcp_accept(int listen_fd);  // -EAGAIN when no connection is pending
int socket_error(int fd);
std::string errno_text(int negative_errno);

// epoll plus a min-heap of timers. Tags identify a socket or a timer owner.
class Loop {
 public:
  Loop();
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;
  bool ok() const { return ep_ >= 0; }
  int add(int fd, uint32_t events, uint64_t tag);
  int mod(int fd, uint32_t events, uint64_t tag);
  void del(int fd);
  void at(int64_t t_ns, uint64_t tag) { timers_.push({t_ns, tag}); }
  // Waits until a socket is ready, a timer is due or `until_ns`. Fills
  // `events` and `fired` (due timer tags, in time order). Returns -errno on error.
  int wait(int64_t until_ns, std::vector<epoll_event>& events, std::vector<uint64_t>& fired);

 private:
  struct Timer {
    int64_t t;
    uint64_t tag;
    bool operator>(const Timer& o) const { return t > o.t; }
  };
  int ep_ = -1;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
};

}  // namespace psemu
