// SPDX-License-Identifier: BSD-3-Clause
// (c) The real psgatectl binary ($PSGATECTL_BIN) run as a subprocess against a
// fake daemon: a Unix-socket server thread in this test that records each
// request line and answers with canned replies, or misbehaves on purpose.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;                  // requests: compared by value
using ojson = nlohmann::ordered_json;  // canned replies: sent in the order written

// A temporary directory, removed with its socket at the end of the test.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/psgatectl-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (d == nullptr) std::abort();
    path_ = d;
  }
  ~TempDir() {
    unlink((path_ + "/psgate.sock").c_str());
    rmdir(path_.c_str());
  }
  std::string socket() const { return path_ + "/psgate.sock"; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A health result of a daemon of psgatectl's protocol.
const char* kHealthResult =
    R"({"status": "ok", "version": "0.1.0", "protocol": 2, "uptime_s": 3725, "generation": 4,
        "lcores": "main:0 data:1", "policy": "static"})";

class FakeDaemon {
 public:
  enum class Mode {
    kAnswer,        // a canned reply per cmd
    kCloseMidLine,  // half a reply, then close
    kCloseNoReply,  // read the request, close without a byte
    kSilent,        // read the request, never answer
    kGarbage,       // a line that is not JSON
  };

  // Health is answered as a daemon of psgatectl's protocol answers it
  // (psgatectl asks before any other command), and whatever the mode, unless
  // `health_too`: the mode is for the command.
  FakeDaemon(const std::string& path, Mode mode, bool health_too = false)
      : path_(path), mode_(mode), health_too_(health_too) {
    answer("health", {{"ok", true}, {"result", ojson::parse(kHealthResult)}});
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    unlink(path.c_str());
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 8) != 0) {
      ADD_FAILURE() << "fake daemon cannot listen on " << path << ": " << std::strerror(errno);
    }
    if (pipe2(stop_pipe_, O_CLOEXEC) != 0) std::abort();
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeDaemon() {
    const char c = 'x';
    (void)!write(stop_pipe_[1], &c, 1);
    thread_.join();
    close(listen_fd_);
    close(stop_pipe_[0]);
    close(stop_pipe_[1]);
    unlink(path_.c_str());
  }

  // The reply line (without '\n') for requests with this "cmd".
  void answer(const std::string& cmd, const ojson& reply) {
    std::lock_guard lock(mu_);
    replies_[cmd] = reply.dump();
  }
  void answer_raw(const std::string& cmd, const std::string& line) {
    std::lock_guard lock(mu_);
    replies_[cmd] = line;
  }
  // The reply to the `nth` request of this "cmd" (counted from 1), in place
  // of answer()'s for that one.
  void answer_nth(const std::string& cmd, int nth, const ojson& reply) {
    std::lock_guard lock(mu_);
    nth_replies_[{cmd, nth}] = reply.dump();
  }
  std::vector<json> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  // How many requests of this "cmd" came.
  int count(const std::string& cmd) {
    std::lock_guard lock(mu_);
    return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [&](const json& r) {
      return r.is_object() && r.contains("cmd") && r["cmd"] == cmd;
    }));
  }
  int connections() const { return connections_.load(); }
  // The next `n` requests are read and recorded but never answered (as
  // kSilent), as a daemon stuck in a long command would; later ones are
  // answered again, each on the connection it came on.
  void stall_next(int n) { stall_.store(n); }

 private:
  // Waits for fd or the stop pipe; false when stopping.
  bool wait(int fd) {
    pollfd p[2] = {{fd, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    while (poll(p, 2, -1) < 0) {
      if (errno != EINTR) return false;
    }
    return (p[1].revents & POLLIN) == 0;
  }

  void serve() {
    while (wait(listen_fd_)) {
      const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      serve_connection(fd);
      close(fd);
    }
  }

  void serve_connection(int fd) {
    std::string buf;
    for (;;) {
      size_t nl;
      while ((nl = buf.find('\n')) == std::string::npos) {
        if (!wait(fd)) return;
        char tmp[4096];
        const ssize_t n = read(fd, tmp, sizeof tmp);
        if (n <= 0) return;
        buf.append(tmp, static_cast<size_t>(n));
      }
      const std::string line = buf.substr(0, nl);
      buf.erase(0, nl + 1);
      json req = json::parse(line, nullptr, false);
      std::string reply;
      bool health = false;
      {
        std::lock_guard lock(mu_);
        requests_.push_back(req);
        const std::string cmd = req.is_object() && req["cmd"].is_string() ? req["cmd"].get<std::string>() : "";
        auto it = replies_.find(cmd);
        reply = it != replies_.end() ? it->second : R"({"ok": false, "error": "unknown command"})";
        if (auto nth = nth_replies_.find({cmd, ++seen_[cmd]}); nth != nth_replies_.end()) reply = nth->second;
        health = cmd == "health";
      }
      Mode mode = health && !health_too_ ? Mode::kAnswer : mode_;
      if (stall_.load() > 0) {
        --stall_;
        mode = Mode::kSilent;
      }
      switch (mode) {
        case Mode::kAnswer:
          reply += "\n";
          break;
        case Mode::kCloseMidLine:
          reply = reply.substr(0, reply.size() / 2);
          (void)!write(fd, reply.data(), reply.size());
          return;
        case Mode::kCloseNoReply:
          return;
        case Mode::kSilent:
          while (wait(fd)) {
            char tmp[256];
            if (read(fd, tmp, sizeof tmp) <= 0) return;
          }
          return;
        case Mode::kGarbage:
          reply = "<html>500 Internal Server Error</html>\n";
          break;
      }
      (void)!write(fd, reply.data(), reply.size());
    }
  }

  std::string path_;
  Mode mode_;
  bool health_too_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::map<std::string, std::string> replies_;
  std::map<std::pair<std::string, int>, std::string> nth_replies_;
  std::map<std::string, int> seen_;  // requests per cmd so far
  std::vector<json> requests_;
  std::atomic<int> connections_{0};
  std::atomic<int> stall_{0};
};

struct CtlRun {
  int status = -1;
  std::string out, err;
};

struct RunOptions {
  const char* env_socket = nullptr;   // $PSGATE_SOCKET for the child; unset when null
  bool as_nobody = false;             // drop to uid/gid 65534 before exec
  std::atomic<pid_t>* pid = nullptr;  // set to the child's pid once it runs (to signal it)
  const char* stdout_path = nullptr;  // the child's stdout is this file (e.g. /dev/full), not the pipe
};

// Runs psgatectl with `args`; collects stdout, stderr and the exit status.
CtlRun run_ctl(const std::vector<std::string>& args, RunOptions opt = {}) {
  const char* bin = std::getenv("PSGATECTL_BIN");
  if (bin == nullptr) {
    ADD_FAILURE() << "PSGATECTL_BIN is not set (run through meson test)";
    return {};
  }
  // Everything the child needs is built before fork: the test has threads.
  std::vector<std::string> argv_s{bin};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s{"PATH=/usr/bin:/bin", "LANG=C"};
  if (opt.env_socket != nullptr) env_s.push_back(std::string("PSGATE_SOCKET=") + opt.env_socket);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);

  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) std::abort();
  const int out_file = opt.stdout_path ? open(opt.stdout_path, O_WRONLY | O_CLOEXEC) : -1;
  if (opt.stdout_path && out_file < 0) std::abort();
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out_file >= 0 ? out_file : out_pipe[1], STDOUT_FILENO);
    dup2(err_pipe[1], STDERR_FILENO);
    if (opt.as_nobody && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 || setuid(65534) != 0)) _exit(126);
    execve(bin, argv.data(), envp.data());
    _exit(127);
  }
  if (opt.pid != nullptr) opt.pid->store(pid);
  if (out_file >= 0) close(out_file);
  close(out_pipe[1]);
  close(err_pipe[1]);
  CtlRun r;
  pollfd p[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* dest[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0) {
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (p[i].fd < 0 || p[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = read(p[i].fd, buf, sizeof buf);
      if (n > 0) {
        dest[i]->append(buf, static_cast<size_t>(n));
      } else {
        close(p[i].fd);
        p[i].fd = -1;
        --open_fds;
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

TEST(PsgatectlFakeDaemon, ReadCommandPrintsTableAndSendsOneLine) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("health", {{"ok", true}, {"result", ojson::parse(kHealthResult)}});
  CtlRun r = run_ctl({"-s", dir.socket(), "health"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  EXPECT_TRUE(contains(r.out, "status      ok\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "uptime_s    3725 (1h 2m 5s)\n")) << r.out;
  ASSERT_EQ(d.requests().size(), 1u);
  EXPECT_EQ(d.requests()[0], json::parse(R"({"cmd": "health"})"));
  EXPECT_EQ(d.connections(), 1);
}

// The daemon's strings in a result (etcd's error text, a gateway's name)
// reach the terminal escaped, as its errors do: no escape sequence is acted
// on, no right-to-left override reorders the line.
TEST(PsgatectlFakeDaemon, StringsInAResultArePrintedEscaped) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("health", {{"ok", true},
                      {"result",
                       {{"status", "degraded"},
                        {"version", "0.1.0"},
                        {"protocol", 2},
                        {"cluster", {{"last_error", "etcd \x1b[2Jdown\xe2\x80\xae"}}},
                        {"documents_held",
                         {"P/jobs/\xe2\x80\x8b"
                          "7"}}}}});
  CtlRun r = run_ctl({"-s", dir.socket(), "health"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xe2\x80\xae"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\xe2\x80\x8b"), std::string::npos) << r.out;
  EXPECT_TRUE(contains(r.out, "2Jdown\\u202e")) << r.out;
  EXPECT_TRUE(contains(r.out, "P/jobs/\\u200b7")) << r.out;
}

// Output that cannot be written (`psgatectl config --toml > now.toml` on a
// full disk) must not look like success: exit 1 and why, on stderr.
TEST(PsgatectlFakeDaemon, OutputThatCannotBeWrittenExitsOne) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("health", {{"ok", true}, {"result", ojson::parse(kHealthResult)}});
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-s", dir.socket(), "health"}, {"-s", dir.socket(), "health", "--json"}}) {
    CtlRun r = run_ctl(args, {.stdout_path = "/dev/full"});
    EXPECT_EQ(r.status, 1) << args.back() << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "cannot write the output")) << r.err;
  }
  // --help's text too.
  CtlRun help = run_ctl({"--help"}, {.stdout_path = "/dev/full"});
  EXPECT_NE(help.status, 0) << help.err;
}

// A watch whose output fails (stdout full or closed) ends there, exit 1
// with the reason: it polled the daemon for nobody until its count or a
// Ctrl-C.
TEST(PsgatectlFakeDaemon, AWatchWhoseOutputFailsEndsAtOnce) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("stats", ojson::parse(R"({"ok": true, "result": {"ports": {}, "classes": [], "jobs": [], "totals": {}}})"));
  const auto started = std::chrono::steady_clock::now();
  CtlRun r = run_ctl({"-s", dir.socket(), "stats", "--watch", "--count", "5"}, {.stdout_path = "/dev/full"});
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "cannot write the output")) << r.err;
  EXPECT_EQ(d.count("stats"), 1) << "it went on polling after its output failed";
  EXPECT_LT(took, 3.0);
}

