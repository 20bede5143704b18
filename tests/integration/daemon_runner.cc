// SPDX-License-Identifier: BSD-3-Clause
#include "daemon_runner.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
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
  daemon_.reset();
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

void DaemonFixture::start_daemon(const std::string& config, const std::vector<std::string>& args) {
  std::vector<std::string> argv_s = {psgate_binary(), "--config", path(config), "--stats-json", path("stats.json")};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::filesystem::remove(path("stats.json"));
  daemon_ = std::make_unique<ChildProcess>(argv_s, ChildProcess::Options{path("psgate.out"), "", dir_});
}

bool DaemonFixture::daemon_running() const { return daemon_ && daemon_->running(); }

bool DaemonFixture::wait_until_serving(const std::string& socket, double limit_s) const {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s);
  while (daemon_running()) {
    if (psgatectl_at(path(socket), {"health"}).status == 0) return true;
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

DaemonRun DaemonFixture::stop_daemon(double limit_s) { return wait_daemon(limit_s, true); }

DaemonRun DaemonFixture::wait_daemon(double limit_s, bool terminate) {
  DaemonRun result;
  if (!daemon_) return result;
  if (terminate) daemon_->signal(SIGTERM);
  result.exit_status = daemon_->wait(limit_s);
  daemon_.reset();  // kills it if it outlived the limit
  result.output = read_text_file(path("psgate.out"));
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
  CtlResult r;
  {
    ChildProcess ctl(argv_s, {templ + "/out", templ + "/err", templ});
    r.status = ctl.wait(600);
  }
  r.out = read_text_file(templ + "/out");
  r.err = read_text_file(templ + "/err");
  std::filesystem::remove_all(templ);
  return r;
}

CtlResult psgatectl_at(const std::string& socket_path, std::vector<std::string> args) {
  args.insert(args.begin(), {"-s", socket_path});
  return psgatectl(args);
}

nlohmann::json psgatectl_json(const std::string& socket_path, std::vector<std::string> args) {
  args.push_back("--json");
  const CtlResult r = psgatectl_at(socket_path, std::move(args));
  EXPECT_EQ(r.status, 0) << r.err;
  return nlohmann::json::parse(r.out, nullptr, false);
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
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
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

  DaemonRun result;
  {
    ChildProcess daemon(argv_s, {out_path, "", dir_});
    if (signal_after_s > 0) {
      result.exit_status = daemon.wait(signal_after_s);
      if (result.exit_status == -1) daemon.signal(SIGTERM);
    }
    if (signal_after_s <= 0 || result.exit_status == -1) {
      result.exit_status = daemon.wait(limit_s - std::max(0.0, signal_after_s));
    }
  }  // killed here if it outlived the limit (exit_status stays -1)
  result.output = read_text_file(out_path);
  std::ifstream js(json_path);
  if (js) result.stats = nlohmann::json::parse(js, nullptr, false);
  return result;
}

}  // namespace psgate::testing
