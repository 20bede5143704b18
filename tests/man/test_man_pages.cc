// SPDX-License-Identifier: BSD-3-Clause
// The man pages cannot drift from the command table and the config schema:
//   psgatectl(8) has a "## CLI WORDS" subsection under COMMANDS for every
//     command of the one registry (src/control/control_commands.cc), and no
//     other, listing each of its arguments (an option's every form, a
//     positional's NAME) as a definition term;
//   psgate.toml(5) (generated from docs/configuration.md) has a definition
//     term for every key the parser accepts, and no other.
// The pages are read in their scdoc source, the text a person edits; scdoc's
// rendering of it is checked by the man-render test.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "config_schema.h"
#include "psgate/control_commands.h"

namespace psgate {
namespace {

// The page named by an environment variable meson sets, line by line, or
// nothing (and the test is skipped) outside meson.
std::vector<std::string> read_page(const char* env) {
  std::vector<std::string> lines;
  const char* path = std::getenv(env);
  if (path == nullptr) return lines;
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot read " << path;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// scdoc definition terms: a line that is followed by a tab-indented one.
std::vector<std::string> terms(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (!lines[i].empty() && lines[i][0] != '\t' && lines[i][0] != ' ' && lines[i + 1].rfind('\t', 0) == 0)
      out.push_back(lines[i]);
  }
  return out;
}

// scdoc's escapes undone: "ports.<p>.rx\_desc" -> "ports.<p>.rx_desc".
std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out += s[i];
  }
  return out;
}

// The "## " subsections of one "# " section: name -> lines.
std::map<std::string, std::vector<std::string>> subsections(const std::vector<std::string>& page,
                                                            const std::string& section) {
  std::map<std::string, std::vector<std::string>> out;
  bool in_section = false;
  std::vector<std::string>* current = nullptr;
  for (const std::string& line : page) {
    if (line.rfind("# ", 0) == 0) {
      in_section = line == "# " + section;
      current = nullptr;
    } else if (in_section && line.rfind("## ", 0) == 0) {
      current = &out[line.substr(3)];
    } else if (current != nullptr) {
      current->push_back(line);
    }
  }
  return out;
}

// The forms of an argument as psgatectl takes it: "-m,--match" -> "*-m*",
// "*--match*"; a positional "ID" -> "_ID_".
std::vector<std::string> arg_marks(const ArgSpec& arg) {
  std::vector<std::string> marks;
  const std::string cli = arg.cli;
  if (cli.rfind('-', 0) != 0) return {"_" + cli + "_"};
  std::stringstream forms(cli);
  for (std::string f; std::getline(forms, f, ',');) marks.push_back("*" + f + "*");
  return marks;
}

TEST(ManPages, PsgatectlHasEveryCommandAndArgumentOfTheRegistry) {
  const std::vector<std::string> page = read_page("PSGATECTL_PAGE");
  if (page.empty()) GTEST_SKIP() << "PSGATECTL_PAGE not set (run through meson test)";
  const auto commands = subsections(page, "COMMANDS");
  std::set<std::string> registry;
  for (const CommandSpec& c : control_commands()) {
    registry.insert(c.cli);
    const auto it = commands.find(c.cli);
    if (it == commands.end()) {
      ADD_FAILURE() << "psgatectl(8) has no '## " << c.cli << "' under COMMANDS (command " << c.name << ")";
      continue;
    }
    const std::vector<std::string> defined = terms(it->second);
    for (const ArgSpec& a : c.args) {
      for (const std::string& mark : arg_marks(a)) {
        bool found = false;
        for (const std::string& t : defined) found = found || t.find(mark) != std::string::npos;
        EXPECT_TRUE(found) << "psgatectl(8) '## " << c.cli << "' does not describe " << mark << " (argument " << a.name
                           << " of " << c.name << ")";
      }
    }
  }
  for (const auto& [name, lines] : commands)
    EXPECT_TRUE(registry.count(name)) << "psgatectl(8) describes '" << name << "', which is not a command";
}

TEST(ManPages, PsgateTomlHasEveryConfigKey) {
  const std::vector<std::string> page = read_page("PSGATE_TOML_PAGE");
  if (page.empty()) GTEST_SKIP() << "PSGATE_TOML_PAGE not set (run through meson test)";
  // The KEYS section's terms: "*ports.<p>.mtu*".
  std::set<std::string> documented;
  for (const auto& [table, lines] : subsections(page, "KEYS")) {
    for (const std::string& t : terms(lines)) {
      const std::string key = unescape(t);
      EXPECT_TRUE(key.size() > 2 && key.front() == '*' && key.back() == '*') << "odd key term: " << t;
      documented.insert(key.substr(1, key.size() - 2));
    }
  }
  const std::set<std::string> schema = test::config_schema_keys();
  ASSERT_FALSE(schema.empty());
  for (const std::string& k : schema) EXPECT_TRUE(documented.count(k)) << k << " is not in psgate.toml(5)";
  for (const std::string& k : documented)
    EXPECT_TRUE(schema.count(k)) << k << " is in psgate.toml(5) but the parser rejects it";
}

}  // namespace
}  // namespace psgate
