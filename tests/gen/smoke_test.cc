// SPDX-License-Identifier: BSD-3-Clause
// Smoke run: the real psgate with memif server ports, psgate-gen with memif
// client ports, both --no-huge. Two IPv4/UDP jobs and one IPv6/TCP job, two
// workers each, at 5,000 pps each for 3 s: zero loss, psgate's per-job
// counters equal the generator's, and the JSON's and per-flow CSV's own
// figures agree with each other.
//
// Both processes are killed whatever happens: by the Child destructor, and by
// PR_SET_PDEATHSIG should this test process itself be killed (meson timeout).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child_process.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;
using psgate::testing::ChildProcess;
using psgate::testing::read_text_file;

using psgate::testing::env_or_empty;

// A test's scratch directory under the temporary directory (`path` empty
// if it could not be made), removed with its files when the test passed,
// kept for a look when it failed or PSGATE_KEEP_TEST_DIRS is set.
struct ScratchDir {
  explicit ScratchDir(const std::string& tag) {
    std::string templ = std::filesystem::temp_directory_path().string() + "/" + tag + "-XXXXXX";
    if (mkdtemp(templ.data()) != nullptr) path = templ;
  }
  ~ScratchDir() {
    if (path.empty() || ::testing::Test::HasFailure() || !env_or_empty("PSGATE_KEEP_TEST_DIRS").empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string path;
};

// Waits while `p` runs, at most `seconds`, for `text` in its output.
// Whether it came.
bool wait_for_output(const ChildProcess& p, const std::string& text, int seconds) {
  const auto by = Clock::now() + std::chrono::seconds(seconds);
  while (p.running() && Clock::now() < by && p.output().find(text) == std::string::npos)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  return p.output().find(text) != std::string::npos;
}

const json* find_job(const json& jobs, uint64_t id) {
  for (const json& j : jobs) {
    if (j["id"].get<uint64_t>() == id) return &j;
  }
  return nullptr;
}

// psgate between two generator ports: memif servers on DIR/wire.sock and
// DIR/host.sock (the generator's clients connect there), one data lcore,
// control socket DIR/psgate.sock, then `jobs` (TOML [[jobs]] tables).
void write_memif_psgate_config(const std::string& dir, const std::string& file_prefix, const std::string& jobs) {
  std::ofstream(dir + "/psgate.toml") << R"([eal]
args = ["--no-huge", "-m", "256", "--no-pci", "--file-prefix=)"
                                      << file_prefix << R"(", "--log-level=4"]
[ports.wire]
device = "net_memif0,role=server,socket=)"
                                      << dir << R"(/wire.sock"
[ports.host]
device = "net_memif1,role=server,socket=)"
                                      << dir << R"(/host.sock"
[lcores]
main = 0
data = [1]
[stats]
interval = "0s"
[dataplane]
mbufs = 8191
[control]
socket = ")" << dir << R"(/psgate.sock"
)" << jobs;
}

// What every psgate-gen test starts from: the binary meson test names in
// PSGATE_GEN_BIN, and a scratch directory of its own, `dir`.
class GenTest : public ::testing::Test {
 protected:
  explicit GenTest(std::string scratch_tag) : scratch_tag_(std::move(scratch_tag)) {}

  void SetUp() override {
    ASSERT_FALSE(gen.empty()) << "PSGATE_GEN_BIN not set (run through meson test)";
    scratch_.emplace(scratch_tag_);
    ASSERT_FALSE(scratch_->path.empty()) << "mkdtemp: " << std::strerror(errno);
    dir = scratch_->path;
  }

  void TearDown() override {
    // Its name (psgate-gen-smoke-XXXXXX) is the fixture's, not the test's:
    // print it next to the test's failure.
    if (HasFailure() && !dir.empty()) std::cerr << "scratch directory kept: " << dir << "\n";
  }

  const std::string gen = env_or_empty("PSGATE_GEN_BIN");
  std::string dir;

 private:
  std::string scratch_tag_;
  // A base member, so removed after a derived fixture's processes, which
  // write in it, are killed.
  std::optional<ScratchDir> scratch_;
};

// Command lines psgate-gen refuses, or runs on net_null ports.
class GenCommandLine : public GenTest {
 protected:
  GenCommandLine() : GenTest("psgate-gen-cli") {}
};

// Runs with real ports: memif to psgate, to dpdk-testpmd or to another
// generator.
class GenSmoke : public GenTest {
 protected:
  GenSmoke() : GenTest("psgate-gen-smoke") {}

