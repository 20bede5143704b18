// SPDX-License-Identifier: BSD-3-Clause
// Calls made all at once, one thread each, and waited for: the etcd link
// asks every endpoint which cluster it answers for this way, each call
// under one shared (absolute) deadline, so that members that do not answer
// cost one deadline in all. A thread that cannot be started
// (std::system_error, EAGAIN: the process at its thread limit) must not
// end the process: std::thread's constructor throws, and a vector of
// joinable threads destroyed on the way out calls std::terminate. Here the
// threads started are always joined, and a call whose thread could not be
// started is made on the calling thread instead (under the same deadline,
// so the whole still ends by it). Pure; tests inject the thread starter.
#pragma once

#include <cstddef>
#include <functional>
#include <system_error>
#include <thread>
#include <vector>

namespace psgate {

using ThreadStarter = std::function<std::thread(std::function<void()>)>;

inline std::thread start_std_thread(std::function<void()> fn) { return std::thread(std::move(fn)); }

// Runs call(i) for every i in `which`, each on its own thread, and returns
// once all have returned: how many were run on the calling thread because
// their thread could not be started (0: none).
inline size_t run_at_once(const std::vector<size_t>& which, const std::function<void(size_t)>& call,
                          const ThreadStarter& start = start_std_thread) {
  std::vector<std::thread> started;
  started.reserve(which.size());
  std::vector<size_t> here;
  for (size_t i : which) {
    try {
      started.push_back(start([&call, i] { call(i); }));
    } catch (const std::system_error&) {
      here.push_back(i);
    }
  }
  for (size_t i : here) {
    try {
      call(i);
    } catch (...) {
      for (std::thread& t : started) t.join();
      throw;
    }
  }
  for (std::thread& t : started) t.join();
  return here.size();
}

}  // namespace psgate