TEST(PsgatectlFakeDaemon, JsonPrintsTheDaemonsResultInItsOrder) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  // Sent as raw text: the key order is the daemon's, not alphabetical.
  d.answer_raw("health", std::string(R"({"ok": true, "result": )") + ojson::parse(kHealthResult).dump() + "}");
  d.answer_raw("config",
               R"({"ok": true, "result": {"ports": {"wire": {"device": "net_null0"}}, "lcores": {"data": 1}}})");
  CtlRun r = run_ctl({"-s", dir.socket(), "health", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), json::parse(kHealthResult));
  EXPECT_LT(r.out.find("\"status\""), r.out.find("\"generation\""));
  EXPECT_LT(r.out.find("\"version\""), r.out.find("\"uptime_s\""));

  CtlRun c = run_ctl({"config", "--json", "--socket", dir.socket()});
  EXPECT_EQ(c.status, 0) << c.err;
  EXPECT_EQ(json::parse(c.out), json::parse(R"({"ports": {"wire": {"device": "net_null0"}}, "lcores": {"data": 1}})"));
  EXPECT_LT(c.out.find("\"ports\""), c.out.find("\"lcores\""));
}

// jobs load sends a large file as several requests; --json prints their
// replies as one, in the daemon's shape ({"added": [ids]}), not a count.
TEST(PsgatectlFakeDaemon, JobsLoadJsonMergesTheRepliesAddedIds) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("jobs.load", ojson::parse(R"({"ok": true, "result": {"added": [7, 9]}})"));
  const std::string file = dir.path() + "/jobs.json";
  {
    json jobs = json::array();
    for (int id = 1; id <= 150; ++id) jobs.push_back({{"job", id}, {"match", {"dport=" + std::to_string(id)}}});
    FILE* f = std::fopen(file.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(jobs.dump().c_str(), f);
    std::fclose(f);
  }
  CtlRun r = run_ctl({"-s", dir.socket(), "jobs", "load", file, "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(d.count("jobs.load"), 2);  // 100 jobs a request at most
  EXPECT_EQ(json::parse(r.out), json::parse(R"({"added": [7, 9, 7, 9], "requests": 2})")) << r.out;

  // A refusal of the second request names the job by its place in the
  // file (100 + 48), not in the request.
  d.answer_nth("jobs.load", 4, ojson::parse(R"({"ok": false, "error": "jobs[48]: job 149: no free job slot"})"));
  CtlRun refused = run_ctl({"-s", dir.socket(), "jobs", "load", file});
  EXPECT_EQ(refused.status, 1) << refused.err;
  EXPECT_TRUE(contains(refused.err, "psgatectl: jobs[148]: job 149: no free job slot\n")) << refused.err;
  EXPECT_TRUE(contains(refused.err, "request 2 of 2 (the file's jobs[100..149]) was not applied")) << refused.err;
  unlink(file.c_str());
}

TEST(PsgatectlFakeDaemon, WriteCommandPrintsOneLineConfirmation) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("jobs.add", ojson::parse(R"({"ok": true, "result": {"job": {"id": 3, "name": "bert-c", "rank": 2,
      "class": 3, "pull_class": 3, "push_class": 3, "match": ["dst=10.0.0.5/32,dport=2222,proto=tcp"],
      "police": "300Mbit/s", "progress": {"fraction": null, "iteration": null, "batch": null}}}})"));
  CtlRun r = run_ctl({"-s", dir.socket(), "jobs", "add", "3", "--match", "dst=10.0.0.5/32,dport=2222,proto=tcp",
                      "--name", "bert-c", "--police", "300Mbit/s"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "added job 3 (bert-c): rank 2, class 3, 1 rule\n");
  // Health first: the daemon's protocol is checked before anything is sent
  // that it could read another way.
  ASSERT_EQ(d.requests().size(), 2u);
  EXPECT_EQ(d.requests()[0], json::parse(R"({"cmd": "health"})"));
  EXPECT_EQ(d.requests()[1], json::parse(R"({"cmd": "jobs.add", "job": 3,
      "match": ["dst=10.0.0.5/32,dport=2222,proto=tcp"], "name": "bert-c", "police": "300Mbit/s"})"));
}

