// SPDX-License-Identifier: BSD-3-Clause
#include "client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cerrno>
#include <cstring>

#include "psgate/control_commands.h"  // reads_only
#include "psgate/control_request.h"   // kMaxJsonDepth
#include "psgate/text.h"

namespace psgatectl {

using psgate::Result;
using Clock = std::chrono::steady_clock;

namespace {

const volatile std::sig_atomic_t* g_interrupt = nullptr;

bool interrupted() { return g_interrupt != nullptr && *g_interrupt != 0; }

std::string connect_reason(int err) {
  switch (err) {
    case ENOENT:
      return "no such socket (is psgate running, and is this its [control] socket?)";
    case ECONNREFUSED:
      return "connection refused (nothing listens there: psgate stopped or the socket is stale)";
    case EACCES:
    case EPERM:
      return "permission denied (run as root or as a member of the socket's group)";
    case ENOTDIR:
      return "a component of the path is not a directory";
    case EAGAIN:
    case EINPROGRESS:
    case ETIMEDOUT:
      return "timed out connecting (the daemon's listen queue is full)";
    default:
      return std::strerror(err);
  }
}

std::string timeout_text(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0) return std::to_string(t.count() / 1000) + "s";
  return std::to_string(t.count()) + "ms";
}

// Milliseconds left until `deadline`, at least 0, for poll().
int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events`; false on timeout or when the
// interrupt flag is set (a Ctrl-C in stats --watch). Any other EINTR retries.
bool wait_ready(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    if (interrupted()) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, remaining_ms(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return true;  // let the following send/recv report the error
  }
}

}  // namespace

void set_interrupt_flag(const volatile std::sig_atomic_t* flag) { g_interrupt = flag; }

Client::Client(int fd, std::string path, std::chrono::milliseconds timeout)
    : fd_(fd), path_(std::move(path)), timeout_(timeout) {}

Client::Client(Client&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)), timeout_(o.timeout_), pending_(std::move(o.pending_)) {}

Client& Client::operator=(Client&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    timeout_ = o.timeout_;
    pending_ = std::move(o.pending_);
  }
  return *this;
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

Result<Client> Client::connect(const std::string& path, std::chrono::milliseconds timeout) {
  auto fail = [&](const std::string& why) {
    return Result<Client>::failure("cannot reach psgate at " + path + ": " + why);
  };
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return fail("socket path empty or too long");
  std::memcpy(addr.sun_path, path.data(), path.size());

  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(std::string("socket: ") + std::strerror(errno));
  // A Unix-socket connect only blocks when the listener's backlog is full;
  // SO_SNDTIMEO bounds that wait.
  timeval tv{};
  tv.tv_sec = timeout.count() / 1000;
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  int rc;
  do {
    rc = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  } while (rc != 0 && errno == EINTR && !interrupted());
  if (rc != 0) {
    const int err = errno;
    close(fd);
    // connect() answers ECONNREFUSED for any file that is not a socket too:
    // "nothing listens" would send the operator after a dead daemon.
    struct stat st {};
    if (err == ECONNREFUSED && ::stat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
      return fail(std::string("not a socket (a ") + (S_ISDIR(st.st_mode) ? "directory" : "file that is not a socket") +
                  " is at that path; psgate's [control] socket is a Unix socket)");
    return fail(connect_reason(err));
  }
  // From here every wait goes through poll() with a deadline.
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  return Client(fd, path, timeout);
}

Result<Reply> Client::call(const nlohmann::json& request) { return call(request, Clock::now() + timeout_); }

Result<Reply> Client::call(const nlohmann::json& request, Clock::time_point deadline) {
  auto fail = [&](const std::string& why) { return Result<Reply>::failure("psgate at " + path_ + ": " + why); };
  if (fd_ < 0) return fail("not connected");

  const std::string line = request.dump() + "\n";
  size_t sent = 0;
  while (sent < line.size()) {
    if (!wait_ready(fd_, POLLOUT, deadline)) {
      if (interrupted()) return fail("interrupted");
      return fail("timed out sending the request after " + timeout_text(timeout_));
    }
    const ssize_t n = send(fd_, line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (errno == EPIPE || errno == ECONNRESET) {
      // The daemon may have refused the connection with a reason before
      // closing it ("too many control clients"): that line is the reply.
      Result<Reply> refusal = read_refusal();
      if (refusal) return refusal;
      return fail("daemon closed the connection before reading the request");
    } else if (errno != EAGAIN && errno != EINTR) {
      return fail(std::string("send: ") + std::strerror(errno));
    }
  }

  size_t scanned = 0;  // bytes of pending_ known to hold no '\n'
  for (;;) {
    const size_t nl = pending_.find('\n', scanned);
    if (nl != std::string::npos) {
      std::string reply_line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      auto reply = parse_reply(reply_line);
      if (!reply) return fail(reply.error());
      return reply;
    }
    scanned = pending_.size();
    if (pending_.size() > kMaxReplyBytes) return fail("reply longer than 64 MiB without a newline");
    if (!wait_ready(fd_, POLLIN, deadline)) {
      if (interrupted()) return fail("interrupted");
      // The daemon has the request: it may still apply it (a cluster write
      // waits on the store), so this is not "nothing changed", unless the
      // command changes nothing (health, sent first by every command).
      const psgate::CommandSpec* command = request.contains("cmd") && request["cmd"].is_string()
                                               ? psgate::find_control_command(request["cmd"].get<std::string>())
                                               : nullptr;
      const bool reads_only = command != nullptr && command->reads_only;
      return fail("no reply within " + timeout_text(timeout_) + " after the request was sent (" +
                  (reads_only ? "" : "a change may still be applied: check before retrying; ") +
                  "use --timeout to wait longer)");
    }
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n > 0) {
      pending_.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      return fail(pending_.empty() ? "daemon closed the connection without replying"
                                   : "daemon closed the connection in the middle of its reply");
    } else if (errno == ECONNRESET) {
      return fail("daemon closed the connection (reset)");
    } else if (errno != EAGAIN && errno != EINTR) {
      return fail(std::string("recv: ") + std::strerror(errno));
    }
  }
}

Result<Reply> Client::read_refusal() {
  char buf[4096];
  const ssize_t n = recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
  if (n <= 0) return Result<Reply>::failure("nothing");
  pending_.append(buf, static_cast<size_t>(n));
  const size_t nl = pending_.find('\n');
  if (nl == std::string::npos) return Result<Reply>::failure("nothing");
  return parse_reply(pending_.substr(0, nl));
}

Result<Reply> parse_reply(const std::string& line) {
  // A reply's text goes to a terminal: its control characters, bidi and
  // invisible characters are shown escaped, never acted on.
  auto excerpt = [&] { return psgate::escape_control_chars(line.size() > 80 ? line.substr(0, 80) + "..." : line); };
  // As deep as a request may be, no deeper: the formatters (and the JSON
  // dump) recurse per level, and a peer's 100,000 nested arrays overflowed
  // the stack. No daemon reply comes near it.
  // (Checked in a pass of its own: a parse callback would bound the depth
  // too, in time quadratic in an array's length: psgate::json_shape.)
  const psgate::JsonShape shape = psgate::json_shape(line);
  if (shape == psgate::JsonShape::kTooDeep)
    return Result<Reply>::failure("reply is nested deeper than " + std::to_string(psgate::kMaxJsonDepth) + " levels");
  auto j = shape == psgate::JsonShape::kJson ? nlohmann::ordered_json::parse(line, nullptr, /*allow_exceptions=*/false)
                                             : nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  if (j.is_discarded()) return Result<Reply>::failure("reply is not JSON: " + excerpt());
  if (!j.is_object() || !j.contains("ok") || !j["ok"].is_boolean()) {
    return Result<Reply>::failure("reply has no \"ok\": " + excerpt());
  }
  Reply r;
  r.ok = j["ok"].get<bool>();
  if (r.ok) {
    if (!j.contains("result")) return Result<Reply>::failure("reply has \"ok\": true but no \"result\"");
    // Every command's result is an object; anything else would print nothing
    // and exit 0 as if it had been read.
    if (!j["result"].is_object()) return Result<Reply>::failure("reply's \"result\" is not an object: " + excerpt());
    r.result = std::move(j["result"]);
  } else if (j.contains("error") && j["error"].is_string()) {
    r.error = psgate::escape_control_chars(j["error"].get<std::string>());
  } else {
    r.error = "request refused (the daemon gave no reason)";
  }
  return r;
}

}  // namespace psgatectl
