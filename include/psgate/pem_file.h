// SPDX-License-Identifier: BSD-3-Clause
// Reading the PEM files cluster mode's TLS names (cluster.ca, cert, key), one
// rule for the daemon's start-up check and for every reconnect's re-read.
#pragma once

#include <string>
#include <string_view>

#include "psgate/result.h"

namespace psgate {

// What a file must hold: certificates (cluster.ca, cluster.cert) or a
// private key (cluster.key).
enum class PemKind { kCertificates, kPrivateKey };

// Why `text` is not a PEM file of `kind`, or "" when it is: at least one
// block of the kind (CERTIFICATE; a PRIVATE KEY other than an encrypted one,
// which psgate has no passphrase for), every block complete (its END line
// there: a file cut short mid-rotation is refused, not handed to gRPC), its
// body base64 of a DER structure. The certificates are not verified here:
// that is the TLS handshake's work.
std::string pem_problem(std::string_view text, PemKind kind);

// The whole file; a failure saying why ("cannot read PATH: reason", "PATH is
// empty", "PATH: <pem_problem>") when it cannot be read or does not hold what
// `kind` needs (a file being rotated, say). Never an empty or unusable text
// for a named file: gRPC takes an empty root certificate list to mean the
// system's, which would trust any public CA's certificate for the store, and
// one it cannot parse fails every connection with "empty address list" and
// its reason on stderr only.
Result<std::string> read_pem_file(const std::string& path, PemKind kind);

}  // namespace psgate
