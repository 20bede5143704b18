// SPDX-License-Identifier: BSD-3-Clause
// epoll's data word for the servers that keep connections by descriptor (the
// control socket and the metrics endpoint): the descriptor in the low half and
// the connection's serial in the high half. A connection closed in one round
// frees its descriptor, and accept() may hand that descriptor to a new client
// in the same round; an event still pending for the old connection then
// carries the old serial and is told apart from the new one's.
// Header-only, like psgate/text.h.
#pragma once

#include <sys/epoll.h>

#include <cstdint>

namespace psgate {

// Serial 0 is for the descriptors that are not connections (listening
// socket, timers, wake-ups).
constexpr uint64_t epoll_key(int fd, uint32_t serial) { return static_cast<uint32_t>(fd) | uint64_t{serial} << 32; }
constexpr int epoll_key_fd(uint64_t key) { return static_cast<int>(static_cast<uint32_t>(key)); }
constexpr uint32_t epoll_key_serial(uint64_t key) { return static_cast<uint32_t>(key >> 32); }

// The next connection serial after `last`, never 0 (wraps past it).
constexpr uint32_t next_connection_serial(uint32_t& last) {
  if (++last == 0) ++last;
  return last;
}

// epoll_ctl with the key above; true when it succeeded (errno says why not).
inline bool epoll_watch(int epoll_fd, int op, int fd, uint32_t events, uint32_t serial = 0) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = epoll_key(fd, serial);
  return ::epoll_ctl(epoll_fd, op, fd, &ev) == 0;
}

}  // namespace psgate
