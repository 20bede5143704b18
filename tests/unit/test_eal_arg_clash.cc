// SPDX-License-Identifier: BSD-3-Clause
// EalArgReader: EAL's arguments as its getopt_long reads them (DPDK 22.11's
// option tables), one table row per argument list.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "psgate/eal_arg_clash.h"

namespace psgate {
namespace {

using enum EalArgClash;

struct Case {
  std::vector<std::string> args;
  std::vector<EalArgClash> clashes;  // one per argument
  std::string awaiting = "";         // after the last
};

const Case kCases[] = {
    // A value is whatever follows an option that takes one.
    {{"--file-prefix", "-h"}, {kNone, kNone}},
    {{"--file-prefix", "--"}, {kNone, kNone}},
    {{"--file-prefix", "--lcores=1"}, {kNone, kNone}},
    {{"--file-pre", "-a"}, {kNone, kNone}},  // abbreviated
    {{"-m", "-h"}, {kNone, kNone}},
    {{"-vm", "-h"}, {kNone, kNone}},
    {{"-m512", "-h"}, {kNone, kHelp}},  // the value was in the argument
    {{"-mh"}, {kNone}},                 // "h" is -m's value
    {{"--file-prefix=x", "-h"}, {kNone, kHelp}},
    {{"--file-prefix", "x", "-h"}, {kNone, kNone, kHelp}},
    {{"--file-prefix", "--file-prefix", "-h"}, {kNone, kNone, kHelp}},
    // An optional value only after "=".
    {{"--huge-unlink", "-h"}, {kNone, kHelp}},
    {{"--huge-unlink=never", "-h"}, {kNone, kHelp}},
    {{"--huge-worker-stack", "--vdev=x"}, {kNone, kDevices}},
    // Help, and --log-level's "help".
    {{"-h"}, {kHelp}},
    {{"-vh"}, {kHelp}},
    {{"--help"}, {kHelp}},
    {{"--hel"}, {kHelp}},
    {{"--log-level=help"}, {kHelp}},
    {{"--log=help"}, {kHelp}},
    {{"--log-level", "help"}, {kNone, kHelp}},
    {{"--log-level", "--file-prefix", "help"}, {kNone, kNone, kNone}},
    {{"--file-prefix", "--log-level", "help"}, {kNone, kNone, kNone}},
    {{"--log-level=8", "help"}, {kNone, kNone}},
    // Cores and devices, abbreviated and bundled.
    {{"-l", "0-3"}, {kCores, kNone}},
    {{"-vl0"}, {kCores}},
    {{"-S1"}, {kCores}},
    {{"--lcor=0@0"}, {kCores}},
    {{"--main-l", "0"}, {kCores, kNone}},
    {{"--vd", "net_null0"}, {kDevices, kNone}},
    {{"-b0000:01:00.0"}, {kDevices}},
    {{"--allow=0000:01:00.0"}, {kDevices}},
    // Past a core or device option (psgate-gen takes them), its value is one.
    {{"-l", "-h"}, {kCores, kNone}},
    {{"--vdev", "--"}, {kDevices, kNone}},
    // Ambiguous or unknown: EAL refuses them itself.
    {{"--l", "0"}, {kNone, kNone}},
    {{"--h"}, {kNone}},
    {{"--pci-whitelist", "x"}, {kNone, kNone}},
    // The end of EAL's options; nothing after it is one.
    {{"--", "-h"}, {kEndOfOptions, kNone}},
    {{"--no-huge", "word", "-h"}, {kNone, kNone, kHelp}},  // getopt skips a word and reads on
    // An option left waiting for its value.
    {{"--no-huge", "--file-prefix"}, {kNone, kNone}, "--file-prefix"},
    {{"-m"}, {kNone}, "-m"},
    {{"-vn"}, {kNone}, "-n"},
    {{"--huge-di"}, {kNone}, "--huge-di"},
    {{"-l"}, {kCores}, "-l"},
    {{"--huge-unlink"}, {kNone}},
    {{"-v"}, {kNone}},
};

TEST(EalArgReader, ReadsAsGetoptDoes) {
  for (const Case& c : kCases) {
    std::string list;
    for (const std::string& a : c.args) list += (list.empty() ? "" : " ") + a;
    SCOPED_TRACE(list);
    ASSERT_EQ(c.args.size(), c.clashes.size());
    EalArgReader reader;
    for (size_t i = 0; i < c.args.size(); ++i)
      EXPECT_EQ(reader.next(c.args[i]), c.clashes[i]) << "argument " << i << ": " << c.args[i];
    EXPECT_EQ(reader.awaiting_value(), c.awaiting);
  }
}

}  // namespace

// The values EAL takes for one long option, as getopt reads them: psgate's
// "another DPDK process runs with the file prefix" check and psgate-gen's
// memif checks read them pair by pair, so "--file-pre=x" (an abbreviation)
// was missed and a value that looked like the option was taken for it.
TEST(EalArgReader, OptionValuesAreTheOnesEalTakes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(
      eal_option_values({"--file-prefix=a", "--file-pre", "b", "--file-prefix", "--file-prefix=c"}, "file-prefix"),
      (V{"a", "b", "--file-prefix=c"}));
  EXPECT_EQ(eal_option_values({"--vd=net_null0", "--vdev", "net_memif0,bsize=64", "-n", "--vdev=x"}, "vdev"),
            (V{"net_null0", "net_memif0,bsize=64"}));
  EXPECT_EQ(eal_option_values({"--", "--vdev=net_null0"}, "vdev"), V{});
  EXPECT_EQ(eal_option_values({"--no-huge", "-m", "512"}, "file-prefix"), V{});
}

// psgate adds --huge-unlink unless eal.args say how hugepage files are kept
// or use none: without it DPDK 22.11 left a hugepage file after every clean
// stop and all of them after a SIGKILL, each holding its page after the
// service (and the package) had gone. EAL refuses --huge-unlink with
// --no-huge (the shipped config's) and with --single-file-segments.
TEST(EalArgReader, HugeUnlinkAddedUnlessTheArgumentsSayHowFilesAreKept) {
  EXPECT_TRUE(eal_adds_huge_unlink({}));
  EXPECT_TRUE(eal_adds_huge_unlink({"--file-prefix=psgate", "--log-level=4"}));
  EXPECT_TRUE(eal_adds_huge_unlink({"-m", "512", "--legacy-mem"}));
  // A value that looks like the option is a value, and nothing after "--" counts.
  EXPECT_TRUE(eal_adds_huge_unlink({"--file-prefix", "--no-huge"}));
  EXPECT_TRUE(eal_adds_huge_unlink({"--", "--no-huge"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--no-huge", "-m", "256", "--no-pci"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--no-hu"}));  // abbreviated, as getopt takes it
  EXPECT_FALSE(eal_adds_huge_unlink({"--in-memory"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--huge-unlink"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--huge-unlink=existing"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--huge-unlink=never"}));
  EXPECT_FALSE(eal_adds_huge_unlink({"--single-file-segments"}));
}

}  // namespace psgate
