// SPDX-License-Identifier: BSD-3-Clause
// ReplyBudget (control/control_connection.h) over real connections: each
// client a socketpair(AF_UNIX, SOCK_STREAM) whose daemon end has a small
// SO_SNDBUF (a send stops after a few KiB while the client does not read),
// in a real epoll set; what flush() arms is read back with epoll_wait.
//   - over the budget, a client owed replies of its own waits for them
//     (budget_paused, EPOLLOUT only: its requests are not read), and one owed
//     nothing still has requests read from the reserve until all unsent
//     replies reach the budget plus the reserve (kReserveEnd), then is held
//     too (reserve_paused, nothing armed);
//   - a peer that shut down its reading side has its replies dropped, and
//     `unsent` goes down by them;
//   - a buffer that drained gives its memory back.
// Pure logic and the kernel's sockets, no EAL: it is here, not in the unit
// suite, because control_connection.cc is in psgate_dpdk (its header takes
// the limits from control_server.h, which includes the control plane's
// DPDK headers, and monotonic_ns() is defined in control_plane.cc).
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <string>
#include <vector>

#include "control/control_connection.h"
#include "psgate/epoll_key.h"

namespace psgate::testing {
namespace {

// Bytes the daemon's end takes before a send stops (the kernel doubles it,
// and keeps at least ~4.5 KiB): small against every reply below.
constexpr int kSmallSendBuffer = 4096;
// Where the reserve ends, as docs/control-protocol.md says it: the budget
// plus the reserve (spelt out, not kReserveEnd, so that a kReserveEnd moved
// away from it fails here).
constexpr size_t kBudgetPlusReserve = kRepliesBudgetBytes + kRepliesReserveBytes;
// Over the budget by this much, a client's own unread reply keeps `unsent`
// over it whatever its first send took.
constexpr size_t kSlack = 1u << 20;

struct Client {
  int daemon_end = -1;  // in the epoll set, what flush() sends on
  int client_end = -1;  // the client's, read (or not) by the test
  ControlConnection c;
};

class ReplyBudgetTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (Client& cl : clients_) {
      close(cl.daemon_end);
      close(cl.client_end);
    }
    close(epoll_fd_);
  }

  // A connection as the server accepts one: watched for requests.
  Client& connect() {
    int sv[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    EXPECT_EQ(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &kSmallSendBuffer, sizeof kSmallSendBuffer), 0);
    Client& cl = clients_.emplace_back();
    cl.daemon_end = sv[0];
    cl.client_end = sv[1];
    cl.c.serial = next_connection_serial(last_serial_);
    EXPECT_TRUE(epoll_watch(epoll_fd_, EPOLL_CTL_ADD, cl.daemon_end, EPOLLIN | EPOLLRDHUP, cl.c.serial));
    return cl;
  }

  // The events epoll reports for `cl` now (0: none).
  uint32_t ready(const Client& cl) {
    epoll_event events[16];
    const int n = epoll_wait(epoll_fd_, events, 16, 0);
    EXPECT_GE(n, 0);
    for (int i = 0; i < n; ++i)
      if (events[i].data.u64 == epoll_key(cl.daemon_end, cl.c.serial)) return events[i].events;
    return 0;
  }

  // The client sends a request (it waits in the socket for the daemon).
  static void ask(const Client& cl) {
    const std::string line = "{\"cmd\":\"health\"}\n";
    ASSERT_EQ(write(cl.client_end, line.data(), line.size()), static_cast<ssize_t>(line.size()));
  }

  // The client reads what has arrived; how many bytes.
  static size_t read_arrived(const Client& cl) {
    char buf[64 * 1024];
    size_t total = 0;
    for (;;) {
      const ssize_t n = recv(cl.client_end, buf, sizeof buf, MSG_DONTWAIT);
      if (n <= 0) return total;
      total += static_cast<size_t>(n);
    }
  }

  int epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  ReplyBudget budget_{epoll_fd_};
  std::deque<Client> clients_;  // stable references
  uint32_t last_serial_ = 0;
};