// Cluster mode: the change is in the store, but the gateway asked has not
// applied it within its wait. Said so, with the revision; not dashes for a
// job or an order the reply does not carry.
TEST(PsgatectlFakeDaemon, AClusterWriteNotYetAppliedHereSaysSo) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  const ojson pending = {
      {"ok", true},
      {"result",
       {{"store_revision", 1042},
        {"applied_here", false},
        {"note", "written to the cluster store; not yet applied on this gateway (see psgatectl cluster)"}}}};
  for (const char* cmd : {"jobs.add", "order", "rank", "policy"}) d.answer(cmd, pending);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"jobs", "add", "3", "--match", "proto=tcp"}, {"order", "3", "1"}, {"rank", "3", "0"}, {"policy", "fifo"}}) {
    std::vector<std::string> argv = {"-s", dir.socket()};
    argv.insert(argv.end(), args.begin(), args.end());
    CtlRun r = run_ctl(argv);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out,
              "written to the cluster store at revision 1042; not yet applied on this gateway (see psgatectl "
              "cluster)\n")
        << args[0];
  }
}

TEST(PsgatectlFakeDaemon, RefusalExitsOneWithTheDaemonsError) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("jobs.remove", ojson{{"ok", false}, {"error", "no job 9"}});
  CtlRun r = run_ctl({"-s", dir.socket(), "jobs", "rm", "9"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "psgatectl: no job 9\n");
  EXPECT_TRUE(r.out.empty()) << r.out;
  // A refusal without an error string still says something.
  d.answer_raw("rank", R"({"ok": false})");
  CtlRun q = run_ctl({"-s", dir.socket(), "rank", "9", "1"});
  EXPECT_EQ(q.status, 1);
  EXPECT_TRUE(contains(q.err, "psgatectl: request refused")) << q.err;
  // The daemon's text reaches a terminal escaped: no colour, no
  // right-to-left override.
  d.answer("jobs.remove", ojson{{"ok", false}, {"error", "no job \x1b[31m9\xe2\x80\xae"}});
  CtlRun e = run_ctl({"-s", dir.socket(), "jobs", "rm", "9"});
  EXPECT_EQ(e.status, 1);
  EXPECT_EQ(e.err, "psgatectl: no job \\x1b[31m9\\u202e\n");
}

