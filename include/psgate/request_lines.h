// SPDX-License-Identifier: BSD-3-Clause
// Splits one connection's byte stream into request lines (control_server.cc),
// and DPDK's log stream into log lines (daemon/log_queue.cc).
// The protocol promises exactly one reply per request line however long it
// is: a line longer than the limit is reported once, as soon as it passes the
// limit, and the rest of it is discarded up to its newline, so the connection
// goes on with the next line. At most `max_line` + 1 bytes are held per
// connection. Header-only and pure, so unit tests can feed it any split.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>

namespace psgate {

class RequestLines {
 public:
  explicit RequestLines(size_t max_line) : max_line_(max_line) {}

  // Calls on_line(std::string&&) for each complete, non-empty line (its
  // "\n" and a trailing "\r" removed) and on_oversized() once for each line
  // longer than max_line bytes. A "\r\n" ending does not count: one byte
  // more is held for the "\r", so a client's line of max_line bytes is taken
  // whichever ending it uses.
  template <typename OnLine, typename OnOversized>
  void feed(std::string_view data, OnLine&& on_line, OnOversized&& on_oversized) {
    while (!data.empty()) {
      const size_t newline = data.find('\n');
      const std::string_view part = data.substr(0, newline);
      if (!discarding_) {
        if (pending_.size() + part.size() > max_line_ + 1) {
          discarding_ = true;
          std::string().swap(pending_);  // give the memory back
          on_oversized();
        } else {
          pending_.append(part);
        }
      }
      if (newline == std::string_view::npos) return;
      data.remove_prefix(newline + 1);
      if (discarding_) {
        discarding_ = false;  // the oversized line ends here
        continue;
      }
      std::string line = std::exchange(pending_, std::string());
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.size() > max_line_) {
        on_oversized();  // max_line + 1 bytes, the last not a "\r"
        continue;
      }
      if (!line.empty()) on_line(std::move(line));
    }
  }

  size_t buffered() const { return pending_.size(); }
  bool discarding() const { return discarding_; }

 private:
  size_t max_line_;
  std::string pending_;      // the start of a line whose newline has not come yet
  bool discarding_ = false;  // inside a line already reported as oversized
};

}  // namespace psgate