  // Writes psgate's config (write_memif_psgate_config) with `jobs`, starts
  // psgate with `options` as psgate_process, and fails the test unless it
  // logs, within 60 s, that its `job_count` jobs are up. Call it inside
  // ASSERT_NO_FATAL_FAILURE.
  void start_psgate(const std::string& file_prefix, const std::vector<std::string>& options, int job_count,
                    const std::string& jobs) {
    const std::string binary = env_or_empty("PSGATE_BIN");
    ASSERT_FALSE(binary.empty()) << "PSGATE_BIN not set (run through meson test)";
    write_memif_psgate_config(dir, file_prefix, jobs);
    std::vector<std::string> argv{binary, "--config", dir + "/psgate.toml"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--duration", "240"});
    psgate_process.emplace(argv, dir + "/psgate.out");
    // psgate logs "psgate <version>: N jobs, ..." once its ports are started.
    const std::string up = ": " + std::to_string(job_count) + " jobs";
    wait_for_output(*psgate_process, up, 60);
    ASSERT_TRUE(psgate_process->running()) << "psgate exited early:\n" << psgate_process->output();
    ASSERT_NE(psgate_process->output().find(up), std::string::npos) << "psgate did not come up:\n"
                                                                    << psgate_process->output();
  }

  // Where psgate's memif servers listen (write_memif_psgate_config), for the
  // generator's clients. Sockets are in the abstract namespace by default:
  // the unique directory name keeps concurrent runs apart.
  std::string psgate_host_sock() const { return dir + "/host.sock"; }
  std::string psgate_wire_sock() const { return dir + "/wire.sock"; }

  // psgate-gen through psgate at 2 kpps for `duration` s, memif clients of
  // its two ports, its report in DIR/gen.json.
  std::vector<std::string> gen_through_psgate(const std::string& duration, const std::string& drain,
                                              const std::string& file_prefix) const {
    return {gen,
            "--duration",
            duration,
            "--drain",
            drain,
            "--interval",
            "0",
            "--rate",
            "2kpps",
            "--host-port",
            "net_memif0",
            "--wire-port",
            "net_memif1",
            "--link-timeout",
            "30",
            "--json",
            dir + "/gen.json",
            "--",
            "--no-huge",
            "-m",
            "128",
            "--no-pci",
            "--file-prefix=" + file_prefix,
            "--log-level=4",
            "--lcores=0@" + std::to_string(1 % cpus) + ",1@0",
            "--vdev=net_memif0,role=client,socket=" + psgate_host_sock(),
            "--vdev=net_memif1,role=client,socket=" + psgate_wire_sock()};
  }

  // In DPDK file prefixes, to keep concurrent runs apart.
  const std::string tag = std::to_string(getpid());
  // The lcores' CPUs are taken modulo this.
  const long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  std::optional<ChildProcess> psgate_process;  // started by start_psgate
};

TEST_F(GenSmoke, TwoJobsThroughPsgateOverMemifWithoutLoss) {
  ASSERT_NO_FATAL_FAILURE(start_psgate("gsmoke-psg-" + tag, {"--stats-json", dir + "/psgate.json"}, 3, R"([[jobs]]
id = 1
rank = 0
match = ["dport=2222,proto=udp", "sport=2222,proto=udp"]
[[jobs]]
id = 2
rank = 1
match = ["dport=2223,proto=udp", "sport=2223,proto=udp"]
[[jobs]]
id = 3
rank = 2
match = ["dport=2224,proto=tcp", "sport=2224,proto=tcp"]
)"));
  ChildProcess& psg = *psgate_process;
  constexpr uint64_t kRatePps = 5000;  // per job, both directions together
  std::ofstream(dir + "/gen.toml") << R"([generator]
duration = "3s"
drain = "1s"
interval = "0s"
link_timeout = "30s"
host_port = "net_memif0"
wire_port = "net_memif1"
mbufs = 8191
[[jobs]]
id = 1
count = 2
ps = "10.0.0.5:2222"
workers = 2
rate = ")" << kRatePps << R"(pps"
[[jobs]]
id = 3
ps = "[fd00::5]:2224"
proto = "tcp"
workers = 2
rate = ")" << kRatePps << R"(pps"
)";

  // --hold: the generator keeps its memif clients connected after the report
  // until psgate has stopped (see the README: a memif server polling while
  // its client disconnects can crash in DPDK 22.11).
  ChildProcess g(
      {gen, "--profile", dir + "/gen.toml", "--json", dir + "/gen.json", "--flows-csv", dir + "/flows.csv", "--hold",
       "--", "--no-huge", "-m", "256", "--no-pci", "--file-prefix=gsmoke-gen-" + tag, "--log-level=4",
       "--lcores=0@" + std::to_string(1 % cpus) + ",1@0", "--vdev=net_memif0,role=client,socket=" + psgate_host_sock(),
       "--vdev=net_memif1,role=client,socket=" + psgate_wire_sock()},
      dir + "/gen.out");
  // The JSON appears (renamed into place, complete) once the run is over.
  const auto report_by = Clock::now() + std::chrono::seconds(120);
  while (g.running() && Clock::now() < report_by && !std::filesystem::exists(dir + "/gen.json")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  psg.signal(SIGINT);
  const int psg_rc = psg.wait(60);
  g.signal(SIGINT);
  const int gen_rc = g.wait(60);
  ASSERT_EQ(gen_rc, 0) << "psgate-gen:\n" << g.output() << "\npsgate:\n" << psg.output();
  ASSERT_EQ(psg_rc, 0) << "psgate:\n" << psg.output();

  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  const json pj = json::parse(read_text_file(dir + "/psgate.json"));
  const double tx_s = gj["generator"]["tx_seconds"].get<double>();
  EXPECT_EQ(gj["generator"]["rx_foreign"], 0);
  EXPECT_EQ(gj["generator_side"]["loss_may_be_own"], false);
  EXPECT_EQ(gj["generator_side"]["alloc_failed"], 0);
  ASSERT_EQ(gj["jobs"].size(), 3u);
  EXPECT_EQ(gj["jobs"][2]["ps"], "[fd00::5]:2224");
  EXPECT_EQ(gj["jobs"][2]["proto"], "tcp");
  // Per-flow records: one per flow and direction, in the CSV's header order.
  std::map<std::string, json> flows;  // "job/dir/flow" -> {tx, rx, lost, samples, min, mean, max}
  {
    std::istringstream csv(read_text_file(dir + "/flows.csv"));
    std::string line;
    ASSERT_TRUE(std::getline(csv, line));
    EXPECT_EQ(line.rfind("job,direction,flow,src,sport,dst,dport,proto,tx_packets,rx_packets,", 0), 0u) << line;
    while (std::getline(csv, line)) {
      std::vector<std::string> c;
      std::istringstream fields(line);
      for (std::string f; std::getline(fields, f, ',');) c.push_back(f);
      ASSERT_EQ(c.size(), 20u) << line;
      flows[c[0] + "/" + c[1] + "/" + c[2]] = {
          {"proto", c[7]}, {"tx", std::stoull(c[8])},      {"rx", std::stoull(c[9])}, {"lost", std::stoull(c[12])},
          {"src", c[3]},   {"samples", std::stoull(c[16])}};
    }
  }
  EXPECT_EQ(flows.size(), 3u * 2 * 2);  // jobs x directions x flows
  uint64_t push_total = 0, pull_total = 0;
  for (uint64_t id : {1, 2, 3}) {
    const json* gjob = find_job(gj["jobs"], id);
    const json* pjob = find_job(pj["jobs"], id);
    ASSERT_TRUE(gjob && pjob) << "job " << id;
    for (const char* dir_name : {"push", "pull"}) {
      SCOPED_TRACE(std::string("job ") + std::to_string(id) + " " + dir_name);
      const json& s = (*gjob)[dir_name];
      const uint64_t tx = s["tx_packets"];
      EXPECT_GT(tx, 0u);
      EXPECT_EQ(s["lost"], 0);
      EXPECT_EQ(s["rx_unique"], tx);
      EXPECT_EQ(s["rx_packets"], tx);
      EXPECT_EQ(s["duplicates"], 0);
      EXPECT_EQ(s["wrong_port"], 0);
      EXPECT_EQ(s["flows_seen"], 2);
      EXPECT_EQ(s["flows_with_loss"], 0);
      EXPECT_EQ(s["late"], 0);
      EXPECT_EQ(s["rx_excess"], 0);
      EXPECT_EQ(s["alloc_failed"], 0);
      EXPECT_EQ(s["latency_invalid"], 0);
      EXPECT_EQ(s["latency"]["count"], tx);
      uint64_t in_buckets = 0;
      for (const json& b : s["latency"]["buckets"]) in_buckets += b[1].get<uint64_t>();
      EXPECT_EQ(in_buckets, tx);
      uint64_t flow_tx = 0, flow_rx = 0;
      for (unsigned f = 0; f < 2; ++f) {
        const std::string key = std::to_string(id) + "/" + dir_name + "/" + std::to_string(f);
        ASSERT_TRUE(flows.count(key)) << key;
        const json& fr = flows[key];
        EXPECT_EQ(fr["lost"], 0) << key;
        EXPECT_EQ(fr["samples"], fr["rx"]) << key;
        EXPECT_EQ(fr["proto"], id == 3 ? "tcp" : "udp") << key;
        EXPECT_EQ(fr["src"].get<std::string>().find(':') != std::string::npos, id == 3) << key;  // IPv6
        flow_tx += fr["tx"].get<uint64_t>();
        flow_rx += fr["rx"].get<uint64_t>();
      }
      EXPECT_EQ(flow_tx, tx);
      EXPECT_EQ(flow_rx, s["rx_packets"].get<uint64_t>());
      // Half the job's rate goes each way. On the wall clock the pacer may run
      // a little ahead of tx_seconds (it starts before the TX lcore's first
      // round, and DPDK's TSC frequency is rounded to 10 MHz), so this is a
      // sanity bound; the pacer's exactness (0.1% over 10 s) is checked in
      // gen-unit against an injected clock.
      EXPECT_LE(tx, static_cast<uint64_t>(kRatePps / 2.0 * tx_s * 1.05) + 33);
      // psgate saw and forwarded exactly these frames for this job.
      EXPECT_EQ((*pjob)[dir_name]["admitted_packets"], tx);
      EXPECT_EQ((*pjob)[dir_name]["sent_packets"], tx);
      EXPECT_EQ((*pjob)[dir_name]["admitted_bytes"], s["tx_bytes"]);
      (std::string(dir_name) == "push" ? push_total : pull_total) += tx;
    }
  }
  EXPECT_EQ(pj["totals"]["conserved"], true);
  EXPECT_EQ(pj["totals"]["dropped"], 0);
  EXPECT_EQ(pj["ports"]["wire"]["rx_packets"], push_total);
  EXPECT_EQ(pj["ports"]["host"]["rx_packets"], pull_total);
  EXPECT_EQ(pj["ports"]["host"]["tx_packets"], push_total);
  EXPECT_EQ(pj["ports"]["wire"]["tx_packets"], pull_total);
  EXPECT_EQ(pj["ports"]["wire"]["rx_unclassified"], 0);
  EXPECT_EQ(pj["ports"]["host"]["rx_unclassified"], 0);

  if (HasFailure()) {
    std::cerr << "psgate-gen output:\n" << g.output() << "\npsgate output:\n" << psg.output() << "\n";
  }
}

// What would fail only after the run, or silently, is refused before it
// (exit 2, naming the option): each of these ran the whole test before.
TEST_F(GenCommandLine, BadOutputsAndTimesAreRefusedBeforeTheRun) {
  std::filesystem::create_directory(dir + "/out.json");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--duration", "nan"}, "--duration: not a number of seconds"},
      {{"--settle", "nan"}, "--settle: not a number of seconds"},
      {{"--json", dir + "/out.json"}, "is a directory"},
      {{"--flows-csv", dir + "/none/f.csv"}, "no directory"},
      {{"--json", dir + "/x.json", "--flows-csv", dir + "/./x.json"}, "name the same file"},
      {{"--flows-csv", "-"}, "'-' is not standard output here"},
      {{"--set", R"(name="a\u001bb")"}, "control character"},
      // An empty value was taken as "not given" and the run went on without it.
      {{"--profile", ""}, "--profile: an empty value is not allowed"},
      {{"--json", ""}, "--json: an empty value is not allowed"},
      {{"--host-port", ""}, "--host-port: an empty value is not allowed"},
      {{"--rate", ""}, "--rate: an empty value is not allowed"},
      // A shortcut won over --set whatever the order; of two --set the last won.
      {{"--set", "rate=2kpps", "--rate", "1kpps"}, "--set rate and --rate both set rate"},
      {{"--set", "rate=1kpps", "--set", "rate=2kpps"}, "--set rate=... is given twice"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> argv{gen, "--link-timeout", "1"};
    if (args[0] != "--duration") argv.insert(argv.end(), {"--duration", "1"});
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* eal : {"--", "--no-huge", "-m", "128", "--no-pci", "--log-level=4"}) argv.emplace_back(eal);
    argv.push_back("--file-prefix=gcli-" + std::to_string(getpid()));
    ChildProcess g(argv, dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 2) << args[0] << ": " << g.output();
    EXPECT_NE(g.output().find(expected), std::string::npos) << args[0] << ": " << g.output();
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.json.tmp"));
}

// EAL arguments that EAL acts on by itself, or drops: --help made EAL print
// its usage and exit 0 (a run of nothing, reported as a success), and a word
// EAL does not take (a second value, anything after a second "--") was
// ignored without a word. Each is a usage error now (exit 2, naming it).
TEST_F(GenCommandLine, EalHelpAndArgumentsEalDoesNotTakeAreUsageErrors) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--help"}, "EAL argument \"--help\" is not allowed"},
      {{"-h"}, "EAL argument \"-h\" is not allowed"},
      {{"-vh"}, "EAL argument \"-vh\" is not allowed"},
      {{"--hel"}, "EAL argument \"--hel\" is not allowed"},
      // EAL lists its log types and exits 0 likewise.
      {{"--log-level=help"}, "EAL argument \"--log-level=help\" is not allowed"},
      {{"--log-level", "help"}, "EAL argument \"help\" is not allowed"},
      {{"--", "--vdev=net_null2"}, "a second '--' is not allowed"},
      {{"512"}, "EAL did not take these arguments after '--': 512"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> argv{gen,
                                  "--duration",
                                  "0.2",
                                  "--link-timeout",
                                  "1",
                                  "-q",
                                  "--",
                                  "--no-huge",
                                  "-m",
                                  "128",
                                  "--no-pci",
                                  "--log-level=4",
                                  "--vdev=net_null0",
                                  "--vdev=net_null1",
                                  "--file-prefix=geal-" + std::to_string(getpid())};
    argv.insert(argv.end(), args.begin(), args.end());
    ChildProcess g(argv, dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 2) << args[0] << ": " << g.output();
    EXPECT_NE(g.output().find(expected), std::string::npos) << args[0] << ": " << g.output();
  }
}

// A run on two net_null ports (links up at once; what they "receive" is
// counted as frames without a stamp), 0.3 s at 1 kpps, EAL as the tests run it.
std::vector<std::string> null_run(const std::string& gen, const std::string& prefix, std::vector<std::string> options) {
  std::vector<std::string> argv{gen, "--duration", "0.3", "--rate", "1kpps"};
  argv.insert(argv.end(), options.begin(), options.end());
  for (const char* eal :
       {"--", "--no-huge", "-m", "128", "--no-pci", "--log-level=4", "--vdev=net_null0", "--vdev=net_null1"})
    argv.emplace_back(eal);
  argv.push_back("--file-prefix=" + prefix + "-" + std::to_string(getpid()));
  return argv;
}

// An EAL option's value is whatever follows it, as EAL's getopt takes it:
// "-h" or "--" after --huge-dir is a directory (unused under --no-huge), not
// --help or the end of EAL's options. They were refused as such (exit 2).
// After an option whose value is optional (--huge-unlink) "-h" is --help.
TEST_F(GenCommandLine, EalValuesThatLookLikeOptionsAreValues) {
  for (const char* value : {"-h", "--"}) {
    std::vector<std::string> argv = null_run(gen, "gval", {"-q"});
    argv.push_back("--huge-dir");
    argv.push_back(value);
    ChildProcess g(argv, dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 0) << value << ": " << g.output();
    EXPECT_EQ(g.output().find("not allowed"), std::string::npos) << value << ": " << g.output();
  }
  std::vector<std::string> argv = null_run(gen, "gval", {"-q"});
  argv.push_back("--huge-unlink");
  argv.push_back("-h");
  ChildProcess g(argv, dir + "/gen.out");
  EXPECT_EQ(g.wait(30), 2) << g.output();
  EXPECT_NE(g.output().find("EAL argument \"-h\" is not allowed"), std::string::npos) << g.output();
}

// The report must reach its reader, or the exit status says it did not:
// standard output full (exit 1, it used to be 0), or a pipe whose reader
// went away (exit 1 with the reason, it used to die of SIGPIPE: 141).
TEST_F(GenCommandLine, AReportThatCannotBeWrittenIsExitOneNotSilenceOrSigpipe) {
  {
    ChildProcess g(null_run(gen, "gfull", {"--json", "-"}), ChildProcess::Options{"/dev/full", dir + "/full.err", ""});
    EXPECT_EQ(g.wait(30), 1) << read_text_file(dir + "/full.err");
    EXPECT_NE(read_text_file(dir + "/full.err").find("cannot write the report"), std::string::npos)
        << read_text_file(dir + "/full.err");
  }
  {
    std::vector<std::string> argv{"/bin/bash", "-c", R"("$0" "$@" | true; exit "${PIPESTATUS[0]}")"};
    for (const std::string& a : null_run(gen, "gpipe", {"--json", "-"})) argv.push_back(a);
    ChildProcess g(argv, dir + "/pipe.out");
    EXPECT_EQ(g.wait(30), 1) << g.output();
    EXPECT_NE(g.output().find("cannot write the report"), std::string::npos) << g.output();
  }
}

// A job name that is not UTF-8 (a --set value kept as given) is refused
// before the run, by psgate's rule for job names: it used to throw while
// writing the JSON after the run, then ran and was shown with U+FFFD.
TEST_F(GenCommandLine, ANameThatIsNotUtf8IsRefusedBeforeTheRun) {
  ChildProcess g(null_run(gen, "gutf", {"--set", std::string("name=caf") + '\xe9', "--json", dir + "/gen.json"}),
                 dir + "/gen.out");
  ASSERT_EQ(g.wait(30), 2) << g.output();
  EXPECT_NE(g.output().find("psgate-gen: --set name: "), std::string::npos) << g.output();
  EXPECT_NE(g.output().find("must be valid UTF-8"), std::string::npos) << g.output();
  EXPECT_FALSE(std::filesystem::exists(dir + "/gen.json"));
}

// Progress lines due faster than they can be written (--interval 1 us)
// must not make the generator deaf to SIGINT: every wait had passed its
// deadline, and a wait that had passed took no signal.
TEST_F(GenSmoke, AnIntervalShorterThanAProgressLineStillStopsOnSigint) {
  std::vector<std::string> argv = null_run(gen, "gint", {"--interval", "0.000001"});
  argv[2] = "0";  // --duration 0: until signalled
  ChildProcess g(argv, ChildProcess::Options{dir + "/gen.out", "/dev/null", ""});
  std::this_thread::sleep_for(std::chrono::seconds(2));
  ASSERT_TRUE(g.running()) << g.output();
  g.signal(SIGINT);
  EXPECT_EQ(g.wait(20), 0) << "still running 20 s after SIGINT (or failed): " << g.output();
}

// memif buffers smaller than psgate-gen's frames: DPDK 22.11's memif
// corrupts a frame that spans buffers (with bsize=1024, 11.1 M frames came
// back for 491,252 sent), and the client's buffers serve both directions.
// Refused before the run, naming the device and its bsize.
TEST_F(GenCommandLine, MemifBuffersSmallerThanAFrameAreRefused) {
  ChildProcess g({gen, "--link-timeout", "1", "--duration", "1", "--", "--no-huge", "-m", "128", "--no-pci",
                  "--log-level=4", "--file-prefix=gbsize-" + std::to_string(getpid()),
                  "--vdev=net_memif0,role=client,socket=" + dir + "/h.sock,bsize=1024",
                  "--vdev=net_memif1,role=client,socket=" + dir + "/w.sock"},
                 dir + "/gen.out");
  EXPECT_NE(g.wait(30), 0) << g.output();
  EXPECT_NE(g.output().find("memif buffers smaller than the 1514-byte frames psgate-gen sends: net_memif0 (bsize "
                            "1024)"),
            std::string::npos)
      << g.output();
  EXPECT_EQ(g.output().find("net_memif1 (bsize"), std::string::npos)
      << "the default 2048 holds a frame: " << g.output();
}

// psgate-gen reads one RX queue per port: a net_pcap port given two
// captures (or af_packet with qpairs=2) had the frames of the second queue
// never read, counted as lost as if psgate had lost them. Refused, naming
// the port and what to give.
TEST_F(GenCommandLine, APortWithMoreRxQueuesThanItReadsIsRefused) {
  {
    // An empty capture: a pcap file header alone.
    std::ofstream f(dir + "/in.pcap", std::ios::binary);
    const uint32_t header[6] = {0xa1b2c3d4, 0x00040002, 0, 0, 65535, 1};
    f.write(reinterpret_cast<const char*>(header), sizeof(header));
  }
  const std::string in = dir + "/in.pcap";
  ChildProcess g({gen, "--link-timeout", "1", "--duration", "0.3", "--", "--no-huge", "-m", "128", "--no-pci",
                  "--log-level=4", "--file-prefix=gqueues-" + std::to_string(getpid()),
                  "--vdev=net_pcap0,rx_pcap=" + in + ",rx_pcap=" + in + ",tx_pcap=" + dir + "/h.pcap",
                  "--vdev=net_pcap1,rx_pcap=" + in + ",tx_pcap=" + dir + "/w.pcap"},
                 dir + "/gen.out");
  EXPECT_EQ(g.wait(30), 1) << g.output();
  EXPECT_NE(g.output().find("2 RX queues (one per rx_pcap, rx_iface or rx_iface_in"), std::string::npos) << g.output();
  EXPECT_NE(g.output().find("give 1 rx_pcap, rx_iface or rx_iface_in), and psgate-gen reads one"), std::string::npos)
      << g.output();
}

// net_null makes every frame `size` bytes: size=0 failed the port's set-up
// with only "RX queue setup failed: Cannot allocate memory", and a size
// above the mbufs' 2048 bytes with copy=1 wrote each frame past its mbuf.
// Refused before the run, naming the port, `size` and what to give.
TEST_F(GenCommandLine, ANetNullSizeItCannotMakeIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"size=0", "port 0 (net_null0): size=0 makes frames of 0 bytes, for which net_null can set up no queue"},
      {"size=70000,copy=1",
       "port 0 (net_null0): size=70000 makes frames larger than the 2048 bytes of packet data "
       "an mbuf holds: net_null would copy each one past the end of its mbuf"},
  };
  for (const auto& [args, expected] : cases) {
    ChildProcess g({gen, "--link-timeout", "1", "--duration", "0.3", "--", "--no-huge", "-m", "128", "--no-pci",
                    "--log-level=4", "--file-prefix=gnullsize-" + std::to_string(getpid()),
                    "--vdev=net_null0," + std::string(args), "--vdev=net_null1"},
                   dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 1) << args << ": " << g.output();
    EXPECT_NE(g.output().find(expected), std::string::npos) << args << ": " << g.output();
    EXPECT_NE(g.output().find("give size="), std::string::npos) << args << ": " << g.output();
  }
}

