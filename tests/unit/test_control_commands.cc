// SPDX-License-Identifier: BSD-3-Clause
// The command table (control_commands.h) against the parsers it names and the
// protocol document: every command parses from its arguments' examples into
// its own ControlRequest alternative, misses no required argument, and is in
// docs/control-protocol.md with each of its arguments.
#include "psgate/control_commands.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "psgate/policy.h"

namespace psgate {
namespace {

using json = nlohmann::json;

constexpr unsigned kClasses = 8;

// An example as psgatectl takes it -> the request's value (as psgatectl sends it).
json example_value(const ArgSpec& a) {
  const std::string text = a.example;
  switch (a.type) {
    case ArgType::kJobId:
    case ArgType::kUint:
      return std::stoull(text);
    case ArgType::kJobIds:
      return json::array({std::stoull(text)});
    case ArgType::kRules:
      return json::array({text});
    case ArgType::kFraction:
      return std::stod(text);
    case ArgType::kJobs:  // psgatectl reads the file; what it sends is the list
      return json::array({{{"job", 3}, {"match", {"proto=tcp"}}}});
    default:
      return text;
  }
}

json request_with(const CommandSpec& c, const ArgSpec* leave_out = nullptr) {
  json req = {{"cmd", c.name}};
  for (const ArgSpec& a : c.args)
    if (&a != leave_out) req[a.name] = example_value(a);
  return req;
}

TEST(ControlCommands, EveryEntryIsComplete) {
  std::set<std::string> names, clis;
  for (const CommandSpec& c : control_commands()) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second);
    EXPECT_TRUE(clis.insert(c.cli).second);
    EXPECT_NE(std::string(c.help), "");
    EXPECT_NE(c.parse, nullptr);
    EXPECT_EQ(find_control_command(c.name), &c);
    std::set<std::string> args;
    for (const ArgSpec& a : c.args) {
      SCOPED_TRACE(a.name);
      EXPECT_TRUE(args.insert(a.name).second);
      EXPECT_NE(std::string(a.cli), "");
      EXPECT_NE(std::string(a.help), "");
      EXPECT_NE(std::string(a.example), "");
      EXPECT_LE(a.min, a.max);
    }
  }
  EXPECT_EQ(find_control_command("jobs"), nullptr);
}

// A command marked as only reading is skipped for a client that hung up
// (ControlPlane::handle_line), so it must change nothing whatever it is
// given: none takes arguments (class.set and policy read when given none,
// and change when given some: not marked), and the changes are not marked.
TEST(ControlCommands, OnlyArgumentlessCommandsAreMarkedAsReadingOnly) {
  unsigned reading = 0;
  for (const CommandSpec& c : control_commands()) {
    SCOPED_TRACE(c.name);
    if (!c.reads_only) continue;
    ++reading;
    EXPECT_TRUE(c.args.empty());
    EXPECT_NE(std::string(c.name), "reload");
  }
  EXPECT_GE(reading, 5u) << "health, jobs.list, stats, config and cluster";
}

// The i-th command yields the i-th alternative, so std::visit in ControlPlane
// reaches the handler written for it.
TEST(ControlCommands, ExamplesParseToTheCommandsOwnRequest) {
  size_t index = 0;
  for (const CommandSpec& c : control_commands()) {
    const json req = request_with(c);
    SCOPED_TRACE(req.dump());
    const auto r = parse_control_line(req.dump(), kClasses);
    ASSERT_TRUE(r.ok()) << r.error();
    EXPECT_EQ(r->index(), index);
    ++index;
  }
}

TEST(ControlCommands, EveryRequiredArgumentIsRequired) {
  for (const CommandSpec& c : control_commands()) {
    for (const ArgSpec& a : c.args) {
      if (!a.required) continue;
      const json req = request_with(c, &a);
      const auto r = parse_control_request(req, kClasses);
      EXPECT_FALSE(r.ok()) << req.dump();
      if (!r.ok()) {
        EXPECT_NE(r.error().find(a.name), std::string::npos) << req.dump() << ": " << r.error();
      }
    }
  }
}

TEST(ControlCommands, EchoesTheRequestId) {
  std::optional<json> id;
  EXPECT_TRUE(parse_control_line(R"({"cmd":"health","id":[1,"a"]})", kClasses, &id).ok());
  EXPECT_EQ(id, std::optional<json>(json::array({1, "a"})));
  id.reset();
  EXPECT_FALSE(parse_control_line(R"({"cmd":"nope","id":null})", kClasses, &id).ok());
  EXPECT_EQ(id, std::optional<json>(json(nullptr)));
  id.reset();
  EXPECT_FALSE(parse_control_line(R"({"cmd":"health","id":1)", kClasses, &id).ok());  // malformed: nothing to echo
  EXPECT_FALSE(id.has_value());
  EXPECT_TRUE(parse_control_line(R"({"cmd":"health"})", kClasses, &id).ok());
  EXPECT_FALSE(id.has_value());
}

// docs/control-protocol.md's command table names every command and every
// argument, and nothing else; its psgatectl section names psgatectl's words
// for every command.
TEST(ControlCommands, ProtocolDocumentListsEveryCommandAndArgument) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";
  std::ifstream in(std::string(root) + "/docs/control-protocol.md");
  ASSERT_TRUE(in) << "cannot read docs/control-protocol.md";
  std::set<std::string> documented;
  std::string line, text;
  while (std::getline(in, line)) {
    text += line + "\n";
    if (line.rfind("| `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    ASSERT_NE(end, std::string::npos) << line;
    const std::string name = line.substr(3, end - 3);
    documented.insert(name);
    const CommandSpec* c = find_control_command(name);
    ASSERT_NE(c, nullptr) << "the document lists a command the table has not: " << name;
    // The arguments column: between the first and second cell separators after the name.
    const size_t args_from = line.find('|', end);
    const size_t args_to = line.find(" | ", args_from + 1);
    const std::string args = line.substr(args_from, args_to - args_from);
    for (const ArgSpec& a : c->args) {
      EXPECT_NE(args.find("`" + std::string(a.name) + "`"), std::string::npos)
          << name << ": argument " << a.name << " is not documented";
      if (a.type == ArgType::kPolicy) {
        for (const PolicyName& p : kPolicyNames)
          EXPECT_NE(args.find("`" + std::string(p.name) + "`"), std::string::npos)
              << name << ": policy " << p.name << " is not documented";
      }
    }
  }
  ASSERT_NE(text.find("## psgatectl"), std::string::npos);
  const std::string psgatectl = text.substr(text.find("## psgatectl"));
  for (const CommandSpec& c : control_commands()) {
    EXPECT_TRUE(documented.count(c.name)) << "command " << c.name << " is missing from docs/control-protocol.md";
    EXPECT_NE(psgatectl.find("`" + std::string(c.cli) + "`"), std::string::npos)
        << "psgatectl " << c.cli << " is missing from docs/control-protocol.md's psgatectl section";
  }
}

}  // namespace
}  // namespace psgate
