// SPDX-License-Identifier: BSD-3-Clause
// Whether the daemon speaks psgatectl's control protocol
// (psgate::kControlProtocolVersion; docs/control-protocol.md). A daemon of
// another protocol may read a request another way (protocol 1 took "id" for
// the job) and answer in another shape, so psgatectl asks first, with a
// health request on the connection (health's "protocol"), and sends nothing
// else to a daemon whose protocol is not its own: exit 3, naming both.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "client.h"

namespace psgatectl {

// "" when `health` (a health result) names psgatectl's protocol; else what
// the daemon speaks and what to do, after "psgate at SOCKET": " speaks
// control protocol 3 (psgate 0.9.0); this psgatectl (0.1.0) speaks protocol
// 2: use the psgatectl installed with that psgate".
std::string protocol_mismatch(const nlohmann::ordered_json& health);

struct ProtocolCheck {
  int status = 0;   // kExitOk, kExitRefused (health refused) or kExitUnreachable
  std::string why;  // the daemon's refusal, or the whole message (naming the socket)
};

// Asks the daemon's protocol on `client` before `command` ("jobs rm", as
// typed) is sent; the reply is awaited until `deadline`. On a failure `why`
// says that the command was not sent.
ProtocolCheck check_protocol(Client& client, const std::string& socket, std::string_view command,
                             std::chrono::steady_clock::time_point deadline);

}  // namespace psgatectl