// A stop signal while the generator waits for its links (no memif server
// listening) ends the wait: a report of nothing sent, exit status 0, and no
// --hold (the signal it would wait for has come).
TEST_F(GenSmoke, StopSignalDuringLinkWaitReportsAndExitsZero) {
  ChildProcess g(
      {gen, "--json", dir + "/gen.json", "--link-timeout", "60", "--hold", "--rate", "1kpps", "--", "--no-huge", "-m",
       "128", "--no-pci", "--file-prefix=gsmoke-sig-" + std::to_string(getpid()), "--log-level=4",
       "--lcores=0@" + std::to_string(1 % cpus) + ",1@0", "--vdev=net_memif0,role=client,socket=" + dir + "/h.sock",
       "--vdev=net_memif1,role=client,socket=" + dir + "/w.sock"},
      dir + "/gen.out");
  // Waiting for the links once EAL is up: a failed memif connect is logged on every retry.
  wait_for_output(g, "memif_connect_client", 60);
  ASSERT_TRUE(g.running()) << g.output();
  g.signal(SIGINT);
  ASSERT_EQ(g.wait(30), 0) << g.output();
  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  EXPECT_EQ(gj["generator"]["interrupted"], true);
  EXPECT_EQ(gj["generator"]["links_up"], false);
  EXPECT_EQ(gj["totals"]["tx_packets"], 0);
  EXPECT_EQ(gj["totals"]["lost"], 0);
  EXPECT_NE(g.output().find("nothing sent"), std::string::npos) << g.output();
}

