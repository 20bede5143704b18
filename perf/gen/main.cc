// SPDX-License-Identifier: BSD-3-Clause
// psgate-gen: packet generator for psgate benchmarks and tests.
//
//   psgate-gen [--profile FILE] [options] -- EAL-ARGS
//
// Exit status: 0 after a run, also one stopped by a signal (loss is reported,
// not an error), 2 for a bad command line or profile, 1 when DPDK, a port or
// its link cannot be set up, a worker lcore cannot be started or a report
// file cannot be written.
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <tuple>

#include "engine.h"
#include "gen_ports.h"
#include "profile.h"
#include "psgate/cli_checks.h"
#include "psgate/eal_arg_clash.h"
#include "psgate/eal_prefix.h"
#include "psgate/eal_teardown.h"
#include "psgate/loop_epochs.h"
#include "psgate/output_file.h"
#include "psgate/signals.h"
#include "psgate/tsc_clock.h"
#include "psgate/units.h"
#include "report.h"

namespace {

using namespace psgate::gen;
using Clock = std::chrono::steady_clock;

constexpr const char* kDescription =
    "psgate-gen: packet generator for psgate.\n"
    "Sends J jobs' parameter-server traffic through two DPDK ports and accounts every frame it gets back:\n"
    "pull frames (PS -> workers) leave by the host-side port (facing psgate's host port) and return on the\n"
    "wire-side port; push frames the other way. Every frame carries job, flow, per-flow sequence number,\n"
    "TX TSC and its run's tag (another generator's frames are counted apart, with a warning); the report\n"
    "gives per job and direction: TX/RX packets, bytes and rates, loss (after the drain), reordering,\n"
    "duplicates, late arrivals and latency (min, p50, p99, p99.9, max and the histogram), whether the\n"
    "generator itself fell behind, and with --flows-csv the same per flow.\n"
    "EAL arguments follow '--' (e.g. -- --no-huge -m 512 --file-prefix=gen --vdev=net_memif0,role=client,...).\n"
    "Lcores: with two worker lcores TX and RX run on separate lcores, with one in one loop; the main lcore\n"
    "sleeps. SIGINT/SIGTERM/SIGHUP stop TX, wait the drain, report and exit 0 (a second cuts the drain short);\n"
    "while the links are awaited they stop the wait instead: report (nothing sent, no --hold) and exit 0.\n"
    "Exit status: 0 after a run, also one stopped by a signal (loss is reported, not an error), 2 for a bad\n"
    "command line or profile or a report path that cannot be written (checked before the run), 1 when DPDK,\n"
    "a port or its link cannot be set up or a worker lcore cannot be started, or a report cannot be written\n"
    "after the run.\n"
    "Profile format: perf/gen/README.md. Without --profile, one [[jobs]] entry is built from the job flags.";

struct Options {
  std::string profile_path;
  double duration_s = -1;
  double drain_s = -1;
  double interval_s = -1;
  double link_timeout_s = -1;
  double settle_s = -1;
  std::string json_path;
  std::string flows_csv_path;
  std::vector<std::string> sets;
  std::string host_port, wire_port;
  std::string burst;  // checked text (psgate::cli::whole_number), "" when not given
  bool single_lcore = false;
  bool quiet = false;
  bool hold = false;
};

void progress(const LiveTotals& prev, const LiveTotals& cur, double secs, double t) {
  std::fputs(format_progress(prev, cur, secs, t).c_str(), stderr);
}

// The per-flow CSV, the JSON and the table. 0, or 1 when a file could not be written.
int write_reports(const Engine& e, const RunResult& result, const Options& opt) {
  int status = 0;
  // Per-flow records first: a script that waits for the JSON finds them complete.
  if (!opt.flows_csv_path.empty()) {
    const std::string error =
        psgate::write_output_file(opt.flows_csv_path, [&](std::FILE* f) { return e.write_flows_csv(f); });
    if (!error.empty()) {
      std::fprintf(stderr, "psgate-gen: %s\n", error.c_str());
      status = 1;
    }
  }
  // Names come from the profile and --set as given: one that is not UTF-8
  // is shown with U+FFFD rather than throwing after the run.
  const std::string json = to_json(result).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const std::string table = format_table(result);
  // Frames of another generator run: warned of on stderr, --quiet or not
  // (the table only gives the figures).
  for (const std::string& w : other_run_warnings(result)) std::fprintf(stderr, "psgate-gen: %s\n", w.c_str());
  if (opt.json_path == "-") {
    std::fputs(json.c_str(), stdout);
    if (!opt.quiet) std::fputs(table.c_str(), stderr);
  } else {
    if (!opt.json_path.empty()) {
      // Complete or absent: a script may poll for the file (see --hold).
      const std::string error =
          psgate::write_output_file(opt.json_path, [&](std::FILE* f) { return std::fputs(json.c_str(), f) >= 0; });
      if (!error.empty()) {
        std::fprintf(stderr, "psgate-gen: %s\n", error.c_str());
        status = 1;
      }
    }
    if (!opt.quiet) std::fputs(table.c_str(), stdout);
  }
  // The report must have reached its reader: `--json - > /dev/full` (or a
  // full disk) would otherwise exit 0 with nothing written.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "psgate-gen: cannot write the report to standard output%s%s\n", errno ? ": " : "",
                 errno ? std::strerror(errno) : "");
    status = 1;
  }
  return status;
}

