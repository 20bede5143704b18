// SPDX-License-Identifier: BSD-3-Clause
// For tests of work that once took hours: whether it ends within a bound.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace psgate::testing {

// Whether `work` returns within `limit`, run on a thread of its own left
// behind if it does not: a test that hung until the suite's timeout would
// say less than a failure. The limit bounds a hang; it is no measure of
// speed.
inline bool finishes_within(std::chrono::seconds limit, std::function<void()> work) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([done, work = std::move(work)] {
    work();
    done->set_value();
  }).detach();
  return finished.wait_for(limit) == std::future_status::ready;
}

}  // namespace psgate::testing