// --burst took what C's strtoll takes: "0x10" ran bursts of 16, "010" of 8
// (octal), and "1.5" was "not in range". Decimal digits only, refused with
// the words psgatectl's number options use.
TEST_F(GenCommandLine, BurstIsADecimalWholeNumber) {
  for (const char* bad : {"0x10", "1.5", "+5", " 5", "1e1", "0", "65"}) {
    ChildProcess g(null_run(gen, "gburst", {"--burst", bad}), dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 2) << bad << ": " << g.output();
    EXPECT_NE(g.output().find("--burst: must be a whole number from 1 to 64 in decimal digits, not '" +
                              std::string(bad) + "'"),
              std::string::npos)
        << bad << ": " << g.output();
  }
  // Leading zeros are decimal. 64 jobs' bursts of 10 are 10 RX bursts of 64
  // a TX round, and RX polls up to twice that: 20 (bursts of 8 made it 16).
  ChildProcess g(null_run(gen, "gburst", {"--jobs", "64", "--burst", "010", "-q", "--json", dir + "/gen.json"}),
                 dir + "/run.out");
  ASSERT_EQ(g.wait(60), 0) << g.output();
  EXPECT_EQ(json::parse(read_text_file(dir + "/gen.json"))["generator"]["rx_bursts_per_round"], 20);
}

