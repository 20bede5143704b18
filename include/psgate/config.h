// SPDX-License-Identifier: BSD-3-Clause
// Configuration in three stages (see README "Configuration"):
//   TOML text --parse_config--> ConfigSpec (validated, user units)
//             --config/compile.h--> what the lcores read (snapshot, scheduler
//               parameters: bytes/s, classes, ticks).
// JobSpec and ClassSpec are the one user-facing form of a job and a class;
// live changes on the control socket edit the control plane's copy of them.
// Validation is complete before DPDK starts: the first problem found is
// returned as one line naming the key, e.g.
//   demo.toml: shaper.wire.rate: "1Gbps/s" is not a rate (expected e.g. "9.5Gbit/s")
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "psgate/match_rule.h"
#include "psgate/policy.h"
#include "psgate/result.h"
#include "psgate/units.h"  // kMinRateBps, check_rate_bps

namespace psgate {

inline constexpr int kNoDscp = -1;

// Limits the config file and the control socket share (one rule, one place:
// the check_* functions below apply them for both; the rate's, kMinRateBps
// and check_rate_bps, are in units.h with the rate parser).
// The largest config file psgate reads, at start and on reload (100,000
// rules take about 5 MiB).
inline constexpr size_t kMaxConfigFileBytes = 16u << 20;
inline constexpr uint64_t kMinBurstBytes = 64;             // a minimum Ethernet frame
inline constexpr uint64_t kMaxBurstBytes = 512ull << 20;   // burst * tick_hz < 2^62 (token_bucket.h)
inline constexpr uint64_t kDefaultBurstBytes = 64 * 1024;  // a rate given without its burst
// classes.control_rate / control_burst: the network-control limit of each
// egress port (control_limit.h). 10 Mbit/s is about 14,000 ARP frames a
// second, far above what a link's own control traffic needs (LACP and LLDP
// send a frame a second or less, a host answers ARP and ND for its peers),
// and 1% of a 1 Gbit/s port; the burst takes 1,500 ARP requests at once (a
// job of that many workers starting together).
inline constexpr uint64_t kDefaultControlRateBps = 10'000'000;
inline constexpr uint64_t kDefaultControlBurstBytes = 128 * 1024;
inline constexpr uint32_t kMaxClassDepth = 65536;  // packets
// Start-time limits, checked by the loader so that --check refuses what a
// start would: the flow cache's table (flow_cache.cc) and the mbuf pool,
// whose ring holds the next power of two above mbufs and cannot exceed 2^30
// entries (rte_ring's size limit).
inline constexpr uint32_t kMinFlowCacheEntries = 8;
inline constexpr uint32_t kMaxFlowCacheEntries = uint32_t{1} << 26;  // 4 GiB of IPv6 entries
inline constexpr uint32_t kMinMbufs = 1024;
inline constexpr uint32_t kMaxMbufs = (uint32_t{1} << 30) - 1;
// dataplane.mbufs = "auto": as many as full queues and rings hold.
inline constexpr uint32_t kAutoMbufs = 0;

struct RateSpec {
  uint64_t rate_bps = 0;     // bits per second, > 0
  uint64_t burst_bytes = 0;  // bytes, > 0
  bool operator==(const RateSpec&) const = default;
};

struct ClassSpec {
  uint32_t depth = 1024;  // packets
  std::optional<RateSpec> cap;
  std::optional<RateSpec> floor;
  uint32_t ecn_threshold = 0;  // packets; 0 = never mark
  int dscp = kNoDscp;          // 0..63 remark, kNoDscp = leave as is
  bool operator==(const ClassSpec&) const = default;
};

struct PortSpec {
  std::string device;  // vdev args ("net_pcap0,rx_pcap=a.pcap") or PCI address
  uint32_t rx_desc = 1024;
  uint32_t tx_desc = 1024;
  // Largest IP packet the port carries, in bytes (Ethernet MTU: the frame
  // without its 14-byte header, VLAN tags and FCS). Both ports must agree.
  uint32_t mtu = 1500;
  std::optional<RateSpec> shaper;  // [shaper.<port>]; absent: unshaped
  uint32_t overhead_bytes = 24;    // [shaper.<port>] overhead, per-frame L1 bytes counted by the shaper
  // [shaper.<port>] headroom: the shaper credit class c leaves for the classes
  // above it, per class step: a share of the shaper's burst (default 25%), or
  // a fixed size. Exactly one of the two is non-zero, or both are zero (off).
  uint32_t headroom_permille = 250;
  uint32_t headroom_bytes = 0;
  // classes.control_rate / control_burst ([classes.<port>] over [classes]):
  // class 0's limit on this port; absent: "off", class 0 unlimited.
  std::optional<RateSpec> control = RateSpec{kDefaultControlRateBps, kDefaultControlBurstBytes};
  // The classes on this port: ConfigSpec::classes with [classes.N.<port>]
  // applied. Empty (a spec built in code): the same as ConfigSpec::classes.
  // Read through port_classes().
  std::vector<ClassSpec> classes;
};

struct JobSpec {
  uint32_t id = 0;
  std::string name;
  uint32_t rank = 0;
  RuleList match;                  // shared between copies (match_rule.h)
  std::optional<RateSpec> police;  // ingress policer: excess dropped and counted
  bool operator==(const JobSpec&) const = default;
};

struct ControlSpec {
  std::string socket = "/run/psgate/psgate.sock";
  std::string state;  // empty: no persistence
  // How long a client may leave its replies unread (paused, or owed replies
  // while all clients' unsent replies are over their budget) before it is
  // disconnected; a fifth of it is how long one may be owed replies and
  // still count as a prompt reader (ControlServer, control_server.h).
  uint64_t unread_timeout_ns = 5'000'000'000;
};

// [metrics]: the Prometheus endpoint (docs/metrics.md). Off unless listen
// names an address: many daemons may run on one host (tests do), and a
// fixed default port would make the second one fail to start.
struct MetricsSpec {
  std::string listen = "off";  // as written: "127.0.0.1:9467", "[::1]:9467" or "off"
  std::string host;            // the address to bind, without brackets; empty when off
  uint16_t port = 0;           // 0 when off
  bool on() const { return port != 0; }
};

// Parses a metrics.listen value; the error names the problem (the caller
// adds the key). Shared with tests.
Result<MetricsSpec> parse_metrics_listen(const std::string& listen);

// [cluster]: follow a job order held in etcd (docs/cluster.md). Absent: the
// single-host gateway, whose jobs, order and policy are its own.
struct ClusterSpec {
  std::vector<std::string> endpoints;     // "http://host:port" or "https://host:port", at least one
  std::string name;                       // this gateway, unique in the cluster (a printable name)
  std::string prefix;                     // where the cluster's keys live: "/psgate/<cluster-name>"
  std::string address;                    // shown to other gateways (psgatectl cluster); default: the name
  std::string ca, cert, key;              // TLS files (https endpoints need ca; cert and key go together)
  uint64_t lease_ttl_ns = 3'000'000'000;  // registration and leadership lease, 2s..60s
  // The policy leader compacts the store's history older than this (one
  // period kept); 0: never (a store compacted by its own operator).
  uint64_t compact_every_ns = 300'000'000'000;
  bool operator==(const ClusterSpec&) const = default;
};
// "http://host:port" -> "host:port" (a gRPC target), tls true for https.
struct ClusterEndpoint {
  std::string target;
  bool tls = false;
};
// Nothing when `url` is a usable endpoint, else why not (one line).
std::optional<std::string> endpoint_problem(std::string_view url);
ClusterEndpoint parse_endpoint(std::string_view url);      // for a url endpoint_problem accepted
inline constexpr uint64_t kMinLeaseTtlNs = 2'000'000'000;  // etcd refuses shorter leases with default timing
inline constexpr uint64_t kMaxLeaseTtlNs = 60'000'000'000;

struct ConfigSpec {
  std::string source;  // file name, for messages
  std::vector<std::string> eal_args;
  PortSpec wire;                      // index 0: towards the network
  PortSpec host;                      // index 1: towards the PS host
  unsigned main_lcore = 0;            // a CPU; may also carry a data lcore (the main lcore sleeps)
  std::vector<unsigned> data_lcores;  // CPUs, non-empty, distinct
  // How the data lcores split the work. kAuto: 2 run one direction each, to
  // completion (no ring, no packet crosses a core), 3 or more are pipelined;
  // kPipelined: 2 or more are RX lcores feeding scheduler lcores through
  // rings; kHybrid (3 or more): the first two run a direction each as kAuto's
  // two do, and also take the rings of the other N-2, RX lcores.
  enum class LcoreMode : uint8_t { kAuto, kPipelined, kHybrid };
  LcoreMode lcore_mode = LcoreMode::kAuto;
  unsigned class_count = 8;             // 2..64
  unsigned default_class = 7;           // 1..count-1
  std::vector<ClassSpec> classes;       // exactly class_count entries
  std::vector<JobSpec> jobs;            // distinct ids
  uint32_t burst = 32;                  // packets per RX/TX burst, 1..64
  uint32_t ring_size = 1024;            // per (RX lcore, egress port, class) ring, power of two
  uint32_t mbufs = kAutoMbufs;          // mbuf pool size, or sized at start
  uint32_t flow_cache_entries = 65536;  // per RX lcore, 0 disables
  uint32_t max_jobs = 4096;             // job slots (counters are sized by it)
  uint64_t drain_timeout_ns = 500'000'000;
  // The longest a job new to its slot waits in the default class behind the
  // packets there before it (flows it takes over); 0: no wait.
  uint64_t takeover_hold_ns = 20'000'000;
  // 0: data lcores poll without a pause. Otherwise a data lcore that has had
  // nothing to do for this long sleeps this long at a time until traffic
  // returns (a CPU not spun for nothing, for up to this much latency on the
  // first packet after a quiet spell).
  uint64_t idle_sleep_ns = 0;
  uint64_t stats_interval_ns = 1'000'000'000;  // 0 disables periodic summaries
  std::string log_level = "info";
  ControlSpec control;
  MetricsSpec metrics;
  // [policy]: the policy at start (a state file's, when there is one, wins).
  PolicyParams policy;
  std::optional<ClusterSpec> cluster;
};

// The classes in force on port `port` (0 wire, 1 host): PortSpec::classes,
// or ConfigSpec::classes where the port has none of its own.
const std::vector<ClassSpec>& port_classes(const ConfigSpec& config, unsigned port);

// ---- the value checks the loader and the control socket share ---------------
// Each returns nothing when the value is acceptable, else the key at fault
// (relative to the table the value lives in, e.g. "floor", "cap_burst") and
// the problem, one line; the caller adds where the value came from.
struct ValueProblem {
  std::string key;
  std::string problem;
};
std::optional<std::string> check_burst_bytes(uint64_t bytes);
// A rate and its burst; `rate_key`/`burst_key` name them ("cap", "cap_burst").
std::optional<ValueProblem> check_rate_spec(const RateSpec& r, const std::string& rate_key,
                                            const std::string& burst_key);
// A class: depth, ECN threshold below the depth (or 0), cap and floor with
// their bursts, floor at most the cap, DSCP 0..63 or kNoDscp.
std::optional<ValueProblem> check_class(const ClassSpec& c);
// A port's shaper (rate, burst).
std::optional<ValueProblem> check_shaper(const RateSpec& r);
// A port's floors against its shaper (bytes per second, 0: unshaped). Floors
// are served ahead of strict priority: when together they reach the shaper's
// rate, a class without one (class 0, network control, among them) gets
// nothing. The problem, or nothing when they fit or the port is unshaped.
std::optional<std::string> check_floors_fit(uint64_t shaper_bytes_per_sec, const std::vector<uint64_t>& floors);
// A job as the loader and `jobs.add` take it: id >= 1, a printable name, at
// least one rule, the policer.
std::optional<ValueProblem> check_job(const JobSpec& j);

// Parses and validates. `source_name` is used as the prefix of error messages.
Result<ConfigSpec> parse_config(std::string_view toml_text, std::string_view source_name);
// Reads the file (error if missing/unreadable) and calls parse_config.
// `give_up`: read_text_file's (a pipe whose writer stalls, and a stop asked
// meanwhile: the read ends, "Interrupted system call").
Result<ConfigSpec> load_config_file(const std::string& path, const std::function<bool()>& give_up = {});
// The message for a config file that could not be read (`err`: an errno,
// EFBIG past kMaxConfigFileBytes), at start and at reload alike.
std::string config_read_error(const std::string& path, int err);

// The largest frame psgate forwards for an MTU: the IP packet, the Ethernet
// header and up to kMaxVlanTags tags (no FCS: devices strip it).
uint32_t max_frame_bytes(uint32_t mtu, unsigned vlan_tags);

// The class a job rank maps to: job classes are 1..count-1 without the default
// class, in order; rank r takes the r-th, ranks beyond share the last one. With
// no job class left (count 2), jobs share the default class.
unsigned class_for_rank(const ConfigSpec& config, uint32_t rank);

}  // namespace psgate