TEST(PsgatectlFakeDaemon, UsageErrorSendsNothing) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  CtlRun r = run_ctl({"-s", dir.socket(), "jobs", "add", "3", "--match", "dst=10.0.0.300"});
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--match")) << r.err;
  CtlRun h = run_ctl({"-s", dir.socket(), "class", "--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_TRUE(contains(h.out, "--ecn-threshold")) << h.out;
  EXPECT_EQ(d.connections(), 0);
}

TEST(PsgatectlFakeDaemon, SocketFromEnvironment) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("policy", ojson::parse(R"({"ok": true, "result": {"policy": {"name": "static", "interval": "1s",
      "rotate_on": null}}})"));
  const std::string sock = dir.socket();
  CtlRun r = run_ctl({"policy"}, {sock.c_str()});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "name       static\ninterval   1s\nrotate_on  -\n");
}

TEST(PsgatectlFakeDaemon, NothingListensExitsThree) {
  TempDir dir;
  CtlRun r = run_ctl({"-s", dir.socket(), "health"});
  EXPECT_EQ(r.status, 3);
  EXPECT_TRUE(contains(r.err, "psgatectl: cannot reach psgate at " + dir.socket() + ": no such socket")) << r.err;
  EXPECT_TRUE(r.out.empty());

  // A socket file nobody listens on (psgate died without removing it).
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, dir.socket().c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  close(fd);
  CtlRun s = run_ctl({"-s", dir.socket(), "stats"});
  EXPECT_EQ(s.status, 3);
  EXPECT_TRUE(contains(s.err, dir.socket() + ": connection refused")) << s.err;

  // A regular file at the path: connect() says "refused", but nothing could
  // ever listen there.
  unlink(dir.socket().c_str());
  std::ofstream(dir.socket()) << "not a socket\n";
  CtlRun f = run_ctl({"-s", dir.socket(), "health"});
  EXPECT_EQ(f.status, 3);
  EXPECT_TRUE(contains(f.err, dir.socket() + ": not a socket")) << f.err;
}

TEST(PsgatectlFakeDaemon, PermissionDeniedExitsThree) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to drop to another user";
  TempDir dir;  // mode 0700, owned by root
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  RunOptions opt;
  opt.as_nobody = true;
  CtlRun r = run_ctl({"-s", dir.socket(), "health"}, opt);
  if (r.status == 126 || r.status == 127) GTEST_SKIP() << "cannot run psgatectl as nobody here";
  EXPECT_EQ(r.status, 3);
  EXPECT_TRUE(contains(r.err, "permission denied")) << r.err;
  EXPECT_EQ(d.connections(), 0);
}

