// SPDX-License-Identifier: BSD-3-Clause
// run_at_once: the etcd link's probe of every endpoint. A thread that
// cannot be started (EAGAIN) must not end the process (std::terminate from
// a vector of joinable threads destroyed by the exception): the threads
// started are joined, and the rest are asked on the calling thread.
#include "psgate/at_once.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <set>

namespace psgate {
namespace {

TEST(RunAtOnce, EveryCallIsMadeOnItsOwnThread) {
  std::mutex m;
  std::set<size_t> done;
  std::set<std::thread::id> on;
  const size_t here = run_at_once({0, 2, 3}, [&](size_t i) {
    std::lock_guard<std::mutex> lock(m);
    done.insert(i);
    on.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(here, 0u);
  EXPECT_EQ(done, (std::set<size_t>{0, 2, 3}));
  EXPECT_EQ(on.size(), 3u);
  EXPECT_EQ(on.count(std::this_thread::get_id()), 0u);
}

TEST(RunAtOnce, AThreadThatCannotStartIsNoCrashAndItsCallIsMadeHere) {
  // The second and later threads cannot be started (the process at its
  // thread limit): the first is joined, the others run on this thread.
  size_t starts = 0;
  const ThreadStarter starter = [&starts](std::function<void()> fn) {
    if (starts++ >= 1) throw std::system_error(EAGAIN, std::generic_category(), "Resource temporarily unavailable");
    return std::thread(std::move(fn));
  };
  std::mutex m;
  std::set<size_t> done, on_caller;
  const std::thread::id caller = std::this_thread::get_id();
  const size_t here = run_at_once(
      {0, 1, 2, 3},
      [&](size_t i) {
        std::lock_guard<std::mutex> lock(m);
        done.insert(i);
        if (std::this_thread::get_id() == caller) on_caller.insert(i);
      },
      starter);
  EXPECT_EQ(here, 3u);
  EXPECT_EQ(done, (std::set<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(on_caller, (std::set<size_t>{1, 2, 3}));
}

TEST(RunAtOnce, NoThreadAtAllStillMakesEveryCall) {
  const ThreadStarter none = [](std::function<void()>) -> std::thread {
    throw std::system_error(EAGAIN, std::generic_category(), "Resource temporarily unavailable");
  };
  std::atomic<int> calls{0};
  EXPECT_EQ(run_at_once(
                {1, 4}, [&](size_t) { ++calls; }, none),
            2u);
  EXPECT_EQ(calls.load(), 2);
}

}  // namespace
}  // namespace psgate
