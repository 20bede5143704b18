// SPDX-License-Identifier: BSD-3-Clause
// psgate: the gateway daemon.
//
//   psgate --config FILE [--duration SECONDS] [--check]
//
// Exit status: 0 after a clean run (or a valid --check), 2 for a bad command
// line or config, 1 when DPDK or a device cannot be set up.
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

#include "control/control_server.h"
#include "control/state_lock.h"
#include "daemon/gateway_run.h"
#include "daemon/log_queue.h"
#include "daemon/service_notify.h"
#include "daemon/start_checks.h"
#include "daemon/stop_requests.h"
#include "psgate/cli_checks.h"
#include "psgate/config.h"
#include "psgate/output_file.h"
#include "psgate/signals.h"

int main(int argc, char** argv) {
  // A stop or reload signal from here waits for run_gateway() to take it: a stop
  // during start-up ends the start at its next step (nothing forwarded,
  // exit 0; run_gateway()), a SIGHUP reloads once the gateway runs. Blocked first thing: the command line and the
  // config take tens of milliseconds, and a SIGHUP in them (a script that reloads right after launching) ended the
  // start without a word (exit 129).
  const sigset_t stop_signals = psgate::block_stop_signals();
  // Output that nobody reads any more (`psgate | tee log` whose tee went, a
  // closed journal pipe) is lost, not fatal: a write to it fails with EPIPE
  // instead of SIGPIPE killing psgate (undrained, no final counters; before
  // the start, at its first warning). Control clients are written with
  // MSG_NOSIGNAL anyway. Set before EAL, so its threads inherit it.
  ::signal(SIGPIPE, SIG_IGN);
  // Signals psgate has no use for end a process by default: a SIGUSR1 meant
  // for another daemon's log rotation stopped the gateway undrained and the
  // service restarted it. Ignored; SIGXFSZ too, so that a file-size limit
  // met by a state or --stats-json write is that write's error (EFBIG),
  // reported as a full disk is, not the gateway's end. (SIGQUIT keeps its
  // meaning: quit now, with a core.)
  for (int sig : {SIGUSR1, SIGUSR2, SIGALRM, SIGXFSZ}) ::signal(sig, SIG_IGN);
  psgate::open_closed_standard_fds();
  CLI::App app{
      "psgate: a DPDK priority gateway for parameter-server training traffic.\n"
      "Forwards every frame between the 'wire' and 'host' ports, classifying IP flows into\n"
      "jobs and scheduling each egress port with strict-priority classes and token buckets.\n"
      "Jobs, their order and the policy change at run time through the control socket\n"
      "([control] socket; see psgatectl --help), and persist in [control] state if set.\n"
      "SIGINT and SIGTERM stop receiving, drain the queues (bounded by\n"
      "dataplane.drain_timeout), print the final counters and exit 0 (during the start: it\n"
      "ends at its next step, releases what was set up, forwards nothing, exit 0); SIGHUP reads the config\n"
      "file again, as `psgatectl reload` does (the outcome goes to the log); SIGUSR1, SIGUSR2,\n"
      "SIGALRM, SIGXFSZ and SIGPIPE are ignored. A port whose link goes\n"
      "down (memif peer gone, af_packet or af_xdp interface deleted) is no longer polled and its traffic is\n"
      "dropped as link_down until it is back (af_xdp, tap and memif role=client ports only after a\n"
      "restart); `psgatectl health` names it. Exit status: 0 clean\n"
      "run, 2 bad command line, configuration (including a ports.<p>.mtu the device cannot\n"
      "carry, and lcores.data needing more queues than a device has) or state file,\n"
      "1 another psgate on the same control socket or state file, DPDK/device/socket set-up\n"
      "failure (the control socket, or\n"
      "metrics.listen's address taken), counters that do not add up, a --stats-json file that\n"
      "could not be written at exit, or a data lcore stuck in a\n"
      "driver call at stop (named in the log, after the final counters).\n"
      "[metrics] listen = \"127.0.0.1:9467\" serves Prometheus metrics on GET /metrics (off by default)."};
  std::string config_path;
  double duration_s = 0;
  bool check_only = false;
  std::string stats_json_path;
  app.add_option("-c,--config", config_path,
                 "TOML configuration file (psgate.toml(5); the service's is /etc/psgate/psgate.toml)")
      ->required();
  app.add_option("-d,--duration", duration_s,
                 "Run this many seconds (at most 1e9), then drain and exit; 0, the default: until signalled")
      // The end is a clock time point: a larger value overflowed it, and
      // psgate stopped right after starting.
      ->check(psgate::cli::seconds_up_to(1e9));
  app.add_flag("--check", check_only, "Validate the configuration and exit (0 if valid, 2 if not)");
  app.add_option("--stats-json", stats_json_path, "At exit, write the final counters to this file as JSON");
  // A build without systemd's notify protocol says so: under the shipped
  // Type=notify unit it would never be READY.
  app.set_version_flag("--version",
                       std::string(PSGATE_VERSION) +
                           (psgate::service::notify_supported() ? "" : " (built without systemd notification)"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  // --check forwards nothing: a signal ends it as it would any command
  // (one pending since the start ends it now).
  if (check_only) pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  if (const char* ns = std::getenv("NOTIFY_SOCKET"); !check_only && ns && *ns && !psgate::service::notify_supported())
    std::fprintf(stderr,
                 "psgate: warning: started by a service manager that waits for READY=1 (NOTIFY_SOCKET is set), but "
                 "this psgate was built without systemd notification (meson -Dsystemd=disabled): a Type=notify "
                 "unit times out and restarts it; rebuild with -Dsystemd=enabled, or use Type=simple\n");
  // Written at exit: a path that cannot be written is found now, not after
  // a run whose final counters it would lose.
  if (!check_only && !stats_json_path.empty()) {
    if (const std::string problem = psgate::output_file_problem(stats_json_path); !problem.empty()) {
      std::fprintf(stderr, "psgate: --stats-json %s: %s\n", stats_json_path.c_str(), problem.c_str());
      return 2;
    }
  }
  // A stop asked while a pipe's writer stalls (--config <(slow command))
  // is taken: the stop signals are blocked, so the read would otherwise
  // wait for the writer for good, and only SIGKILL ended psgate.
  auto config = psgate::load_config_file(config_path, psgate::stop_signal_pending);
  if (!config.ok()) {
    if (psgate::stop_signal_pending()) {
      std::fprintf(stderr, "psgate: stopped while reading %s; nothing was started\n", config_path.c_str());
      return 0;
    }
    std::fprintf(stderr, "psgate: %s\n", config.error().c_str());
    return 2;
  }
  if (const std::optional<int> verdict = psgate::check_before_start(*config, config_path, check_only)) return *verdict;
  // One gateway per control socket and per state file, found before DPDK
  // starts: a second one (another --file-prefix, devices that open twice)
  // would otherwise open the live one's devices, and write its own view over
  // the live one's state file, before its socket was found taken. Exit 1:
  // the running one may stop, and a restart then succeeds.
  if (psgate::ControlServer::in_use(config->control.socket)) {
    std::fprintf(stderr,
                 "psgate: control socket %s is in use by another process (a psgate already running with this "
                 "configuration?); nothing was started\n",
                 config->control.socket.c_str());
    return 1;
  }
  auto state_lock = psgate::StateLock::acquire(config->control.state);
  if (!state_lock) {
    std::fprintf(stderr, "psgate: %s; nothing was started\n", state_lock.error().c_str());
    // Something other than a file at the lock's path (a directory, a
    // dangling link) stays until an operator moves it, like a config error
    // (exit 2: the service is not restarted every 2 s for ever). Another
    // psgate holding it may stop, and an I/O error may pass (exit 1).
    return state_lock.error().find(" is not a regular file") != std::string::npos ? 2 : 1;
  }
  if (!state_lock->warning().empty()) std::fprintf(stderr, "psgate: warning: %s\n", state_lock->warning().c_str());
  auto logger = spdlog::stderr_color_mt("psgate");
  spdlog::set_default_logger(logger);
  // A start that fails says why whatever log.level asks (critical, off):
  // errors are shown until the gateway forwards, and the file's level from
  // then on (run).
  spdlog::set_level(std::min(spdlog::level::from_str(config->log_level), spdlog::level::err));
  bool stdout_held = false;
  const int status = psgate::run_gateway(*config, duration_s, stats_json_path, state_lock->warning(), stdout_held);
  if (!psgate::drain_log_lines(std::chrono::seconds(2)) || stdout_held) {
    // A writer is held in a write to an output nobody reads (the log
    // writer on stderr, the printer on stdout): exit()'s flush of that
    // stream would wait for it for good.
    if (!stdout_held) std::fflush(stdout);
    ::_exit(status);
  }
  return status;
}
