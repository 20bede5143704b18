// SPDX-License-Identifier: BSD-3-Clause
// psemu: parameter-server training emulator over real TCP.
//
//   psemu ps     --jobs N --workers W --bytes M --iters K [--listen ADDR] [--out FILE]
//   psemu worker --ps ADDR[,ADDR..] --jobs N --workers W --bytes M --iters K --compute-ms C
//                [--stagger-ms S] [--local-addrs A,B,..] [--out FILE]
//
// One process per host role; both write a JSON report (timestamps in
// CLOCK_MONOTONIC microseconds, comparable across the two processes). Exit
// status: 0 complete and verified, 1 failure (connection, protocol, checksum),
// 2 bad command line, 3 timeout.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "runtime.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  for (size_t pos = 0; !s.empty();) {
    const size_t at = s.find(sep, pos);
    out.push_back(s.substr(pos, at - pos));
    if (at == std::string::npos) break;
    pos = at + 1;
  }
  return out;
}

void add_common(CLI::App* app, psemu::Params& p, std::string& bytes) {
  app->add_option("--jobs", p.jobs, "Training jobs")->check(CLI::Range(1u, 1000u))->capture_default_str();
  app->add_option("--workers", p.workers, "Workers per job")->check(CLI::Range(1u, 1000u))->capture_default_str();
  app->add_option("--bytes", bytes, "Push and pull size M, e.g. 4MiB, 4MB, 65536")->capture_default_str();
  app->add_option("--iters", p.iters, "Iterations K per job")->check(CLI::Range(1u, 1000000u))->capture_default_str();
  app->add_option("--base-port", p.base_port, "Job j's PS listens on base-port + j")
      ->check(CLI::Range(1u, 65000u))
      ->capture_default_str();
  app->add_option("--timeout", p.timeout_s, "Give up after this many seconds (exit 3)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--idle-timeout", p.idle_timeout_s, "Give up when nothing moved for this many seconds (exit 3)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_flag("!--no-verify", p.verify, "Count bytes but skip payload checksums");
  app->add_option("--out", p.out, "JSON report file, - for stdout")->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"psemu: parameter-server training emulator over real TCP (push, barrier, pull, compute)"};
  app.require_subcommand(1);
  psemu::PsOptions ps;
  psemu::WorkerOptions wk;
  std::string ps_bytes = "4MiB", wk_bytes = "4MiB";
  std::string local_addrs;

  CLI::App* ps_cmd = app.add_subcommand("ps", "Run the parameter servers of every job");
  add_common(ps_cmd, ps.p, ps_bytes);
  ps_cmd->add_option("--listen", ps.listen, "Address to listen on")->capture_default_str();

  CLI::App* wk_cmd = app.add_subcommand("worker", "Run every worker of every job");
  add_common(wk_cmd, wk.p, wk_bytes);
  std::string ps_addrs;
  wk_cmd
      ->add_option("--ps", ps_addrs,
                   "The PS host's IPv4 address; several, comma-separated: the model is sharded over them")
      ->required();
  wk_cmd->add_option("--compute-ms", wk.compute_ms, "Compute time C per iteration (a sleep), ms")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  wk_cmd->add_option("--stagger-ms", wk.stagger_ms, "Job j starts j * stagger after job 0, ms (0: together)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  wk_cmd->add_option("--start-delay-ms", wk.start_delay_ms, "Pause after all connections are up, ms")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  wk_cmd->add_option("--connect-timeout", wk.connect_timeout_s, "Retry refused connections this long, s")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  wk_cmd->add_option("--progress-cmd", wk.progress_cmd,
                     "Shell command run when a job finishes an iteration; {job} {id} {iter} {iters} {fraction}");
  wk_cmd->add_option("--local-addrs", local_addrs,
                     "Comma-separated source addresses, worker w uses entry w mod n; with several PS hosts, "
                     "one such list per host separated by ';' (or one list for all)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? psemu::kExitOk : psemu::kExitUsage;
  }

  psemu::Params& p = ps_cmd->parsed() ? ps.p : wk.p;
  const std::string& bytes = ps_cmd->parsed() ? ps_bytes : wk_bytes;
  if (!psemu::parse_size(bytes, p.bytes)) {
    std::fprintf(stderr, "psemu: --bytes '%s': expected a size such as 4MiB, 4MB or 65536\n", bytes.c_str());
    return psemu::kExitUsage;
  }
  if (p.base_port + p.jobs > 65536) {
    std::fprintf(stderr, "psemu: --base-port + --jobs exceeds 65535\n");
    return psemu::kExitUsage;
  }
  if (ps_cmd->parsed()) return psemu::run_ps(ps);
  wk.ps_addrs = split(ps_addrs, ',');
  if (wk.ps_addrs.empty() || wk.ps_addrs.size() > 64 ||
      std::any_of(wk.ps_addrs.begin(), wk.ps_addrs.end(), [](const std::string& a) { return a.empty(); })) {
    std::fprintf(stderr, "psemu: --ps '%s': expected 1 to 64 comma-separated addresses\n", ps_addrs.c_str());
    return psemu::kExitUsage;
  }
  if (p.bytes < wk.ps_addrs.size()) {
    std::fprintf(stderr, "psemu: --bytes must be at least one byte per PS host\n");
    return psemu::kExitUsage;
  }
  if (!local_addrs.empty()) {
    for (const std::string& group : split(local_addrs, ';')) wk.local_addrs.push_back(split(group, ','));
    if (wk.local_addrs.size() != 1 && wk.local_addrs.size() != wk.ps_addrs.size()) {
      std::fprintf(stderr, "psemu: --local-addrs has %zu ';'-separated lists for %zu PS hosts (expected 1 or %zu)\n",
                   wk.local_addrs.size(), wk.ps_addrs.size(), wk.ps_addrs.size());
      return psemu::kExitUsage;
    }
  }
  return psemu::run_workers(wk);
}
