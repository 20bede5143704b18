// SPDX-License-Identifier: BSD-3-Clause
// A thread's state and CPU time, as the kernel reports them (lcore_stall.h).
#include "psgate/lcore_stall.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace psgate {
namespace {

// The file's text into `buf` (NUL-terminated); false when unreadable or empty.
bool read_small_file(const char* path, char* buf, size_t size) {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, buf, size - 1);
  ::close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  return true;
}

}  // namespace

ThreadSample sample_thread(int tid) {
  ThreadSample sample;
  if (tid <= 0) return sample;
  char path[64];
  char text[512];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
  if (!read_small_file(path, text, sizeof text)) return sample;
  // "<tid> (<comm>) <state> ...": comm may hold spaces and parentheses, so
  // the state follows the last ')'.
  const char* close = std::strrchr(text, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0') return sample;
  const char state = close[2];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
  if (!read_small_file(path, text, sizeof text)) return sample;
  // "<ns on a CPU> <ns waiting on a run queue> <time slices>"
  char* end = nullptr;
  const unsigned long long cpu = std::strtoull(text, &end, 10);
  if (end == text) return sample;
  sample.known = true;
  sample.runnable = state == 'R';
  sample.cpu_ns = cpu;
  return sample;
}

}  // namespace psgate
