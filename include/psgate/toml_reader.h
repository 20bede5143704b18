// SPDX-License-Identifier: BSD-3-Clause
// A reader for psgate's TOML files (the daemon's config, psgate-gen's
// profiles): typed getters that check what they read and report ONE line
// naming the key the operator must fix,
//   <source>: <key.path>: <problem>        (a value, or an unknown key)
//   <source>:<line>:<col>: <problem>       (TOML syntax)
// with a "did you mean" suggestion for a mistyped key. The first problem
// wins. What a file may hold (its schema) is the caller's: src/config/
// config.cc for the config, perf/gen/profile.cc for profiles.
// Shared with psgate-gen, so public; no DPDK.
#pragma once

#include <toml++/toml.h>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "psgate/result.h"
#include "psgate/text.h"

namespace psgate {

// Parses TOML text; a syntax error is "<source>:<line>:<col>: <problem>".
Result<toml::table> parse_toml(std::string_view text, std::string_view source);
// toml++ recurses once per part of a dotted key or table name, unbounded,
// and the walks over what it builds once per level: the line of `text`
// where keys, tables and values first nest kMaxKeyParts deep (dotted parts,
// inline tables and arrays together), or 0. parse_toml refuses such a text
// before parsing it.
inline constexpr unsigned kMaxKeyParts = 256;
size_t line_of_overlong_key(std::string_view text);

// The path (below `path`) of the first key or string in `node` that holds a
// control character other than tab, or "": what parse_toml refuses, for
// values that come another way (psgate-gen's --set).
std::string control_char_path(const toml::node& node, const std::string& path);

// "text" with control characters escaped.
std::string toml_quote(std::string_view s);
// path.key, the key quoted when it is not a bare TOML key.
std::string key_path(const std::string& path, std::string_view key);
// path[i]
std::string index_path(const std::string& path, size_t i);
// What the operator wrote, with its type: `integer 5`, `string "x"`.
std::string describe_typed(const toml::node& n);
// What the operator wrote, as written: `5`, `"x"`, `a table`.
std::string describe_value(const toml::node& n);
// closest_key (the "did you mean" rule) is in text.h, shared with the control protocol.

class TomlReader {
 public:
  using Keys = std::span<const std::string_view>;
  // How a value of the wrong type is reported: "expected a string, got
  // integer 5" (the config) or "5 is not a string" (psgate-gen's profiles).
  enum class Wording { kExpectedGot, kIsNot };

  explicit TomlReader(std::string_view source, Wording wording = Wording::kExpectedGot)
      : source_(source), wording_(wording) {}

  // Records the first error; always returns false so callers can
  // `return fail(...)`.
  bool fail(const std::string& path, const std::string& problem);
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  const std::string& source() const { return source_; }

  // Unknown keys are errors: a typo such as "ecn_treshold" must not silently
  // fall back to the default. `extra` describes allowed keys the list cannot
  // name (e.g. "a class number 0..7").
  bool check_keys(const toml::table& t, const std::string& path, Keys allowed);
  bool check_keys(const toml::table& t, const std::string& path, std::initializer_list<std::string_view> allowed) {
    return check_keys(t, path, Keys(allowed.begin(), allowed.size()));
  }
  bool unknown_key(const std::string& path, std::string_view key, Keys allowed, std::string_view extra = {});
  bool unknown_key(const std::string& path, std::string_view key, std::initializer_list<std::string_view> allowed,
                   std::string_view extra = {}) {
    return unknown_key(path, key, Keys(allowed.begin(), allowed.size()), extra);
  }
  // `expected` as in "a string", "an array of lcore ids".
  bool wrong_type(const std::string& path, const toml::node& n, std::string_view expected);

  // nullptr when absent (an error if `required`) or of the wrong type.
  const toml::table* table(const toml::table& parent, std::string_view key, const std::string& path, bool required);

  // Integer in [lo, hi]. Absent: leaves `out` (the default) unless required.
  template <typename T>
  bool integer(const toml::table& t, std::string_view key, const std::string& path, int64_t lo, int64_t hi, T& out,
               bool required = false) {
    std::optional<int64_t> v;
    if (!integer_value(t, key, path, lo, hi, v, required)) return false;
    if (v) out = static_cast<T>(*v);
    return true;
  }

  // nullptr when absent (an error if `required`) or of the wrong type
  // (check failed()). `expected` names what the string holds, for the
  // error a number gets ("5 is not an endpoint ..." rather than "5 is not
  // a string", which tells someone who typed `--set ps=5` nothing).
  const std::string* string(const toml::table& t, std::string_view key, const std::string& path, bool required = false,
                            std::string_view expected = "a string");

  // A quantity with a unit, parsed by `parse` (units.h). Bare numbers are
  // refused on purpose: "1000" could be bits, bytes or packets. `example`
  // shows the form, e.g. "9.5Gbit/s".
  bool quantity(const toml::table& t, std::string_view key, const std::string& path,
                Result<uint64_t> (*parse)(std::string_view), const char* example, std::optional<uint64_t>& out,
                bool required = false);

 private:
  bool integer_value(const toml::table& t, std::string_view key, const std::string& path, int64_t lo, int64_t hi,
                     std::optional<int64_t>& out, bool required);

  std::string source_;
  std::string error_;
  Wording wording_;
};

}  // namespace psgate
