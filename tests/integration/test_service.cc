// SPDX-License-Identifier: BSD-3-Clause
// The systemd notify protocol as a Type=notify unit meets it, with a fake
// NOTIFY_SOCKET (a datagram socket this test owns): READY=1 comes only once
// the control socket answers, STOPPING=1 when SIGTERM starts the drain.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon_runner.h"

namespace psgate::testing {
namespace {

// A bound datagram socket standing in for systemd's notification socket.
class FakeNotifySocket {
 public:
  explicit FakeNotifySocket(const std::string& path) : path_(path) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bound_ = fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~FakeNotifySocket() {
    if (fd_ >= 0) close(fd_);
    unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  // The next datagram, or "" after `timeout_ms`.
  std::string receive(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return "";
    char buf[4096];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

std::string service_config(const DaemonFixture& fx) {
  return "[eal]\nargs = [\"--no-huge\", \"-m\", \"256\", \"--no-pci\", \"--file-prefix=psgate-svc-" +
         std::to_string(getpid()) +
         "\", \"--log-level=3\"]\n"
         "[ports.wire]\ndevice = \"net_null0,no-rx=1\"\n[ports.host]\ndevice = \"net_null1,no-rx=1\"\n"
         "[lcores]\nmain = 0\ndata = [1]\n[dataplane]\nmbufs = 4095\n[stats]\ninterval = \"0s\"\n"
         "[control]\nsocket = \"" +
         fx.path("ctl.sock") + "\"\n";
}

TEST(Service, ReadyIsSentOnceTheControlSocketAnswersAndStoppingWhenTheDrainStarts) {
  DaemonFixture fx;
  FakeNotifySocket notify(fx.path("notify.sock"));
  ASSERT_TRUE(notify.bound()) << std::strerror(errno);
  fx.write_file("psgate.toml", service_config(fx));
  ::setenv("NOTIFY_SOCKET", fx.path("notify.sock").c_str(), 1);
  fx.start_daemon("psgate.toml");
  ::unsetenv("NOTIFY_SOCKET");

  const std::string ready = notify.receive(30'000);
  ASSERT_NE(ready.find("READY=1"), std::string::npos) << "no READY=1 within 30 s; got \"" << ready << "\"\n"
                                                      << (fx.daemon_running() ? "" : fx.stop_daemon().output);
  EXPECT_NE(ready.find("STATUS=forwarding"), std::string::npos) << ready;
  // What READY promises: psgatectl connects at once.
  EXPECT_EQ(psgatectl_at(fx.path("ctl.sock"), {"health"}).status, 0);

  const DaemonRun stopped = fx.stop_daemon();
  EXPECT_EQ(stopped.exit_status, 0) << stopped.output;
  const std::string stopping = notify.receive(1000);
  EXPECT_NE(stopping.find("STOPPING=1"), std::string::npos) << "got \"" << stopping << "\"";
}

// Started by hand (no NOTIFY_SOCKET), it runs as before and says nothing.
TEST(Service, WithoutNotifySocketNothingIsSent) {
  DaemonFixture fx;
  FakeNotifySocket notify(fx.path("notify.sock"));
  ASSERT_TRUE(notify.bound());
  ::unsetenv("NOTIFY_SOCKET");
  fx.write_file("psgate.toml", service_config(fx));
  fx.start_daemon("psgate.toml");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (psgatectl_at(fx.path("ctl.sock"), {"health"}).status != 0 && std::chrono::steady_clock::now() < deadline)
    usleep(100'000);
  EXPECT_EQ(psgatectl_at(fx.path("ctl.sock"), {"health"}).status, 0);
  EXPECT_EQ(notify.receive(200), "");
  EXPECT_EQ(fx.stop_daemon().exit_status, 0);
}

}  // namespace
}  // namespace psgate::testing
