// SPDX-License-Identifier: BSD-3-Clause
// A process a test starts: argv run in `cwd` with stdout (and stderr, unless
// err_path names another file) written to out_path. It dies with the test
// (PR_SET_PDEATHSIG) and is killed and reaped by the destructor, so a test
// that fails or times out never leaves a daemon busy-polling a CPU.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace psgate::testing {

class ChildProcess {
 public:
  struct Options {
    std::string out_path;  // required
    std::string err_path;  // empty: stderr goes to out_path too
    std::string cwd;       // empty: the test's own
  };
  ChildProcess(std::vector<std::string> argv, Options options);
  ChildProcess(std::vector<std::string> argv, const std::string& out_path)
      : ChildProcess(std::move(argv), Options{out_path, "", ""}) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { kill_now(); }

  pid_t pid() const { return pid_; }
  bool running() const;
  // The exit code (128 + signal when killed by one), or -1 when it still runs
  // after `seconds` (it keeps running).
  int wait(double seconds);
  void signal(int sig);
  // SIGKILL and reap, if it still runs.
  void kill_now();
  // Everything written to out_path so far.
  std::string output() const;

 private:
  std::string out_path_;
  pid_t pid_ = -1;
  // Reaping is an observation of the child, not a change to this object.
  mutable bool exited_ = false;
  mutable int status_ = 0;
};

// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);

// An environment variable's value (meson test sets the binaries' paths),
// or "" when it is not set.
std::string env_or_empty(const char* name);

}  // namespace psgate::testing
