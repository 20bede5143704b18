// SPDX-License-Identifier: BSD-3-Clause
// A memif peer that connects and goes away at once, and how psgate survives it.
//
// DPDK 22.11's memif server accepts a connection on the EAL interrupt
// thread (memif_socket.c, memif_listener_handler): it registers an
// interrupt callback for the new socket, then sends its HELLO. If the peer
// has already closed, sendmsg fails (EPIPE), and the handler's error path
// closes the socket without unregistering the callback. The interrupt
// thread then rebuilds its epoll set from its sources, finds the closed
// descriptor among them and calls rte_panic ("Error adding fd N
// epoll_ctl, Bad file descriptor"): the gateway aborted when a client
// connected to its memif socket and closed before the HELLO (measured:
// within 7 such connections; a peer killed or restarted during the
// handshake does the same).
//
// psgate interposes sendmsg (exported, like munmap in memif_guard.cc): a
// send that fails on the interrupt thread because the peer of a
// SOCK_SEQPACKET socket (memif's control channel) is gone is reported as
// sent. The driver then keeps the socket registered and open, reads its
// end of file at the next event, and tears the connection down the way it
// does for any peer that leaves (the callback unregistered first, then the
// socket closed). Nothing is lost by the pretence: nobody was there to
// receive the message. Every other sendmsg (any other thread, socket type
// or error) is the system call as it is.
#include <errno.h>
#include <rte_interrupts.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

extern "C" __attribute__((visibility("default"))) ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  const ssize_t sent = static_cast<ssize_t>(syscall(SYS_sendmsg, fd, msg, flags));
  if (sent >= 0 || (errno != EPIPE && errno != ECONNRESET)) return sent;
  const int error = errno;
  int type = 0;
  socklen_t type_len = sizeof type;
  const bool memif_channel =
      rte_thread_is_intr() && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 && type == SOCK_SEQPACKET;
  errno = error;
  if (!memif_channel) return sent;
  size_t whole = 0;
  for (size_t i = 0; i < msg->msg_iovlen; ++i) whole += msg->msg_iov[i].iov_len;
  return static_cast<ssize_t>(whole);
}
