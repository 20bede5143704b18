// SPDX-License-Identifier: BSD-3-Clause
// The generic half of reading a TOML file: typed getters, key checks with
// suggestions, one-line errors (toml_reader.h). The schemas are elsewhere.
#include "psgate/toml_reader.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "psgate/text.h"

namespace psgate {
namespace {

bool is_bare_key(std::string_view k) {
  if (k.empty()) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// A control character other than tab (TOML writes them as escapes such as
// \u0000): no setting means one, and a NUL silently cuts a path, device or
// EAL argument short where C APIs read it, so that psgate would use another
// file than the one --check passed.
bool has_control_char(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && u != '\t') || u == 0x7f;
  });
}

}  // namespace

// toml++'s limit of 256 is for nested inline tables and arrays, not for the
// parts of a dotted key, nor for both together: a header of 50,000 parts
// overflowed the stack, and a reload of such a file killed the running
// gateway; inline tables 255 deep each keyed 255 parts deep build a tree
// 65,000 deep, which the walks over it (control_char_path, the destructor)
// recurse through. The depth counted here is the tree's: each open inline
// table or array (a table header counts as one too) plus the parts of the
// key being read in it. Dots count outside strings and comments only, and a
// comma or line end starts a new key: a value outside a string has at most
// one dot (a float, a time). No psgate key is more than a few deep.
size_t line_of_overlong_key(std::string_view t) {
  size_t line = 1;
  unsigned dots = 0;           // of the key being read
  std::vector<unsigned> open;  // for each open bracket or brace: the depth inside it
  unsigned depth = 0;          // the innermost open one's (0: none)
  const size_t n = t.size();
  // Past a string that starts at i (quote q, multi-line when tripled),
  // counting the lines it spans; returns the index of its last character.
  auto skip_string = [&](size_t i, char q) {
    const bool multi = t.compare(i, 3, std::string(3, q)) == 0;
    size_t j = i + (multi ? 3 : 1);
    while (j < n) {
      const char c = t[j];
      if (q == '"' && c == '\\') {
        if (j + 1 < n && t[j + 1] == '\n') ++line;
        j += 2;
        continue;
      }
      if (c == '\n') {
        if (!multi) return j - 1;  // unterminated: the parser says so
        ++line;
      }
      if (multi ? t.compare(j, 3, std::string(3, q)) == 0 : c == q) {
        if (!multi) return j;
        j += 3;
        while (j < n && t[j] == q) ++j;  // up to two quotes of the content before the closing three
        return j - 1;
      }
      ++j;
    }
    return n - 1;
  };
  for (size_t i = 0; i < n; ++i) {
    switch (const char c = t[i]) {
      case '\n':
        ++line;
        dots = 0;
        break;
      case '#':
        while (i + 1 < n && t[i + 1] != '\n') ++i;
        break;
      case '"':
      case '\'':
        i = skip_string(i, c);
        break;
      case ',':
        dots = 0;
        break;
      case '[':
      case '{':
        // Nested under the key that holds it (the dots read since the last
        // comma or line end: a value's own dot, if any, comes after it).
        depth += dots + 1;
        if (depth >= kMaxKeyParts) return line;
        open.push_back(depth);
        dots = 0;
        break;
      case ']':
      case '}':
        if (!open.empty()) open.pop_back();
        depth = open.empty() ? 0 : open.back();
        dots = 0;
        break;
      case '.':
        if (depth + ++dots >= kMaxKeyParts) return line;
        break;
      default:
        break;
    }
  }
  return 0;
}

std::string control_char_path(const toml::node& node, const std::string& path) {
  if (const auto* t = node.as_table()) {
    for (const auto& [key, value] : *t) {
      const std::string here = key_path(path, key.str());
      if (has_control_char(key.str())) return here;
      if (std::string found = control_char_path(value, here); !found.empty()) return found;
    }
  } else if (const auto* a = node.as_array()) {
    for (size_t i = 0; i < a->size(); ++i)
      if (std::string found = control_char_path((*a)[i], index_path(path, i)); !found.empty()) return found;
  } else if (const auto* s = node.as_string()) {
    if (has_control_char(s->get())) return path;
  }
  return "";
}

Result<toml::table> parse_toml(std::string_view text, std::string_view source) {
  if (const size_t line = line_of_overlong_key(text); line != 0)
    return Result<toml::table>::failure(std::string(source) + ":" + std::to_string(line) +
                                        ": keys, tables and values nested " + std::to_string(kMaxKeyParts) +
                                        " or more levels deep (dotted parts, inline tables and arrays together)");
  try {
    toml::table root = toml::parse(text, source);
    if (const std::string bad = control_char_path(root, ""); !bad.empty())
      return Result<toml::table>::failure(std::string(source) + ": " + bad +
                                          ": holds a control character (only tab is allowed in keys and strings)");
    return root;
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    return Result<toml::table>::failure(std::string(source) + ":" + std::to_string(begin.line) + ":" +
                                        std::to_string(begin.column) + ": " + escape_control_chars(e.description()));
  }
}

