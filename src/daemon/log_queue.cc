// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/log_queue.h"

#include <spdlog/async.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <memory>
#include <thread>

namespace psgate {

namespace {

constexpr size_t kQueuedLines = 8192;

// Never destroyed: the pool's destructor joins its writer thread, which a
// standard error nobody reads keeps in a write for good (the exit would
// hang there). The loggers hold it only weakly.
std::shared_ptr<spdlog::details::thread_pool>* writer = nullptr;

}  // namespace

void queue_log_lines() {
  if (writer != nullptr) return;
  const std::shared_ptr<spdlog::logger> direct = spdlog::default_logger();
  writer = new std::shared_ptr<spdlog::details::thread_pool>(
      std::make_shared<spdlog::details::thread_pool>(kQueuedLines, 1));
  auto queued = std::make_shared<spdlog::async_logger>(direct->name(), direct->sinks().begin(), direct->sinks().end(),
                                                       *writer, spdlog::async_overflow_policy::overrun_oldest);
  queued->set_level(direct->level());
  queued->flush_on(direct->flush_level());
  spdlog::set_default_logger(queued);  // replaces the direct one of the same name
}

bool drain_log_lines(std::chrono::milliseconds limit) {
  if (writer == nullptr) return true;
  const auto& pool = *writer;
  const auto until = std::chrono::steady_clock::now() + limit;
  // Every line taken from the queue, and the last one's write over: stderr's
  // lock free (the writer holds it while it writes).
  auto drained = [&] {
    for (;; std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
      if (pool->queue_size() == 0 && ::ftrylockfile(stderr) == 0) {
        ::funlockfile(stderr);
        return true;
      }
      if (std::chrono::steady_clock::now() >= until) return false;
    }
  };
  if (!drained()) return false;
  if (const size_t lost = pool->overrun_counter(); lost != 0) {
    spdlog::warn("{} log lines were dropped: standard error was not read as fast as they came", lost);
    return drained();
  }
  return true;
}

}  // namespace psgate
