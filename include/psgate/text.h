// SPDX-License-Identifier: BSD-3-Clause
// Small text helpers shared by the parsers of config files, generator
// profiles and control requests: one-line errors, key suggestions, the rule
// for names. Header-only: the fuzz targets compile a
// fixed list of sources.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace psgate {

// One UTF-8 code point at the start of `s`: its value and length in bytes,
// or nullopt for an invalid sequence (a stray byte, a cut sequence, an
// overlong form, a surrogate, past U+10FFFF).
struct CodePoint {
  uint32_t value;
  size_t length;
};
inline std::optional<CodePoint> decode_utf8(std::string_view s) {
  if (s.empty()) return std::nullopt;
  const auto b0 = static_cast<unsigned char>(s[0]);
  uint32_t cp;
  size_t len;
  if (b0 < 0x80) {
    return CodePoint{b0, 1};
  } else if (b0 >= 0xc2 && b0 <= 0xdf) {
    cp = b0 & 0x1f, len = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    cp = b0 & 0x0f, len = 3;
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    cp = b0 & 0x07, len = 4;
  } else {
    return std::nullopt;
  }
  if (len > s.size()) return std::nullopt;
  for (size_t k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[k]);
    if ((b & 0xc0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (b & 0x3f);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return std::nullopt;
  return CodePoint{cp, len};
}

// C0 and C1 controls and DEL.
inline bool is_control_char(uint32_t cp) { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }
// Bidirectional controls (U+061C, U+200E/F, U+202A..U+202E, U+2066..U+2069):
// they can make text display as other text ("Trojan Source").
inline bool is_bidi_control(uint32_t cp) {
  return cp == 0x061c || cp == 0x200e || cp == 0x200f || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}
// Characters that display as nothing (soft hyphen, zero-width space and
// joiners, word joiner and invisible operators, BOM, Mongolian vowel
// separator): "job\u200b" looks like "job".
inline bool is_invisible_char(uint32_t cp) {
  return cp == 0x00ad || cp == 0x180e || (cp >= 0x200b && cp <= 0x200d) || (cp >= 0x2060 && cp <= 0x2064) ||
         cp == 0xfeff;
}

// Text for a one-line message on a terminal: control characters and the
// line and paragraph separators (U+2028/9) would break the one-line promise
// (and terminals), bidi and invisible characters would
// show other text than is there, and bytes that are not UTF-8 may be a C1
// control to an 8-bit terminal. \n and \t become those escapes, other C0
// controls, DEL and bytes that are not UTF-8 \xNN, the rest of those
// characters \uNNNN. For messages: \xNN is neither TOML nor JSON.
inline std::string escape_control_chars(std::string_view s) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  while (!s.empty()) {
    const auto cp = decode_utf8(s);
    if (!cp) {
      const auto c = static_cast<unsigned char>(s[0]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
      s.remove_prefix(1);
      continue;
    }
    const uint32_t v = cp->value;
    if (v == '\n') {
      out += "\\n";
    } else if (v == '\t') {
      out += "\\t";
    } else if (v < 0x80 && is_control_char(v)) {
      out += "\\x";
      out += kHex[v >> 4];
      out += kHex[v & 15];
    } else if (is_control_char(v) || is_bidi_control(v) || is_invisible_char(v) || v == 0x2028 || v == 0x2029) {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(v >> shift) & 15];
    } else {
      out.append(s.substr(0, cp->length));
    }
    s.remove_prefix(cp->length);
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

// Reasons for one outcome, joined with "; ", the first `shown` of them and
// how many more: an error, a health line or a log line about thousands of
// items (a store with 5,000 jobs for 4,096 slots) stays a line.
class ReasonList {
 public:
  explicit ReasonList(std::string_view items, size_t shown = 3) : items_(items), shown_(shown) {}
  void add(std::string_view why) {
    if (++count_ > shown_) return;
    if (!text_.empty()) text_ += "; ";
    text_ += why;
  }
  size_t count() const { return count_; }
  std::string str() const {
    if (count_ <= shown_) return text_;
    return text_ + "; and " + std::to_string(count_ - shown_) + " more " + items_ + " likewise";
  }

 private:
  std::string items_;
  size_t shown_;
  size_t count_ = 0;
  std::string text_;
};

inline constexpr size_t kMaxNameBytes = 64;

inline constexpr std::string_view kInvisibleNameProblem =
    "must not contain invisible characters (zero-width, soft hyphen, BOM)";
inline constexpr std::string_view kLineSeparatorNameProblem =
    "must not contain line or paragraph separators (U+2028, U+2029)";

// Why `name` cannot be a job name, or empty when it can. A name is shown in
// reports, logs and terminals, so it must be what it looks like: 1..64 bytes
// of valid UTF-8 (decode_utf8), no C0 or C1 control characters or DEL, no
// bidirectional controls and no invisible characters (is_invisible_char),
// which can make a name display as another, and no line or paragraph
// separator, which breaks a report's line (or shows as nothing). The config loader and the
// control protocol share this rule.
inline std::string name_problem(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes) return "must be 1..64 bytes";
  while (!name.empty()) {
    const auto cp = decode_utf8(name);
    if (!cp) return "must be valid UTF-8";
    if (is_control_char(cp->value)) return "must not contain control characters";
    if (is_bidi_control(cp->value)) return "must not contain bidirectional control characters";
    if (is_invisible_char(cp->value)) return std::string(kInvisibleNameProblem);
    if (cp->value == 0x2028 || cp->value == 0x2029) return std::string(kLineSeparatorNameProblem);
    name.remove_prefix(cp->length);
  }
  return {};
}

// A name stored by a version that allowed invisible characters or line
// separators (the state file, a cluster store's job document): read with
// them shown escaped ("job\\u200b"), so that the job still loads and its
// name is what it looks like. Any other name is returned as it is, for the
// usual check to judge.
inline std::string stored_name(std::string_view name) {
  const std::string problem = name_problem(name);
  if (problem != kInvisibleNameProblem && problem != kLineSeparatorNameProblem) return std::string(name);
  std::string shown = escape_control_chars(name);
  return name_problem(shown).empty() ? shown : std::string(name);
}

// Reads an open descriptor to its end, at most `max_bytes`. Returns 0 and
// fills `text`, or the errno that stopped it (e.g. EISDIR for a directory;
// EFBIG past `max_bytes`, so that a path naming /dev/zero or an endless pipe
// ends in an error rather than in memory exhaustion). Leaves `fd` open.
// `give_up`, for a descriptor opened non-blocking: asked every 100 ms while
// nothing comes; true ends the read with EINTR.
inline int read_text_fd(int fd, std::string& text, size_t max_bytes, const std::function<bool()>& give_up = {}) {
  text.clear();
  // A regular file's size says it at once (the loop below would read
  // max_bytes first).
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && static_cast<uint64_t>(st.st_size) > max_bytes) return EFBIG;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN || !give_up) return errno;
      if (give_up()) return EINTR;
      pollfd p{fd, POLLIN, 0};
      (void)::poll(&p, 1, 100);
      continue;
    }
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      text.clear();
      return EFBIG;
    }
    text.append(buf, static_cast<size_t>(n));
  }
}