// --jobs, --workers and --flows became --set values read as TOML: "0x10"
// ran 16 workers, "1_000" and "+5" passed. Decimal digits only, as --burst.
TEST_F(GenCommandLine, CountShortcutsAreDecimalWholeNumbers) {
  for (const char* option : {"--jobs", "--workers", "--flows"}) {
    for (const char* bad : {"0x10", "1_000", "+5", "1.5"}) {
      ChildProcess g(null_run(gen, "gcounts", {option, bad}), dir + "/gen.out");
      EXPECT_EQ(g.wait(30), 2) << option << " " << bad << ": " << g.output();
      EXPECT_NE(g.output().find(std::string(option) + ": must be a whole number"), std::string::npos)
          << option << " " << bad << ": " << g.output();
    }
  }
}

// A shortcut's error (--rate for --set rate=...) said "--set rate", or the
// profile's key ("command line: jobs[0].rate", or "gen.toml: jobs[0].rate"
// for a value the file does not hold): it names the option typed now, and
// the profile's entry it failed in.
TEST_F(GenCommandLine, AnErrorNamesTheOptionTyped) {
  const std::string profile = dir + "/gen.toml";
  std::ofstream(profile) << "[[jobs]]\nid = 1\n[[jobs]]\nid = 2\nps = \"[fd00::5]:2222\"\n";
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--rate", "1.5pps"}, "psgate-gen: --rate: \"1.5pps\" is not a whole number of packets per second"},
      {{"--rate", "a\x1b"}, "psgate-gen: --rate: holds a control character"},
      {{"--workers", "0"}, "psgate-gen: --workers: 0 is out of range 1.."},
      {{"--direction", "up"}, "psgate-gen: --direction: \"up\" is not push, pull or both"},
      {{"--set", "workers=0"}, "psgate-gen: --set workers: 0 is out of range 1.."},
      // 64 B holds the IPv4 job's headers, not the IPv6 one's.
      {{"--profile", profile, "--size", "64B"},
       "psgate-gen: --size (for jobs[1] of " + profile + "): 64 bytes is outside 82..1518"},
  };
  for (const auto& [args, expected] : cases) {
    std::vector<std::string> argv{gen, "--duration", "0.3"};  // no null_run: it gives --rate
    argv.insert(argv.end(), args.begin(), args.end());
    for (const char* eal :
         {"--", "--no-huge", "-m", "128", "--no-pci", "--log-level=4", "--vdev=net_null0", "--vdev=net_null1"})
      argv.emplace_back(eal);
    argv.push_back("--file-prefix=glabel-" + std::to_string(getpid()));
    ChildProcess g(argv, dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 2) << args[0] << ": " << g.output();
    EXPECT_NE(g.output().find(expected), std::string::npos) << args[0] << ": " << g.output();
    if (args[0] != "--set") {
      EXPECT_EQ(g.output().find("--set"), std::string::npos) << args[0] << ": " << g.output();
    }
  }
}

