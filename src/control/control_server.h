// SPDX-License-Identifier: BSD-3-Clause
// The control socket: a Unix stream socket speaking one JSON object per line
// (docs/control-protocol.md), served by one control thread with epoll. The
// same thread runs the periodic work (policy ticks, stats reports), so every
// control operation is serialised without locks on the control side, and no
// data lcore ever waits for it.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "psgate/control_plane.h"
#include "psgate/result.h"

namespace psgate {

// The protocol's limits (docs/control-protocol.md states each).
// (kMaxRequestBytes, one request line, is in control_request.h: clients split by it.)
// While a connection has this much of its replies unsent, the server reads no
// more of its requests (they wait in the kernel's socket buffer, and then in
// the client's send): a client that sends without reading costs the daemon at
// most this plus one reply. Requests are taken one line at a time, so the
// limit holds however many a client pipelines.
inline constexpr size_t kPauseReadingBytes = 256 * 1024;
// A client paused that long without reading a byte of its replies (or one
// that shut down its sending side and reads nothing) is disconnected and
// logged: it holds a slot and memory for nothing, and a client blocked in a
// send while the daemon waits for it to read would otherwise wait forever.
// The default of `control.unread_timeout` (Options::unread_timeout_ns).
inline constexpr uint64_t kStalledReaderNs = 5'000'000'000;
// Replies built and not yet sent, to all clients together. Past it the
// server reads no requests from clients owed replies (they wait in the
// kernel) until the replies drain: clients that do not read their replies
// cost the daemon at most this plus the reserve below plus one reply, not
// kPauseReadingBytes times kMaxClients. A client with replies of its own
// unsent meanwhile counts as waiting for kStalledReaderNs; one with none
// takes a request from the reserve, or waits for the others'.
inline constexpr size_t kRepliesBudgetBytes = 16u << 20;
// ... except for a client owed nothing (a monitor's `health`, a psgatectl
// asking once): past the budget its requests are still read, one reply's
// worth at a time, until all unsent replies reach the budget plus this
// reserve, unless it was owed replies for over kPromptReaderNs since the
// budget was last spent (a client pipelining requests is owed nothing for a
// moment each time its replies drain). The
// clients holding the budget (readers too slow for their own pipelined
// requests, or none at all) then cannot keep every other client's question
// unread: 100 clients reading big replies slowly held `health` for over a
// minute. The daemon's bound is the budget plus the reserve plus one reply.
inline constexpr size_t kRepliesReserveBytes = 16u << 20;
// ... a client owed replies for longer than this while the budget is spent
// is not a prompt reader: the reserve is not for it until the budget is
// spent anew. A fifth of the unread timeout (1 s by default): one knob says
// how patient the daemon is with a client slow to read.
inline constexpr uint64_t prompt_reader_ns(uint64_t unread_timeout_ns) { return unread_timeout_ns / 5; }
inline constexpr uint64_t kPromptReaderNs = prompt_reader_ns(kStalledReaderNs);
// Request pieces (a line, or up to 16 KiB of a longer one) the control thread
// takes from one connection before it turns to the others and its tick.
inline constexpr unsigned kMaxPiecesPerWakeup = 64;
// ... and for at most this long (at least one piece is taken).
inline constexpr uint64_t kMaxTurnNs = 20'000'000;
inline constexpr size_t kMaxClients = 1024;  // connected at once; one more gets "too many control clients"
// ... and fewer where RLIMIT_NOFILE is low: the descriptors open when the
// server starts (DPDK's, the ports', the listening sockets) and this many
// more stay out of the clients' reach. A state write takes the state file,
// its temp file and the rules directory, a reload reads the config file,
// the metrics server holds up to its kMaxConnections (64) connections: with
// every descriptor given to control clients they all fail (EMFILE), and a
// gateway whose changes cannot be saved is refused every change. 96 is the
// metrics server's 64 and room for a state write and a reload besides. A
// manual run under a shell's 1,024 leaves about 900 clients, the systemd
// unit's 65,536 the full kMaxClients.
inline constexpr size_t kReservedFds = 96;
// ... unless a client has sent nothing for this long and is owed nothing: with
// every place taken (or no descriptor left), the one idle longest gives its
// place to the newcomer, so forgotten connections cannot lock everyone out.
inline constexpr uint64_t kIdleEvictNs = 10'000'000'000;
// Connections the kernel queues before the control thread accepts them
// (capped by net.core.somaxconn, 4096 by default since Linux 5.4). The thread
// accepts up to kMaxAcceptsPerWakeup on every wake-up, but a long command
// holds it: the backlog is what lets a burst of clients connect meanwhile.
inline constexpr int kListenBacklog = 4096;
// Connections accepted (or refused) per wake-up. Clients connecting faster
// than the thread accepts would otherwise keep it in the accept loop for
// good: no tick (nor systemd's watchdog), no stop, no request answered. The
// listening socket is level-triggered, so the rest wait for the next round.
// As many as one round's events (64): clients that connect and hang up at
// once are closed as fast as they come, so their places are free again.
inline constexpr unsigned kMaxAcceptsPerWakeup = 64;
// At a stop, how long a change out to the cluster store is waited for, so
// that its writer is told whether it was written: past it the write is
// cancelled and the reply says it may or may not have been.
inline constexpr uint64_t kStopWriteWaitNs = 500'000'000;

struct ControlConnection;  // control_connection.h

class ControlServer {
 public:
  struct Options {
    std::string socket_path;
    uint64_t tick_ns = 100'000'000;    // policy evaluation period
    uint64_t report_ns = 0;            // 0: no periodic report
    std::function<void()> report;      // called every report_ns on the control thread
    std::function<void()> after_tick;  // called after every tick's control step (the service watchdog)
    // Readable when there is news for the control plane (cluster mode: the
    // store changed); the server drains it and calls ControlPlane::wake().
    // -1: none. Owned by the caller.
    int wake_fd = -1;
    // Readable when the config file is to be read again (SIGHUP): the server
    // drains it, runs `reload` as a client's request would, and logs the
    // outcome. -1: none. Owned by the caller.
    int reload_fd = -1;
    // `control.unread_timeout`: a client paused this long without taking a
    // byte of its replies is disconnected (kStalledReaderNs), and one owed
    // replies for a fifth of it while the budget is spent is no prompt
    // reader (kPromptReaderNs).
    uint64_t unread_timeout_ns = kStalledReaderNs;
  };

