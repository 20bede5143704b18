// SPDX-License-Identifier: BSD-3-Clause
#include "protocol_check.h"

#include "commands.h"                // exit codes
#include "psgate/control_request.h"  // kControlProtocolVersion
#include "psgate/text.h"             // escape_control_chars

namespace psgatectl {

using ojson = nlohmann::ordered_json;

std::string protocol_mismatch(const ojson& health) {
  constexpr int kOurs = psgate::kControlProtocolVersion;
  const ojson* protocol = health.is_object() && health.contains("protocol") ? &health["protocol"] : nullptr;
  if (protocol != nullptr && protocol->is_number_integer() && protocol->get<int64_t>() == kOurs) return "";
  // The daemon's words reach a terminal: escaped, and cut.
  auto shown = [](const ojson& v) {
    const std::string text = v.dump();
    return psgate::escape_control_chars(text.size() > 40 ? text.substr(0, 40) + "..." : text);
  };
  std::string notes;
  auto note = [&](const std::string& n) { notes += (notes.empty() ? "" : "; ") + n; };
  if (health.is_object() && health.contains("version") && health["version"].is_string())
    note("psgate " + psgate::escape_control_chars(health["version"].get<std::string>()));
  std::string speaks;
  if (protocol == nullptr) {
    // Protocol 2 added "protocol" to health.
    speaks = "control protocol 1";
    note("its health names no \"protocol\", as protocol 1's did not");
  } else if (protocol->is_number_unsigned() || (protocol->is_number_integer() && protocol->get<int64_t>() >= 0)) {
    speaks = "control protocol " + shown(*protocol);
  } else {
    speaks = "no control protocol psgatectl knows";
    note("its health's \"protocol\" is " + shown(*protocol));
  }
  return " speaks " + speaks + (notes.empty() ? "" : " (" + notes + ")") +
         "; this psgatectl (" PSGATE_VERSION ") speaks protocol " + std::to_string(kOurs) +
         ": use the psgatectl installed with that psgate";
}

ProtocolCheck check_protocol(Client& client, const std::string& socket, std::string_view command,
                             std::chrono::steady_clock::time_point deadline) {
  const std::string not_sent = std::string(command) + " was not sent";
  auto reply = client.call(nlohmann::json{{"cmd", "health"}}, deadline);
  if (!reply)
    return {kExitUnreachable,
            reply.error() + "; the request was health, sent first to check the daemon's protocol: " + not_sent};
  // Refused (too many clients): as the command's own refusal would be.
  if (!reply->ok) return {kExitRefused, reply->error};
  if (const std::string mismatch = protocol_mismatch(reply->result); !mismatch.empty())
    return {kExitUnreachable, "psgate at " + socket + mismatch + "; " + not_sent};
  return {};
}

}  // namespace psgatectl