TEST_F(ReplyBudgetTest, OverTheBudgetOwedClientsWaitAndTheReserveServesOthersUntilItsEnd) {
  ASSERT_GE(epoll_fd_, 0);
  Client& hog = connect();    // owed more than the budget, reads nothing
  Client& owed = connect();   // owed a reply of its own, reads nothing
  Client& asker = connect();  // owed nothing, asks (a monitor's `health`)
  Client& slow = connect();   // owed nothing now, but was owed too long this episode

  budget_.append(hog.c, std::string(kRepliesBudgetBytes + kSlack, 'h'));
  ASSERT_TRUE(budget_.flush(hog.daemon_end, hog.c));
  ASSERT_GE(budget_.unsent, kRepliesBudgetBytes);
  ASSERT_LT(budget_.unsent, kBudgetPlusReserve);
  // Paused for its own replies (over kPauseReadingBytes), not the budget's.
  EXPECT_TRUE(hog.c.waiting);
  EXPECT_FALSE(hog.c.paused_by_budget);

  // A client owed a reply of its own, under its own pause: the budget's.
  budget_.append(owed.c, std::string(64 * 1024, 'o'));
  ASSERT_TRUE(budget_.flush(owed.daemon_end, owed.c));
  ASSERT_FALSE(owed.c.out.empty()) << "the socket took the whole reply: SO_SNDBUF not small?";
  ASSERT_LT(owed.c.out.size(), kPauseReadingBytes);
  EXPECT_TRUE(owed.c.paused_by_budget);
  EXPECT_TRUE(owed.c.waiting);  // for its replies to leave (the unread timeout counts)
  EXPECT_EQ(budget_.budget_paused, std::vector<int>{owed.daemon_end});
  EXPECT_TRUE(budget_.reserve_paused.empty());
  // Its request is not read (no EPOLLIN armed), and its socket is full...
  ask(owed);
  EXPECT_EQ(ready(owed), 0u);
  // ... until it reads: EPOLLOUT, and still no EPOLLIN.
  ASSERT_GT(read_arrived(owed), 0u);
  EXPECT_EQ(ready(owed), static_cast<uint32_t>(EPOLLOUT));

  // Owed nothing: its requests are still read, from the reserve.
  ask(asker);
  ASSERT_TRUE(budget_.flush(asker.daemon_end, asker.c));
  EXPECT_TRUE(budget_.reserve_open(asker.c));
  EXPECT_FALSE(asker.c.paused_by_budget);
  EXPECT_FALSE(asker.c.waiting);
  EXPECT_TRUE(ready(asker) & EPOLLIN);
  // ... unless it was owed replies too long this episode: held for the
  // budget, not the reserve, though the reserve is not spent.
  slow.c.waited_in_episode = budget_.budget_episode;
  ask(slow);
  ASSERT_TRUE(budget_.flush(slow.daemon_end, slow.c));
  EXPECT_TRUE(slow.c.paused_by_budget);
  EXPECT_EQ(ready(slow), 0u);
  EXPECT_EQ(budget_.budget_paused, (std::vector<int>{owed.daemon_end, slow.daemon_end}));
  EXPECT_TRUE(budget_.reserve_paused.empty());

  // One byte short of the reserve's end: still read.
  budget_.append(hog.c, std::string(kBudgetPlusReserve - 1 - budget_.unsent, 'h'));
  ASSERT_EQ(budget_.unsent, kBudgetPlusReserve - 1);
  ASSERT_TRUE(budget_.flush(asker.daemon_end, asker.c));
  EXPECT_FALSE(asker.c.paused_by_budget) << "the reserve is open until unsent reaches kBudgetPlusReserve";
  EXPECT_TRUE(budget_.reserve_paused.empty());
  EXPECT_TRUE(ready(asker) & EPOLLIN);

  // At it: held, listed for the reserve, nothing armed (its request waits).
  budget_.append(hog.c, "h");
  ASSERT_EQ(budget_.unsent, kBudgetPlusReserve);
  ASSERT_TRUE(budget_.flush(asker.daemon_end, asker.c));
  EXPECT_TRUE(asker.c.paused_by_budget) << "unsent at kBudgetPlusReserve: the reserve is spent";
  EXPECT_FALSE(asker.c.waiting);  // nothing of its own to wait for: no unread timeout
  EXPECT_EQ(budget_.reserve_paused, std::vector<int>{asker.daemon_end});
  EXPECT_EQ(budget_.budget_paused, (std::vector<int>{owed.daemon_end, slow.daemon_end}));
  EXPECT_EQ(ready(asker), 0u);
  // Listed once, however often it is flushed.
  ASSERT_TRUE(budget_.flush(asker.daemon_end, asker.c));
  EXPECT_EQ(budget_.reserve_paused.size(), 1u);

  // The replies drained under the budget: looked at again, it is read again.
  budget_.drop(hog.c);
  ASSERT_LT(budget_.unsent, kRepliesBudgetBytes);
  ASSERT_TRUE(budget_.flush(asker.daemon_end, asker.c));
  EXPECT_FALSE(asker.c.paused_by_budget);
  EXPECT_TRUE(ready(asker) & EPOLLIN);
}

