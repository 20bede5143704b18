// SPDX-License-Identifier: BSD-3-Clause
// psgate: the gateway daemon.
//
//   psgate --config FILE [--duration SECONDS] [--check]
//
// Exit status: 0 after a clean run (or a valid --check), 2 for a bad command
// line or config, 1 when DPDK or a device cannot be set up.
#include <rte_devargs.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <signal.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <tuple>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "config/compile.h"
#include "control/control_server.h"
#include "control/state_file.h"
#include "control/state_lock.h"
#include "daemon/log_queue.h"
#include "daemon/service_notify.h"
#include "dataplane/eal_args.h"
#include "psgate/cli_checks.h"
#include "psgate/config.h"
#include "psgate/control_plane.h"
#include "psgate/dataplane.h"
#include "psgate/eal_prefix.h"
#include "psgate/eal_teardown.h"
#include "psgate/lcore_check.h"
#include "psgate/log_throttle.h"
#include "psgate/output_file.h"
#include "psgate/pem_file.h"
#include "psgate/prometheus.h"
#include "psgate/signals.h"
#include "psgate/units.h"
#include "stats/metrics_server.h"
#include "stats/stats_json.h"
#include "stats/stats_report.h"
#include "stats/telemetry.h"

#ifdef PSGATE_HAVE_CLUSTER
#include "cluster/etcd_link.h"
#endif

namespace {

// How long the final report may wait for a stdout to take it (a pipe or
// terminal nobody reads) before the stop goes on without it.
constexpr std::chrono::milliseconds kFinalReportWait{5000};

using Clock = std::chrono::steady_clock;

// Whether a SIGINT or SIGTERM waits, blocked and not taken yet: a stop asked
// while the start is under way, which it asks between its long steps.
bool stop_signal_pending() {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  return sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1;
}

// Takes the pending SIGINT or SIGTERM (a SIGHUP stays: a reload is no stop)
// and returns its name.
std::string take_stop_signal() {
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  const int sig = psgate::take_pending_signal(stops);
  const char* name = sig ? sigabbrev_np(sig) : nullptr;
  return name ? std::string("SIG") + name : std::string("a stop signal");
}

// The control socket serves up to kMaxClients connections beside DPDK's own
// descriptors; a soft open-file limit of 1024 (a shell's default) runs out
// before that. Raise the soft limit to the hard one, as servers do; if it is
// still short, say so (clients past it are refused with a reason).
void raise_open_file_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  if (lim.rlim_cur < lim.rlim_max) {
    const rlim_t was = lim.rlim_cur;
    lim.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &lim) == 0) spdlog::debug("open-file limit raised from {} to {}", was, lim.rlim_cur);
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < psgate::kMaxClients + 256)
    spdlog::warn(
        "open-file limit {} is below the {} control clients psgate serves (plus its own); "
        "raise RLIMIT_NOFILE (LimitNOFILE= in a systemd unit)",
        lim.rlim_cur, psgate::kMaxClients);
}

