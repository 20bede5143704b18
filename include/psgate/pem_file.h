// SPDX-License-Identifier: BSD-3-Clause
// Reading the PEM files cluster mode's TLS names (cluster.ca, cert, key), one
// rule for the daemon's start-up check and for every reconnect's re-read.
#pragma once

#include <string>

#include "psgate/result.h"

namespace psgate {

// The whole file; a failure saying why ("cannot read PATH: reason", "PATH is
// empty") when it cannot be read or is empty (a file being rotated, say).
// Never an empty text for a named file: gRPC takes an empty root certificate
// list to mean the system's, which would trust any public CA's certificate
// for the store.
Result<std::string> read_pem_file(const std::string& path);

}  // namespace psgate