// An lcore that cannot be started (rte_eal_remote_launch failing, made so by
// the preloaded launch_fails.cc): the launch's result went unread, and the
// main lcore waited for ever (deaf to signals) for a TX loop that never
// ran, or sent without RX and reported every frame lost, exit 0. Exit 1
// now, naming the loop and its lcore, with no report of a run not made.
TEST_F(GenSmoke, AnLcoreThatCannotBeStartedIsAnErrorNotAHang) {
  const std::string fails = env_or_empty("PSGATE_GEN_LAUNCH_FAILS");
  ASSERT_FALSE(fails.empty()) << "PSGATE_GEN_LAUNCH_FAILS not set (run through meson test)";
  struct Case {
    const char* failing_call;  // 1: the first launch
    const char* lcores;        // one worker lcore: TX and RX in one loop; two: TX, then RX
    const char* expected;
  };
  const Case cases[] = {
      {"1", "--lcores=0@0,1@0", "cannot start TX and RX on lcore 1: "},
      {"1", "--lcores=0@0,1@0,2@0", "cannot start TX on lcore 1: "},
      {"2", "--lcores=0@0,1@0,2@0", "cannot start RX on lcore 2: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.lcores) + ", launch " + c.failing_call + " fails");
    std::vector<std::string> argv{"/usr/bin/env", "LD_PRELOAD=" + fails,
                                  std::string("PSGATE_TEST_FAIL_LAUNCH=") + c.failing_call};
    for (std::string& a : null_run(gen, "glaunch", {"--json", dir + "/gen.json"})) argv.push_back(std::move(a));
    argv.push_back(c.lcores);
    ChildProcess g(argv, dir + "/gen.out");
    EXPECT_EQ(g.wait(30), 1) << "(-1: still running) " << g.output();
    EXPECT_NE(g.output().find(c.expected), std::string::npos) << g.output();
    EXPECT_NE(g.output().find("Device or resource busy"), std::string::npos) << g.output();
    EXPECT_FALSE(std::filesystem::exists(dir + "/gen.json")) << g.output();
  }
}

// A paced job's bucket was made with the engine, before the links were
// awaited and settled, and had filled to pacer_depth by the time TX began:
// that much went out at once, on top of the rate over the TX time (1 s at
// 1 kpps with a 1 s depth after a 1 s settle sent about 2000 frames, and
// tx_pps said 2 kpps). The bucket starts empty when TX does.
TEST_F(GenSmoke, APacedRunSendsItsRateNotTheCreditBankedBeforeTx) {
  // net_null without RX: TX takes every frame, nothing comes back.
  ChildProcess g({gen,
                  "--duration",
                  "1",
                  "--settle",
                  "1",
                  "--drain",
                  "0",
                  "--interval",
                  "0",
                  "--rate",
                  "1kpps",
                  "--set",
                  "pacer_depth=1s",
                  "-q",
                  "--json",
                  dir + "/gen.json",
                  "--",
                  "--no-huge",
                  "-m",
                  "128",
                  "--no-pci",
                  "--log-level=4",
                  "--vdev=net_null0,no-rx=1",
                  "--vdev=net_null1,no-rx=1",
                  "--file-prefix=gpace-" + std::to_string(getpid())},
                 dir + "/gen.out");
  ASSERT_EQ(g.wait(60), 0) << g.output();
  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  const double tx_s = gj["generator"]["tx_seconds"].get<double>();
  const uint64_t sent = gj["totals"]["tx_packets"].get<uint64_t>();
  // The pacer never lets out more than the rate over the time (the TX time
  // is read after the last round: it only adds room).
  EXPECT_LE(sent, static_cast<uint64_t>(1000 * tx_s) + 1) << "over " << tx_s << " s";
  EXPECT_GT(sent, 0u);
}

// A memif server that is listening but has not started its port turns a
// client away ("ID not found"), as psgate's ports are between its probe and
// its start, and DPDK 22.11's client never connects again by itself: a
// generator launched before psgate waited out --link-timeout and failed
// (exit 1) about every time, and it waited on its ports in turn, so a peer
// that starts its ports in turn could never come up. dpdk-testpmd with
// --disable-device-start is such a server until "port start all"; it
// then forwards port 0 <-> port 1, a wire for the generator.
TEST_F(GenSmoke, AMemifClientTurnedAwayBeforeItsServerStartsConnectsOnceItHas) {
  const std::string fifo = dir + "/testpmd.in";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  // exec: the pid is testpmd's, for the signal and the destructor's kill.
  ChildProcess tp({"/bin/sh", "-c",
                   "exec dpdk-testpmd --no-huge -m 256 --no-pci --file-prefix=glate-tp-" + tag +
                       " --log-level=4 -l 0," + std::to_string(1 % cpus) + " --vdev=net_memif0,role=server,socket=" +
                       dir + "/s0.sock --vdev=net_memif1,role=server,socket=" + dir +
                       "/s1.sock -- -i --disable-device-start --total-num-mbufs=4096 < " + fifo},
                  dir + "/testpmd.out");
  const int commands = open(fifo.c_str(), O_WRONLY | O_CLOEXEC);  // once the shell has opened it
  ASSERT_GE(commands, 0) << std::strerror(errno);
  const bool prompt = wait_for_output(tp, "testpmd> ", 60);
  if (!prompt) close(commands);
  ASSERT_TRUE(prompt) << "dpdk-testpmd (package dpdk-dev, tools/setup) did not come up:\n" << tp.output();

  ChildProcess g(
      {gen, "--duration", "1", "--rate", "1kpps", "--interval", "0", "--link-timeout", "20", "--json",
       dir + "/gen.json", "--hold", "-q", "--", "--no-huge", "-m", "128", "--no-pci", "--file-prefix=glate-gen-" + tag,
       // Without --log-level=4: a global level caps every type's.
       "--log-level=pmd.net.memif:8", "--lcores=0@" + std::to_string(1 % cpus) + ",1@0",
       "--vdev=net_memif0,role=client,socket=" + dir + "/s0.sock",
       "--vdev=net_memif1,role=client,socket=" + dir + "/s1.sock"},
      dir + "/gen.out");
  const bool turned_away = wait_for_output(g, "ID not found", 60);
  const std::string start = "port start all\nstart\n";
  const bool started = write(commands, start.data(), start.size()) == static_cast<ssize_t>(start.size());
  const auto report_by = Clock::now() + std::chrono::seconds(60);
  while (g.running() && Clock::now() < report_by && !std::filesystem::exists(dir + "/gen.json"))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // The server stops first (--hold), as with psgate.
  tp.signal(SIGINT);
  tp.wait(30);
  close(commands);
  g.signal(SIGINT);
  const int rc = g.wait(30);
  ASSERT_TRUE(turned_away) << "the client was never turned away: the case was not made\n" << g.output();
  ASSERT_TRUE(started);
  ASSERT_EQ(rc, 0) << g.output() << "\ntestpmd:\n" << tp.output();
  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  EXPECT_EQ(gj["generator"]["links_up"], true);
  EXPECT_GT(gj["totals"]["tx_packets"].get<uint64_t>(), 0u);
  EXPECT_GT(gj["totals"]["rx_packets"].get<uint64_t>(), 0u);
}

// psgate killed (SIGKILL) mid-run: the generator reported the frames psgate
// held as lost and what TX offered afterwards as "refused by full TX rings",
// and nothing about the link. The report names the links that went down.
// Connects to a memif server's socket (the abstract namespace, as DPDK's
// memif names it by default) and closes at once. Whether it connected.
bool connect_and_close(const std::string& memif_socket) {
  const int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = memif_socket.substr(0, sizeof(addr.sun_path) - 2);
  std::memcpy(addr.sun_path + 1, name.data(), name.size());  // sun_path[0] = 0: abstract
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0;
  ::close(fd);
  return connected;
}

// A memif peer that connects and leaves before the server's HELLO (a peer
// killed during the handshake, a probe, a script): DPDK 22.11's server
// closed the socket with its interrupt callback still registered, and its
// interrupt thread panicked ("Error adding fd N epoll_ctl, Bad file
// descriptor"): psgate aborted within a handful of them
// (memif_handshake_guard.cc). psgate now outlives hundreds, and a real
// peer still connects and is carried without loss afterwards.
TEST_F(GenSmoke, MemifPeersThatLeaveDuringTheHandshakeDoNotStopPsgate) {
  ASSERT_NO_FATAL_FAILURE(start_psgate("ghs-psg-" + tag, {}, 1, R"([[jobs]]
id = 1
rank = 0
match = ["dport=2222,proto=udp", "sport=2222,proto=udp"]
)"));
  int connected = 0;
  for (int i = 0; i < 300 && psgate_process->running(); ++i) {
    connected += connect_and_close(psgate_wire_sock());
    connected += connect_and_close(psgate_host_sock());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ASSERT_TRUE(psgate_process->running()) << "psgate died after " << connected << " memif peers left early:\n"
                                         << psgate_process->output();
  EXPECT_GT(connected, 100) << "the memif sockets took too few connections for the test to mean anything";
  EXPECT_EQ(psgate_process->output().find("PANIC"), std::string::npos) << psgate_process->output();
  ChildProcess g(gen_through_psgate("2", "0.5", "ghs-gen-" + tag), dir + "/gen.out");
  ASSERT_EQ(g.wait(90), 0) << g.output();
  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  EXPECT_GT(gj["totals"]["tx_packets"].get<uint64_t>(), 0u) << g.output();
  EXPECT_EQ(gj["totals"]["lost"], 0) << g.output();
}

TEST_F(GenSmoke, APeerKilledMidRunIsReportedAsItsLinksGoingDown) {
  ASSERT_NO_FATAL_FAILURE(start_psgate("gkill-psg-" + tag, {}, 1, R"([[jobs]]
id = 1
rank = 0
match = ["dport=2222,proto=udp", "sport=2222,proto=udp"]
)"));
  ChildProcess g(gen_through_psgate("30", "0.2", "gkill-gen-" + tag), dir + "/gen.out");
  // Sending once it says its ports are up; psgate dies a second later.
  ASSERT_TRUE(wait_for_output(g, " up, ", 60)) << g.output();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  psgate_process->kill_now();
  // A second later the links are down (memif's control socket closed); the run ends on SIGINT.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  g.signal(SIGINT);
  ASSERT_EQ(g.wait(60), 0) << g.output();
  const json gj = json::parse(read_text_file(dir + "/gen.json"));
  EXPECT_GT(gj["totals"]["tx_packets"].get<uint64_t>(), 0u);
  // .value(): a report without the fields fails here rather than aborting.
  EXPECT_EQ(gj["generator_side"].value("link_down_events", -1), 2) << gj["ports"].dump();
  for (const json& port : gj["ports"]) {
    EXPECT_EQ(port.value("link_down_events", -1), 1) << port.dump();
    EXPECT_EQ(port.value("link_up_at_end", true), false) << port.dump();
  }
  EXPECT_NE(g.output().find("link down during the run: host-side port 0 (net_memif0) went down 1 time(s), still "
                            "down at the end"),
            std::string::npos)
      << g.output();
}

// Two generators wired to each other over memif, no psgate between: A's
// ports are memif servers, B's clients, A's host-side port facing B's
// wire-side and A's wire-side B's host-side. Same profile, so every frame of
// one arrives at the other on the port its stream returns by, with a stream
// and flow that exist there. Each took the other's frames for its own (an
// audit saw A report 0 lost and 6804 excess, B 6804 lost, and no warning).
// Now each counts the other's frames as another run's, on the port they came
// in by, warns of them, and its own flows lose everything it sent: nothing
// echoes them.
TEST_F(GenSmoke, TwoGeneratorsWiredToEachOtherCountTheOthersFramesAsAnotherRuns) {
  // The drain outlasts the few hundred ms between the two runs' starts, so
  // each is still receiving when the other's last frame arrives.
  std::ofstream(dir + "/gen.toml") << R"([generator]
duration = "1s"
drain = "2s"
interval = "0s"
link_timeout = "30s"
host_port = "net_memif0"
wire_port = "net_memif1"
[[jobs]]
id = 1
ps = "10.0.0.5:2222"
workers = 2
rate = "2kpps"
)";
  // --hold: neither disconnects until both have reported (a memif server
  // polling while its client goes can crash in DPDK 22.11).
  auto run = [&](const char* name, const char* role, const char* host_sock, const char* wire_sock, int main_cpu) {
    return std::vector<std::string>{
        gen,
        "--profile",
        dir + "/gen.toml",
        "--json",
        dir + "/" + name + ".json",
        "--hold",
        "--",
        "--no-huge",
        "-m",
        "128",
        "--no-pci",
        "--file-prefix=gpair-" + std::string(name) + "-" + tag,
        "--log-level=4",
        "--lcores=0@" + std::to_string(main_cpu % cpus) + ",1@" + std::to_string((main_cpu + 1) % cpus),
        "--vdev=net_memif0,role=" + std::string(role) + ",socket=" + dir + "/" + host_sock,
        "--vdev=net_memif1,role=" + std::string(role) + ",socket=" + dir + "/" + wire_sock};
  };
  // A's host-side is x.sock, its wire-side y.sock; B's host-side connects to
  // y.sock and its wire-side to x.sock. A's worker polls CPU 0, B's CPU 1.
  ChildProcess a(run("a", "server", "x.sock", "y.sock", 1), dir + "/a.out");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // A's servers listening (B retries anyway)
  ChildProcess b(run("b", "client", "y.sock", "x.sock", 0), dir + "/b.out");
  const auto report_by = Clock::now() + std::chrono::seconds(90);
  while ((a.running() || b.running()) && Clock::now() < report_by &&
         !(std::filesystem::exists(dir + "/a.json") && std::filesystem::exists(dir + "/b.json"))) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  a.signal(SIGINT);  // the servers first, as with psgate
  const int a_rc = a.wait(30);
  b.signal(SIGINT);
  const int b_rc = b.wait(30);
  ASSERT_EQ(a_rc, 0) << "A:\n" << a.output() << "\nB:\n" << b.output();
  ASSERT_EQ(b_rc, 0) << "B:\n" << b.output() << "\nA:\n" << a.output();

  const json aj = json::parse(read_text_file(dir + "/a.json"));
  const json bj = json::parse(read_text_file(dir + "/b.json"));
  // .value(): a report without the fields (an older psgate-gen) fails here rather than aborting.
  // -1 for both: no tags (an older psgate-gen).
  EXPECT_NE(aj["generator"].value("run_tag", -1), bj["generator"].value("run_tag", -1))
      << "both runs drew the same tag (once in 65535): their frames cannot be told apart";
  struct Side {
    const char* name;
    const json& own;
    const json& other;
    const ChildProcess& p;
  };
  for (const Side& x : {Side{"A", aj, bj, a}, Side{"B", bj, aj, b}}) {
    SCOPED_TRACE(x.name);
    const json& own_job = x.own["jobs"][0];
    const json& other_job = x.other["jobs"][0];
    // Every frame the other sent arrived here, as another run's: push frames
    // on the host-side port (the other's wire-side sends them), pull frames
    // on the wire-side port.
    const uint64_t other_tx = x.other["totals"]["tx_packets"].get<uint64_t>();
    EXPECT_GT(other_tx, 0u);
    EXPECT_EQ(x.own["generator"].value("rx_other_run", uint64_t{0}), other_tx);
    ASSERT_EQ(x.own["ports"].size(), 2u);
    EXPECT_EQ(x.own["ports"][0]["role"], "host-side");
    EXPECT_EQ(x.own["ports"][0].value("rx_other_run", uint64_t{0}), other_job["push"]["tx_packets"].get<uint64_t>());
    EXPECT_EQ(x.own["ports"][1].value("rx_other_run", uint64_t{0}), other_job["pull"]["tx_packets"].get<uint64_t>());
    EXPECT_EQ(x.own["generator"]["rx_foreign"], 0);
    // Its own frames: all lost, and none of the other's counted on its flows.
    for (const char* dir_name : {"push", "pull"}) {
      SCOPED_TRACE(dir_name);
      const json& s = own_job[dir_name];
      EXPECT_GT(s["tx_packets"].get<uint64_t>(), 0u);
      EXPECT_EQ(s["lost"], s["tx_packets"]);
      for (const char* zero : {"rx_packets", "rx_unique", "rx_excess", "reordered", "duplicates", "late", "wrong_port",
                               "flows_seen", "latency_invalid", "rx_stale"}) {
        EXPECT_EQ(s[zero], 0) << zero;
      }
      EXPECT_EQ(s["latency"]["count"], 0);
    }
    const std::string warning =
        "psgate-gen: warning: " + std::to_string(other_job["push"]["tx_packets"].get<uint64_t>()) +
        " frames from another generator run arrived on host-side port 0 (net_memif0): two "
        "generators wired together?";
    EXPECT_NE(x.p.output().find(warning), std::string::npos) << warning << "\n" << x.p.output();
  }
}

}  // namespace
