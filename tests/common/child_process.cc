// SPDX-License-Identifier: BSD-3-Clause
#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace psgate::testing {

ChildProcess::ChildProcess(std::vector<std::string> argv, Options options) : out_path_(options.out_path) {
  const pid_t parent = getpid();
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ != 0) return;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(125);  // the test died before prctl took effect
  if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(126);
  const int out = open(options.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int err = options.err_path.empty() ? out : open(options.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, 1);
  dup2(err, 2);
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execv(args[0], args.data());
  _exit(127);
}

bool ChildProcess::running() const {
  if (pid_ <= 0 || exited_) return false;
  if (waitpid(pid_, &status_, WNOHANG) == pid_) {
    exited_ = true;
    return false;
  }
  return true;
}

int ChildProcess::wait(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (running() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited_) return -1;
  return WIFEXITED(status_) ? WEXITSTATUS(status_) : 128 + WTERMSIG(status_);
}

void ChildProcess::signal(int sig) {
  if (running()) kill(pid_, sig);
}

void ChildProcess::kill_now() {
  if (!running()) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, &status_, 0);
  exited_ = true;
}

std::string ChildProcess::output() const { return read_text_file(out_path_); }

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace psgate::testing
