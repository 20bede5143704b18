// SPDX-License-Identifier: BSD-3-Clause
// How many control clients the descriptor limit leaves room for: the
// gateway's own descriptors and kReservedFds more (control_server.h) stay out
// of the clients' reach.
#pragma once

#include <cstddef>

namespace psgate {

// Descriptors the process has open now (0 if /proc is not mounted).
size_t open_fd_count();

// Descriptors kept from clients beyond the `held` the gateway had at start:
// kReservedFds, less where the limit leaves fewer than kReservedFds plus
// kFewClients, so that a low limit still serves a few clients (health,
// reload) rather than none: then kFewClients places (half of what is left,
// below that).
inline constexpr size_t kFewClients = 4;
size_t reserved_fds(size_t limit, size_t held);

// RLIMIT_NOFILE now (SIZE_MAX: none).
size_t client_limit();

// How many clients may be connected now: kMaxClients, or fewer so that the
// reserve stays free. Read at every accept: prlimit may change the limit
// under a running gateway.
size_t client_cap(size_t held);

}  // namespace psgate
