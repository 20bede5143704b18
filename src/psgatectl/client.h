// SPDX-License-Identifier: BSD-3-Clause
// The control-socket client: one Unix stream connection, one JSON line out,
// one JSON line back per call (docs/control-protocol.md). Every failure to get
// a well-formed reply is an error whose text names the socket and the reason;
// psgatectl exits 3 on it. A reply with "ok": false is not an error here: the
// daemon answered, and the caller reports its refusal (exit 1).
#pragma once

#include <chrono>
#include <csignal>
#include <string>

#include <nlohmann/json.hpp>

#include "psgate/result.h"

namespace psgatectl {

struct Reply {
  bool ok = false;
  nlohmann::ordered_json result;  // when ok; key order kept as the daemon sent it
  std::string error;              // when !ok
};

// Replies larger than this are treated as a broken daemon rather than read
// into memory without end. The protocol says lines are at most 64 KiB, but a
// `stats` reply with thousands of jobs is larger, so the client is lenient.
inline constexpr size_t kMaxReplyBytes = 64u << 20;

class Client {
 public:
  // Connects to `path`; the timeout bounds connect and each later call.
  static psgate::Result<Client> connect(const std::string& path, std::chrono::milliseconds timeout);

  // Sends `request` as one line and reads one reply line, within the
  // connection's timeout, or by `deadline` (the protocol check and the
  // command it precedes share one: --timeout bounds the wait for the reply).
  psgate::Result<Reply> call(const nlohmann::json& request);
  psgate::Result<Reply> call(const nlohmann::json& request, std::chrono::steady_clock::time_point deadline);

  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

 private:
  Client(int fd, std::string path, std::chrono::milliseconds timeout);
  // After a failed send: a reply line the daemon left before closing, if any.
  psgate::Result<Reply> read_refusal();

  int fd_ = -1;
  std::string path_;
  std::chrono::milliseconds timeout_;
  std::string pending_;  // bytes received after the last reply's '\n'
};

// A flag a signal handler sets (stats --watch: SIGINT, SIGTERM). While it is
// set, connect and call stop waiting at once and fail with "interrupted",
// instead of sitting out the rest of their timeout.
void set_interrupt_flag(const volatile std::sig_atomic_t* flag);

// Parses one reply line; errors describe what was wrong with it.
psgate::Result<Reply> parse_reply(const std::string& line);

}  // namespace psgatectl
