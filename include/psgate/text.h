// SPDX-License-Identifier: BSD-3-Clause
// Small text helpers shared by the parsers of config files, generator
// profiles and control requests: one-line errors, key suggestions, the rule
// for names. Header-only: the fuzz targets compile a
// fixed list of sources.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace psgate {

// Control characters would break an error message's one-line promise (and
// terminals): \n, \t and the rest become escapes.
inline std::string escape_control_chars(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// Levenshtein distance, for "did you mean" suggestions.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The allowed key `key` is most likely a typo of (empty: none is close). One
// rule for the config's unknown keys and the control protocol's unknown
// arguments.
inline std::string_view closest_key(std::string_view key, std::span<const std::string_view> allowed) {
  std::string_view best;
  size_t best_d = 3;
  for (std::string_view a : allowed) {
    const size_t d = edit_distance(key, a);
    // Only close matches: "x" is not a typo of "id".
    if (d < best_d && d * 3 <= a.size()) best_d = d, best = a;
  }
  return best;
}

inline constexpr size_t kMaxNameBytes = 64;

// Why `name` cannot be a job name, or empty when it can. A name is shown in
// reports, logs and terminals, so it must be what it looks like: 1..64 bytes
// of valid UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF), no C0 or C1 control characters or DEL, and no bidirectional
// controls (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069), which can make
// a name display as another ("Trojan Source"). The config loader and the
// control protocol share this rule.
inline std::string name_problem(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return "must be 1..64 bytes";
  size_t i = 0;
  while (i < name.size()) {
    const auto b0 = static_cast<unsigned char>(name[i]);
    uint32_t cp;
    size_t len;
    if (b0 < 0x80) {
      cp = b0, len = 1;
    } else if (b0 >= 0xc2 && b0 <= 0xdf) {
      cp = b0 & 0x1f, len = 2;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      cp = b0 & 0x0f, len = 3;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      cp = b0 & 0x07, len = 4;
    } else {
      return "must be valid UTF-8";
    }
    if (i + len > name.size()) return "must be valid UTF-8";
    for (size_t k = 1; k < len; ++k) {
      const auto b = static_cast<unsigned char>(name[i + k]);
      if ((b & 0xc0) != 0x80) return "must be valid UTF-8";
      cp = (cp << 6) | (b & 0x3f);
    }
    const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return "must be valid UTF-8";
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return "must not contain control characters";
    if (cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
        (cp >= 0x2066 && cp <= 0x2069))
      return "must not contain bidirectional control characters";
    i += len;
  }
  return {};
}

// Reads an open descriptor to its end, at most `max_bytes`. Returns 0 and
// fills `text`, or the errno that stopped it (e.g. EISDIR for a directory;
// EFBIG past `max_bytes`, so that a path naming /dev/zero or an endless pipe
// ends in an error rather than in memory exhaustion). Leaves `fd` open.
inline int read_text_fd(int fd, std::string& text, size_t max_bytes) {
  text.clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      text.clear();
      return EFBIG;
    }
    text.append(buf, static_cast<size_t>(n));
  }
}

// read_text_fd for a path, opened and closed here.
inline int read_text_file(const std::string& path, std::string& text, size_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int err = read_text_fd(fd, text, max_bytes);
  ::close(fd);
  return err;
}

}  // namespace psgate
