// SPDX-License-Identifier: BSD-3-Clause
// (d) The shape of each command's reply (reply_shape.h): every command of
// the registry has its reply checked, the daemon's own shapes pass.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "commands.h"
#include "psgate/control_commands.h"
#include "reply_shape.h"

namespace psgatectl {
namespace {

using ojson = nlohmann::ordered_json;

// A jobs file for `jobs load`, removed at the end of the test.
class JobsFile {
 public:
  JobsFile() {
    char tmpl[] = "/tmp/psgatectl-shape-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) std::abort();
    path_ = tmpl;
    const std::string text = R"([{"job": 1, "match": ["proto=tcp"]}])";
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) std::abort();
    close(fd);
  }
  ~JobsFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// psgatectl's words for `command` with its positional and required
// arguments, as the command table gives them (`progress` needs one of its
// optional ones).
std::vector<std::string> command_line(const psgate::CommandSpec& command, const std::string& jobs_file) {
  std::vector<std::string> args;
  const std::string_view cli = command.cli;
  for (size_t at = 0; at <= cli.size();) {
    const size_t space = std::min(cli.find(' ', at), cli.size());
    args.emplace_back(cli.substr(at, space - at));
    at = space + 1;
  }
  for (const psgate::ArgSpec& a : command.args) {
    const std::string_view name = a.cli;
    if (!a.required && name[0] == '-') continue;
    if (name[0] == '-') args.emplace_back(name.substr(name.rfind(',') + 1));  // "-m,--match": --match
    args.push_back(a.type == psgate::ArgType::kJobs ? jobs_file : std::string(a.example));
  }
  return args;
}

// Every command, reads and changes alike: a reply whose result is of no
// shape of the daemon's ({}) is not taken for a success. `jobs load`, `jobs
// rm`, `class` and `shaper` printed their confirmation from it and exited 0.
TEST(ReplyShape, EveryCommandOfTheRegistryChecksItsReply) {
  const JobsFile file;
  for (const psgate::CommandSpec& command : psgate::control_commands()) {
    SCOPED_TRACE(command.name);
    std::vector<const char*> argv{"psgatectl"};
    const std::vector<std::string> args = command_line(command, file.path());
    for (const std::string& a : args) argv.push_back(a.c_str());
    const ParseOutcome parsed = parse_command_line(static_cast<int>(argv.size()), argv.data(), nullptr);
    ASSERT_TRUE(parsed.invocation) << parsed.err;
    const auto checked = check_reply_shape(parsed.invocation->kind, command.cli, ojson::object());
    if (checked) {
      ADD_FAILURE() << "a reply of {} to " << command.cli << " would be taken for a success";
      continue;
    }
    EXPECT_NE(checked.error().find(std::string(command.cli) + ": the reply's \""), std::string::npos)
        << checked.error();
    EXPECT_NE(checked.error().find("of another version"), std::string::npos) << checked.error();
  }
}

struct ShapeCase {
  Kind kind;
  const char* result;
  const char* problem;  // "" when the result is of the daemon's shape
};

// The confirmations, as the daemon makes them (control_apply.cc) and as
// another shape would read.
const ShapeCase kConfirmations[] = {
    {Kind::kJobsLoad, R"({"added": [1, 2]})", ""},
    {Kind::kJobsLoad, R"({"added": [], "store_revision": 4})", ""},
    {Kind::kJobsLoad, R"({"store_revision": 9, "applied_here": false, "note": "written"})", ""},
    {Kind::kJobsLoad, R"({"jobs": [1, 2]})", "\"added\" is missing (should be an array)"},
    {Kind::kJobsLoad, R"({"added": 2})", "\"added\" is not an array"},
    {Kind::kJobsLoad, R"({"added": ["1"]})", "\"added[0]\" is not a whole number"},
    {Kind::kJobsLoad, R"({"applied_here": false})", "\"store_revision\" is missing"},
    {Kind::kJobsRemove, R"({"removed": 3})", ""},
    {Kind::kJobsRemove, R"({"removed": 3, "note": "deleted", "store_revision": 8})", ""},
    {Kind::kJobsRemove, R"({"job": 3})", "\"removed\" is missing (should be a whole number)"},
    {Kind::kJobsRemove, R"({"removed": {"id": 3}})", "\"removed\" is not a whole number"},
    {Kind::kJobsRemove, R"({"removed": 3, "note": 5})", "\"note\" is not a string"},
    {Kind::kClassSet,
     R"({"port": "wire", "class": 1, "cap": "1Gbit/s", "floor": null, "ecn_threshold": 20, "dscp": 46})", ""},
    {Kind::kClassSet,
     R"({"port": "host", "class": 0, "cap": null, "floor": "100Mbit/s", "ecn_threshold": 0, "dscp": null})", ""},
    // A missing cap printed as "cap none": a class said to be uncapped.
    {Kind::kClassSet, R"({"port": "wire", "class": 1, "floor": null, "ecn_threshold": 0, "dscp": null})",
     "\"cap\" is missing (should be a string or null)"},
    {Kind::kClassSet, R"({"port": "wire", "class": "1", "cap": null, "floor": null, "ecn_threshold": 0, "dscp": null})",
     "\"class\" is not a whole number"},
    {Kind::kClassSet, R"({"port": "wire", "class": 1, "cap": null, "floor": null, "ecn_threshold": 0})",
     "\"dscp\" is missing (should be a whole number or null)"},
    {Kind::kClassSet, R"({"class": 1, "cap": null, "floor": null, "ecn_threshold": 0, "dscp": null})",
     "\"port\" is missing (should be a string)"},
    {Kind::kShaperSet, R"({"port": "wire", "rate": "1Gbit/s", "burst": "64KiB"})", ""},
    {Kind::kShaperSet, R"({"port": "wire", "rate": null, "burst": null})", ""},
    // A missing rate printed as "shaper: none (unshaped)".
    {Kind::kShaperSet, R"({"port": "wire", "burst": "64KiB"})", "\"rate\" is missing (should be a string or null)"},
    {Kind::kShaperSet, R"({"port": "wire", "rate": 1000, "burst": null})", "\"rate\" is not a string or null"},
    {Kind::kShaperSet, R"({"port": "wire", "rate": null})", "\"burst\" is missing (should be a string or null)"},
};

TEST(ReplyShape, ConfirmationsOfChangesAreChecked) {
  for (const ShapeCase& c : kConfirmations) {
    SCOPED_TRACE(c.result);
    const auto checked = check_reply_shape(c.kind, "cmd", ojson::parse(c.result));
    if (*c.problem == '\0') {
      EXPECT_TRUE(checked) << checked.error();
    } else {
      ASSERT_FALSE(checked);
      EXPECT_NE(checked.error().find(std::string("cmd: the reply's ") + c.problem), std::string::npos)
          << checked.error();
    }
  }
}

}  // namespace
}  // namespace psgatectl
