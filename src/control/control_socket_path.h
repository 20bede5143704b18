// SPDX-License-Identifier: BSD-3-Clause
// The control socket's path: what may stand there, whether a live server
// answers on it, and the lock that makes two starts on one stale socket take
// turns. ControlServer's check_path, check_writable and in_use
// (control_server.h) are defined in control_socket_path.cc with these.
#pragma once

#include <string>

#include "psgate/result.h"

namespace psgate {

// Is a live server listening on `path`?
bool socket_in_use(const std::string& path);

// Opens and locks PATH.lock: the descriptor, -1 when it cannot be had (the
// server then runs as before the lock, with only the stale check), or -2
// when another process holds it.
int lock_socket_path(const std::string& path);

// Makes `path` ready for a new server's bind: checks it (check_path), makes
// its missing directories, takes PATH.lock and replaces a stale socket (one
// no live server answers on; said in the log). The lock's descriptor (-1:
// none could be had), for the server to hold while it runs; an error when
// the path cannot serve or another process serves it.
Result<int> claim_socket_path(const std::string& path);

}  // namespace psgate
