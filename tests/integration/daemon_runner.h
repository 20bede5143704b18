// SPDX-License-Identifier: BSD-3-Clause
// Runs the real psgate binary for integration tests: writes a config and
// capture files into a fresh directory, runs the daemon with a time limit, and
// reads back its exit status, output, JSON counters and output captures.
#pragma once

#include <sys/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "child_process.h"

namespace psgate::testing {

struct DaemonRun {
  int exit_status = -1;  // -1: killed after the time limit
  std::string output;    // stdout + stderr
  nlohmann::json stats;  // --stats-json, null if absent
};

class DaemonFixture {
 public:
  DaemonFixture();   // makes a fresh directory under $TMPDIR
  ~DaemonFixture();  // removes it

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  void write_file(const std::string& name, const std::string& text) const;
  void write_pcap(const std::string& name, const std::vector<std::vector<uint8_t>>& frames) const;
  std::vector<std::vector<uint8_t>> read_pcap(const std::string& name) const;

  // Runs `psgate --config <dir>/<config> args...` in dir(); `signal_after_s`
  // > 0 sends SIGTERM after that long. Kills the daemon after `limit_s`.
  DaemonRun run(const std::string& config, const std::vector<std::string>& args, double limit_s = 60,
                double signal_after_s = 0) const;

  // Starts the daemon in the background (in dir()); stop_daemon() sends
  // SIGTERM and waits. The destructor kills one still running.
  void start_daemon(const std::string& config, const std::vector<std::string>& args = {});
  DaemonRun stop_daemon(double limit_s = 30);
  bool daemon_running() const;
  // Asks `health` on the daemon's control socket (a path in dir()) every
  // 100 ms until it answers, while the daemon runs, for at most `limit_s`.
  bool wait_until_serving(const std::string& socket = "ctl.sock", double limit_s = 30) const;
  pid_t daemon_pid() const { return daemon_ ? daemon_->pid() : -1; }
  // Waits for the daemon started by start_daemon() to exit (sending SIGTERM
  // first when `terminate`); killed past `limit_s` (exit_status -1).
  DaemonRun wait_daemon(double limit_s, bool terminate);

 private:
  std::string dir_;
  std::unique_ptr<ChildProcess> daemon_;
};

// Runs psgatectl (PSGATECTL_BIN) with `args`; returns exit status and output.
struct CtlResult {
  int status = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
CtlResult psgatectl(const std::vector<std::string>& args);
// psgatectl -s SOCKET args...
CtlResult psgatectl_at(const std::string& socket_path, std::vector<std::string> args);
// psgatectl -s SOCKET args... --json: the reply, expected to succeed (exit 0).
nlohmann::json psgatectl_json(const std::string& socket_path, std::vector<std::string> args);

// One request line on a fresh connection to a Unix socket; returns the reply
// line, or "" on timeout/close.
std::string socket_request(const std::string& socket_path, const std::string& line, int timeout_ms = 5000);
// Sends `line` on a connected socket and reads one reply line.
std::string send_line(int fd, const std::string& line, int timeout_ms = 5000);

// The psgate binary (PSGATE_BIN, set by meson).
std::string psgate_binary();

}  // namespace psgate::testing