TEST(PsgatectlFakeDaemon, BrokenRepliesExitThree) {
  struct Case {
    FakeDaemon::Mode mode;
    std::vector<std::string> extra;
    const char* message;
  };
  const Case cases[] = {
      {FakeDaemon::Mode::kCloseMidLine, {}, "daemon closed the connection in the middle of its reply"},
      {FakeDaemon::Mode::kCloseNoReply, {}, "daemon closed the connection without replying"},
      {FakeDaemon::Mode::kSilent, {"--timeout", "300ms"}, "no reply within 300ms"},
      {FakeDaemon::Mode::kGarbage, {}, "reply is not JSON: <html>"},
      {FakeDaemon::Mode::kAnswer, {}, "reply's \"result\" is not an object: {\"ok\": true, \"result\": \"fine\"}"},
      // 100,000 nested arrays: psgatectl's formatters overflowed the stack (SIGSEGV).
      {FakeDaemon::Mode::kAnswer, {"--json"}, "reply is nested deeper than 64 levels"},  // after the command
      {FakeDaemon::Mode::kAnswer, {}, "reply is nested deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    TempDir dir;
    FakeDaemon d(dir.socket(), c.mode);
    // kAnswer: a reply well formed but for its result, or one nested too deep.
    if (std::string(c.message).find("nested") != std::string::npos) {
      d.answer_raw("stats", R"({"ok": true, "result": {"status": )" + std::string(100000, '[') +
                                std::string(100000, ']') + "}}");
    } else {
      d.answer_raw("stats", R"({"ok": true, "result": "fine"})");
    }
    std::vector<std::string> args{"-s", dir.socket()};
    const bool json = c.extra == std::vector<std::string>{"--json"};
    if (!json) args.insert(args.end(), c.extra.begin(), c.extra.end());
    args.push_back("stats");
    if (json) args.push_back("--json");
    CtlRun r = run_ctl(args);
    EXPECT_EQ(r.status, 3);
    EXPECT_TRUE(contains(r.err, "psgatectl: psgate at " + dir.socket() + ": " + c.message)) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_EQ(d.count("stats"), 1);
  }
}

// The health request that checks the daemon's protocol gets no usable
// reply: the command is not sent, and the message says so (not that a
// change may still be applied: none was asked for).
TEST(PsgatectlFakeDaemon, ABrokenReplyToTheProtocolCheckSendsNothingElse) {
  struct Case {
    FakeDaemon::Mode mode;
    const char* message;
  };
  const Case cases[] = {
      {FakeDaemon::Mode::kCloseNoReply, "daemon closed the connection without replying"},
      {FakeDaemon::Mode::kSilent, "no reply within 300ms after the request was sent (use --timeout"},
      {FakeDaemon::Mode::kGarbage, "reply is not JSON: <html>"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    TempDir dir;
    FakeDaemon d(dir.socket(), c.mode, /*health_too=*/true);
    CtlRun r = run_ctl({"-s", dir.socket(), "--timeout", "300ms", "jobs", "rm", "3"});
    EXPECT_EQ(r.status, 3);
    EXPECT_TRUE(contains(r.err, "psgatectl: psgate at " + dir.socket() + ": " + c.message)) << r.err;
    EXPECT_TRUE(contains(r.err, "jobs rm was not sent")) << r.err;
    EXPECT_FALSE(contains(r.err, "a change may still be applied")) << r.err;
    EXPECT_EQ(d.count("jobs.remove"), 0);
  }
}

// A daemon of another control protocol might read a request another way
// (protocol 1 took "id" for the job): psgatectl asks its protocol first
// (health's "protocol") and sends nothing else to one that is not its own,
// exit 3 naming both and what to do. `health --json` still shows it all.
TEST(PsgatectlFakeDaemon, ADaemonOfAnotherProtocolIsSentNothingElse) {
  struct Case {
    const char* health;  // the daemon's health result
    const char* says;    // what the message says of the daemon's protocol
  };
  const Case cases[] = {
      {R"({"status": "ok", "version": "0.9.0", "protocol": 3})", "speaks control protocol 3 (psgate 0.9.0)"},
      {R"({"status": "ok", "version": "0.0.5", "protocol": 1})", "speaks control protocol 1 (psgate 0.0.5)"},
      // Protocol 1's health named no protocol.
      {R"({"status": "ok", "version": "0.0.4"})",
       "speaks control protocol 1 (psgate 0.0.4; its health names no \"protocol\", as protocol 1's did not)"},
      {R"({"status": "ok", "protocol": "2"})",
       "speaks no control protocol psgatectl knows (its health's \"protocol\" is \"2\")"},
  };
  const std::string ours =
      "; this psgatectl (" PSGATE_VERSION ") speaks protocol 2: use the psgatectl installed with that psgate";
  for (const Case& c : cases) {
    SCOPED_TRACE(c.health);
    TempDir dir;
    FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
    d.answer_raw("health", std::string(R"({"ok": true, "result": )") + c.health + "}");
    d.answer("jobs.remove", ojson::parse(R"({"ok": true, "result": {"removed": 3}})"));
    d.answer("stats",
             ojson::parse(R"({"ok": true, "result": {"ports": {}, "classes": [], "jobs": [], "totals": {}}})"));
    const std::string daemon = "psgatectl: psgate at " + dir.socket() + " " + c.says + ours;
    CtlRun rm = run_ctl({"-s", dir.socket(), "jobs", "rm", "3"});
    EXPECT_EQ(rm.status, 3) << rm.out;
    EXPECT_TRUE(contains(rm.err, daemon + "; jobs rm was not sent\n")) << rm.err;
    EXPECT_TRUE(rm.out.empty()) << rm.out;
    EXPECT_EQ(d.count("jobs.remove"), 0);
    // --json too: a script must not read another protocol's result as this one's.
    CtlRun stats = run_ctl({"-s", dir.socket(), "stats", "--json"});
    EXPECT_EQ(stats.status, 3) << stats.out;
    EXPECT_TRUE(contains(stats.err, daemon + "; stats was not sent\n")) << stats.err;
    EXPECT_EQ(d.count("stats"), 0);
    // health prints its table from the one reply, once the protocol is
    // checked; --json prints it as it came, to see what the daemon is.
    CtlRun health = run_ctl({"-s", dir.socket(), "health"});
    EXPECT_EQ(health.status, 3) << health.out;
    EXPECT_TRUE(contains(health.err, daemon + " (`psgatectl health --json` prints its reply as it came)\n"))
        << health.err;
    CtlRun raw = run_ctl({"-s", dir.socket(), "health", "--json"});
    EXPECT_EQ(raw.status, 0) << raw.err;
    EXPECT_EQ(json::parse(raw.out), json::parse(c.health));
  }
  // The daemon of psgatectl's own protocol: health, then the command.
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("jobs.remove", ojson::parse(R"({"ok": true, "result": {"removed": 3}})"));
  CtlRun rm = run_ctl({"-s", dir.socket(), "jobs", "rm", "3"});
  EXPECT_EQ(rm.status, 0) << rm.err;
  EXPECT_EQ(rm.out, "removed job 3\n");
  ASSERT_EQ(d.requests().size(), 2u);
  EXPECT_EQ(d.requests()[0], json::parse(R"({"cmd": "health"})"));
  EXPECT_EQ(d.requests()[1], json::parse(R"({"cmd": "jobs.remove", "job": 3})"));
}

// jobs load checks each request's reply: one of another shape is not
// counted as loaded jobs (with --json neither: the output is psgatectl's
// own merge of the replies), and the message says what went in before it.
TEST(PsgatectlFakeDaemon, JobsLoadChecksEachReplysShape) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("jobs.load", ojson::parse(R"({"ok": true, "result": {"loaded": 1}})"));
  const std::string file = dir.path() + "/jobs.json";
  std::ofstream(file) << R"([{"job": 1, "match": ["proto=tcp"]}])";
  for (const bool json_output : {false, true}) {
    std::vector<std::string> args{"-s", dir.socket(), "jobs", "load", file};
    if (json_output) args.push_back("--json");
    CtlRun r = run_ctl(args);
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_TRUE(contains(r.err, "psgatectl: psgate at " + dir.socket() +
                                    ": jobs load: the reply's \"added\" is missing (should be an array)"))
        << r.err;
    EXPECT_TRUE(contains(r.err, "request 1 of 1 (the file's jobs[0..0]) got no usable answer")) << r.err;
    EXPECT_FALSE(contains(r.out, "added 1 job")) << r.out;
  }
  unlink(file.c_str());
}

TEST(PsgatectlFakeDaemon, StatsTableAndWatch) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer("stats", ojson::parse(R"({"ok": true, "result": {
      "ports": {"wire": {"rx_packets": 5, "tx_bytes": 1000, "drops": {"queue_full": 2}},
                "host": {"rx_packets": 6, "tx_bytes": 2000, "drops": {"queue_full": 0}}},
      "classes": [], "totals": {"received": 11, "transmitted": 9, "dropped": 2, "conserved": true},
      "jobs": [{"id": 1, "name": "resnet32-a", "rank": 0, "class": 1, "policed": 0, "drops": 2,
                "pull": {"sent_packets": 3, "sent_bytes": 4500}, "push": {"sent_packets": 0, "sent_bytes": 0},
                "telemetry": {"iterations": 1, "bytes_per_iteration": null, "iteration_period_ms": null,
                              "last_burst_ms": null, "straggler_wait_ms": null}}]}})"));
  CtlRun s = run_ctl({"-s", dir.socket(), "stats"});
  EXPECT_EQ(s.status, 0) << s.err;
  EXPECT_TRUE(contains(s.out, "Drops by reason")) << s.out;
  EXPECT_TRUE(contains(s.out, "resnet32-a")) << s.out;
  EXPECT_TRUE(contains(s.out, "conserved yes")) << s.out;

  // Two frames on one connection, one second apart; not a terminal, so no
  // escape codes.
  CtlRun w = run_ctl({"-s", dir.socket(), "stats", "--watch", "--count", "2"});
  EXPECT_EQ(w.status, 0) << w.err;
  size_t frames = 0;
  for (size_t at = 0; (at = w.out.find("PULL Mbit/s", at)) != std::string::npos; ++at) ++frames;
  EXPECT_EQ(frames, 2u) << w.out;
  EXPECT_EQ(w.out.find('\x1b'), std::string::npos);
  EXPECT_TRUE(contains(w.out, "ports: wire tx 0.0 Mbit/s, host tx 0.0 Mbit/s")) << w.out;  // unchanged counters
  EXPECT_EQ(d.count("stats"), 3);
  EXPECT_EQ(d.count("health"), 2);  // once per connection
  EXPECT_EQ(d.connections(), 2);
}