std::string toml_quote(std::string_view s) { return "\"" + escape_control_chars(s) + "\""; }

std::string key_path(const std::string& path, std::string_view key) {
  const std::string k = is_bare_key(key) ? std::string(key) : toml_quote(key);
  return path.empty() ? k : path + "." + k;
}

std::string index_path(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

std::string describe_typed(const toml::node& n) {
  if (const auto* s = n.as_string()) {
    std::string v = s->get();
    if (v.size() > 40) v = v.substr(0, 37) + "...";
    return "string " + toml_quote(v);
  }
  if (const auto* i = n.as_integer()) return "integer " + std::to_string(i->get());
  if (const auto* f = n.as_floating_point()) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", f->get());
    return std::string("float ") + buf;
  }
  if (const auto* b = n.as_boolean()) return b->get() ? "boolean true" : "boolean false";
  if (n.is_array()) return "array";
  if (n.is_table()) return "table";
  return "date/time";
}

std::string describe_value(const toml::node& n) {
  std::ostringstream os;
  if (n.is_string()) {
    os << toml_quote(n.as_string()->get());
  } else if (n.is_table()) {
    os << "a table";
  } else if (n.is_array()) {
    os << "an array";
  } else {
    n.visit([&](auto&& v) { os << v; });
  }
  return os.str();
}

bool TomlReader::fail(const std::string& path, const std::string& problem) {
  if (error_.empty()) error_ = source_ + ": " + path + ": " + escape_control_chars(problem);
  return false;
}

bool TomlReader::check_keys(const toml::table& t, const std::string& path, Keys allowed) {
  for (auto&& [k, v] : t) {
    (void)v;
    const std::string_view key = k.str();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    return unknown_key(path, key, allowed);
  }
  return true;
}

bool TomlReader::unknown_key(const std::string& path, std::string_view key, Keys allowed, std::string_view extra) {
  std::string msg = "unknown key";
  if (const std::string_view best = closest_key(key, allowed); !best.empty()) {
    msg += " (did you mean \"" + std::string(best) + "\"?)";
  }
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  if (!extra.empty()) list += (list.empty() ? "" : ", ") + std::string(extra);
  msg += "; allowed here: " + (list.empty() ? std::string("nothing") : list);
  return fail(key_path(path, key), msg);
}

bool TomlReader::wrong_type(const std::string& path, const toml::node& n, std::string_view expected) {
  if (wording_ == Wording::kIsNot) return fail(path, describe_value(n) + " is not " + std::string(expected));
  return fail(path, "expected " + std::string(expected) + ", got " + describe_typed(n));
}

const toml::table* TomlReader::table(const toml::table& parent, std::string_view key, const std::string& path,
                                     bool required) {
  const toml::node* n = parent.get(key);
  if (n == nullptr) {
    if (required) fail(key_path(path, key), "missing (required table)");
    return nullptr;
  }
  const toml::table* t = n->as_table();
  if (t == nullptr) wrong_type(key_path(path, key), *n, "a table");
  return t;
}

bool TomlReader::integer_value(const toml::table& t, std::string_view key, const std::string& path, int64_t lo,
                               int64_t hi, std::optional<int64_t>& out, bool required) {
  const toml::node* n = t.get(key);
  const std::string p = key_path(path, key);
  if (n == nullptr) return required ? fail(p, "missing (required)") : true;
  const auto* i = n->as_integer();
  if (i == nullptr) return wrong_type(p, *n, "an integer");
  const int64_t v = i->get();
  if (v < lo || v > hi) {
    return fail(p, std::to_string(v) + " is out of range " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  out = v;
  return true;
}

const std::string* TomlReader::string(const toml::table& t, std::string_view key, const std::string& path,
                                      bool required, std::string_view expected) {
  const toml::node* n = t.get(key);
  if (n == nullptr) {
    if (required) fail(key_path(path, key), "missing (required)");
    return nullptr;
  }
  const auto* s = n->as_string();
  if (s == nullptr) {
    wrong_type(key_path(path, key), *n, expected);
    return nullptr;
  }
  return &s->get();
}

bool TomlReader::quantity(const toml::table& t, std::string_view key, const std::string& path,
                          Result<uint64_t> (*parse)(std::string_view), const char* example,
                          std::optional<uint64_t>& out, bool required) {
  const toml::node* n = t.get(key);
  const std::string p = key_path(path, key);
  if (n == nullptr) return required ? fail(p, "missing (required)") : true;
  const auto* s = n->as_string();
  if (s == nullptr) return wrong_type(p, *n, std::string("a string with a unit like \"") + example + "\"");
  auto r = parse(s->get());
  if (!r) return fail(p, r.error());
  out = *r;
  return true;
}

}  // namespace psgate