TEST_F(ReplyBudgetTest, APeerThatStoppedReadingHasItsRepliesDropped) {
  ASSERT_GE(epoll_fd_, 0);
  Client& other = connect();
  Client& gone = connect();
  budget_.append(other.c, std::string(32 * 1024, 'x'));
  ASSERT_TRUE(budget_.flush(other.daemon_end, other.c));
  budget_.append(gone.c, std::string(64 * 1024, 'g'));
  ASSERT_TRUE(budget_.flush(gone.daemon_end, gone.c));
  const size_t owed = gone.c.out.size();
  ASSERT_GT(owed, 0u) << "the socket took the whole reply: SO_SNDBUF not small?";
  const size_t unsent_before = budget_.unsent;

  ASSERT_EQ(shutdown(gone.client_end, SHUT_RD), 0);
  // Kept (its requests are still taken until it closes), muted, and what it
  // was owed no longer counts.
  ASSERT_TRUE(budget_.flush(gone.daemon_end, gone.c));
  EXPECT_TRUE(gone.c.peer_gone);
  EXPECT_TRUE(gone.c.out.empty());
  EXPECT_EQ(budget_.unsent, unsent_before - owed);
  EXPECT_EQ(budget_.unsent, other.c.out.size());
  ask(gone);
  EXPECT_TRUE(ready(gone) & EPOLLIN);

  // Its requests cost no budget: never held, even past the reserve's end.
  budget_.append(other.c, std::string(kBudgetPlusReserve, 'x'));
  ASSERT_TRUE(budget_.flush(gone.daemon_end, gone.c));
  EXPECT_FALSE(gone.c.paused_by_budget);
  EXPECT_TRUE(budget_.budget_paused.empty());
  EXPECT_TRUE(budget_.reserve_paused.empty());
  EXPECT_TRUE(ready(gone) & EPOLLIN);
}

TEST_F(ReplyBudgetTest, ADrainedBufferGivesItsMemoryBack) {
  ASSERT_GE(epoll_fd_, 0);
  Client& reader = connect();
  // A big reply (a `config` of many rules is megabytes).
  const size_t big = 1u << 20;
  budget_.append(reader.c, std::string(big, 'r'));
  ASSERT_TRUE(budget_.flush(reader.daemon_end, reader.c));
  ASSERT_FALSE(reader.c.out.empty()) << "the socket took the whole reply: SO_SNDBUF not small?";
  ASSERT_GE(reader.c.out.capacity(), big / 2);
  // The client reads it a socket's worth at a time; after every send the
  // buffer keeps at most twice what it holds plus kKeptReplyBufferBytes.
  size_t received = 0;
  for (int round = 0; !reader.c.out.empty(); ++round) {
    ASSERT_LT(round, 100'000) << "the reply does not drain";
    received += read_arrived(reader);
    ASSERT_TRUE(budget_.flush(reader.daemon_end, reader.c));
    EXPECT_LE(reader.c.out.capacity(), 2 * reader.c.out.size() + kKeptReplyBufferBytes)
        << "after round " << round << ", " << reader.c.out.size() << " bytes left";
  }
  received += read_arrived(reader);
  EXPECT_EQ(received, big);
  EXPECT_EQ(budget_.unsent, 0u);
  EXPECT_LE(reader.c.out.capacity(), kKeptReplyBufferBytes);
}

}  // namespace
}  // namespace psgate::testing
