// SPDX-License-Identifier: BSD-3-Clause
// A control client's connection (its request lines, its replies not yet
// sent, what it waits for) and the budget of unsent replies across all
// connections, with the send that drains a connection's replies and sets
// what the control thread waits for on it (ReplyBudget::flush). Only the
// control thread touches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "control/control_server.h"  // the limits: kPauseReadingBytes, kRepliesBudgetBytes, ...
#include "psgate/control_request.h"  // kMaxRequestBytes
#include "psgate/request_lines.h"

namespace psgate {

struct ControlConnection {
  RequestLines in{kMaxRequestBytes};
  std::string out;
  // The client shut down its side (EOF): no more requests, but the replies
  // it is owed still go out before the connection is closed.
  bool eof = false;
  // Waiting for the client to read (kPauseReadingBytes pending, or EOF with
  // replies pending), since `waiting_ns` or the last byte it took, whichever
  // is later; past Options::unread_timeout_ns (kStalledReaderNs) it is
  // disconnected.
  bool waiting = false;
  uint64_t waiting_ns = 0;
  // Paused for all clients' unsent replies (over kRepliesBudgetBytes), not
  // its own: held (nothing of its own to send) or waiting for what it has.
  // Listed in ReplyBudget's `budget_paused` (looked at again when the
  // replies drain under the budget) or, held only because the reserve is
  // spent too, `reserve_paused` (when they drain under budget + reserve);
  // `listed_*`: it is in that list, which it is put in once.
  bool paused_by_budget = false;
  bool listed_for_budget = false;
  bool listed_for_reserve = false;
  // The budget episode (ReplyBudget) in which it was owed replies for over
  // prompt_reader_ns while the budget was spent: the reserve is not for it
  // until the next. A client pipelining requests that it reads slowly, owed
  // nothing for a moment each time its replies drain, would otherwise take
  // a reply from the reserve each time, and with others like it keep the
  // reserve spent; one whose replies leave as they come (a psgatectl) keeps
  // it. `owing_ns`: since when it is owed replies.
  uint64_t waited_in_episode = 0;
  uint64_t owing_ns = 0;
  // A reply could not be sent (EPIPE, ECONNRESET): muted (replies dropped,
  // requests still taken) until it closes.
  bool peer_gone = false;
  // Its last request's reply is the control plane's to give later (a
  // change sent to the cluster store: ControlPlane::handle_line_deferred):
  // nothing more is read from it until then, so its requests stay in
  // order. `unwatched`: it hung up meanwhile, and is out of the epoll set
  // (its hang-up would be reported at every round) until the reply comes;
  // what it sent before is taken then.
  bool deferred = false;
  bool unwatched = false;
  // When it last sent anything (accepted, or a request's bytes): idle since.
  uint64_t active_ns = 0;
  // Which connection on this descriptor (psgate/epoll_key.h).
  uint32_t serial = 0;
};

// Where the reserve ends: unsent replies past it hold every client.
inline constexpr size_t kReserveEnd = kRepliesBudgetBytes + kRepliesReserveBytes;

// Memory a connection's reply buffer may keep beyond twice what it holds
// (flush() gives the rest back).
inline constexpr size_t kKeptReplyBufferBytes = 16 * 1024;

// Replies built and not yet sent, all clients together, and the clients
// paused until that is under kRepliesBudgetBytes again, or under it plus
// kRepliesReserveBytes (flush()).
class ReplyBudget {
 public:
  // `epoll_fd`: the control thread's epoll set, in which flush() sets what
  // to wait for on a connection.
  explicit ReplyBudget(int epoll_fd) : epoll_fd_(epoll_fd) {}

  // Adds `text` to what `c` is owed (an episode begins when it takes the
  // total over the budget).
  void append(ControlConnection& c, const std::string& text);
  // Drops what `c` is owed (nobody can read it).
  void drop(ControlConnection& c);
  // Whether a client may have a request read from the reserve past the
  // budget: owed nothing, and not owed replies too long this episode.
  bool reserve_open(const ControlConnection& c) const { return c.out.empty() && c.waited_in_episode != budget_episode; }
  // Sends what is buffered and sets what to wait for: more requests while
  // few replies are pending, only EPOLLOUT while many are (a client that
  // does not read is not read from either), and after EOF only the rest of
  // the replies. While all clients' unsent replies are over the budget, a
  // client with some of its own unsent waits for them to leave, and one with
  // none is held: nothing to wait for but the others (re-armed when they
  // drain). False: close the connection (peer gone, or done).
  bool flush(int fd, ControlConnection& c);

  size_t unsent = 0;
  // The clients paused for the budget, and those held only because the
  // reserve is spent too (by descriptor, each listed once).
  std::vector<int> budget_paused, reserve_paused;
  // Counts the times `unsent` went over the budget (from 1: a connection's
  // waited_in_episode starts at 0, no episode).
  uint64_t budget_episode = 1;
  // A new episode since the clients held for the budget were last looked at:
  // the reserve is open to them again (reserve_open).
  bool episode_unseen = false;
  uint64_t episode_start_ns = 0;  // when the budget was last spent

 private:
  int epoll_fd_;
};

}  // namespace psgate
