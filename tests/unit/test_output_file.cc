// SPDX-License-Identifier: BSD-3-Clause
// Report files written at the end of a run (psgate --stats-json, psgate-gen
// --json and --flows-csv): checked at start, written complete or not at all,
// and never replacing a device node (as root, psgate-gen --json /dev/null
// turned /dev/null into a regular file).
#include "psgate/output_file.h"
#include "temp_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace psgate {
namespace {

using testing::TempDir;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t files_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.exists() || e.is_symlink();
  return n;
}

auto text(const std::string& t) {
  return [t](std::FILE* f) { return std::fputs(t.c_str(), f) >= 0; };
}

TEST(OutputFile, ARegularFileIsReplacedWholeAndNoTemporaryStays) {
  TempDir t("psgate-output");
  std::ofstream(t.path("r.json")) << "old, longer than the new";
  EXPECT_EQ(output_file_problem(t.path("r.json")), "");
  EXPECT_EQ(write_output_file(t.path("r.json"), text("new")), "");
  EXPECT_EQ(slurp(t.path("r.json")), "new");
  EXPECT_EQ(files_in(t.dir), 1u) << "a temporary stayed";
  // A writer that fails leaves the old file and no temporary.
  EXPECT_NE(write_output_file(t.path("r.json"), [](std::FILE*) { return false; }), "");
  EXPECT_EQ(slurp(t.path("r.json")), "new");
  EXPECT_EQ(files_in(t.dir), 1u) << "a temporary stayed";
  // A file or link at PATH.tmp (another's, or planted) is neither truncated
  // nor followed.
  std::ofstream(t.path("r.json.tmp")) << "someone's";
  EXPECT_EQ(write_output_file(t.path("r.json"), text("newer")), "");
  EXPECT_EQ(slurp(t.path("r.json")), "newer");
  EXPECT_EQ(slurp(t.path("r.json.tmp")), "someone's");
}