// Waits up to 20 s for `done`; false if it never came.
bool wait_for(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

ojson stats_reply(const std::string& job_name) {
  return ojson{{"ok", true},
               {"result",
                {{"ports", ojson::object()},
                 {"classes", ojson::array()},
                 {"totals", ojson::object()},
                 {"jobs", ojson::array({{{"id", 1}, {"name", job_name}, {"rank", 0}, {"class", 1}}})}}}};
}

// stats --watch is a monitor: nothing listening yet, a stalled reply, and a
// daemon that goes away and comes back are each reported on stderr with the
// time, and watching goes on; SIGTERM ends it with status 0.
TEST(PsgatectlFakeDaemon, WatchSurvivesNoDaemonAStallAndARestart) {
  TempDir dir;
  std::atomic<pid_t> pid{0};
  CtlRun w;
  std::thread watcher([&] {
    RunOptions opt;
    opt.pid = &pid;
    w = run_ctl({"-s", dir.socket(), "--timeout", "400ms", "stats", "--watch"}, opt);
  });
  ASSERT_TRUE(wait_for([&] { return pid.load() != 0; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // nobody listens yet

  auto a = std::make_unique<FakeDaemon>(dir.socket(), FakeDaemon::Mode::kAnswer);
  a->answer("stats", stats_reply("before-outage"));
  EXPECT_TRUE(wait_for([&] { return a->count("stats") >= 1; }));
  a->stall_next(1);  // the second stats request is never answered: the client times out
  EXPECT_TRUE(wait_for([&] { return a->count("stats") >= 4; }));  // 2 stalled, 3 and 4 answered
  a.reset();                                                      // the daemon goes away
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));

  FakeDaemon b(dir.socket(), FakeDaemon::Mode::kAnswer);
  b.answer("stats", stats_reply("after-restart"));
  EXPECT_TRUE(wait_for([&] { return b.count("stats") >= 2; }));
  kill(pid.load(), SIGTERM);
  watcher.join();

  EXPECT_EQ(w.status, 0) << w.err;
  EXPECT_GE(count_of(w.out, "before-outage"), 3u) << w.out;
  EXPECT_GE(count_of(w.out, "after-restart"), 2u) << w.out;  // watching went on after the outage
  EXPECT_GE(b.connections(), 1);
  // Each problem is one stderr line with the time and the backoff.
  const std::regex line(R"(psgatectl: \d\d:\d\d:\d\d .*psgate at .*; reconnecting in (100ms|200ms|400ms|800ms|2s))");
  EXPECT_TRUE(contains(w.err, ": no such socket")) << w.err;
  EXPECT_TRUE(contains(w.err, "no reply within 400ms")) << w.err;
  EXPECT_TRUE(contains(w.err, "answers again")) << w.err;
  size_t problems = 0;
  std::istringstream lines(w.err);
  for (std::string l; std::getline(lines, l);) {
    if (contains(l, "answers again")) continue;
    ++problems;
    EXPECT_TRUE(std::regex_search(l, line)) << l;
  }
  EXPECT_GE(problems, 4u) << w.err;  // no daemon (at least once), the stall, the restart (twice or more)
  // The backoff doubles while the daemon is away and stops at 2 s.
  EXPECT_TRUE(contains(w.err, "reconnecting in 200ms")) << w.err;
}

// Ctrl-C or SIGTERM while a reply is overdue ends the watch at once (not
// after --timeout), with status 0.
TEST(PsgatectlFakeDaemon, WatchEndsPromptlyOnSigtermDuringAStalledReply) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kSilent);
  std::atomic<pid_t> pid{0};
  CtlRun w;
  std::thread watcher([&] {
    RunOptions opt;
    opt.pid = &pid;
    w = run_ctl({"-s", dir.socket(), "--timeout", "60s", "stats", "--watch"}, opt);
  });
  ASSERT_TRUE(wait_for([&] { return d.count("stats") > 0; }));
  const auto t0 = std::chrono::steady_clock::now();
  kill(pid.load(), SIGTERM);
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(w.status, 0) << w.err;
}

