// SPDX-License-Identifier: BSD-3-Clause
// psgate-gen traffic model: what to send, validated before DPDK starts.
//
//   TOML profile (+ --set KEY=VALUE overrides) --parse_profile--> Profile
//   (user units: frame sizes in bytes including the FCS, rates in packets/s or
//   bit/s, durations in ns; every job expanded, every key checked).
//
// See perf/gen/README.md for the format. Nothing here touches DPDK.
#pragma once

#include <toml++/toml.h>
#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "psgate/result.h"

namespace psgate::gen {

// Same numbering as psgate's counters (counters.h): push goes towards the PS
// (enters psgate's wire port), pull comes from it (enters psgate's host port).
enum Dir : unsigned { kPush = 0, kPull = 1 };
inline constexpr const char* kDirNames[2] = {"push", "pull"};

enum class Proto : uint8_t { kUdp, kTcp };
enum class SizeModel : uint8_t { kFixed, kImix, kPsLike };
enum class RateMode : uint8_t { kMax, kPps, kBps };
enum class Pattern : uint8_t { kConstant, kIteration };

// An IPv4 or IPv6 address in host byte order: IPv4 lives in `lo` (hi = 0).
struct Addr {
  bool v6 = false;
  uint64_t hi = 0;
  uint64_t lo = 0;
  bool operator==(const Addr&) const = default;
};

Result<Addr> parse_addr(std::string_view text);
std::string format_addr(const Addr& a);
// "10.0.0.5:2222" or "[fd00::5]:2222".
Result<std::pair<Addr, uint16_t>> parse_endpoint(std::string_view text);

// The largest frame psgate-gen builds: standard Ethernet, FCS included.
inline constexpr uint32_t kMaxFrameSize = 1518;
inline constexpr uint32_t kFcsBytes = 4;

struct JobProfile {
  uint32_t id = 0;  // label in reports (psgate's job id, usually)
  std::string name;
  Addr ps_addr;  // the parameter server
  uint16_t ps_port = 2222;
  uint32_t workers = 2;          // distinct worker addresses (before port exhaustion)
  Addr worker_addr;              // first worker; worker w = worker_addr + w
  uint16_t worker_port = 40000;  // first worker port
  uint64_t flows = 0;            // 5-tuples per direction, >= workers
  Proto proto = Proto::kUdp;
  SizeModel size_model = SizeModel::kFixed;
  uint32_t size = 64;  // frame bytes incl. FCS (kFixed)
  unsigned dirs = 3;   // bit kPush | bit kPull
  RateMode rate_mode = RateMode::kMax;
  uint64_t rate = 0;                  // packets/s (kPps) or bit/s of frame bytes without FCS (kBps)
  uint64_t pacer_depth_ns = 100'000;  // token-bucket depth as time at the rate
  Pattern pattern = Pattern::kConstant;
  uint64_t push_bytes = 1'000'000;  // iteration: bytes each worker pushes
  uint64_t pull_bytes = 1'000'000;  // iteration: bytes the PS sends each worker
  uint64_t gap_ns = 10'000'000;     // iteration: compute gap

  bool sends(Dir d) const { return (dirs >> d) & 1u; }
};

// The largest TX burst ([generator] burst, --burst): what one RX burst takes.
inline constexpr uint32_t kMaxTxBurst = 64;

struct Profile {
  uint64_t duration_ns = 0;              // 0: until SIGINT/SIGTERM
  uint64_t drain_ns = 500'000'000;       // RX keeps counting this long after TX stops
  uint64_t interval_ns = 1'000'000'000;  // progress lines on stderr; 0: none
  uint64_t link_timeout_ns = 10'000'000'000;
  // After the links are up, before the first frame: a peer that polls its
  // links (psgate polls memif, pcap and ring ports every 100 ms) sees them up
  // up to a poll later, and drops what comes before as link_down.
  uint64_t settle_ns = 200'000'000;
  uint32_t tx_burst = 32;   // packets per rte_eth_tx_burst, 1..kMaxTxBurst
  uint32_t tx_retries = 8;  // tries of a full TX ring before counting tx_dropped
  uint32_t mbufs = 16383;
  std::string host_port = "0";  // port id or device name ("net_memif0")
  std::string wire_port = "1";
  std::vector<JobProfile> jobs;  // expanded ("count"), at least one
};

// Limits that keep per-flow state in memory and ids in their stamp fields.
inline constexpr uint64_t kMaxFlowsPerJob = 1ull << 24;  // the stamp's flow field: 24 bits
inline constexpr uint64_t kMaxFlowStates = 1ull << 25;   // sum of flows x directions
inline constexpr size_t kMaxJobs = 32768;                // stamp stream field: job * 2 + dir

// Smallest frame (incl. FCS) that holds the headers and the 16-byte stamp,
// and at least Ethernet's 64 bytes.
uint32_t min_frame_size(bool v6, Proto proto);

// The longest time any [generator] setting or option takes, in ns: 1e8 s.
inline constexpr uint64_t kMaxTimeNs = 100'000'000ull * 1'000'000'000ull;

// Which command-line option set each override key, as typed: "rate" ->
// "--rate" (a shortcut) or "--set rate". An error in such a key names the
// option rather than the profile's key, which may hold another value or
// none: "--rate: ...", or "--size (for jobs[1] of gen.toml): ..." when it
// failed in a profile's entry.
using OverrideOptions = std::map<std::string, std::string>;

// `root` is the profile; `job_overrides` (may be empty) is merged into every
// [[jobs]] entry before it is read (command-line --set). A root without
// [[jobs]] gets one job made of the overrides alone. `source` prefixes errors
// but those in a key `options` names.
Result<Profile> parse_profile(const toml::table& root, const toml::table& job_overrides, std::string_view source,
                              const OverrideOptions& options = {});
Result<Profile> parse_profile_text(std::string_view text, const toml::table& job_overrides, std::string_view source,
                                   const OverrideOptions& options = {});
Result<Profile> load_profile_file(const std::string& path, const toml::table& job_overrides,
                                  const OverrideOptions& options = {});

// "KEY=VALUE" from the command line into `table`: VALUE is read as a TOML
// value when it is one (4, true, "x"), else as a string (5kpps, imix).
// Errors name the option: `shortcut` when the assignment stands for one
// ("--rate" for rate=...), else "--set KEY".
Result<bool> add_override(toml::table& table, std::string_view assignment, std::string_view shortcut = {});

// "5kpps", "1.5Mpps" -> packets per second, a whole number of them: a
// fraction of a packet ("1.5pps", "0.0005kpps") is refused, not rounded.
Result<uint64_t> parse_pps(std::string_view text);

}  // namespace psgate::gen
