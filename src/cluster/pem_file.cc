// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/pem_file.h"

#include <optional>

#include "psgate/text.h"

namespace psgate {

namespace {

// A CA bundle of every public root is ~200 KiB: 1 MiB is room for any real
// one, and /dev/zero named by mistake is refused rather than read until
// memory runs out.
constexpr size_t kMaxPemFileBytes = 1 << 20;

constexpr std::string_view kBegin = "-----BEGIN ";
constexpr std::string_view kEnd = "-----END ";
constexpr std::string_view kDashes = "-----";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string_view trim_right(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string_view trim_left(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  return s;
}

// The label of a "-----BEGIN X-----" or "-----END X-----" line, if it is
// one: at the start of the line, as OpenSSL reads them, and a label of
// capitals, digits and spaces (a one-line PEM, its newlines made spaces,
// would otherwise be all label, and a message quoting it would print a key).
std::optional<std::string_view> armour_label(std::string_view line, std::string_view prefix) {
  if (line.size() < prefix.size() + kDashes.size() || !line.starts_with(prefix) || !line.ends_with(kDashes))
    return std::nullopt;
  const std::string_view label = line.substr(prefix.size(), line.size() - prefix.size() - kDashes.size());
  if (label.empty() || label.size() > 64) return std::nullopt;
  for (char c : label)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == ' ')) return std::nullopt;
  return label;
}

bool wanted(std::string_view label, PemKind kind) {
  if (kind == PemKind::kCertificates) return label == "CERTIFICATE" || label == "TRUSTED CERTIFICATE";
  return label.ends_with("PRIVATE KEY") && label != "ENCRYPTED PRIVATE KEY";
}

}  // namespace

std::string pem_problem(std::string_view text, PemKind kind) {
  const std::string_view what = kind == PemKind::kCertificates ? "CERTIFICATE" : "PRIVATE KEY";
  unsigned found = 0;
  std::optional<std::string_view> open;  // the label of the block being read
  std::string body;                      // its base64 characters
  bool body_started = false;
  bool encrypted = false;  // an RFC 1421 "Proc-Type: 4,ENCRYPTED" header
  size_t line_no = 0;
  if (text.starts_with("\xEF\xBB\xBF"))
    return "starts with a UTF-8 byte order mark, before which OpenSSL finds no PEM: save it without one";
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    const std::string_view whole = trim_right(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    const std::string_view line = trim_left(whole);
    if (line.starts_with(kDashes) && line.size() != whole.size())
      return "line " + std::to_string(line_no) +
             ": an indented BEGIN or END line (OpenSSL reads them only at the "
             "start of a line)";
    if (!open) {
      // Text around the blocks is allowed (bundles carry "subject=" lines).
      if (auto label = armour_label(line, kBegin)) {
        open = *label;
        body.clear();
        body_started = false;
        encrypted = false;
      } else if (armour_label(line, kEnd)) {
        return "line " + std::to_string(line_no) + ": an END line with no BEGIN line before it";
      } else if (line.starts_with(kDashes)) {
        return "line " + std::to_string(line_no) + ": not a whole BEGIN or END line (cut short?)";
      }
      continue;
    }
    if (auto label = armour_label(line, kEnd)) {
      if (*label != *open)
        return "line " + std::to_string(line_no) + ": \"-----END " + std::string(*label) + "-----\" closes a " +
               std::string(*open) + " block";
      // Base64 whole: padding only at the end, a multiple of 4 characters;
      // a certificate's or key's first byte a DER SEQUENCE (0x30), as every
      // one is (other blocks, such as a key file's EC PARAMETERS, may not).
      const size_t pad = body.find('=');
      if (body.empty() || body.size() % 4 != 0 ||
          (pad != std::string::npos &&
           (pad + 2 < body.size() || body.find_first_not_of('=', pad) != std::string::npos)))
        return "line " + std::to_string(line_no) + ": the " + std::string(*open) + " block's base64 is incomplete";
      if (wanted(*open, kind) && ((base64_value(body[0]) << 2) | (base64_value(body[1]) >> 4)) != 0x30)
        return "line " + std::to_string(line_no) + ": the " + std::string(*open) + " block holds no DER structure";
      if (kind == PemKind::kPrivateKey && (*open == "ENCRYPTED PRIVATE KEY" || encrypted))
        return "an encrypted private key: psgate has no passphrase for it (write it unencrypted, readable by root "
               "only)";
      if (wanted(*open, kind) && !encrypted) ++found;
      open.reset();
      continue;
    }
    if (line.starts_with(kDashes))
      return "line " + std::to_string(line_no) + ": a BEGIN line, or a cut END line, inside the " + std::string(*open) +
             " block";
    if (line.empty()) continue;
    // RFC 1421 headers ("Proc-Type: ...") come before the body.
    if (!body_started && line.find(':') != std::string_view::npos) {
      encrypted = encrypted || (line.starts_with("Proc-Type:") && line.find("ENCRYPTED") != std::string_view::npos);
      continue;
    }
    body_started = true;
    for (char c : line) {
      if (base64_value(c) < 0 && c != '=')
        return "line " + std::to_string(line_no) + ": not base64 inside the " + std::string(*open) + " block";
      body += c;
    }
  }
  if (open) return "cut short: its " + std::string(*open) + " block has no END line";
  if (found == 0) return "no PEM " + std::string(what) + " block in it (is it PEM?)";
  return "";
}

Result<std::string> read_pem_file(const std::string& path, PemKind kind) {
  using R = Result<std::string>;
  std::string text;
  if (const int err = read_text_file(path, text, kMaxPemFileBytes))
    return R::failure(
        "cannot read " + path + ": " +
        (err == EFBIG ? std::string("larger than 1 MiB, more than a PEM file holds") : read_text_error(err)));
  if (text.empty()) return R::failure(path + " is empty");
  if (std::string problem = pem_problem(text, kind); !problem.empty()) return R::failure(path + ": " + problem);
  return R(std::move(text));
}

}  // namespace psgate