// stats --watch is a monitor: a daemon of another protocol is reported as
// any other trouble and retried (a restart may bring one of this protocol
// back), and is never sent a stats request.
TEST(PsgatectlFakeDaemon, WatchReportsADaemonOfAnotherProtocolAndRetries) {
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer_raw("health", R"({"ok": true, "result": {"status": "ok", "version": "0.9.0", "protocol": 3}})");
  std::atomic<pid_t> pid{0};
  CtlRun w;
  std::thread watcher([&] {
    RunOptions opt;
    opt.pid = &pid;
    w = run_ctl({"-s", dir.socket(), "stats", "--watch"}, opt);
  });
  ASSERT_TRUE(wait_for([&] { return pid.load() != 0; }));
  EXPECT_TRUE(wait_for([&] { return d.count("health") >= 2; }));
  kill(pid.load(), SIGTERM);
  watcher.join();
  EXPECT_EQ(w.status, 0) << w.err;
  EXPECT_EQ(d.count("stats"), 0);
  EXPECT_TRUE(contains(w.err, "psgate at " + dir.socket() + " speaks control protocol 3 (psgate 0.9.0)")) << w.err;
  EXPECT_TRUE(contains(w.err, "; reconnecting in 100ms")) << w.err;
}

}  // namespace

// A reply of another shape (a daemon of another version, or not psgate) is
// not an empty gateway: each table's command says which member is wrong and
// exits 3, as for a reply that is not JSON, rather than printing "(no jobs)"
// or a table of "-" and exiting 0. --json prints it as it came.
TEST(PsgatectlFakeDaemon, RepliesOfAnotherShapeExitThree) {
  struct Case {
    std::vector<std::string> args;
    const char* cmd;
    const char* result;
    const char* message;
  };
  const Case cases[] = {
      {{"jobs", "list"}, "jobs.list", "{}", "jobs list: the reply's \"jobs\" is missing (should be an array)"},
      {{"jobs", "list"}, "jobs.list", R"({"jobs": {"1": {}}})", "jobs list: the reply's \"jobs\" is not an array"},
      {{"jobs", "list"},
       "jobs.list",
       R"({"jobs": [{"id": "1", "name": "a", "rank": 0, "match": [], "progress": {}}]})",
       "jobs list: the reply's \"jobs[0].id\" is not a whole number"},
      {{"stats"}, "stats", R"({"jobs": []})", "stats: the reply's \"ports\" is missing (should be an object)"},
      {{"stats"},
       "stats",
       R"({"ports": {"wire": 5}, "classes": [], "jobs": [], "totals": {}})",
       "stats: the reply's \"ports.wire\" is not an object"},
      {{"health"},
       "health",
       R"({"state": "ok", "protocol": 2})",
       "health: the reply's \"status\" is missing (should be a string)"},
      {{"config"}, "config", R"({"config": {}})", "config: the reply's \"ports\" is missing (should be an object)"},
      {{"config", "--toml"}, "config", R"({"x": 1})", "config: the reply's \"ports\" is missing"},
      {{"policy"},
       "policy",
       R"({"name": "static"})",
       "policy: the reply's \"policy\" is missing (should be an object)"},
      {{"cluster"}, "cluster", R"({"cluster": true})", "cluster: the reply's \"mode\" is missing (should be a string)"},
      {{"cluster"},
       "cluster",
       R"({"mode": "cluster", "gateways": {}})",
       "cluster: the reply's \"gateways\" is not an array"},
      // Confirmations of changes: they printed "removed job 3", "cap none"
      // or "none (unshaped)" from members that were not there, and exit 0.
      {{"jobs", "rm", "3"},
       "jobs.remove",
       R"({"job": 3})",
       "jobs rm: the reply's \"removed\" is missing (should be a whole number)"},
      {{"class", "wire", "1", "--cap", "1Gbit/s"},
       "class.set",
       R"({"port": "wire", "class": 1})",
       "class: the reply's \"cap\" is missing (should be a string or null)"},
      {{"shaper", "wire", "1Gbit/s"},
       "shaper.set",
       R"({"port": "wire", "burst": "64KiB"})",
       "shaper: the reply's \"rate\" is missing (should be a string or null)"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    TempDir dir;
    FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
    d.answer_raw(c.cmd, std::string(R"({"ok": true, "result": )") + c.result + "}");
    std::vector<std::string> args{"-s", dir.socket()};
    args.insert(args.end(), c.args.begin(), c.args.end());
    CtlRun r = run_ctl(args);
    EXPECT_EQ(r.status, 3) << r.out;
    EXPECT_TRUE(contains(r.err, "psgatectl: psgate at " + dir.socket() + ": " + c.message)) << r.err;
    EXPECT_TRUE(contains(r.err, "the daemon may be of another version")) << r.err;
    EXPECT_TRUE(contains(r.err, "\"version\" and \"protocol\"")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  // --json: the result as it came, for the reader to judge.
  TempDir dir;
  FakeDaemon d(dir.socket(), FakeDaemon::Mode::kAnswer);
  d.answer_raw("jobs.list", R"({"ok": true, "result": {}})");
  CtlRun r = run_ctl({"-s", dir.socket(), "jobs", "list", "--json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "{}\n");
  // Cluster mode: applied, but the job removed by another writer before the
  // reply was made ("job": null) is a success of the daemon's shape, not
  // another version's.
  TempDir gone;
  FakeDaemon g(gone.socket(), FakeDaemon::Mode::kAnswer);
  g.answer_raw("rank", R"({"ok": true, "result": {"job": null, "store_revision": 7}})");
  CtlRun ranked = run_ctl({"-s", gone.socket(), "rank", "3", "0"});
  EXPECT_EQ(ranked.status, 0) << ranked.err;
  EXPECT_TRUE(contains(ranked.out, "revision 7 and applied; the job has been removed since")) << ranked.out;
}