  // Creates the socket (mode 0660; the parent directory if missing). Fails if
  // another live process serves the path; a stale socket file is replaced.
  static Result<std::unique_ptr<ControlServer>> start(ControlPlane& control, Options options);

  // What the configuration alone decides about [control] socket, checked
  // before DPDK starts (and by --check), so that it is a config error (exit 2,
  // which the unit does not restart on), not a failed start retried for
  // ever: a path of 1..107 bytes, whose parent, if it exists, is a
  // directory, and that names nothing but a socket (only a socket is ever
  // replaced: anything else is the operator's to fix).
  static Result<bool> check_path(const std::string& path);
  // Whether this process may create the socket (and the directories above it
  // that are missing): the nearest existing ancestor must be writable. A
  // read-only place (ProtectSystem= makes /etc and /usr so for the service)
  // failed only at bind, after DPDK had started: exit 1, restarted for ever.
  static Result<bool> check_writable(const std::string& path);
  // Whether a live server answers on `path` (a psgate already running with
  // this socket): asked before DPDK starts, so that a second one stops
  // before it opens devices or touches the state.
  static bool in_use(const std::string& path);
  ~ControlServer();  // stops the thread and removes the socket file

 private:
  ControlServer() = default;
  // The control thread: waits for events and hands each to its step below.
  void run();
  // What the thread keeps while it serves (control_server.cc).
  struct Serving;
  // epoll_wait failed: said (rarely) and a pause, never a busy loop.
  void on_wait_error(Serving& s);
  // One event to the step for its descriptor.
  void on_event(Serving& s, const epoll_event& event);
  // The tick: the control plane's periodic step, after_tick, then
  // disconnect_stalled.
  void on_tick(Serving& s);
  // Clients past the unread timeout are disconnected; those owed replies
  // while over the budget flushed.
  void disconnect_stalled(Serving& s, uint64_t now);
  // New connections, up to kMaxAcceptsPerWakeup; each to admit_client.
  void accept_clients(Serving& s);
  // A new connection `c` served, or refused with why (too many clients, out
  // of descriptors: `out_of_fds`, the spare given up to take it).
  void admit_client(Serving& s, int c, bool out_of_fds);
  bool evict_idle(Serving& s);
  void close_client(Serving& s, int fd);
  // A client's event: its requests taken (take_requests), its replies sent.
  void read_client(Serving& s, int fd, const epoll_event& event);
  // Reads and answers requests up to the turn's limits; false: the
  // connection failed. `capped`: stopped with more to read.
  bool take_requests(Serving& s, int fd, ControlConnection& c, bool hung_up, bool mute, bool& capped);
  void answer(Serving& s, int fd, ControlConnection& c, const std::string& line, bool keep_reply);
  // A reply added to what `c` is owed (the budget's warning when it goes over).
  void add_reply(Serving& s, ControlConnection& c, const nlohmann::json& reply);
  // The control plane's deferred replies that are ready, to their clients,
  // whose requests are read again.
  void deliver_deferred(Serving& s);
  // After a round: the clients the replies budget paused, looked at again.
  void look_again_at_paused(Serving& s);

  ControlPlane* control_ = nullptr;
  Options options_;
  int listen_fd_ = -1;
  // flock(2) on PATH.lock, held while the server runs: two starts on one
  // stale socket take turns at the stale check, unlink and bind (-1: no lock).
  int lock_fd_ = -1;
  bool bound_ = false;                    // the socket file at the path is this server's (removed at the end)
  std::pair<dev_t, ino_t> bound_file_{};  // which file that is
  int stop_fd_ = -1;
  // Set with the stop_fd_ write: looked at between events, so a stop waits
  // for the event in hand only, not for the rest of its round.
  std::atomic<bool> stopping_{false};
  // The thread's epoll set and timers, made by start() so that a failure is
  // start()'s error, not a thread that cannot serve.
  int epoll_fd_ = -1;
  int tick_fd_ = -1;
  int report_fd_ = -1;
  std::thread thread_;
};

}  // namespace psgate