// Why read_text_file failed with `err`, in words.
inline std::string read_text_error(int err) {
  return err == ESPIPE ? std::string("a FIFO with no writer (nothing to read)") : std::string(std::strerror(err));
}

// read_text_fd for a path, opened and closed here. `give_up`, if given, is
// asked every 100 ms while a pipe's writer sends nothing: true ends the read
// with EINTR.
inline int read_text_file(const std::string& path, std::string& text, size_t max_bytes,
                          const std::function<bool()>& give_up = {}) {
  // Opened without blocking: a FIFO's open waits for a writer, for good if
  // none comes (psgate, whose stop signals are blocked then, could only be
  // killed). A pipe with a writer (`--config <(envsubst < t.toml)`) is then
  // read as any file, blocking again (or, with `give_up`, waiting 100 ms at
  // a time: a writer that stalls must not keep a stop from being taken); one
  // with none reads as empty at once, refused with ESPIPE (read_text_error
  // says so).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno;
  struct stat st;
  const bool fifo = ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
  if (fifo && !give_up) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int err = read_text_fd(fd, text, max_bytes, fifo ? give_up : std::function<bool()>{});
  if (err == 0 && fifo && text.empty()) err = ESPIPE;
  ::close(fd);
  return err;
}

}  // namespace psgate
