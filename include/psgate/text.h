// Small text helpers shared by the parsers of config files, generator
// profiles and control requests. Header-only: the fuzz targets compile a
// fixed list of sources.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <string_view>

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

// Reads a whole file. Returns 0 and fills `text`, or the errno that stopped
// it (e.g. EISDIR for a directory).
inline int read_text_file(const std::string& path, std::string& text) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  text.clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return err;
    }
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return 0;
}

}  // namespace psgate