// A writer killed between its temporary's create and rename left
// PATH.tmp.<pid>: one of this pid (a container's psgate is pid 1 every run)
// made every later write fail at its O_EXCL, and those of dead pids piled
// up. Both go; a live process's stays.
TEST(OutputFile, TemporariesOfDeadWritersAreRemoved) {
  TempDir t("psgate-output");
  const pid_t dead = ::fork();
  ASSERT_GE(dead, 0);
  if (dead == 0) ::_exit(0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const std::string mine = t.path("r.json.tmp." + std::to_string(::getpid()));
  const std::string theirs = t.path("r.json.tmp." + std::to_string(dead));
  const std::string live = t.path("r.json.tmp.1");  // init's: alive
  for (const std::string& p : {mine, theirs, live}) std::ofstream(p) << "left";
  EXPECT_EQ(write_output_file(t.path("r.json"), text("fresh")), "");
  EXPECT_EQ(slurp(t.path("r.json")), "fresh");
  EXPECT_FALSE(std::filesystem::exists(mine));
  EXPECT_FALSE(std::filesystem::exists(theirs));
  EXPECT_TRUE(std::filesystem::exists(live));
}

// Standard output named as a file (/dev/stdout, /proc/self/fd/1) may be a
// log file: appended to, not replaced by a rename (which would take the log).
TEST(OutputFile, AProcessFileDescriptorPathIsAppendedTo) {
  TempDir t("psgate-output");
  std::ofstream(t.path("log")) << "log\n";
  const int fd = ::open(t.path("log").c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  struct stat before;
  ASSERT_EQ(::stat(t.path("log").c_str(), &before), 0);
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  EXPECT_EQ(output_file_problem(proc), "");
  EXPECT_EQ(write_output_file(proc, text("report\n")), "");
  ::close(fd);
  struct stat after;
  ASSERT_EQ(::stat(t.path("log").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "the log was replaced";
  EXPECT_EQ(slurp(t.path("log")), "log\nreport\n");
}

TEST(OutputFile, ALinkIsWrittenThroughAndKept) {
  TempDir t("psgate-output");
  std::ofstream(t.path("target")) << "old";
  std::filesystem::create_symlink(t.path("target"), t.path("link.json"));
  EXPECT_EQ(output_file_problem(t.path("link.json")), "");
  EXPECT_EQ(write_output_file(t.path("link.json"), text("new")), "");
  EXPECT_TRUE(std::filesystem::is_symlink(t.path("link.json")));
  EXPECT_EQ(slurp(t.path("target")), "new");
  // A link whose target does not exist yet: the target is made, the link kept.
  std::filesystem::create_symlink("later.json", t.path("dangling.json"));
  EXPECT_EQ(output_file_problem(t.path("dangling.json")), "");
  EXPECT_EQ(write_output_file(t.path("dangling.json"), text("made")), "");
  EXPECT_TRUE(std::filesystem::is_symlink(t.path("dangling.json")));
  EXPECT_EQ(slurp(t.path("later.json")), "made");
}

TEST(OutputFile, ADeviceNodeIsWrittenToNotReplaced) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  TempDir t("psgate-output");
  // A null device of its own: a wrong rename replaces this node, not /dev/null.
  ASSERT_EQ(::mknod(t.path("null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  EXPECT_EQ(output_file_problem(t.path("null")), "");
  EXPECT_EQ(write_output_file(t.path("null"), text("report")), "");
  EXPECT_TRUE(std::filesystem::is_character_file(t.path("null")));
  EXPECT_FALSE(std::filesystem::exists(t.path("null.tmp")));
}

TEST(OutputFile, WhatCannotBeWrittenIsFoundBeforeTheRun) {
  TempDir t("psgate-output");
  std::filesystem::create_directory(t.path("dir.json"));
  EXPECT_EQ(output_file_problem(t.path("dir.json")), "is a directory");
  EXPECT_NE(write_output_file(t.path("dir.json"), text("x")), "");
  EXPECT_EQ(files_in(t.dir), 1u) << "a temporary stayed";
  EXPECT_NE(output_file_problem(t.path("missing/x.json")).find("no directory"), std::string::npos)
      << output_file_problem(t.path("missing/x.json"));
  // The check creates nothing.
  EXPECT_EQ(output_file_problem(t.path("new.json")), "");
  EXPECT_FALSE(std::filesystem::exists(t.path("new.json")));
  EXPECT_EQ(files_in(t.dir), 1u) << "the check created something";
}

// A FIFO is accepted at start (its reader may come by the end of the run);
// one still without a reader at the end is said to be so, not "No such
// device or address" (ENXIO, what the open says).
TEST(OutputFile, AFifoWithoutAReaderAtTheEndIsNamedSo) {
  TempDir t("psgate-output");
  ASSERT_EQ(::mkfifo(t.path("report.json").c_str(), 0600), 0);
  EXPECT_EQ(output_file_problem(t.path("report.json")), "");
  const std::string error = write_output_file(t.path("report.json"), text("report"));
  EXPECT_NE(error.find("a FIFO nobody has open for reading"), std::string::npos) << error;
  EXPECT_TRUE(std::filesystem::is_fifo(t.path("report.json"))) << "the FIFO was replaced";
}

TEST(OutputFile, OneFileSpeltTwoWaysIsTheSame) {
  TempDir t("psgate-output");
  EXPECT_TRUE(same_output_file(t.path("x.json"), t.dir + "/./x.json"));  // neither exists yet
  const auto cwd = std::filesystem::current_path();
  std::filesystem::current_path(t.dir);
  EXPECT_TRUE(same_output_file("r.json", "./r.json")) << "relative, neither existing";
  std::filesystem::current_path(cwd);
  EXPECT_FALSE(same_output_file(t.path("x.json"), t.path("y.json")));
  std::ofstream(t.path("target")) << "";
  std::filesystem::create_symlink(t.path("target"), t.path("link"));
  EXPECT_TRUE(same_output_file(t.path("link"), t.path("target")));
}

}  // namespace
}  // namespace psgate
