// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/gateway_run.h"

#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "control/control_server.h"
#include "daemon/eal_start.h"
#include "daemon/log_queue.h"
#include "daemon/service_notify.h"
#include "daemon/stop_requests.h"
#include "psgate/control_plane.h"
#include "psgate/dataplane.h"
#include "psgate/eal_teardown.h"
#include "psgate/log_throttle.h"
#include "psgate/output_file.h"
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

namespace psgate {

namespace {

// How long the final report may wait for a stdout to take it (a pipe or
// terminal nobody reads) before the stop goes on without it.
constexpr std::chrono::milliseconds kFinalReportWait{5000};

using Clock = std::chrono::steady_clock;

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
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < kMaxClients + 256)
    spdlog::warn(
        "open-file limit {} is below the {} control clients psgate serves (plus its own); "
        "raise RLIMIT_NOFILE (LimitNOFILE= in a systemd unit)",
        lim.rlim_cur, kMaxClients);
}

}  // namespace

int run_gateway(const ConfigSpec& config, double duration_s, const std::string& stats_json_path,
                const std::string& unlocked, bool& stdout_held) {
  const sigset_t stop_signals = block_stop_signals();
  raise_open_file_limit();
  if (const int eal_failed = start_eal(config)) return eal_failed;
  queue_log_lines();
  // rte_eal_cleanup once EAL's interrupt thread has caught up with the ports'
  // teardown: racing it crashed an exit now and then (psgate/eal_teardown.h).
  auto end_eal = [] {
    if (!eal_cleanup_after_interrupts())
      spdlog::warn("DPDK's interrupt thread did not answer within 1 s: EAL is left as it is for the exit");
  };
  int status = 0;
  {
    // A stop asked during the start ends it at the next step (the mbuf pool,
    // each port, queue and device start can take seconds): nothing forwarded,
    // what was set up released, exit 0.
    auto dataplane = Dataplane::create(config, stop_signal_pending);
    if (!dataplane.ok() && dataplane.error().rfind(Dataplane::kStartStopped, 0) == 0) {
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
    Dataplane& dp = **dataplane;
    // A start-up step failed (or a stop ended the start: `level` info) after
    // the ports were made: say why, stop the ports before EAL goes, and exit
    // with `code`.
    auto give_up = [&](const std::string& why, int code, spdlog::level::level_enum level = spdlog::level::err) {
      spdlog::log(level, "{}", why);
      unregister_telemetry();  // DPDK telemetry must not reach what is freed next
      dataplane->reset();
      end_eal();
      return code;
    };
    // Cluster mode: connect before the control plane starts, so that it starts
    // from the store's view when the store answers, and from the state this
    // gateway applied last (its state file) when it does not (fail static).
    // Declared before the control plane: it must outlive it.
    std::unique_ptr<ClusterLink> cluster;
#ifdef PSGATE_HAVE_CLUSTER
    if (config.cluster) {
      auto link = std::make_unique<EtcdLink>(*config.cluster, config.class_count, config.policy);
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
    auto control = ControlPlane::create(dp, config);
    if (!control.ok()) return give_up(control.error(), 2);
    ControlPlane& cp = **control;
    if (cluster) cp.follow_cluster(cluster.get(), *config.cluster);
    if (!unlocked.empty()) cp.note_state_unlocked(unlocked);
    // The start's rules compile (seconds for 100,000 rules) asks for a stop
    // between its partitions: one ends it there, nothing published or
    // written, exit 0 as for a stop at any other step of the start.
    if (auto ok = cp.start(stop_signal_pending); !ok) {
      if (ok.error().rfind(kCompileStopped, 0) == 0)
        return give_up(
            take_stop_signal() + " received during start-up: start " + ok.error() + "; nothing was forwarded", 0,
            spdlog::level::info);
      // The first write of the state file failing is the state path's fault
      // (an operator's setting), like a config error.
      return give_up(ok.error(), ok.error().rfind("state file ", 0) == 0 ? 2 : 1);
    }
    register_telemetry(cp);
    // A set-up step that fails from here on: the gateway never served.
    auto give_up_unserved = [&](const std::string& why, int code) {
      cp.withdraw_unserved_state();
      return give_up(why, code);
    };

    // Periodic report on the control thread: a summary line and the per-job table.
    const auto started = Clock::now();
    Totals prev = cp.totals_locked(false);
    std::vector<uint32_t> prev_job_of_slot;  // at `prev`: which job each slot counted for
    auto prev_time = started;
    ControlServer::Options options;
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
    std::optional<BackgroundPrinter> job_table(std::in_place, stdout);
    options.report = [&] {
      const auto now = Clock::now();
      Totals cur = cp.totals_locked(false);
      const double secs = std::chrono::duration<double>(now - prev_time).count();
      spdlog::info("{}", format_summary_line(prev, cur, secs));
      cp.with_snapshot([&](const Snapshot& snap) {
        if (!snap.jobs.empty()) {
          job_table->print(format_job_rates(prev, cur, secs, snap, std::chrono::duration<double>(now - started).count(),
                                            prev_job_of_slot));
        }
        prev_job_of_slot.assign(snap.slots.size(), 0);
        for (const JobEntry& j : snap.jobs) prev_job_of_slot[j.slot] = j.id;
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
      if (!dp.any_lcore_stuck()) service::notify_watchdog();
      // Only between READY and the stop: before, the start's own text says
      // where it is (and whether it forwards at all); after, the drain's.
      if (!serving.load() || !service::notify_wanted() || Clock::now() < status_due) return;
      status_due = Clock::now() + std::chrono::seconds(1);
      const nlohmann::json health = cp.handle_line(R"({"cmd":"health"})");
      std::string status = service::status_text(health.value("result", nlohmann::json::object()));
      if (status != status_sent) service::notify_status(status_sent = std::move(status));
    };
    auto server = ControlServer::start(cp, options);
    if (!server.ok()) return give_up_unserved(server.error(), 1);
    // GET /metrics ([metrics] listen). A port it cannot have is a set-up
    // failure like the control socket's: exit 1, naming metrics.listen.
    std::unique_ptr<MetricsServer> metrics;
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
        if (drain_log_lines(std::chrono::seconds(2))) std::fflush(stderr);
        std::_Exit(1);
      }
      return give_up(why, code, level);
    };
    if (config.metrics.on()) {
      auto started_metrics =
          MetricsServer::start(config.metrics, [&cp] { return render_prometheus(cp.metrics_view()); });
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
    service::notify_ready(fmt::format("forwarding; {} jobs; control socket {}", cp.job_count(), config.control.socket));
    serving = true;
    spdlog::set_level(spdlog::level::from_str(config.log_level));  // errors were shown whatever it said (main)

    const bool bounded = duration_s > 0;
    const auto end = started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration_s));
    // A storm of SIGHUPs (a script in a loop) is said once a second, with
    // how many came since: each reload says its own outcome, and the reloads
    // a busy control thread had not begun yet are one.
    LogThrottle hup_log(1'000'000'000);
    for (;;) {
      const auto wait = bounded ? end - Clock::now() : std::chrono::hours(1);
      if (const int sig = wait_for_stop_signal(stop_signals, wait)) {
        if (sig == SIGHUP) {
          if (hup_log.admit(monotonic_ns())) {
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
            sigabbrev_np(sig) ? sigabbrev_np(sig) : "?", duration_text_exact(config.drain_timeout_ns));
        serving = false;
        service::notify_stopping("draining queues", config.drain_timeout_ns);
        break;
      }
      if (bounded && Clock::now() >= end) {
        spdlog::info("duration of {} s reached: stopping RX and draining queues", duration_s);
        serving = false;
        service::notify_stopping("draining queues", config.drain_timeout_ns);
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
      const int sig = take_pending_signal(stop_signals);
      if (sig != SIGTERM && sig != SIGINT) return false;
      spdlog::warn("SIG{} received while draining: stopping now; what is still queued is dropped (shutdown_flush)",
                   sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
      return true;
    });
    const Totals totals = cp.totals_locked(true);
    // The report file before anything goes to stdout: a stdout nobody reads
    // cannot keep the final counters from the disk.
    bool counters_written = false;  // to the --stats-json file
    if (!stats_json_path.empty()) {
      const std::string text = totals_to_json(totals, dp.snapshot()).dump(2) + "\n";
      const std::string error =
          write_output_file(stats_json_path, [&](std::FILE* f) { return std::fputs(text.c_str(), f) >= 0; });
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
    const auto reported = job_table->finish(format_final_report(totals, dp.snapshot(), config), kFinalReportWait);
    job_table.reset();
    if (reported.outcome == BackgroundPrinter::Outcome::kHeld) {
      stdout_held = true;
      spdlog::warn("final report: standard output took nothing for {} s (nobody reads it): stopping without it{}",
                   kFinalReportWait.count() / 1000,
                   counters_written ? "; the final counters are in " + stats_json_path : std::string());
    } else if (reported.outcome == BackgroundPrinter::Outcome::kFailed && reported.error != EPIPE) {
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
      if (drain_log_lines(std::chrono::seconds(2))) std::fflush(stderr);
      std::_Exit(1);
    }
    if (!conservation_holds(totals)) {
      spdlog::error("counter conservation violated: received != transmitted + dropped");
      status = 1;
    }
    unregister_telemetry();
  }
  end_eal();
  return status;
}

}  // namespace psgate
