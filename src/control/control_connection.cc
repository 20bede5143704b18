// SPDX-License-Identifier: BSD-3-Clause
// A control connection's replies: buffered, sent, and the budget of all
// connections' unsent replies (control_connection.h).
#include "control/control_connection.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "psgate/control_plane.h"  // monotonic_ns
#include "psgate/epoll_key.h"

namespace psgate {

void ReplyBudget::append(ControlConnection& c, const std::string& text) {
  if (c.out.empty()) c.owing_ns = monotonic_ns();
  if (unsent < kRepliesBudgetBytes && unsent + text.size() >= kRepliesBudgetBytes) {
    ++budget_episode;
    episode_unseen = true;
    episode_start_ns = monotonic_ns();
  }
  c.out += text;
  unsent += text.size();
}

void ReplyBudget::drop(ControlConnection& c) {
  unsent -= c.out.size();
  c.out.clear();
}

bool ReplyBudget::flush(int fd, ControlConnection& c) {
  bool progress = false;
  while (!c.out.empty()) {
    const ssize_t n = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      unsent -= static_cast<size_t>(n);
      progress = true;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    // Peer gone (it closed, or shut down its reading side, between sending
    // and our reply): nobody reads a reply again, but the requests it sends
    // are still taken, until it closes (EOF or a hang-up).
    if (!c.eof) {
      c.peer_gone = true;
      drop(c);
      break;
    }
    return false;
  }
  // Everything it asked for was sent, and it will ask for nothing more
  // (but a deferred reply is still to come).
  if (c.eof && c.out.empty() && !c.deferred) return false;
  // A buffer that drained gives its memory back: erasing what was sent
  // keeps the capacity, so a client that once had a large reply pending
  // (a `config` of 100k rules is megabytes; up to kPauseReadingBytes are
  // built in one round) would otherwise hold that much as long as it stays
  // connected, and the budget would bound what is unsent but not what is
  // held.
  if (progress && c.out.capacity() > 2 * c.out.size() + kKeptReplyBufferBytes) {
    if (c.out.empty()) {
      std::string().swap(c.out);
    } else {
      c.out.shrink_to_fit();
    }
  }
  const bool over_budget = unsent >= kRepliesBudgetBytes;
  // (A client past its EOF waits for its replies; while one is deferred,
  // for the control plane, which no unread timeout applies to.)
  const bool own_pause = (c.eof && !c.deferred) || c.out.size() >= kPauseReadingBytes;
  const bool waiting = own_pause || (over_budget && !c.out.empty());
  if (waiting && (!c.waiting || progress)) c.waiting_ns = monotonic_ns();
  c.waiting = waiting;
  // Owed nothing (else it would be waiting while over the budget): its
  // next request may still be read, from the reserve, until that is spent,
  // unless it was owed replies too long this episode (waited_in_episode).
  const bool may_use_reserve = reserve_open(c);
  // (Never one whose replies are dropped, peer_gone: its requests cost
  // no budget, and are taken until it closes.)
  const bool hold = over_budget && !waiting && !c.peer_gone && (!may_use_reserve || unsent >= kReserveEnd);
  const bool for_reserve = hold && may_use_reserve;
  const bool for_budget = (hold && !may_use_reserve) || (over_budget && !own_pause && !c.out.empty());
  if (for_budget && !c.listed_for_budget) {
    budget_paused.push_back(fd);
    c.listed_for_budget = true;
  }
  if (for_reserve && !c.listed_for_reserve) {
    reserve_paused.push_back(fd);
    c.listed_for_reserve = true;
  }
  c.paused_by_budget = for_budget || for_reserve;
  // Held: no event but a hang-up or an error (always reported). Deferred:
  // no request read (nor its EOF) until the reply is in.
  const uint32_t reading = c.deferred ? 0u : static_cast<uint32_t>(EPOLLIN | EPOLLRDHUP);
  const uint32_t events = waiting ? EPOLLOUT
                          : hold  ? 0u
                                  : reading | (c.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
  epoll_watch(epoll_fd_, EPOLL_CTL_MOD, fd, events, c.serial);
  return true;
}

}  // namespace psgate
