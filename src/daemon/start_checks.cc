// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/start_checks.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <tuple>
#include <utility>
#include <vector>

#include "config/compile.h"
#include "control/control_server.h"
#include "control/state_file.h"
#include "psgate/lcore_check.h"
#include "psgate/pem_file.h"

namespace psgate {

std::optional<int> check_before_start(const ConfigSpec& config, const std::string& config_path, bool check_only) {
#ifndef PSGATE_HAVE_CLUSTER
  if (config.cluster) {
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
  const std::vector<unsigned>& affinity = start_affinity_cpus();
  const std::vector<unsigned> online = online_cpus();
  const std::vector<unsigned>& usable = check_only && !online.empty() ? online : affinity;
  if (auto lcores = check_lcores_exist(config, usable, config_path, online); !lcores) {
    std::fprintf(stderr, "psgate: %s\n", lcores.error().c_str());
    return 2;
  }
  if (check_only) {
    if (auto here = check_lcores_exist(config, affinity, config_path, online); !here) {
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
      !config.control.state.empty() && std::filesystem::equivalent(config.control.state, config_path, same_error)) {
    std::fprintf(stderr,
                 "psgate: %s: control.state: \"%s\" is this config file itself: the state file must be a file of "
                 "its own (e.g. /var/lib/psgate/state.json)\n",
                 config_path.c_str(), config.control.state.c_str());
    return 2;
  }
  // The state file's path: a directory, or a directory this process cannot
  // write, is refused before DPDK starts, by --check too, which also reads
  // the file as a start would (a start reads it in ControlPlane::create). A
  // state file on a filesystem mounted read-only only warns (a disk
  // condition: check_state_dir_writable).
  if (auto kind = check_state_file_kind(config.control.state); !kind) {
    std::fprintf(stderr, "psgate: %s\n", kind.error().c_str());
    return 2;
  }
  if (auto writable = check_state_dir_writable(config.control.state); writable && !*writable) {
    std::fprintf(stderr,
                 "psgate: warning: state file %s: on a read-only filesystem: psgate forwards on the state it "
                 "reads and refuses changes until it can write there again (health degraded meanwhile)\n",
                 config.control.state.c_str());
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
       {std::pair{"control.socket", &config.control.socket}, {"control.state", &config.control.state}}) {
    if (!path->empty() && path->front() != '/')
      std::fprintf(stderr,
                   "psgate: warning: %s: %s \"%s\" is relative: taken from the working directory (%s), which is / "
                   "under systemd; write an absolute path\n",
                   config_path.c_str(), key, path->c_str(), cwd_error ? "unknown" : cwd.c_str());
  }
  // An empty rule is the protocol's "every IP packet"; in a file made from a
  // template it is more often a variable that was not set (psgatectl refuses
  // it on a command line). Said, not refused: it may be meant.
  for (const JobSpec& job : config.jobs) {
    for (size_t k = 0; k < job.match.size(); ++k) {
      if (job.match[k] == MatchRule{})
        std::fprintf(stderr,
                     "psgate: warning: %s: job %u: match[%zu] is empty, so the job takes every IP packet that no "
                     "earlier job's rule takes (an unset variable?)\n",
                     config_path.c_str(), job.id, k);
    }
  }
  // The control socket's path: one that names a file, or lies under one, is
  // a config error that a restart cannot mend (exit 2), found by --check too.
  if (auto sock = ControlServer::check_path(config.control.socket); !sock) {
    std::fprintf(stderr, "psgate: %s: %s\n", config_path.c_str(), sock.error().c_str());
    return 2;
  }
  if (auto writable = ControlServer::check_writable(config.control.socket); !writable) {
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
  if (config.cluster) {
    for (auto [key, path, kind] : {std::tuple{"ca", &config.cluster->ca, PemKind::kCertificates},
                                   {"cert", &config.cluster->cert, PemKind::kCertificates},
                                   {"key", &config.cluster->key, PemKind::kPrivateKey}}) {
      if (path->empty()) continue;
      if (auto pem = read_pem_file(*path, kind); !pem) {
        std::fprintf(stderr, "psgate: %s: cluster.%s: %s\n", config_path.c_str(), key, pem.error().c_str());
        return 2;
      }
    }
  }
  if (check_only) {
    auto saved = read_state_file(config.control.state, config.max_jobs, config.class_count);
    if (saved && *saved) {
      take_file_changes(**saved, FileSettings{config.policy, compile_ports(config)}, config);
      if (auto valid = check_saved_state(**saved, config); !valid) saved = decltype(saved)::failure(valid.error());
    }
    if (!saved) {
      std::fprintf(stderr, "psgate: %s\n", saved.error().c_str());
      return 2;
    }
    if (*saved && !config.cluster) {
      if (const std::string unlike = config_jobs_unlike_state(config.jobs, (*saved)->jobs); !unlike.empty())
        std::fprintf(stderr,
                     "psgate: warning: %s: its [[jobs]] differ from the state file %s (%s), whose jobs a start "
                     "uses: change jobs with psgatectl (or stop psgate, remove the state file, and start it to start "
                     "from the config's)\n",
                     config_path.c_str(), config.control.state.c_str(), unlike.c_str());
    }
    std::printf("%s: configuration is valid\n", config_path.c_str());
    return 0;
  }
  return std::nullopt;
}

}  // namespace psgate
