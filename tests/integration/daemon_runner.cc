#include "daemon_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
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
  if (daemon_pid_ > 0) {
    kill(daemon_pid_, SIGKILL);
    waitpid(daemon_pid_, nullptr, 0);
  }
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

namespace {

pid_t spawn(const std::string& dir, const std::vector<std::string>& argv_s, const std::string& out_path,
            const std::string& err_path) {
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    // A test binary killed by a timeout must not leave a daemon busy-polling a CPU.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (chdir(dir.c_str()) != 0) _exit(126);
    const int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int efd = err_path.empty() ? fd : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(efd, 2);
    std::vector<char*> argv;
    for (auto& a : const_cast<std::vector<std::string>&>(argv_s)) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

void DaemonFixture::start_daemon(const std::string& config, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {psgate_binary(), "--config", path(config), "--stats-json", path("stats.json")};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::filesystem::remove(path("stats.json"));
  daemon_pid_ = spawn(dir_, argv_s, path("psgate.out"), "");
}

bool DaemonFixture::daemon_running() const {
  return daemon_pid_ > 0 && waitpid(daemon_pid_, nullptr, WNOHANG) == 0;
}

DaemonRun DaemonFixture::stop_daemon(double limit_s) { return wait_daemon(limit_s, true); }

DaemonRun DaemonFixture::wait_daemon(double limit_s, bool terminate) {
  DaemonRun result;
  if (daemon_pid_ <= 0) return result;
  if (terminate) kill(daemon_pid_, SIGTERM);
  const auto start = std::chrono::steady_clock::now();
  int status = 0;
  for (;;) {
    const pid_t r = waitpid(daemon_pid_, &status, WNOHANG);
    if (r == daemon_pid_) {
      result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_s) {
      kill(daemon_pid_, SIGKILL);
      waitpid(daemon_pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  daemon_pid_ = -1;
  result.output = slurp(path("psgate.out"));
  std::ifstream js(path("stats.json"));
  if (js) result.stats = nlohmann::json::parse(js, nullptr, false);
  return result;
}

CtlResult psgatectl(const std::vector<std::string>& args) {
  const char* bin = std::getenv("PSGATECTL_BIN");
  if (!bin) throw std::runtime_error("PSGATECTL_BIN is not set (run the tests through meson test)");
  std::string templ = std::filesystem::temp_directory_path().string() + "/psgatectl-XXXXXX";
  if (!mkdtemp(templ.data())) throw std::runtime_error("mkdtemp failed");
  std::vector<std::string> argv_s = {bin};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const pid_t pid = spawn(templ, argv_s, templ + "/out", templ + "/err");
  int status = 0;
  waitpid(pid, &status, 0);
  CtlResult r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(templ + "/out");
  r.err = slurp(templ + "/err");
  std::filesystem::remove_all(templ);
  return r;
}

std::string socket_request(const std::string& socket_path, const std::string& line, int timeout_ms) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof(addr.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "";
  }
  std::string reply = send_line(fd, line, timeout_ms);
  close(fd);
  return reply;
}

std::string send_line(int fd, const std::string& line, int timeout_ms) {
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = send(fd, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return "";
    done += static_cast<size_t>(n);
  }
  std::string reply;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (reply.find('\n') == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return "";
    reply.append(buf, static_cast<size_t>(n));
  }
  return reply.substr(0, reply.find('\n'));
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
    prctl(PR_SET_PDEATHSIG, SIGKILL);
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
