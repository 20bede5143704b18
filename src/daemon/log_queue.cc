// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/log_queue.h"

#include <spdlog/async.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/spdlog.h>

#include <rte_log.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "psgate/request_lines.h"

namespace psgate {

namespace {

constexpr size_t kQueuedLines = 8192;
// DPDK's lines are short; a dump longer than this is no log line.
constexpr size_t kLongestDpdkLine = 16384;

// Counts the lines it is given, and writes nothing: the marker that tells
// the drain the writer has written every line queued before it (one queue,
// one writer thread: lines are handled in the order they were queued).
class MarkerSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  uint64_t handled() const { return handled_.load(std::memory_order_acquire); }

 protected:
  void sink_it_(const spdlog::details::log_msg&) override { handled_.fetch_add(1, std::memory_order_release); }
  void flush_() override {}

 private:
  std::atomic<uint64_t> handled_{0};
};

// Never destroyed: the pool's destructor joins its writer thread, which a
// standard error nobody reads keeps in a write for good (the exit would
// hang there). The loggers hold it only weakly.
struct Queue {
  std::shared_ptr<spdlog::details::thread_pool> pool;
  std::shared_ptr<MarkerSink> marker_sink;
  std::shared_ptr<spdlog::async_logger> marker;
  std::shared_ptr<spdlog::async_logger> dpdk;  // DPDK's lines, as its --log-level lets through
  uint64_t markers_sent = 0;
};
Queue* queue = nullptr;

spdlog::level::level_enum spdlog_level_of_dpdk(int level) {
  // 0 (or anything out of 1..8): text written to the stream other than
  // through rte_log, whose level is unknown.
  if (level < static_cast<int>(RTE_LOG_EMERG) || level > static_cast<int>(RTE_LOG_DEBUG)) return spdlog::level::info;
  if (level <= static_cast<int>(RTE_LOG_CRIT)) return spdlog::level::critical;
  if (level == static_cast<int>(RTE_LOG_ERR)) return spdlog::level::err;
  if (level == static_cast<int>(RTE_LOG_WARNING)) return spdlog::level::warn;
  if (level <= static_cast<int>(RTE_LOG_INFO)) return spdlog::level::info;
  return spdlog::level::debug;
}

// DPDK's log stream: each line it writes becomes a queued line. DPDK's own
// stream wrote to stderr on the thread that logged (a data lcore's driver
// message into a full pipe stopped that lcore) and to syslog as well,
// which under systemd put every line in the journal twice.
ssize_t queue_dpdk_text(void*, const char* text, size_t size) {
  // The level of the message being written: DPDK keeps it per thread, and
  // the thread that flushes the stream is the one that logged.
  const spdlog::level::level_enum level = spdlog_level_of_dpdk(rte_log_cur_msg_loglevel());
  // A line DPDK writes in pieces (several rte_log calls, or longer than the
  // stream's buffer) is one log line: its start waits here, per thread, for
  // its end. The control socket's splitter: unit-tested on every split.
  thread_local RequestLines lines(kLongestDpdkLine);
  lines.feed(
      std::string_view(text, size), [&](std::string&& line) { queue->dpdk->log(level, "{}", line); },
      [&] { queue->dpdk->warn("a line longer than {} bytes was left out", kLongestDpdkLine); });
  return static_cast<ssize_t>(size);
}

void queue_dpdk_log_lines(const std::shared_ptr<spdlog::logger>& direct) {
  queue->dpdk = std::make_shared<spdlog::async_logger>("dpdk", direct->sinks().begin(), direct->sinks().end(),
                                                       queue->pool, spdlog::async_overflow_policy::overrun_oldest);
  queue->dpdk->set_level(spdlog::level::trace);  // DPDK's --log-level chose already
  // Line-buffered: a write per line, whole.
  std::FILE* stream = fopencookie(nullptr, "w", cookie_io_functions_t{nullptr, queue_dpdk_text, nullptr, nullptr});
  if (stream == nullptr || setvbuf(stream, nullptr, _IOLBF, 0) != 0 || rte_openlog_stream(stream) != 0) {
    spdlog::warn("DPDK's log lines are written as before, outside the log queue: {}", std::strerror(errno));
    if (stream != nullptr) std::fclose(stream);
  }
}

}  // namespace

void queue_log_lines() {
  if (queue != nullptr) return;
  const std::shared_ptr<spdlog::logger> direct = spdlog::default_logger();
  queue = new Queue;
  queue->pool = std::make_shared<spdlog::details::thread_pool>(kQueuedLines, 1);
  auto queued = std::make_shared<spdlog::async_logger>(direct->name(), direct->sinks().begin(), direct->sinks().end(),
                                                       queue->pool, spdlog::async_overflow_policy::overrun_oldest);
  queued->set_level(direct->level());
  queued->flush_on(direct->flush_level());
  spdlog::set_default_logger(queued);  // replaces the direct one of the same name
  // Not registered: spdlog::set_level must not turn it off. (A marker
  // dropped from a full queue is a drain that times out: the writer is
  // held then anyway.)
  queue->marker_sink = std::make_shared<MarkerSink>();
  queue->marker = std::make_shared<spdlog::async_logger>("psgate-log-drain", queue->marker_sink, queue->pool,
                                                         spdlog::async_overflow_policy::overrun_oldest);
  queue->marker->set_level(spdlog::level::trace);
  queue_dpdk_log_lines(direct);
}

bool drain_log_lines(std::chrono::milliseconds limit) {
  if (queue == nullptr) return true;
  const auto until = std::chrono::steady_clock::now() + limit;
  // A marker queued behind every line logged so far; the writer has written
  // them once it has handled the marker.
  auto drained = [&] {
    queue->marker->critical("drain");
    const uint64_t want = ++queue->markers_sent;
    while (queue->marker_sink->handled() < want) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  };
  if (!drained()) return false;
  if (const size_t lost = queue->pool->overrun_counter(); lost != 0) {
    spdlog::warn("{} log lines were dropped: standard error was not read as fast as they came", lost);
    return drained();
  }
  return true;
}

}  // namespace psgate