// `unlocked`: why the state file's lock could not be taken ("": it is held).
// `stdout_held`: set when stdout took nothing of the final report for
// kFinalReportWait (nobody reads it): the exit must not flush it.
int run(const psgate::ConfigSpec& config, double duration_s, const std::string& stats_json_path,
        const std::string& unlocked, bool& stdout_held) {
  const sigset_t stop_signals = psgate::block_stop_signals();
  raise_open_file_limit();

  std::vector<std::string> args = psgate::eal_arguments(config, "psgate");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  spdlog::debug("EAL arguments: {}", fmt::join(args, " "));
  const int eal_used = rte_eal_init(static_cast<int>(argv.size()), argv.data());
  if (eal_used < 0) {
    // EAL's errno alone misleads: no hugepages reserved reads "Permission
    // denied" for root. Its own log above says which step failed.
    // EINVAL: EAL refused its arguments (an option of eal.args it does not
    // know, or one it cannot combine with the rest), or what they ask of
    // this machine (IOVA as PA without physical addresses, a driver plugin
    // that does not load): a restart repeats it, so a config error.
    if (rte_errno == EINVAL) {
      spdlog::error(
          "DPDK EAL refused its arguments ({}), or what they ask of this machine: see EAL's messages above; "
          "check eal.args in {}",
          fmt::join(args, " "), config.source);
      return 2;
    }
    // ENODEV: a device string EAL cannot parse (no driver of that name, a
    // malformed PCI address), or buses it could not scan (the machine's).
    // eal.args holds no device options (config.cc): a port's string that
    // does not parse now either is the configuration's (exit 2).
    if (rte_errno == ENODEV) {
      for (auto [key, spec] : {std::pair{"ports.wire.device", &config.wire}, {"ports.host.device", &config.host}}) {
        rte_devargs parsed{};
        // (Not reset: rte_devargs_reset is experimental in 22.11, and the
        // process ends here either way.)
        if (rte_devargs_parse(&parsed, spec->device.c_str()) != 0) {
          spdlog::error(
              "{}: {} \"{}\": DPDK knows no device of that name (a driver name it does not know: net_af_packet, "
              "net_af_xdp, net_memif, net_pcap, net_ring, net_null, net_tap...; or a malformed PCI address)",
              config.source, key, spec->device);
          return 2;
        }
      }
    }
    const bool huge = std::find(args.begin(), args.end(), "--no-huge") == args.end();
    if (const std::string in_use = psgate::eal_prefix_in_use(args); !in_use.empty()) {
      spdlog::error("DPDK EAL initialisation failed: {}: each psgate needs its own --file-prefix in eal.args", in_use);
      return 1;
    }
    spdlog::error(
        "DPDK EAL initialisation failed: {} (see EAL's messages above{})", rte_strerror(rte_errno),
        huge ? "; hugepages reserved and mounted? HugePages_Free in /proc/meminfo, dpdk-hugepages.py -s" : "");
    return 1;
  }
  // EAL reads options only (getopt moves the rest to the end): a word of
  // eal.args that is neither an option nor an option's value would be
  // ignored, unsaid.
  if (eal_used + 1 < static_cast<int>(argv.size())) {
    std::vector<std::string> unused(argv.begin() + eal_used + 1, argv.end());
    spdlog::error("eal.args in {}: EAL does not take {} (not an option, nor the value of one)", config.source,
                  fmt::join(unused, " "));
    psgate::eal_cleanup_after_interrupts();
    return 2;
  }
  psgate::queue_log_lines();
  // rte_eal_cleanup once EAL's interrupt thread has caught up with the ports'
  // teardown: racing it crashed an exit now and then (psgate/eal_teardown.h).
  auto end_eal = [] {
    if (!psgate::eal_cleanup_after_interrupts())
      spdlog::warn("DPDK's interrupt thread did not answer within 1 s: EAL is left as it is for the exit");
  };
  int status = 0;
  {
    // A stop asked during the start ends it at the next step (the mbuf pool,
    // each port, queue and device start can take seconds): nothing forwarded,
    // what was set up released, exit 0.
    auto dataplane = psgate::Dataplane::create(config, stop_signal_pending);
    if (!dataplane.ok() && dataplane.error().rfind(psgate::Dataplane::kStartStopped, 0) == 0) {
      spdlog::info("{} received during start-up: {}; nothing was forwarded", take_stop_signal(), dataplane.error());
      end_eal();
      return 0;
    }
    if (!dataplane.ok()) {
      spdlog::error("{}", dataplane.error());
      end_eal();
      // A key the device refuses (an MTU above its limit) is reported as
      // "<config>: <key>: ..." and is a configuration error like any other.
      return dataplane.error().rfind(config.source + ": ", 0) == 0 ? 2 : 1;
    }
    psgate::Dataplane& dp = **dataplane;
    // A start-up step failed (or a stop ended the start: `level` info) after
    // the ports were made: say why, stop the ports before EAL goes, and exit
    // with `code`.
    auto give_up = [&](const std::string& why, int code, spdlog::level::level_enum level = spdlog::level::err) {
      spdlog::log(level, "{}", why);
      psgate::unregister_telemetry();  // DPDK telemetry must not reach what is freed next
      dataplane->reset();
      end_eal();
      return code;
    };
    // Cluster mode: connect before the control plane starts, so that it starts
    // from the store's view when the store answers, and from the state this
    // gateway applied last (its state file) when it does not (fail static).
    // Declared before the control plane: it must outlive it.
    std::unique_ptr<psgate::ClusterLink> cluster;
#ifdef PSGATE_HAVE_CLUSTER
    if (config.cluster) {
      auto link = std::make_unique<psgate::EtcdLink>(*config.cluster, config.class_count, config.policy);
      if (!link->wait_first_read(2'000'000'000))
        spdlog::warn(
            "cluster: the store did not answer within 2 s; starting on the state this gateway applied last, "
            "and following the store once it answers");
      if (!config.jobs.empty())
        spdlog::warn("cluster mode: the config's [[jobs]] are not used; jobs come from the store ({}/jobs/)",
                     config.cluster->prefix);
      cluster = std::move(link);
    }
#endif
    auto control = psgate::ControlPlane::create(dp, config);
    if (!control.ok()) return give_up(control.error(), 2);
    psgate::ControlPlane& cp = **control;
    if (cluster) cp.follow_cluster(cluster.get(), *config.cluster);
    if (!unlocked.empty()) cp.note_state_unlocked(unlocked);
    // The start's rules compile (seconds for 100,000 rules) asks for a stop
    // between its partitions: one ends it there, nothing published or
    // written, exit 0 as for a stop at any other step of the start.
    if (auto ok = cp.start(stop_signal_pending); !ok) {
      if (ok.error().rfind(psgate::kCompileStopped, 0) == 0)
        return give_up(
            take_stop_signal() + " received during start-up: start " + ok.error() + "; nothing was forwarded", 0,
            spdlog::level::info);
      // The first write of the state file failing is the state path's fault
      // (an operator's setting), like a config error.
      return give_up(ok.error(), ok.error().rfind("state file ", 0) == 0 ? 2 : 1);
    }
    psgate::register_telemetry(cp);
    // A set-up step that fails from here on: the gateway never served.
    auto give_up_unserved = [&](const std::string& why, int code) {
      cp.withdraw_unserved_state();
      return give_up(why, code);
    };

    // Periodic report on the control thread: a summary line and the per-job table.
    const auto started = Clock::now();
    psgate::Totals prev = cp.totals_locked(false);
    std::vector<uint32_t> prev_job_of_slot;  // at `prev`: which job each slot counted for
    auto prev_time = started;
    psgate::ControlServer::Options options;
    options.socket_path = config.control.socket;
    options.report_ns = config.stats_interval_ns;
    options.unread_timeout_ns = config.control.unread_timeout_ns;
    // Cluster mode: the store's changes are applied as soon as they are read
    // (the link's wake descriptor); the tick reports this gateway to the store.
    if (cluster) options.wake_fd = cluster->wake_fd();
    // SIGHUP reads the config file again (`reload`), on the control thread:
    // this thread only takes signals, and says so through the descriptor.
    const int reload_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (reload_fd < 0) return give_up_unserved(std::string("eventfd: ") + std::strerror(errno), 1);
    struct CloseReloadFd {
      int fd;
      ~CloseReloadFd() { close(fd); }
    } close_reload_fd{reload_fd};
    options.reload_fd = reload_fd;
    std::optional<psgate::BackgroundPrinter> job_table(std::in_place, stdout);
    options.report = [&] {
      const auto now = Clock::now();
      psgate::Totals cur = cp.totals_locked(false);
      const double secs = std::chrono::duration<double>(now - prev_time).count();
      spdlog::info("{}", psgate::format_summary_line(prev, cur, secs));
      cp.with_snapshot([&](const psgate::Snapshot& snap) {
        if (!snap.jobs.empty()) {
          job_table->print(psgate::format_job_rates(
              prev, cur, secs, snap, std::chrono::duration<double>(now - started).count(), prev_job_of_slot));
        }
        prev_job_of_slot.assign(snap.slots.size(), 0);
        for (const psgate::JobEntry& j : snap.jobs) prev_job_of_slot[j.slot] = j.id;
      });
      prev = std::move(cur);
      prev_time = now;
    };
    // systemd's watchdog (WatchdogSec= in the unit): alive while the control
    // thread ticks and every data lcore loops.
    // And `systemctl status` says what health says, looked at once a second
    // (on the control thread: the first look replaces READY's text) and sent
    // when it changed, while `serving` (READY sent, no stop begun).
    std::atomic<bool> serving{false};
    options.after_tick = [&dp, &cp, &serving, status_due = Clock::now(), status_sent = std::string()]() mutable {
      if (!dp.any_lcore_stuck()) psgate::service::notify_watchdog();
      // Only between READY and the stop: before, the start's own text says
      // where it is (and whether it forwards at all); after, the drain's.
      if (!serving.load() || !psgate::service::notify_wanted() || Clock::now() < status_due) return;
      status_due = Clock::now() + std::chrono::seconds(1);
      const nlohmann::json health = cp.handle_line(R"({"cmd":"health"})");
      std::string status = psgate::service::status_text(health.value("result", nlohmann::json::object()));
      if (status != status_sent) psgate::service::notify_status(status_sent = std::move(status));
    };
    auto server = psgate::ControlServer::start(cp, options);
    if (!server.ok()) return give_up_unserved(server.error(), 1);
    // GET /metrics ([metrics] listen). A port it cannot have is a set-up
    // failure like the control socket's: exit 1, naming metrics.listen.
    std::unique_ptr<psgate::MetricsServer> metrics;
    // Stops a start that never served, once the control socket listens (a
    // stop signal, or a step that failed): the metrics endpoint and the
    // socket close, the state file's record of this start is withdrawn, then
    // give_up: `why` said at `level`, exit `code`.
    // `lcores_launched`: dp.start() was called, so data lcores may run; they
    // are stopped first, and one stuck already (in a driver call) may still
    // use what would be freed: then nothing is, and the process leaves at
    // once, exit 1, with the stop's own lines about the stuck lcore and then
    // `why` (what ended the start; it went unsaid there before).
    auto stop_unserved = [&](bool lcores_launched, spdlog::level::level_enum level, const std::string& why, int code) {
      if (metrics) metrics->stop();
      server->reset();
      cp.withdraw_unserved_state();
      if (lcores_launched && !dp.stop_and_drain()) {
        spdlog::log(level, "{}", why);
        cluster.reset();
        std::fflush(stdout);
        // The queued log lines (the stuck lcore's name among them) first;
        // stderr's own flush only when its writer is not held in a write.
        if (psgate::drain_log_lines(std::chrono::seconds(2))) std::fflush(stderr);
        std::_Exit(1);
      }
      return give_up(why, code, level);
    };
    if (config.metrics.on()) {
      auto started_metrics =
          psgate::MetricsServer::start(config.metrics, [&cp] { return psgate::render_prometheus(cp.metrics_view()); });
      if (!started_metrics.ok())
        return stop_unserved(false, spdlog::level::err, config.source + ": " + started_metrics.error(), 1);
      metrics = std::move(*started_metrics);
    }
    // A stop asked since the ports started (the control plane's set-up takes
    // a second for a state file of thousands of jobs): the gateway never
    // forwarded, and its state file records nothing that served.
    if (stop_signal_pending()) {
      return stop_unserved(
          false, spdlog::level::info,
          take_stop_signal() + " received during start-up: start stopped before forwarding; nothing was forwarded", 0);
    }
    if (config.class_count == 2)
      spdlog::warn(
          "classes.count = 2 leaves jobs no class of their own (class 0 is network control's, class 1 the "
          "default): every job shares the default class, in no order; 3 or more give jobs priorities");
    spdlog::info("psgate {}: {} jobs, {} classes, control socket {}, metrics {}, {}", PSGATE_VERSION, cp.job_count(),
                 config.class_count, config.control.socket,
                 config.metrics.on() ? "http://" + config.metrics.listen + "/metrics" : std::string("off"),
                 dp.describe_lcores());
    if (auto launched = dp.start(); !launched) return stop_unserved(true, spdlog::level::err, launched.error(), 1);
    // Ports forward and the control socket listens: a Type=notify unit's
    // `systemctl start` returns now, and psgatectl can connect.
    psgate::service::notify_ready(
        fmt::format("forwarding; {} jobs; control socket {}", cp.job_count(), config.control.socket));
    serving = true;
    spdlog::set_level(spdlog::level::from_str(config.log_level));  // errors were shown whatever it said (main)

    const bool bounded = duration_s > 0;
    const auto end = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s));
    // A storm of SIGHUPs (a script in a loop) is said once a second, with
    // how many came since: each reload says its own outcome, and the reloads
    // a busy control thread had not begun yet are one.
    psgate::LogThrottle hup_log(1'000'000'000);
    for (;;) {
      const auto wait = bounded ? end - Clock::now() : std::chrono::hours(1);
      if (const int sig = psgate::wait_for_stop_signal(stop_signals, wait)) {
        if (sig == SIGHUP) {
          if (hup_log.admit(psgate::monotonic_ns())) {
            spdlog::info(
                "SIGHUP received{}: reading {} again (reload)",
                hup_log.held_back() ? fmt::format(" ({} more before it in the last second)", hup_log.held_back()) : "",
                config.source);
          }
          const uint64_t one = 1;
          if (write(reload_fd, &one, sizeof(one)) != sizeof(one))
            spdlog::error("SIGHUP: cannot ask the control thread to reload: {}", std::strerror(errno));
          continue;
        }
        spdlog::info(
            "SIG{} received: stopping RX and draining queues (for up to {}; a second SIGTERM or SIGINT "
            "stops at once)",
            sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", psgate::duration_text_exact(config.drain_timeout_ns));
        serving = false;
        psgate::service::notify_stopping("draining queues", config.drain_timeout_ns);
        break;
      }
      if (bounded && Clock::now() >= end) {
        spdlog::info("duration of {} s reached: stopping RX and draining queues", duration_s);
        serving = false;
        psgate::service::notify_stopping("draining queues", config.drain_timeout_ns);
        break;
      }
    }
    // A rule merge started now would only delay the exit, which waits for
    // it; one under way is waited for at the control thread's priority.
    cp.stop_background_work();
    // The scrapes end before the data plane stops: none reads a counter
    // while the lcores drain, or after they are gone.
    if (metrics) metrics->stop();
    // The control thread may be waiting in a publish for a stuck lcore's
    // quiescence, which never comes: let it go, or the join below hangs.
    dp.publisher().stop_waiting();
    server->reset();  // no control change after this point
    // A second stop signal (an operator who will not wait out a long
    // drain_timeout) ends the drain at once; a SIGHUP meanwhile is no reload.
    const bool stopped = dp.stop_and_drain([&] {
      const int sig = psgate::take_pending_signal(stop_signals);
      if (sig != SIGTERM && sig != SIGINT) return false;
      spdlog::warn("SIG{} received while draining: stopping now; what is still queued is dropped (shutdown_flush)",
                   sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
      return true;
    });
    const psgate::Totals totals = cp.totals_locked(true);
    // The report file before anything goes to stdout: a stdout nobody reads
    // cannot keep the final counters from the disk.
    bool counters_written = false;  // to the --stats-json file
    if (!stats_json_path.empty()) {
      const std::string text = psgate::totals_to_json(totals, dp.snapshot()).dump(2) + "\n";
      const std::string error =
          psgate::write_output_file(stats_json_path, [&](std::FILE* f) { return std::fputs(text.c_str(), f) >= 0; });
      if (!error.empty()) {
        spdlog::error("--stats-json: {}", error);
        status = 1;
      } else {
        counters_written = true;
      }
    }
    // The last table, then the report, from the printer's thread: a stdout
    // nobody reads (a full pipe, a stopped pager) held the stop here until
    // SIGKILL; now it waits a bounded time and the stop goes on without it.
    // A report that cannot be written (a full disk under a redirected
    // stdout) is said, and the exit says so, as for --stats-json; a reader
    // that went (EPIPE) took the output it no longer wanted with it.
    const auto reported =
        job_table->finish(psgate::format_final_report(totals, dp.snapshot(), config), kFinalReportWait);
    job_table.reset();
    if (reported.outcome == psgate::BackgroundPrinter::Outcome::kHeld) {
      stdout_held = true;
      spdlog::warn("final report: standard output took nothing for {} s (nobody reads it): stopping without it{}",
                   kFinalReportWait.count() / 1000,
                   counters_written ? "; the final counters are in " + stats_json_path : std::string());
    } else if (reported.outcome == psgate::BackgroundPrinter::Outcome::kFailed && reported.error != EPIPE) {
      spdlog::error("final report: cannot write it to standard output: {}", std::strerror(reported.error));
      status = 1;
    }
    if (!stopped) {
      // An lcore is still inside a driver call: tearing down the ports or
      // EAL under it could crash or hang. The report is out: leave now.
      // The store link touches no port: it goes first, revoking its lease,
      // so the registration (and any policy leadership) goes now rather
      // than one lease TTL later.
      cluster.reset();
      if (!stdout_held) std::fflush(stdout);
      // The queued log lines (the stuck lcore's name among them) first;
      // stderr's own flush only when its writer is not held in a write.
      if (psgate::drain_log_lines(std::chrono::seconds(2))) std::fflush(stderr);
      std::_Exit(1);
    }
    if (!psgate::conservation_holds(totals)) {
      spdlog::error("counter conservation violated: received != transmitted + dropped");
      status = 1;
    }
    psgate::unregister_telemetry();
  }
  end_eal();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  // A stop or reload signal from here waits for run() to take it: a stop
  // during start-up ends the start at its next step (nothing forwarded,
  // exit 0; run()), a SIGHUP reloads once the gateway runs. Blocked first thing: the command line and the config take
  // tens of milliseconds, and a SIGHUP in them (a script that reloads right after launching) ended the start without a
  // word (exit 129).
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
  auto config = psgate::load_config_file(config_path, stop_signal_pending);
  if (!config.ok()) {
    if (stop_signal_pending()) {
      std::fprintf(stderr, "psgate: stopped while reading %s; nothing was started\n", config_path.c_str());
      return 0;
    }
    std::fprintf(stderr, "psgate: %s\n", config.error().c_str());
    return 2;
  }
#ifndef PSGATE_HAVE_CLUSTER
  if (config->cluster) {
    std::fprintf(stderr,
                 "psgate: %s: [cluster]: this psgate was built without cluster mode (meson -Dcluster=enabled, with "
                 "libgrpc++-dev and etcd's .proto files; tools/setup installs them)\n",
                 config_path.c_str());
    return 2;
  }
#endif
  // Lcores must exist on this machine (the parser cannot know which do),
  // and be in this process's CPU affinity. --check is run from a shell whose
  // affinity need not be the service's (isolcpus leaves the isolated CPUs
  // out of a login shell's; CPUAffinity= sets the unit's): there an online
  // CPU outside it is a warning, not a refusal. Read before EAL pins each
  // thread to its lcore: recorded for a reload's check of the lcores.
  const std::vector<unsigned>& affinity = psgate::start_affinity_cpus();
  const std::vector<unsigned> online = psgate::online_cpus();
  const std::vector<unsigned>& usable = check_only && !online.empty() ? online : affinity;
  if (auto lcores = psgate::check_lcores_exist(*config, usable, config_path, online); !lcores) {
    std::fprintf(stderr, "psgate: %s\n", lcores.error().c_str());
    return 2;
  }
  if (check_only) {
    if (auto here = psgate::check_lcores_exist(*config, affinity, config_path, online); !here) {
      std::fprintf(stderr,
                   "psgate: warning: %s: a start with this process's affinity would fail; the service's "
                   "(CPUAffinity=) may differ\n",
                   here.error().c_str());
    }
  }
  // The config file itself (a template's state = the config's own path):
  // read as a state file it is "not valid JSON", and the remedy that error
  // gives, move it away, would take the config.
  if (std::error_code same_error;
      !config->control.state.empty() && std::filesystem::equivalent(config->control.state, config_path, same_error)) {
    std::fprintf(stderr,
                 "psgate: %s: control.state: \"%s\" is this config file itself: the state file must be a file of "
                 "its own (e.g. /var/lib/psgate/state.json)\n",
                 config_path.c_str(), config->control.state.c_str());
    return 2;
  }
  // The state file's path: a directory, or a directory this process cannot
  // write, is refused before DPDK starts, by --check too, which also reads
  // the file as a start would (a start reads it in ControlPlane::create). A
  // state file on a filesystem mounted read-only only warns (a disk
  // condition: check_state_dir_writable).
  if (auto kind = psgate::check_state_file_kind(config->control.state); !kind) {
    std::fprintf(stderr, "psgate: %s\n", kind.error().c_str());
    return 2;
  }
  if (auto writable = psgate::check_state_dir_writable(config->control.state); writable && !*writable) {
    std::fprintf(stderr,
                 "psgate: warning: state file %s: on a read-only filesystem: psgate forwards on the state it "
                 "reads and refuses changes until it can write there again (health degraded meanwhile)\n",
                 config->control.state.c_str());
  } else if (!writable) {
    // An operator of group psgate checking an edit (operations.md) is not
    // the root the service runs as: what root may write is not theirs to see.
    if (!check_only || ::geteuid() == 0) {
      std::fprintf(stderr, "psgate: %s\n", writable.error().c_str());
      return 2;
    }
    std::fprintf(stderr, "psgate: warning: %s (checked as uid %u, not as the root the service runs as)\n",
                 writable.error().c_str(), static_cast<unsigned>(::geteuid()));
  }
  // Relative paths are taken from the working directory, which is / under
  // systemd and wherever a shell is for --check: the two then look at
  // different files.
  std::error_code cwd_error;
  const std::string cwd = std::filesystem::current_path(cwd_error).string();
  for (auto [key, path] :
       {std::pair{"control.socket", &config->control.socket}, {"control.state", &config->control.state}}) {
    if (!path->empty() && path->front() != '/')
      std::fprintf(stderr,
                   "psgate: warning: %s: %s \"%s\" is relative: taken from the working directory (%s), which is / "
                   "under systemd; write an absolute path\n",
                   config_path.c_str(), key, path->c_str(), cwd_error ? "unknown" : cwd.c_str());
  }
  // An empty rule is the protocol's "every IP packet"; in a file made from a
  // template it is more often a variable that was not set (psgatectl refuses
  // it on a command line). Said, not refused: it may be meant.
  for (const psgate::JobSpec& job : config->jobs) {
    for (size_t k = 0; k < job.match.size(); ++k) {
      if (job.match[k] == psgate::MatchRule{})
        std::fprintf(stderr,
                     "psgate: warning: %s: job %u: match[%zu] is empty, so the job takes every IP packet that no "
                     "earlier job's rule takes (an unset variable?)\n",
                     config_path.c_str(), job.id, k);
    }
  }
  // The control socket's path: one that names a file, or lies under one, is
  // a config error that a restart cannot mend (exit 2), found by --check too.
  if (auto sock = psgate::ControlServer::check_path(config->control.socket); !sock) {
    std::fprintf(stderr, "psgate: %s: %s\n", config_path.c_str(), sock.error().c_str());
    return 2;
  }
  if (auto writable = psgate::ControlServer::check_writable(config->control.socket); !writable) {
    // As for the state file: what root may write is not a group member's
    // --check to see.
    if (!check_only || ::geteuid() == 0) {
      std::fprintf(stderr, "psgate: %s: %s\n", config_path.c_str(), writable.error().c_str());
      return 2;
    }
    std::fprintf(stderr, "psgate: warning: %s: %s (checked as uid %u, not as the root the service runs as)\n",
                 config_path.c_str(), writable.error().c_str(), static_cast<unsigned>(::geteuid()));
  }
  // Cluster TLS files: unreadable is a config error, found by --check too, not
  // a store that silently never answers.
  if (config->cluster) {
    using psgate::PemKind;
    for (auto [key, path, kind] : {std::tuple{"ca", &config->cluster->ca, PemKind::kCertificates},
                                   {"cert", &config->cluster->cert, PemKind::kCertificates},
                                   {"key", &config->cluster->key, PemKind::kPrivateKey}}) {
      if (path->empty()) continue;
      if (auto pem = psgate::read_pem_file(*path, kind); !pem) {
        std::fprintf(stderr, "psgate: %s: cluster.%s: %s\n", config_path.c_str(), key, pem.error().c_str());
        return 2;
      }
    }
  }
  if (check_only) {
    auto saved = psgate::read_state_file(config->control.state, config->max_jobs, config->class_count);
    if (saved && *saved) {
      psgate::take_file_changes(**saved, psgate::FileSettings{config->policy, psgate::compile_ports(*config)}, *config);
      if (auto valid = psgate::check_saved_state(**saved, *config); !valid)
        saved = decltype(saved)::failure(valid.error());
    }
    if (!saved) {
      std::fprintf(stderr, "psgate: %s\n", saved.error().c_str());
      return 2;
    }
    if (*saved && !config->cluster) {
      if (const std::string unlike = psgate::config_jobs_unlike_state(config->jobs, (*saved)->jobs); !unlike.empty())
        std::fprintf(stderr,
                     "psgate: warning: %s: its [[jobs]] differ from the state file %s (%s), whose jobs a start "
                     "uses: change jobs with psgatectl (or stop psgate, remove the state file, and start it to start "
                     "from the config's)\n",
                     config_path.c_str(), config->control.state.c_str(), unlike.c_str());
    }
    std::printf("%s: configuration is valid\n", config_path.c_str());
    return 0;
  }
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
  const int status = run(*config, duration_s, stats_json_path, state_lock->warning(), stdout_held);
  if (!psgate::drain_log_lines(std::chrono::seconds(2)) || stdout_held) {
    // A writer is held in a write to an output nobody reads (the log
    // writer on stderr, the printer on stdout): exit()'s flush of that
    // stream would wait for it for good.
    if (!stdout_held) std::fflush(stdout);
    ::_exit(status);
  }
  return status;
}
