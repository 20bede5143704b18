// SPDX-License-Identifier: BSD-3-Clause
// Report files written at the end of a run (psgate --stats-json, psgate-gen
// --json and --flows-csv): checked at start, written complete or not at all,
// and never replacing a device node (as root, psgate-gen --json /dev/null
// turned /dev/null into a regular file).
#include "psgate/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace psgate {
namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/psgate-output-XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string path(const std::string& name) const { return dir + "/" + name; }
  std::string dir;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

auto text(const std::string& t) {
  return [t](std::FILE* f) { return std::fputs(t.c_str(), f) >= 0; };
}

TEST(OutputFile, ARegularFileIsReplacedWholeAndNoTemporaryStays) {
  TempDir t;
  std::ofstream(t.path("r.json")) << "old, longer than the new";
  EXPECT_EQ(output_file_problem(t.path("r.json")), "");
  EXPECT_EQ(write_output_file(t.path("r.json"), text("new")), "");
  EXPECT_EQ(slurp(t.path("r.json")), "new");
  EXPECT_FALSE(std::filesystem::exists(t.path("r.json.tmp")));
  // A writer that fails leaves the old file and no temporary.
  EXPECT_NE(write_output_file(t.path("r.json"), [](std::FILE*) { return false; }), "");
  EXPECT_EQ(slurp(t.path("r.json")), "new");
  EXPECT_FALSE(std::filesystem::exists(t.path("r.json.tmp")));
}

TEST(OutputFile, ALinkIsWrittenThroughAndKept) {
  TempDir t;
  std::ofstream(t.path("target")) << "old";
  std::filesystem::create_symlink(t.path("target"), t.path("link.json"));
  EXPECT_EQ(output_file_problem(t.path("link.json")), "");
  EXPECT_EQ(write_output_file(t.path("link.json"), text("new")), "");
  EXPECT_TRUE(std::filesystem::is_symlink(t.path("link.json")));
  EXPECT_EQ(slurp(t.path("target")), "new");
}

TEST(OutputFile, ADeviceNodeIsWrittenToNotReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  TempDir t;
  // A null device of its own: a wrong rename replaces this node, not /dev/null.
  ASSERT_EQ(::mknod(t.path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  EXPECT_EQ(output_file_problem(t.path("null")), "");
  EXPECT_EQ(write_output_file(t.path("null"), text("report")), "");
  EXPECT_TRUE(std::filesystem::is_character_file(t.path("null")));
  EXPECT_FALSE(std::filesystem::exists(t.path("null.tmp")));
}

TEST(OutputFile, WhatCannotBeWrittenIsFoundBeforeTheRun) {
  TempDir t;
  std::filesystem::create_directory(t.path("dir.json"));
  EXPECT_EQ(output_file_problem(t.path("dir.json")), "is a directory");
  EXPECT_NE(write_output_file(t.path("dir.json"), text("x")), "");
  EXPECT_FALSE(std::filesystem::exists(t.path("dir.json.tmp")));
  EXPECT_NE(output_file_problem(t.path("missing/x.json")).find("No such file or directory"), std::string::npos)
      << output_file_problem(t.path("missing/x.json"));
  // The check creates nothing.
  EXPECT_EQ(output_file_problem(t.path("new.json")), "");
  EXPECT_FALSE(std::filesystem::exists(t.path("new.json")));
  EXPECT_FALSE(std::filesystem::exists(t.path("new.json.tmp")));
}

TEST(OutputFile, OneFileSpeltTwoWaysIsTheSame) {
  TempDir t;
  EXPECT_TRUE(same_output_file(t.path("x.json"), t.dir + "/./x.json"));  // neither exists yet
  EXPECT_FALSE(same_output_file(t.path("x.json"), t.path("y.json")));
  std::ofstream(t.path("target")) << "";
  std::filesystem::create_symlink(t.path("target"), t.path("link"));
  EXPECT_TRUE(same_output_file(t.path("link"), t.path("target")));
}

}  // namespace
}  // namespace psgate
