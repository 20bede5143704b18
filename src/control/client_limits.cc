// SPDX-License-Identifier: BSD-3-Clause
// The control clients' share of the descriptor limit (client_limits.h).
#include "control/client_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <system_error>

#include "control/control_server.h"  // kMaxClients, kReservedFds

namespace psgate {

size_t open_fd_count() {
  std::error_code ec;
  size_t n = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) ++n;
  return n;
}

size_t reserved_fds(size_t limit, size_t held) {
  const size_t room = limit > held ? limit - held : 0;
  if (room >= kReservedFds + kFewClients) return kReservedFds;
  return room > 2 * kFewClients ? room - kFewClients : room / 2;
}

size_t client_limit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return static_cast<size_t>(lim.rlim_cur);
}
size_t client_cap(size_t held) {
  const size_t limit = client_limit();
  if (limit == SIZE_MAX) return kMaxClients;
  const size_t kept = held + reserved_fds(limit, held);
  return limit > kept ? std::min(kMaxClients, limit - kept) : 0;
}

}  // namespace psgate
