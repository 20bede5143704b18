#include "daemon_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pcap_file.h"

namespace psgate::testing {

std::string psgate_binary() {
  const char* bin = std::getenv("PSGATE_BIN");
  if (!bin) throw std::runtime_error("PSGATE_BIN is not set (run the tests through meson test)");
  return bin;
}

DaemonFixture::DaemonFixture() {
  std::string templ = std::filesystem::temp_directory_path().string() + "/psgate-it-XXXXXX";
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  dir_ = templ;
}

DaemonFixture::~DaemonFixture() {
  std::error_code ec;
  if (!std::getenv("PSGATE_KEEP_TEST_DIRS")) std::filesystem::remove_all(dir_, ec);
}

void DaemonFixture::write_file(const std::string& name, const std::string& text) const {
  std::ofstream(path(name)) << text;
}

void DaemonFixture::write_pcap(const std::string& name, const std::vector<std::vector<uint8_t>>& frames) const {
  pkt::PcapWriter writer;
  if (!writer.open(path(name))) throw std::runtime_error(writer.error());
  uint64_t ts = 0;
  for (const auto& f : frames) writer.write(f, ts += 1000);
  if (!writer.close()) throw std::runtime_error(writer.error());
}

std::vector<std::vector<uint8_t>> DaemonFixture::read_pcap(const std::string& name) const {
  auto records = pkt::read_pcap(path(name));
  if (!records.ok()) throw std::runtime_error(records.error());
  std::vector<std::vector<uint8_t>> frames;
  for (auto& r : *records) frames.push_back(std::move(r.bytes));
  return frames;
}

DaemonRun DaemonFixture::run(const std::string& config, const std::vector<std::string>& args, double limit_s,
                             double signal_after_s) const {
  const std::string out_path = path("psgate.out");
  const std::string json_path = path("stats.json");
  std::filesystem::remove(json_path);
  std::vector<std::string> argv_s = {psgate_binary(), "--config", path(config), "--stats-json", json_path};
  argv_s.insert(argv_s.end(), args.begin(), args.end());

  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (chdir(dir_.c_str()) != 0) _exit(126);
    const int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  DaemonRun result;
  const auto start = std::chrono::steady_clock::now();
  bool signalled = false;
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (signal_after_s > 0 && !signalled && elapsed >= signal_after_s) {
      kill(pid, SIGTERM);
      signalled = true;
    }
    if (elapsed > limit_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.exit_status = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::ifstream out(out_path);
  std::stringstream ss;
  ss << out.rdbuf();
  result.output = ss.str();
  std::ifstream js(json_path);
  if (js) result.stats = nlohmann::json::parse(js, nullptr, false);
  return result;
}

}  // namespace psgate::testing