int run(const Profile& profile, const Options& opt, std::vector<std::string> eal_args) {
  const sigset_t stop = psgate::block_stop_signals();
  // A reader that went away (`psgate-gen ... | head`, `--json - | jq` that
  // exited) makes later writes fail with EPIPE instead of SIGPIPE killing
  // the run without a report and with its memif ports open. Before EAL, so
  // its threads inherit it.
  ::signal(SIGPIPE, SIG_IGN);
  std::vector<char*> argv;
  for (std::string& a : eal_args) argv.push_back(a.data());
  const int eal_used = rte_eal_init(static_cast<int>(argv.size()), argv.data());
  if (eal_used < 0) {
    const std::string in_use = psgate::eal_prefix_in_use(eal_args);
    if (!in_use.empty())
      std::fprintf(stderr, "psgate-gen: DPDK EAL initialisation failed: %s: give each process its own --file-prefix\n",
                   in_use.c_str());
    else
      std::fprintf(stderr, "psgate-gen: DPDK EAL initialisation failed: %s (see EAL's messages above)\n",
                   rte_errno != 0 ? rte_strerror(rte_errno) : "no reason given");
    return 1;
  }
  // Not before the EAL interrupt thread has caught up with the ports' close
  // (psgate/eal_teardown.h: a memif port's teardown could crash the exit).
  auto end_eal = [] {
    if (!psgate::eal_cleanup_after_interrupts())
      std::fprintf(stderr, "psgate-gen: DPDK's interrupt thread did not answer; EAL left as it is at exit\n");
  };
  // EAL stops at the first word that is no option of its own (getopt moves
  // such words to the end) and leaves the rest to the program; psgate-gen
  // takes nothing there, so a stray word ("-m 256 512") or what follows it
  // would be dropped without a word: a run other than the one asked for.
  if (eal_used + 1 < static_cast<int>(argv.size())) {
    std::string unused;
    for (size_t i = static_cast<size_t>(eal_used) + 1; i < argv.size(); ++i) unused += std::string(" ") + argv[i];
    std::fprintf(stderr, "psgate-gen: EAL did not take these arguments after '--':%s (EAL options only)\n",
                 unused.c_str());
    end_eal();
    return 2;
  }
  // The ports set up so far: closed before EAL ends, on every way out (an
  // open memif port would be closed inside rte_eal_cleanup, after the wait).
  std::vector<uint16_t> ports;
  auto close_ports = [&] {
    for (uint16_t p : ports) {
      rte_eth_dev_stop(p);
      rte_eth_dev_close(p);
    }
    end_eal();
  };
  auto fail = [&close_ports](const std::string& msg) {
    std::fprintf(stderr, "psgate-gen: %s\n", msg.c_str());
    close_ports();
    return 1;
  };

  std::vector<unsigned> workers;
  unsigned lc;
  RTE_LCORE_FOREACH_WORKER(lc) workers.push_back(lc);
  if (workers.empty()) {
    return fail("needs a worker lcore besides the main one, e.g. --lcores=0@0,1@1 (the main lcore sleeps)");
  }
  const bool split = workers.size() >= 2 && !opt.single_lcore;

  if (const std::string missing = vdevs_not_created(eal_args); !missing.empty())
    return fail("virtual device(s) " + missing + " not created (their driver refused them: see EAL's messages above)");
  if (const std::string small = memif_buffers_too_small(eal_args, kMaxFrameSize - kFcsBytes); !small.empty())
    return fail("memif buffers smaller than the " + std::to_string(kMaxFrameSize - kFcsBytes) +
                "-byte frames psgate-gen sends: " + small +
                "; DPDK 22.11's memif corrupts frames that span buffers: give bsize=2048 or more (the default)");
  auto host = resolve_port(profile.host_port);
  if (!host.ok()) return fail("host-side port: " + host.error());
  auto wire = resolve_port(profile.wire_port);
  if (!wire.ok()) return fail("wire-side port: " + wire.error());

  rte_mempool* pool = rte_pktmbuf_pool_create("gen_mbufs", profile.mbufs, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                              static_cast<int>(rte_socket_id()));
  if (!pool) return fail(std::string("cannot create the mbuf pool: ") + rte_strerror(rte_errno));
  auto engine = Engine::create(profile, *host, *wire, pool, psgate::tsc_hz());
  if (!engine.ok()) return fail(engine.error());
  Engine& e = **engine;

  ports.push_back(*host);
  if (*wire != *host) ports.push_back(*wire);
  for (uint16_t p : ports) {
    if (auto r = configure_port(p, pool); !r.ok()) return fail(r.error());
  }
  // --link-timeout is for the links together, not for each port in turn.
  const auto link_deadline = Clock::now() + std::chrono::nanoseconds(profile.link_timeout_ns);
  for (const bool settling : {false, true}) {
    // The links, then the settle time.
    psgate::Result<bool> r = true;
    if (!settling) r = start_and_wait_links(ports, link_deadline, profile.link_timeout_ns, stop);
    else r = psgate::wait_for_stop_signal(stop, std::chrono::nanoseconds(profile.settle_ns)) == 0;
    if (!r.ok()) return fail(r.error());
    if (!*r) {
      // Stopped before anything was sent: still a run (of nothing), so the
      // report is written and the exit status is 0, as for any stop signal.
      // No --hold: the stop it waits for has come.
      std::fprintf(stderr, "psgate-gen: stop signal while waiting for the links%s; nothing sent\n",
                   settling ? " to settle" : "");
      RunResult result = e.result();
      result.lcore_mode = split ? "tx+rx" : "single";
      result.interrupted = true;
      result.links_up = settling;
      const int status = write_reports(e, result, opt);
      close_ports();
      return status;
    }
  }
  std::fprintf(
      stderr, "psgate-gen: %zu jobs, ports host-side %u wire-side %u up, %s\n", profile.jobs.size(), *host, *wire,
      split ? ("TX on lcore " + std::to_string(workers[0]) + ", RX on lcore " + std::to_string(workers[1])).c_str()
            : ("TX and RX on lcore " + std::to_string(workers[0])).c_str());

  // A loop that did not start never finishes: the main lcore waited for
  // TX to end for ever, deaf to signals, or ran TX without RX and reported
  // every frame lost. The loops that did start are stopped and waited for
  // (they use the engine and the ports), and the run fails as a setup
  // failure, before anything is reported.
  struct Loop {
    lcore_function_t* main;
    unsigned lcore;
    const char* what;
  };
  const std::vector<Loop> loops =
      split ? std::vector<Loop>{{Engine::tx_main, workers[0], "TX"}, {Engine::rx_main, workers[1], "RX"}}
            : std::vector<Loop>{{Engine::both_main, workers[0], "TX and RX"}};
  // While the loops run, a memif teardown waits for their bursts
  // (memif_guard.cc).
  psgate::g_teardown_guard.store(&e.loop_epochs(), std::memory_order_release);
  for (const Loop& loop : loops) {
    if (const int rc = rte_eal_remote_launch(loop.main, &e, loop.lcore); rc != 0) {
      e.stop_tx();
      e.stop_rx();
      rte_eal_mp_wait_lcore();
      psgate::g_teardown_guard.store(nullptr, std::memory_order_release);
      return fail(std::string("cannot start ") + loop.what + " on lcore " + std::to_string(loop.lcore) +
                  ": rte_eal_remote_launch: " + rte_strerror(-rc));
    }
  }

  // Main lcore: sleeps in sigtimedwait between progress lines.
  const auto started = Clock::now();
  const bool bounded = profile.duration_ns > 0;
  const auto end = started + std::chrono::nanoseconds(profile.duration_ns);
  const auto interval = std::chrono::nanoseconds(profile.interval_ns);
  auto next_report = started + interval;
  LiveTotals prev = e.live();
  auto prev_time = started;
  bool interrupted = false;
  // Links are polled every 100 ms at most: one that goes down is a peer
  // that went away, and its refused and lost frames are said to be so.
  LinkWatch links(ports);
  constexpr auto kLinkPoll = std::chrono::milliseconds(100);
  for (;;) {
    auto wake = bounded ? end : Clock::now() + std::chrono::hours(1);
    if (profile.interval_ns) wake = std::min(wake, next_report);
    wake = std::min(wake, Clock::now() + kLinkPoll);
    if (psgate::wait_for_stop_signal(stop, wake - Clock::now())) {
      interrupted = true;
      break;
    }
    const auto now = Clock::now();
    links.poll();
    if (profile.interval_ns && now >= next_report) {
      const LiveTotals cur = e.live();
      progress(prev, cur, std::chrono::duration<double>(now - prev_time).count(),
               std::chrono::duration<double>(now - started).count());
      prev = cur;
      prev_time = now;
      // The next line an interval on; intervals missed while this one was
      // written (an interval shorter than a line takes) are skipped.
      next_report += interval;
      if (next_report <= now) next_report = now + interval;
    }
    if (bounded && now >= end) break;
  }

  // Stop TX, then let in-flight frames arrive: until every sent frame is
  // accounted for, the drain time passes, or a signal (the second one, if
  // a signal stopped TX), also while TX finishes its round.
  e.stop_tx();
  bool cut_drain = false;
  while (!e.tx_finished()) {
    if (psgate::wait_for_stop_signal(stop, std::chrono::milliseconds(1))) cut_drain = interrupted = true;
  }
  links.poll();
  const auto drain_start = Clock::now();
  const auto drain_end = drain_start + std::chrono::nanoseconds(profile.drain_ns);
  while (!cut_drain) {
    const LiveTotals t = e.live();
    if (t.pending == 0 || Clock::now() >= drain_end) break;
    const auto wait = std::min<Clock::duration>(std::chrono::milliseconds(5), drain_end - Clock::now());
    if (psgate::wait_for_stop_signal(stop, wait)) {
      interrupted = true;
      break;
    }
  }
  const double drain_s = std::chrono::duration<double>(Clock::now() - drain_start).count();
  e.stop_rx();
  rte_eal_mp_wait_lcore();
  psgate::g_teardown_guard.store(nullptr, std::memory_order_release);
  links.poll();

  RunResult result = e.result();
  for (PortResult& p : result.ports) {
    p.link_down_events = links.down_events(p.port_id);
    p.link_up_at_end = links.up(p.port_id);
  }
  result.lcore_mode = split ? "tx+rx" : "single";
  result.drain_seconds = drain_s;
  result.interrupted = interrupted;
  const int status = write_reports(e, result, opt);
  if (opt.hold) {
    // Nothing polls the ports any more, but they stay started: stopping a
    // memif port disconnects it, which is what --hold exists to delay (a
    // DPDK 22.11 memif peer can crash when its partner disconnects).
    std::fprintf(stderr, "psgate-gen: report written; holding the ports open until SIGINT/SIGTERM/SIGHUP\n");
    while (sigwaitinfo(&stop, nullptr) < 0) {
    }
  }
  close_ports();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  psgate::open_closed_standard_fds();
  // Everything after "--" belongs to EAL.
  std::vector<std::string> eal_args{"psgate-gen"};
  int own_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      own_argc = i;
      for (int k = i + 1; k < argc; ++k) eal_args.emplace_back(argv[k]);
      break;
    }
  }

  CLI::App app{kDescription, "psgate-gen"};
  Options opt;
  std::string jobs, workers, flows, rate, size, direction, proto, pattern;
  // An empty value ("--rate \"$RATE\"" with RATE unset) read as "not given":
  // the run went on with the default, the profile's value, no profile or no
  // report file, and said nothing.
  const CLI::Validator non_empty = psgate::cli::check(
      [](const std::string& s) { return s.empty() ? std::string("an empty value is not allowed") : std::string(); });
  app.add_option("-p,--profile", opt.profile_path, "TOML traffic profile (perf/gen/README.md)")->check(non_empty);
  // Every [generator] setting a flag overrides: the flag wins, else the
  // profile's value, else the built-in default (taken from Profile itself).
  const Profile defaults;
  auto secs = [](uint64_t ns) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(ns) / 1e9);
    return std::string(buf);
  };
  auto dflt = [](const char* key, const std::string& value) {
    return " (default: the profile's [generator] " + std::string(key) + ", else " + value + ")";
  };
  app.add_option("-d,--duration", opt.duration_s,
                 "Send for this many seconds; 0: until SIGINT/SIGTERM/SIGHUP" + dflt("duration", "0"))
      ->check(psgate::cli::seconds_up_to(1e8));
  app.add_option(
         "--drain", opt.drain_s,
         "After TX stops, wait at most this many seconds for in-flight frames" + dflt("drain", secs(defaults.drain_ns)))
      ->check(psgate::cli::seconds_up_to(1e8));
  app.add_option(
         "--interval", opt.interval_s,
         "Progress line on stderr every this many seconds; 0: none" + dflt("interval", secs(defaults.interval_ns)))
      ->check(psgate::cli::seconds_up_to(1e8));
  app.add_option("--link-timeout", opt.link_timeout_s,
                 "Seconds to wait for the ports' links, all of them together" +
                     dflt("link_timeout", secs(defaults.link_timeout_ns)))
      ->check(psgate::cli::seconds_up_to(1e8));
  app.add_option("--settle", opt.settle_s,
                 "Seconds to wait once the links are up, before sending: psgate polls memif, pcap and ring links "
                 "every 100 ms and drops what comes before it sees them up" +
                     dflt("settle", secs(defaults.settle_ns)))
      ->check(psgate::cli::seconds_up_to(1e8));
  app.add_option("--json", opt.json_path,
                 "Write the JSON summary to this file ('-': stdout, the table then goes to stderr)")
      ->check(non_empty);
  app.add_option("--flows-csv", opt.flows_csv_path,
                 "After the run, write one CSV record per flow and direction to this file: job, direction, flow, "
                 "5-tuple, packets and bytes, lost, reordered, duplicates, late, latency min/mean/max "
                 "(perf/gen/README.md)")
      ->check(non_empty);
  app.add_flag("-q,--quiet", opt.quiet, "Do not print the table");
  app.add_option("--host-port", opt.host_port,
                 "Host-side port (faces psgate's host port): id or device name" + dflt("host_port", defaults.host_port))
      ->check(non_empty);
  app.add_option("--wire-port", opt.wire_port,
                 "Wire-side port (faces psgate's wire port): id or device name" + dflt("wire_port", defaults.wire_port))
      ->check(non_empty);
  // Text, not an int: CLI11 reads an int as strtol does ("0x10" ran bursts
  // of 16, "010" of 8) and said "not in range" for "1.5".
  app.add_option("--burst", opt.burst, "Frames per TX burst" + dflt("burst", std::to_string(defaults.tx_burst)))
      ->type_name("N")
      ->check(psgate::cli::whole_number(1, kMaxTxBurst));
  app.add_flag(
      "--hold", opt.hold,
      "After the report, keep the ports open until SIGINT/SIGTERM/SIGHUP, so that a memif server peer can stop "
      "before its client disconnects");
  app.add_flag("--single-lcore", opt.single_lcore, "Run TX and RX in one loop even when two worker lcores exist");
  app.add_option("--set", opt.sets,
                 "KEY=VALUE: set a [[jobs]] key in every [[jobs]] entry of the profile (repeatable), e.g. "
                 "--set rate=10kpps --set size=imix; count, id and ps only for a profile of one entry");
  // The counts' shortcuts become --set values, read as TOML, which takes
  // "0x10", "1_000" and "+5": decimal digits only, as --burst; the profile
  // checks the range and names the option.
  const CLI::Validator decimal = psgate::cli::whole_number(0, UINT64_MAX);
  app.add_option("--jobs", jobs,
                 "N copies of the job: ids id+0..N-1, PS ports ps+0..N-1 (--set count=N). Only without --profile or "
                 "with a profile of one [[jobs]] entry; refused for a profile with more (set count in its entries)")
      ->check(decimal);
  app.add_option("--workers", workers, "Shortcut for --set workers=W")->check(decimal);
  app.add_option("--flows", flows, "Shortcut for --set flows=F (5-tuples per job and direction)")->check(decimal);
  app.add_option("--rate", rate, "Shortcut for --set rate=R: \"max\", \"10kpps\", \"1Gbit/s\" (per job)")
      ->check(non_empty);
  app.add_option(
         "--size", size,
         "Shortcut for --set size=S: \"64B\"..\"1518B\" (frame with FCS; at least 74B for TCP, 82B for IPv6, 94B for "
         "both), \"imix\", \"ps\"")
      ->check(non_empty);
  app.add_option("--direction", direction, "Shortcut for --set direction=push|pull|both")->check(non_empty);
  app.add_option("--proto", proto, "Shortcut for --set proto=udp|tcp")->check(non_empty);
  app.add_option("--pattern", pattern, "Shortcut for --set pattern=constant|iteration")->check(non_empty);
  try {
    app.parse(own_argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : 2;
  }

  // EAL acts on these itself, before psgate-gen could report anything:
  // --help prints EAL's usage and ends the process with status 0 (a run that
  // did nothing, reported as a success), and after a second "--" EAL reads
  // nothing more. A usage error instead, as psgate does for its eal.args.
  // Read as EAL's getopt reads them: "-h" after --file-prefix is a prefix.
  psgate::EalArgReader eal;
  for (size_t i = 1; i < eal_args.size(); ++i) {
    const psgate::EalArgClash clash = eal.next(eal_args[i]);
    if (clash == psgate::EalArgClash::kHelp) {
      std::fprintf(stderr,
                   "psgate-gen: EAL argument \"%s\" is not allowed: EAL would print its usage (or its log "
                   "types) and exit 0 without a run (dpdk-testpmd --help lists EAL's options)\n",
                   eal_args[i].c_str());
      return 2;
    }
    if (clash == psgate::EalArgClash::kEndOfOptions) {
      std::fprintf(stderr,
                   "psgate-gen: a second '--' is not allowed: EAL would stop reading its arguments there and "
                   "ignore the rest\n");
      return 2;
    }
  }

  toml::table overrides;
  // Each key once: a shortcut went in after every --set whatever the order
  // (--set rate=2kpps --rate 1kpps ran at 1 kpps, --rate 1kpps --set
  // rate=2kpps too), and of two --set the last won, unlike any other option
  // given twice (CLI11 refuses those).
  // Errors in a key name this option too, not "--set" for a shortcut's.
  OverrideOptions set_by;  // key -> the option that set it
  auto claim = [&set_by](const std::string& key, const std::string& option) {
    const auto [it, fresh] = set_by.emplace(key, option);
    if (fresh) return true;
    if (it->second == option) std::fprintf(stderr, "psgate-gen: %s=... is given twice: give it once\n", option.c_str());
    else
      std::fprintf(stderr, "psgate-gen: %s and %s both set %s: give it once\n", it->second.c_str(), option.c_str(),
                   key.c_str());
    return false;
  };
  std::vector<std::pair<std::string, std::string>> assignments;  // KEY=VALUE, the shortcut it stands for or ""
  for (const std::string& s : opt.sets) {
    const size_t eq = s.find('=');
    if (eq != std::string::npos && !claim(s.substr(0, eq), "--set " + s.substr(0, eq))) return 2;
    assignments.emplace_back(s, "");
  }
  for (auto [key, value, option] :
       {std::tuple{"count", &jobs, "--jobs"}, std::tuple{"workers", &workers, "--workers"},
        std::tuple{"flows", &flows, "--flows"}, std::tuple{"rate", &rate, "--rate"},
        std::tuple{"size", &size, "--size"}, std::tuple{"direction", &direction, "--direction"},
        std::tuple{"proto", &proto, "--proto"}, std::tuple{"pattern", &pattern, "--pattern"}}) {
    if (value->empty()) continue;
    if (!claim(key, option)) return 2;
    assignments.emplace_back(std::string(key) + "=" + *value, option);
  }
  for (const auto& [assignment, shortcut] : assignments) {
    if (auto r = add_override(overrides, assignment, shortcut); !r.ok()) {
      std::fprintf(stderr, "psgate-gen: %s\n", r.error().c_str());
      return 2;
    }
  }
  auto profile = opt.profile_path.empty() ? parse_profile(toml::table{}, overrides, "command line", set_by)
                                          : load_profile_file(opt.profile_path, overrides, set_by);
  if (!profile.ok()) {
    std::fprintf(stderr, "psgate-gen: %s\n", profile.error().c_str());
    return 2;
  }
  // Output files are written after the run: find out now that they cannot be.
  if (opt.flows_csv_path == "-") {
    std::fprintf(stderr, "psgate-gen: --flows-csv: '-' is not standard output here; name a file\n");
    return 2;
  }
  for (const auto& [flag, path] :
       {std::pair{"--json", &opt.json_path}, std::pair{"--flows-csv", &opt.flows_csv_path}}) {
    if (path->empty() || *path == "-") continue;
    if (const std::string problem = psgate::output_file_problem(*path); !problem.empty()) {
      std::fprintf(stderr, "psgate-gen: %s %s: %s\n", flag, path->c_str(), problem.c_str());
      return 2;
    }
  }
  if (!opt.flows_csv_path.empty() && !opt.json_path.empty() && opt.json_path != "-" &&
      psgate::same_output_file(opt.flows_csv_path, opt.json_path)) {
    std::fprintf(stderr, "psgate-gen: --flows-csv and --json name the same file\n");
    return 2;
  }
  Profile& p = *profile;
  // A positive time never rounds to 0, which means "until SIGINT" for
  // --duration (the options' range, 0..1e8 s, keeps the rest in 64 bits).
  auto ns = [](double s) { return s > 0 ? std::max<uint64_t>(1, static_cast<uint64_t>(s * 1e9 + 0.5)) : 0; };
  if (opt.duration_s >= 0) p.duration_ns = ns(opt.duration_s);
  if (opt.drain_s >= 0) p.drain_ns = ns(opt.drain_s);
  if (opt.interval_s >= 0) p.interval_ns = ns(opt.interval_s);
  if (opt.link_timeout_s >= 0) p.link_timeout_ns = ns(opt.link_timeout_s);
  if (opt.settle_s >= 0) p.settle_ns = ns(opt.settle_s);
  if (!opt.host_port.empty()) p.host_port = opt.host_port;
  if (!opt.wire_port.empty()) p.wire_port = opt.wire_port;
  if (!opt.burst.empty()) p.tx_burst = static_cast<uint32_t>(*psgate::parse_uint(opt.burst, 1, kMaxTxBurst));
  return run(p, opt, std::move(eal_args));
}
