// SPDX-License-Identifier: BSD-3-Clause
// What EAL's getopt would make of the arguments the programs hand it from
// their users (psgate's eal.args, psgate-gen's after "--"), so that they can
// refuse those EAL acts on in a way the program cannot let it: --help, which
// makes EAL print its usage and exit 0 (a run that did nothing, reported as a
// success), core and device options the program sets itself, and a second
// "--", after which EAL reads nothing.
//
// The arguments are read in order, as getopt_long reads them with DPDK
// 22.11's option tables (eal_short_options, eal_long_options in
// lib/eal/common/eal_common_options.c): an option that takes a value takes
// the next argument whatever it looks like, so in `--file-prefix -h` the
// "-h" is a file prefix, not the help option.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace psgate {

enum class EalArgClash { kNone, kCores, kDevices, kHelp, kEndOfOptions };

// Feed it the arguments in order, without the program name.
class EalArgReader {
 public:
  // What EAL makes of the next argument. Short options bundled behind one
  // dash ("-vl0" is -v -l 0) count up to the first that takes a value, long
  // ones also by an abbreviation getopt resolves ("--lcor=..." is --lcores).
  // A value is kNone, but "help" as --log-level's: EAL lists its log types
  // and exits 0 for it as for --help.
  EalArgClash next(std::string_view arg);

  // The option whose value the next argument would be ("--file-pre" as
  // given, "-n" of "-vn"), or "" when none is awaited. After the last argument
  // a program that adds arguments of its own must refuse it: EAL would take
  // the first of them as that value.
  const std::string& awaiting_value() const { return awaiting_; }

  // The long option (its full name, "file-prefix" of "--file-pre x") whose
  // value the last argument gave, either as "--name=VALUE" or as the
  // argument after it, and that value; "" for any other argument.
  const std::string& value_of() const { return value_of_; }
  const std::string& value() const { return value_; }

  // The long option (its full name, "no-huge" of "--no-h") the last
  // argument named, with or without a value; "" for any other argument
  // (a short option, a value, a word).
  const std::string& option() const { return option_; }

 private:
  std::string awaiting_;       // the option whose value comes next
  std::string awaiting_name_;  // ... its full long name ("" for a short one)
  std::string value_of_, value_;
  std::string option_;
  bool log_level_ = false;     // ... and that option is --log-level
  bool options_over_ = false;  // after "--": nothing more is an option
};

// Every value EAL takes for the long option `name` ("file-prefix",
// "vdev"), in order, as getopt reads them (abbreviations, "=VALUE" or the
// next argument, nothing after "--").
std::vector<std::string> eal_option_values(const std::vector<std::string>& args, std::string_view name);

// Whether psgate adds --huge-unlink to `args` (its eal.args): EAL then
// removes each hugepage file as soon as it has mapped it, so the pages go
// back to the system when the process ends, however it ends (DPDK 22.11
// otherwise leaves one file after a clean exit and all of them after a
// crash or SIGKILL, each holding its page until someone removes it). Not
// where the arguments say how hugepage files are kept (--huge-unlink with
// or without a value, --single-file-segments, which EAL refuses with it) or
// use none (--no-huge, which EAL refuses with it, --in-memory).
bool eal_adds_huge_unlink(const std::vector<std::string>& args);

}  // namespace psgate
