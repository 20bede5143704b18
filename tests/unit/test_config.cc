// SPDX-License-Identifier: BSD-3-Clause
// parse_config: a full config maps to the right fields, defaults match
// ConfigSpec, and every bad input gives ONE line naming the key to fix.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include "psgate/config.h"
#include "psgate/toml_reader.h"

namespace psgate {
namespace {

const std::string kPorts = R"(
[ports.wire]
device = "net_null0"
[ports.host]
device = "net_null1"
)";
const std::string kLcores = "\n[lcores]\ndata = [1]\n";

// The minimal valid config plus `extra`, which may add keys to the root and
// tables other than [ports.*] and [lcores].
std::string doc(const std::string& extra) { return extra + "\n" + kPorts + kLcores; }

const char* kFull = R"(
[eal]
args = ["--no-huge", "-m", "512", "--no-pci", "--file-prefix=psgate-demo"]

[ports.wire]
device = "net_pcap0,rx_pcap=wire-in.pcap,tx_pcap=wire-out.pcap"
rx_desc = 512
tx_desc = 2048
mtu = 9000
[ports.host]
device = "0000:03:00.1"
mtu = 9000

[lcores]
main = 2
data = [3, 0, 5]
mode = "pipelined"

[shaper.wire]
rate = "9.5Gbit/s"
burst = "64KiB"
overhead = "20B"
headroom = "3KiB"

[shaper.host]
rate = "1Gbps"
burst = "1500B"

[classes]
count = 6
default = 2
depth = 512
ecn_threshold = 100
[classes.3]
depth = 256
cap = "100Mbit/s"
floor = "10Mbit/s"
floor_burst = "2KB"
ecn_threshold = 64
dscp = 46
[classes.0]
cap = "1Mbit/s"
cap_burst = "1MiB"

[[jobs]]
id = 1
name = "resnet32-a"
rank = 0
match = ["src=10.0.0.5/32,sport=2222,proto=tcp", "dst=10.0.0.5/32,dport=2222,proto=tcp"]
police = "300Mbit/s"
police_burst = "128KiB"

[[jobs]]
id = 4294967295
rank = 3
match = ["dst=fd00::/64,dport=2222-2230,proto=udp"]

[dataplane]
burst = 16
ring_size = 4096
mbufs = 32767
flow_cache = 0
max_jobs = 2
drain_timeout = "1.5s"
takeover_hold = "5ms"
idle_sleep = "250us"

[stats]
interval = "0s"

[log]
level = "debug"

[control]
socket = "/tmp/psgate.sock"
unread_timeout = "30s"
state = "/var/lib/psgate/state.json"
)";

TEST(ConfigParse, FullConfigMapsEveryField) {
  const auto r = parse_config(kFull, "full.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  const ConfigSpec& c = *r;
  EXPECT_EQ(c.source, "full.toml");
  EXPECT_EQ(c.eal_args, (std::vector<std::string>{"--no-huge", "-m", "512", "--no-pci", "--file-prefix=psgate-demo"}));
  EXPECT_EQ(c.wire.device, "net_pcap0,rx_pcap=wire-in.pcap,tx_pcap=wire-out.pcap");
  EXPECT_EQ(c.wire.rx_desc, 512u);
  EXPECT_EQ(c.wire.tx_desc, 2048u);
  EXPECT_EQ(c.host.device, "0000:03:00.1");
  EXPECT_EQ(c.host.rx_desc, 1024u);
  EXPECT_EQ(c.wire.mtu, 9000u);
  EXPECT_EQ(c.host.mtu, 9000u);
  ASSERT_TRUE(c.wire.shaper);
  EXPECT_EQ(c.wire.shaper->rate_bps, 9'500'000'000u);
  EXPECT_EQ(c.wire.shaper->burst_bytes, 65536u);
  EXPECT_EQ(c.wire.overhead_bytes, 20u);
  EXPECT_EQ(c.wire.headroom_bytes, 3072u);
  EXPECT_EQ(c.wire.headroom_permille, 0u) << "a fixed size replaces the default share";
  ASSERT_TRUE(c.host.shaper);
  EXPECT_EQ(c.host.shaper->rate_bps, 1'000'000'000u);
  EXPECT_EQ(c.host.shaper->burst_bytes, 1500u);
  EXPECT_EQ(c.host.overhead_bytes, 24u);
  EXPECT_EQ(c.host.headroom_bytes, 0u);
  EXPECT_EQ(c.host.headroom_permille, 250u) << "default: a quarter of the burst per class step";
  EXPECT_EQ(c.main_lcore, 2u);
  EXPECT_EQ(c.data_lcores, (std::vector<unsigned>{3, 0, 5}));
  EXPECT_EQ(c.lcore_mode, ConfigSpec::LcoreMode::kPipelined);

  EXPECT_EQ(c.class_count, 6u);
  EXPECT_EQ(c.default_class, 2u);
  ASSERT_EQ(c.classes.size(), 6u);
  for (unsigned i : {1u, 2u, 4u, 5u}) {
    EXPECT_EQ(c.classes[i].depth, 512u) << i;
    EXPECT_EQ(c.classes[i].ecn_threshold, 100u) << i;
    EXPECT_FALSE(c.classes[i].cap) << i;
    EXPECT_FALSE(c.classes[i].floor) << i;
    EXPECT_EQ(c.classes[i].dscp, kNoDscp) << i;
  }
  const ClassSpec& c3 = c.classes[3];
  EXPECT_EQ(c3.depth, 256u);
  EXPECT_EQ(c3.ecn_threshold, 64u);
  EXPECT_EQ(c3.dscp, 46);
  ASSERT_TRUE(c3.cap);
  EXPECT_EQ(c3.cap->rate_bps, 100'000'000u);
  EXPECT_EQ(c3.cap->burst_bytes, 65536u);  // default cap_burst
  ASSERT_TRUE(c3.floor);
  EXPECT_EQ(c3.floor->rate_bps, 10'000'000u);
  EXPECT_EQ(c3.floor->burst_bytes, 2000u);
  ASSERT_TRUE(c.classes[0].cap);
  EXPECT_EQ(c.classes[0].cap->burst_bytes, 1u << 20);
  EXPECT_EQ(c.classes[0].depth, 512u);

  ASSERT_EQ(c.jobs.size(), 2u);
  EXPECT_EQ(c.jobs[0].id, 1u);
  EXPECT_EQ(c.jobs[0].name, "resnet32-a");
  EXPECT_EQ(c.jobs[0].rank, 0u);
  ASSERT_EQ(c.jobs[0].match.size(), 2u);
  EXPECT_EQ(to_string(c.jobs[0].match[0]), "src=10.0.0.5/32,sport=2222,proto=tcp");
  EXPECT_EQ(to_string(c.jobs[0].match[1]), "dst=10.0.0.5/32,dport=2222,proto=tcp");
  ASSERT_TRUE(c.jobs[0].police);
  EXPECT_EQ(c.jobs[0].police->rate_bps, 300'000'000u);
  EXPECT_EQ(c.jobs[0].police->burst_bytes, 131072u);
  EXPECT_EQ(c.jobs[1].id, 4294967295u);
  EXPECT_EQ(c.jobs[1].name, "job-4294967295");
  EXPECT_EQ(c.jobs[1].rank, 3u);
  EXPECT_FALSE(c.jobs[1].police);
  ASSERT_EQ(c.jobs[1].match.size(), 1u);
  EXPECT_EQ(c.jobs[1].match[0].dport, (PortRange{2222, 2230}));

  EXPECT_EQ(c.burst, 16u);
  EXPECT_EQ(c.ring_size, 4096u);
  EXPECT_EQ(c.mbufs, 32767u);
  EXPECT_EQ(c.flow_cache_entries, 0u);
  EXPECT_EQ(c.max_jobs, 2u);
  EXPECT_EQ(c.drain_timeout_ns, 1'500'000'000u);
  EXPECT_EQ(c.takeover_hold_ns, 5'000'000u);
  EXPECT_EQ(c.idle_sleep_ns, 250'000u);
  EXPECT_EQ(c.stats_interval_ns, 0u);
  EXPECT_EQ(c.log_level, "debug");
  EXPECT_EQ(c.control.socket, "/tmp/psgate.sock");
  EXPECT_EQ(c.control.unread_timeout_ns, 30'000'000'000u);
  EXPECT_EQ(c.control.state, "/var/lib/psgate/state.json");
}

// EAL options near the refused ones, and values of other options, pass.
TEST(ConfigParse, HybridModeWithThreeDataLcoresOrMore) {
  for (const char* data : {"[1, 2, 3]", "[4, 1, 2, 3, 5]"}) {
    auto c = parse_config(kPorts + "\n[lcores]\ndata = " + data + "\nmode = \"hybrid\"\n", "t.toml");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c->lcore_mode, ConfigSpec::LcoreMode::kHybrid) << data;
  }
}

TEST(ConfigParse, EalOptionsThatLeaveLcoresAndDevicesAloneAreKept) {
  const std::vector<std::string> args = {"--huge-dir=/mnt/huge",
                                         "--vfio-intr=msix",
                                         "-d",
                                         "/usr/lib/x.so",
                                         "--base-virtaddr=0x100000000",
                                         "-m",
                                         "512",
                                         "-v",
                                         "--no-pci",
                                         "-n",
                                         "4"};
  std::string list;
  for (const std::string& a : args) list += (list.empty() ? "\"" : ", \"") + a + "\"";
  const auto r = parse_config(doc("[eal]\nargs = [" + list + "]\n"), "eal.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->eal_args, args);
}

// An option's value is whatever follows it, as EAL's getopt takes it: a
// value that looks like a refused option ("-h", "--", "--lcores=...") is
// that value, not the option. An option that takes its value only after
// "=" (--huge-unlink) leaves the next argument an option.
TEST(ConfigParse, EalOptionValuesAreNeverReadAsOptions) {
  auto list = [](const std::vector<std::string>& args) {
    std::string out;
    for (const std::string& a : args) out += (out.empty() ? "\"" : ", \"") + a + "\"";
    return out;
  };
  const std::vector<std::vector<std::string>> kept = {
      {"--file-prefix", "-h"},
      {"--file-prefix", "--help"},
      {"--file-prefix", "--"},
      {"--huge-dir", "-l0"},
      {"--file-pre", "--vdev=net_null0"},  // abbreviated, as getopt takes it
      {"-m", "-h"},
      {"-d", "-a"},
      {"--log-level", "--file-prefix", "help"},  // "help" is no value: a word EAL leaves
      {"--file-prefix", "--log-level", "help"},  // --log-level is the prefix; "help" a word
      {"-vm", "-b"},                             // -v, then -m takes "-b"
  };
  for (const auto& args : kept) {
    const auto r = parse_config(doc("[eal]\nargs = [" + list(args) + "]\n"), "eal.toml");
    if (!r.ok()) {
      ADD_FAILURE() << list(args) << ": " << r.error();
      continue;
    }
    EXPECT_EQ(r->eal_args, args);
  }
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"--huge-unlink", "-h"}, "eal.args[1]: \"-h\" is not allowed here: EAL would print its usage"},
      {{"--file-prefix=x", "-h"}, "eal.args[1]: \"-h\" is not allowed"},
      {{"--file-prefix", "x", "-h"}, "eal.args[2]: \"-h\" is not allowed"},
      {{"--file-prefix", "--file-prefix", "--lcores=1"}, "eal.args[2]: \"--lcores=1\" is not allowed"},
      {{"-m", "512", "--log-level", "help"}, "eal.args[3]: \"help\" is not allowed"},
  };
  for (const auto& [args, message] : refused) {
    const auto r = parse_config(doc("[eal]\nargs = [" + list(args) + "]\n"), "eal.toml");
    if (r.ok()) {
      ADD_FAILURE() << list(args) << " was taken";
      continue;
    }
    EXPECT_NE(r.error().find(message), std::string::npos) << list(args) << ": " << r.error();
  }
}

// psgate adds its own arguments after eal.args (--lcores=..., the ports'
// devices): an option left without its value would take the first of them
// as its value, and EAL would run on its default cores.
TEST(ConfigParse, AnEalOptionWithoutItsValueIsRefused) {
  for (const char* last : {"--file-prefix", "-m", "--log-level", "--huge-di"}) {
    const auto r = parse_config(doc("[eal]\nargs = [\"--no-huge\", \"" + std::string(last) + "\"]\n"), "eal.toml");
    if (r.ok()) {
      ADD_FAILURE() << last << " last was taken";
      continue;
    }
    EXPECT_NE(r.error().find("eal.args[1]: \"" + std::string(last) + "\" needs a value after it"), std::string::npos)
        << r.error();
  }
  // Its value in the same argument, or an option whose value is optional.
  for (const char* last : {"--file-prefix=p", "-m512", "--huge-unlink", "-v"}) {
    const auto r = parse_config(doc("[eal]\nargs = [\"--no-huge\", \"" + std::string(last) + "\"]\n"), "eal.toml");
    EXPECT_TRUE(r.ok()) << last << ": " << r.error();
  }
}

TEST(ConfigParse, MinimalConfigTakesSpecDefaults) {
  const auto r = parse_config(doc(""), "min.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  const ConfigSpec& c = *r;
  const ConfigSpec d;  // the documented defaults
  EXPECT_TRUE(c.eal_args.empty());
  EXPECT_EQ(c.wire.device, "net_null0");
  EXPECT_EQ(c.host.device, "net_null1");
  EXPECT_EQ(c.wire.rx_desc, d.wire.rx_desc);
  EXPECT_EQ(c.wire.tx_desc, d.wire.tx_desc);
  EXPECT_EQ(c.wire.mtu, 1500u);
  EXPECT_EQ(c.host.mtu, 1500u);
  EXPECT_FALSE(c.wire.shaper);
  EXPECT_FALSE(c.host.shaper);
  EXPECT_EQ(c.wire.overhead_bytes, d.wire.overhead_bytes);
  EXPECT_EQ(c.main_lcore, d.main_lcore);
  EXPECT_EQ(c.data_lcores, std::vector<unsigned>{1});
  EXPECT_EQ(c.lcore_mode, ConfigSpec::LcoreMode::kAuto);
  EXPECT_EQ(c.class_count, d.class_count);
  EXPECT_EQ(c.default_class, d.default_class);
  ASSERT_EQ(c.classes.size(), d.class_count);
  for (const ClassSpec& cs : c.classes) {
    EXPECT_EQ(cs.depth, ClassSpec{}.depth);
    EXPECT_EQ(cs.ecn_threshold, 0u);
    EXPECT_EQ(cs.dscp, kNoDscp);
    EXPECT_FALSE(cs.cap);
    EXPECT_FALSE(cs.floor);
  }
  EXPECT_TRUE(c.jobs.empty());
  EXPECT_EQ(c.burst, d.burst);
  EXPECT_EQ(c.ring_size, d.ring_size);
  EXPECT_EQ(c.mbufs, d.mbufs);
  EXPECT_EQ(d.mbufs, kAutoMbufs);  // sized at start to what the queues hold
  EXPECT_EQ(c.flow_cache_entries, d.flow_cache_entries);
  EXPECT_EQ(c.max_jobs, d.max_jobs);
  EXPECT_EQ(c.drain_timeout_ns, d.drain_timeout_ns);
  EXPECT_EQ(c.stats_interval_ns, d.stats_interval_ns);
  EXPECT_EQ(c.log_level, d.log_level);
  EXPECT_EQ(c.control.socket, d.control.socket);
  EXPECT_EQ(c.control.state, d.control.state);
  EXPECT_EQ(c.control.unread_timeout_ns, d.control.unread_timeout_ns);
  EXPECT_EQ(d.control.unread_timeout_ns, 5'000'000'000u);
}

// headroom is a share of the burst ("12.5%") or a fixed size, never both.
TEST(ConfigParse, HeadroomShareOrSize) {
  const auto share =
      parse_config(doc("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"12.5%\""), "s.toml");
  ASSERT_TRUE(share.ok()) << share.error();
  EXPECT_EQ(share->wire.headroom_permille, 125u);
  EXPECT_EQ(share->wire.headroom_bytes, 0u);
  const auto off =
      parse_config(doc("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"0B\""), "o.toml");
  ASSERT_TRUE(off.ok()) << off.error();
  EXPECT_EQ(off->wire.headroom_permille, 0u) << "\"0B\" turns the headroom off";
  EXPECT_EQ(off->wire.headroom_bytes, 0u);
}

// [classes.N.<port>]: what one port's class N differs in, over [classes.N];
// the depth stays the class's. ConfigSpec::classes keeps the shared form.
TEST(ConfigParse, PerPortClassSettings) {
  const auto r = parse_config(doc("[classes]\necn_threshold = 10\n[classes.3]\ndepth = 256\ncap = \"100Mbit/s\"\n"
                                  "dscp = 10\n[classes.3.wire]\ncap = \"50Mbit/s\"\ncap_burst = \"2KiB\"\n"
                                  "ecn_threshold = 0\n[classes.3.host]\nfloor = \"1Mbit/s\"\ndscp = 46\n"),
                              "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  const ClassSpec& shared = r->classes[3];
  const ClassSpec& w = port_classes(*r, 0)[3];
  const ClassSpec& h = port_classes(*r, 1)[3];
  EXPECT_EQ(shared.cap, (RateSpec{100'000'000, kDefaultBurstBytes}));
  EXPECT_EQ(w.depth, 256u);
  EXPECT_EQ(h.depth, 256u);
  EXPECT_EQ(w.cap, (RateSpec{50'000'000, 2048}));
  EXPECT_EQ(h.cap, shared.cap);
  EXPECT_EQ(w.ecn_threshold, 0u);
  EXPECT_EQ(h.ecn_threshold, 10u);
  EXPECT_FALSE(w.floor);
  EXPECT_EQ(h.floor, (RateSpec{1'000'000, kDefaultBurstBytes}));
  EXPECT_EQ(w.dscp, 10);
  EXPECT_EQ(h.dscp, 46);
  EXPECT_EQ(port_classes(*r, 0)[2], r->classes[2]);
  // A spec built in code (no per-port classes) reads the shared ones.
  ConfigSpec built;
  built.classes.assign(built.class_count, ClassSpec{});
  EXPECT_EQ(&port_classes(built, 1), &built.classes);
}

// A per-port table inherits [classes.N]'s bursts as configuration.md says: a
// cap alone keeps the class's cap_burst, a cap_burst alone changes the
// inherited cap's (before, the first fell back to 64KiB and the second was
// refused as "given without cap").
TEST(ConfigParse, PerPortClassSettingsInheritTheClassBurst) {
  const auto r = parse_config(doc("[classes.3]\ncap = \"100Mbit/s\"\ncap_burst = \"1MiB\"\nfloor = \"10Mbit/s\"\n"
                                  "floor_burst = \"256KiB\"\n[classes.3.wire]\ncap = \"50Mbit/s\"\n"
                                  "[classes.3.host]\ncap_burst = \"2MiB\"\nfloor = \"20Mbit/s\"\n"),
                              "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(port_classes(*r, 0)[3].cap, (RateSpec{50'000'000, 1 << 20}));
  EXPECT_EQ(port_classes(*r, 1)[3].cap, (RateSpec{100'000'000, 2 << 20}));
  EXPECT_EQ(port_classes(*r, 1)[3].floor, (RateSpec{20'000'000, 256 << 10}));
  EXPECT_EQ(port_classes(*r, 0)[3].floor, (RateSpec{10'000'000, 256 << 10}));
  // With nothing to inherit, a burst alone is still an error.
  const auto alone = parse_config(doc("[classes.4.wire]\ncap_burst = \"2MiB\"\n"), "t.toml");
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.error().find("classes.4.wire.cap_burst"), std::string::npos) << alone.error();
}

// A shaper table without a rate: unshaped, but its overhead and headroom
// are what a rate set later over the socket uses.
TEST(ConfigParse, ShaperWithoutRateKeepsOverheadAndHeadroom) {
  const auto r = parse_config(doc("[shaper.wire]\noverhead = \"20B\"\nheadroom = \"0B\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->wire.shaper);
  EXPECT_EQ(r->wire.overhead_bytes, 20u);
  EXPECT_EQ(r->wire.headroom_permille, 0u);
}

TEST(ConfigParse, NetworkControlLimitPerPortOverTheClassesDefault) {
  auto r = parse_config(doc(""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  // On by default, on both ports.
  for (const PortSpec* p : {&r->wire, &r->host}) {
    ASSERT_TRUE(p->control);
    EXPECT_EQ(p->control->rate_bps, kDefaultControlRateBps);
    EXPECT_EQ(p->control->burst_bytes, kDefaultControlBurstBytes);
  }
  r = parse_config(doc("[classes]\ncontrol_rate = \"20Mbit/s\"\n[classes.host]\ncontrol_burst = \"1MiB\"\n"
                       "[classes.wire]\ncontrol_rate = \"off\"\n"),
                   "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->wire.control);
  ASSERT_TRUE(r->host.control);
  EXPECT_EQ(*r->host.control, (RateSpec{20'000'000, 1u << 20}));
  r = parse_config(doc("[classes]\ncontrol_rate = \"off\"\n[classes.wire]\ncontrol_rate = \"1Mbit/s\"\n"), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->host.control);
  EXPECT_EQ(*r->wire.control, (RateSpec{1'000'000, kDefaultControlBurstBytes})) << "control_burst's default";
  const std::pair<const char*, const char*> bad[] = {
      {"[classes]\ncontrol_rate = \"off\"\ncontrol_burst = \"1MiB\"\n", "classes.control_burst"},
      {"[classes]\ncontrol_rate = \"off\"\n[classes.host]\ncontrol_burst = \"1MiB\"\n", "classes.host.control_burst"},
      {"[classes]\ncontrol_rate = \"fast\"\n", "classes.control_rate"},
      {"[classes]\ncontrol_rate = 5\n", "classes.control_rate"},
      {"[classes.wire]\ncontrol = \"1Mbit/s\"\n", "classes.wire.control"},
      {"[classes.wire]\ncap = \"1Mbit/s\"\n", "classes.wire.cap"},
  };
  for (const auto& [text, key] : bad) {
    const auto e = parse_config(doc(text), "t.toml");
    ASSERT_FALSE(e.ok()) << text;
    EXPECT_NE(e.error().find(key), std::string::npos) << text << ": " << e.error();
  }
}

TEST(ConfigParse, PolicyTable) {
  EXPECT_EQ(parse_config(doc(""), "t.toml")->policy.kind, PolicyKind::kStatic);
  // No [policy] is the static policy with its own default interval, so that
  // sending `policy static` to such a gateway changes nothing.
  EXPECT_EQ(parse_config(doc(""), "t.toml")->policy,
            parse_config(doc("[policy]\nname = \"static\""), "t.toml")->policy);
  EXPECT_EQ(parse_config(doc(""), "t.toml")->policy.interval_ns, 1'000'000'000u);
  auto r = parse_config(doc("[policy]\nname = \"round-robin\"\nrotate_on = \"iteration\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->policy.kind, PolicyKind::kRoundRobin);
  EXPECT_EQ(r->policy.interval_ns, 20'000'000'000u);  // the policy command's default
  EXPECT_EQ(r->policy.rotate_on, RotateOn::kIteration);
  r = parse_config(doc("[policy]\nname = \"progress\"\ninterval = \"250ms\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->policy.kind, PolicyKind::kProgress);
  EXPECT_EQ(r->policy.interval_ns, 250'000'000u);
  r = parse_config(doc("[policy]\nname = \"fifo\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->policy.interval_ns, 1'000'000'000u);
}

TEST(ConfigParse, ClusterTable) {
  EXPECT_FALSE(parse_config(doc(""), "t.toml")->cluster) << "absent: single-host";
  auto r = parse_config(doc("[cluster]\nendpoints = [\"http://10.0.0.1:2379\", \"http://etcd-2:2379/\"]\n"
                            "name = \"gw-a\"\nprefix = \"/psgate/training\""),
                        "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  ASSERT_TRUE(r->cluster);
  EXPECT_EQ(r->cluster->endpoints, (std::vector<std::string>{"http://10.0.0.1:2379", "http://etcd-2:2379/"}));
  EXPECT_EQ(r->cluster->name, "gw-a");
  EXPECT_EQ(r->cluster->prefix, "/psgate/training");
  EXPECT_EQ(r->cluster->address, "gw-a") << "the address defaults to the name";
  EXPECT_EQ(r->cluster->lease_ttl_ns, 3'000'000'000u);
  EXPECT_EQ(r->cluster->compact_every_ns, 300'000'000'000u) << "etcd 3.4 compacts nothing by itself";
  EXPECT_TRUE(r->cluster->ca.empty());

  r = parse_config(doc("[cluster]\nendpoints = [\"https://[fd00::1]:2379\"]\nname = \"gw-b\"\n"
                       "prefix = \"/p\"\naddress = \"10.1.1.1:9000\"\nca = \"ca.pem\"\ncert = \"c.pem\"\n"
                       "key = \"k.pem\"\nlease_ttl = \"10s\"\ncompact_every = \"0s\""),
                   "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->cluster->address, "10.1.1.1:9000");
  EXPECT_EQ(r->cluster->ca, "ca.pem");
  EXPECT_EQ(r->cluster->cert, "c.pem");
  EXPECT_EQ(r->cluster->key, "k.pem");
  EXPECT_EQ(r->cluster->lease_ttl_ns, 10'000'000'000u);
  EXPECT_EQ(r->cluster->compact_every_ns, 0u);
}

TEST(ConfigParse, ClusterEndpoints) {
  EXPECT_FALSE(endpoint_problem("http://10.0.0.1:2379"));
  EXPECT_FALSE(endpoint_problem("https://etcd.example:443/"));
  EXPECT_FALSE(endpoint_problem("http://[fd00::1]:2379"));
  for (const char* bad : {"10.0.0.1:2379", "ftp://h:21", "http://h", "http://:2379", "http://h:", "http://h:0",
                          "http://h:65536", "http://h:2379/v3", "http://h:23x9", "http://h:2379?x=1", "http://"}) {
    const auto problem = endpoint_problem(bad);
    ASSERT_TRUE(problem) << bad;
    EXPECT_NE(problem->find(bad), std::string::npos) << "names the endpoint: " << *problem;
  }
  ClusterEndpoint e = parse_endpoint("https://etcd.example:443/");
  EXPECT_EQ(e.target, "etcd.example:443");
  EXPECT_TRUE(e.tls);
  e = parse_endpoint("http://10.0.0.1:2379");
  EXPECT_EQ(e.target, "10.0.0.1:2379");
  EXPECT_FALSE(e.tls);
}

// The values the socket can set are checked by these same functions
// (control_apply.cc); the loader's messages above come from them too.
TEST(ConfigChecks, SharedValueChecks) {
  ClassSpec c;
  EXPECT_FALSE(check_class(c));
  c.ecn_threshold = 5000;
  auto p = check_class(c);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->key, "ecn_threshold");
  EXPECT_EQ(p->problem, "ecn_threshold 5000 must be below depth 1024 (0 turns marking off)");
  c.ecn_threshold = 0;
  c.cap = RateSpec{10'000'000, 64};
  c.floor = RateSpec{20'000'000, 64};
  ASSERT_TRUE(check_class(c));
  EXPECT_EQ(check_class(c)->key, "floor");
  c.floor.reset();
  c.cap->burst_bytes = 63;
  ASSERT_TRUE(check_class(c));
  EXPECT_EQ(check_class(c)->key, "cap_burst");
  c.cap.reset();
  c.dscp = 64;
  ASSERT_TRUE(check_class(c));
  EXPECT_EQ(check_class(c)->key, "dscp");
  EXPECT_EQ(check_shaper(RateSpec{7, 64})->key, "rate");
  EXPECT_EQ(check_shaper(RateSpec{8, (512u << 20) + 1})->key, "burst");
  EXPECT_FALSE(check_shaper(RateSpec{8, 512u << 20}));
  JobSpec j;
  j.id = 3;
  j.name = "ok";
  EXPECT_EQ(check_job(j)->key, "match");
  j.match.push_back(*parse_match_rule("proto=tcp"));
  EXPECT_FALSE(check_job(j));
  j.police = RateSpec{1'000'000, 32};
  EXPECT_EQ(check_job(j)->key, "police_burst");
  j.name = "a\u202eb";
  EXPECT_EQ(check_job(j)->key, "name");
}

TEST(ConfigParse, ClassCountMovesTheDefaultClass) {
  const auto r = parse_config(doc("[classes]\ncount = 4\n"), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->class_count, 4u);
  EXPECT_EQ(r->default_class, 3u);
  EXPECT_EQ(r->classes.size(), 4u);
}

struct BadCase {
  std::string text;     // whole document
  const char* path;     // key the error must name
  const char* problem;  // phrase the error must contain
};

void expect_error(const BadCase& c) {
  const auto r = parse_config(c.text, "t.toml");
  ASSERT_FALSE(r.ok()) << "accepted:\n" << c.text;
  const std::string& e = r.error();
  const std::string prefix = std::string("t.toml: ") + c.path + ": ";
  EXPECT_EQ(e.rfind(prefix, 0), 0u) << "want prefix \"" << prefix << "\", got: " << e;
  EXPECT_NE(e.find(c.problem), std::string::npos) << "want \"" << c.problem << "\" in: " << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << "not one line: " << e;
}

std::vector<BadCase> bad_cases() {
  auto d = [](const std::string& extra) { return doc(extra); };
  const std::string ports_host = "\n[ports.host]\ndevice = \"h\"\n";
  auto wire = [&](const std::string& keys) { return "[ports.wire]\n" + keys + "\n" + ports_host + kLcores; };
  auto lcores = [&](const std::string& keys) { return kPorts + "\n[lcores]\n" + keys + "\n"; };
  auto cl = [](const std::string& keys) { return "[cluster]\n" + keys; };
  const std::string job = "[[jobs]]\nid = 1\nmatch = [\"proto=tcp\"]\n";
  return {
      // [eal]
      {d("[eal]\nargs = [\"-l\", \"1\"]"), "eal.args[0]", "set lcores in [lcores]"},
      {d("[eal]\nargs = [\"--no-huge\", \"-l1-3\"]"), "eal.args[1]", "set lcores in [lcores]"},
      {d("[eal]\nargs = [\"-c\", \"0x3\"]"), "eal.args[0]", "set lcores in [lcores]"},
      {d("[eal]\nargs = [\"-m\", \"512\", \"--lcores=1@2\"]"), "eal.args[2]", "set lcores"},
      {d("[eal]\nargs = [\"--lcores\", \"1\"]"), "eal.args[0]", "set lcores"},
      {d("[eal]\nargs = [\"--main-lcore\", \"0\"]"), "eal.args[0]", "set lcores"},
      // Service cores: EAL never launches psgate's loop there.
      {d("[eal]\nargs = [\"-s\", \"0x2\"]"), "eal.args[0]", "set lcores"},
      {d("[eal]\nargs = [\"--no-huge\", \"-S1\"]"), "eal.args[1]", "set lcores"},
      // As EAL's getopt reads them: bundled behind one dash, abbreviated.
      {d("[eal]\nargs = [\"-vl0\"]"), "eal.args[0]", "set lcores"},
      {d("[eal]\nargs = [\"--lcor=0@0,1@1\"]"), "eal.args[0]", "set lcores"},
      {d("[eal]\nargs = [\"--main-l\", \"0\"]"), "eal.args[0]", "set lcores"},
      // A NUL would cut the string where EAL (or a path) reads it.
      {d("[eal]\nargs = [\"--file-prefix=a\\u0000b\"]"), "eal.args[0]", "control character"},
      {d("[control]\nsocket = \"/tmp/a.sock\\u0000/etc/passwd\""), "control.socket", "control character"},
      {d("[eal]\nargs = [\"--main-lcore=0\"]"), "eal.args[0]", "set lcores"},
      // Devices are the ports': EAL takes the first of a name, after eal.args
      // psgate's own would be shadowed (or, -b, hidden).
      {d("[eal]\nargs = [\"--vdev=net_null0\"]"), "eal.args[0]", "devices go in ports.wire.device"},
      {d("[eal]\nargs = [\"--no-pci\", \"--vd\", \"net_null0\"]"), "eal.args[1]", "devices go in"},
      {d("[eal]\nargs = [\"-a\", \"0000:01:00.0\"]"), "eal.args[0]", "devices go in"},
      {d("[eal]\nargs = [\"-v\", \"-b0000:01:00.0\"]"), "eal.args[1]", "devices go in"},
      {d("[eal]\nargs = [\"--allow=0000:01:00.0\"]"), "eal.args[0]", "devices go in"},
      {d("[eal]\nargs = [\"--block\", \"0000:01:00.0\"]"), "eal.args[0]", "devices go in"},
      // EAL's usage and exit 0, or the end of its options.
      {d("[eal]\nargs = [\"--help\"]"), "eal.args[0]", "print its usage and exit"},
      // EAL lists its log types and exits 0, as for --help.
      {d("[eal]\nargs = [\"--log-level=help\"]"), "eal.args[0]", "print its usage and exit"},
      {d("[eal]\nargs = [\"--log-level\", \"help\"]"), "eal.args[1]", "print its usage and exit"},
      {d("[eal]\nargs = [\"--hel\"]"), "eal.args[0]", "print its usage and exit"},
      {d("[eal]\nargs = [\"-vh\"]"), "eal.args[0]", "print its usage and exit"},
      {d("[eal]\nargs = [\"--no-huge\", \"--\", \"x\"]"), "eal.args[1]", "stop reading its arguments"},
      {d("[eal]\nargs = \"--no-huge\""), "eal.args", "expected an array of strings"},
      {d("[eal]\nargs = [512]"), "eal.args[0]", "expected a string, got integer 512"},
      {d("[eal]\nargz = []"), "eal.argz", "unknown key (did you mean \"args\"?)"},
      {d("eal = 1"), "eal", "expected a table, got integer 1"},
      // [ports]
      {kLcores, "ports", "missing"},
      {"[ports.wire]\ndevice = \"w\"\n" + kLcores, "ports.host", "missing"},
      {ports_host + kLcores, "ports.wire", "missing"},
      {wire("device = \"\""), "ports.wire.device", "must not be empty"},
      {wire("rx_desc = 1024"), "ports.wire.device", "missing"},
      {wire("device = 5"), "ports.wire.device", "expected a string, got integer 5"},
      {wire("device = \"w\"\nrx_desc = 1000"), "ports.wire.rx_desc", "1000 is not a power of two"},
      {wire("device = \"w\"\nrx_desc = 32"), "ports.wire.rx_desc", "32 is out of range 64..16384"},
      {wire("device = \"w\"\ntx_desc = 32768"), "ports.wire.tx_desc", "out of range 64..16384"},
      {wire("device = \"w\"\ntx_desc = -1024"), "ports.wire.tx_desc", "out of range"},
      {wire("device = \"w\"\nrx_desc = \"1024\""), "ports.wire.rx_desc", "expected an integer, got string \"1024\""},
      {wire("device = \"w\"\nrxdesc = 1024"), "ports.wire.rxdesc", "unknown key (did you mean \"rx_desc\"?)"},
      {wire("device = \"w\"\n[ports.mgmt]\ndevice = \"m\""), "ports.mgmt", "unknown key"},
      {wire("device = \"w\"\nmtu = 67"), "ports.wire.mtu", "67 is out of range 68..65505"},
      {wire("device = \"w\"\nmtu = 65506"), "ports.wire.mtu", "out of range 68..65505"},
      {wire("device = \"w\"\nmtu = \"9000B\""), "ports.wire.mtu", "expected an integer"},
      {wire("device = \"w\"\nmtu = 9000"), "ports.host.mtu", "1500 differs from ports.wire.mtu 9000"},
      // One device on both sides: refused by the loader (exit 2, and --check), not at start (exit 1, restarted).
      {wire("device = \"h,size=64\""), "ports.host.device", "\"h\" is ports.wire.device too"},
      // [lcores]
      {kPorts, "lcores", "missing"},
      {lcores("main = 0"), "lcores.data", "missing"},
      {lcores("data = []"), "lcores.data", "at least one"},
      {lcores("data = 1"), "lcores.data", "expected an array"},
      {lcores("data = [1, 2, 1]"), "lcores.data[2]", "lcore 1 listed twice"},
      {lcores("data = [128]"), "lcores.data[0]", "128 is out of range 0..127"},
      {lcores("data = [-1]"), "lcores.data[0]", "out of range"},
      {lcores("data = [\"1\"]"), "lcores.data[0]", "expected an integer"},
      {lcores("data = [1.0]"), "lcores.data[0]", "expected an integer, got float 1"},
      {lcores("main = -1\ndata = [1]"), "lcores.main", "-1 is out of range 0..127"},
      {lcores("data = [1]\nworkers = 2"), "lcores.workers", "unknown key"},
      {lcores("data = [1]\nmode = \"pipelined\""), "lcores.mode", "\"pipelined\" needs 2 or more data lcores"},
      {lcores("data = [1, 2]\nmode = \"hybrid\""), "lcores.mode",
       "\"hybrid\" needs 3 or more data lcores (lcores.data lists 2)"},
      {lcores("data = [1, 2]\nmode = \"by-direction\""), "lcores.mode",
       "\"by-direction\" is not a mode (auto, pipelined, hybrid)"},
      {lcores("data = [1, 2]\nmode = 2"), "lcores.mode", "expected a string"},
      // [shaper]
      {d("[shaper.wire]\nburst = \"64KiB\""), "shaper.wire.burst", "given without rate"},
      // Floors (served first) that reach the shaper's rate starve class 0.
      {d("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\n[classes.6]\nfloor = \"600Mbit/s\"\n"
         "[classes.7]\nfloor = \"400Mbit/s\""),
       "shaper.wire.rate", "class floors add up to 1Gbit/s"},
      // ... past 64 bits in bit/s: said as it is, not wrapped.
      {d("[shaper.wire]\nrate = \"1Tbit/s\"\nburst = \"64KiB\"\n[classes.6]\nfloor = \"10000000000000000000bit/s\"\n"
         "[classes.7]\nfloor = \"10000000000000000000bit/s\""),
       "shaper.wire.rate", "class floors add up to 20000000000000000000 bit/s"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\n[classes.7.host]\nfloor = \"2Gbit/s\""),
       "shaper.host.rate", "class 0, network control"},
      {d("[shaper.wire]\nrate = \"1Gbit/s\""), "shaper.wire.burst", "missing"},
      {d("[shaper.wire]\nrate = \"1Gbps/s\"\nburst = \"64KiB\""), "shaper.wire.rate",
       "\"1Gbps/s\" is not a rate (expected e.g. \"9.5Gbit/s\")"},
      {d("[shaper.wire]\nrate = 1000000000\nburst = \"64KiB\""), "shaper.wire.rate",
       "expected a string with a unit like \"9.5Gbit/s\", got integer 1000000000"},
      {d("[shaper.wire]\nrate = \"0bit/s\"\nburst = \"64KiB\""), "shaper.wire.rate", "at least 8bit/s"},
      {d("[shaper.wire]\nrate = \"1.5kbit/s\"\nburst = \"64KiB\""), "shaper.wire.rate",
       "1500bit/s is not a whole number of bytes per second, the unit rates run in: give \"1496bit/s\" or "
       "\"1504bit/s\""},
      {d("[classes.3]\ncap = \"1Mbit/s\"\nfloor = \"1000007bit/s\""), "classes.3.floor", "not a whole number of bytes"},
      {d("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"63B\""), "shaper.wire.burst",
       "63 bytes is out of range 64B..512MiB"},
      {d("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"1GiB\""), "shaper.wire.burst", "out of range"},
      {d("[shaper.wire]\nrate = \"1Gbit/s\"\nburst = \"64Kib\""), "shaper.wire.burst", "unknown unit"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\noverhead = \"65B\""), "shaper.host.overhead",
       "65 bytes is more than 64B"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"65537B\""), "shaper.host.headroom",
       "65537 bytes is more than 64KiB"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"101%\""), "shaper.host.headroom",
       "at most 100%"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"25\""), "shaper.host.headroom",
       "missing unit"},
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\noverhead = 24"), "shaper.host.overhead",
       "expected a string with a unit"},
      {d("[shaper.wire]\nrat = \"1Gbit/s\"\nburst = \"64KiB\""), "shaper.wire.rat", "did you mean \"rate\"?"},
      {d("[shaper.mgmt]\nrate = \"1Gbit/s\"\nburst = \"64KiB\""), "shaper.mgmt", "unknown key"},
      {d("[shaper]\nwire = \"1Gbit/s\""), "shaper.wire", "expected a table"},
      // [classes]
      {d("[classes]\ncount = 1"), "classes.count", "1 is out of range 2..64"},
      {d("[classes]\ncount = 65"), "classes.count", "out of range 2..64"},
      {d("[classes]\ncount = \"8\""), "classes.count", "expected an integer"},
      {d("[classes]\ncount = true"), "classes.count", "got boolean true"},
      {d("[classes]\ndefault = 0"), "classes.default", "0 is out of range 1..7"},
      {d("[classes]\ndefault = 8"), "classes.default", "out of range 1..7"},
      {d("[classes]\ncount = 4\ndefault = 4"), "classes.default", "out of range 1..3"},
      {d("[classes]\ndepth = 0"), "classes.depth", "out of range 1..65536"},
      {d("[classes]\ndepth = 65537"), "classes.depth", "out of range"},
      {d("[classes]\necn_threshold = 1024"), "classes.ecn_threshold", "ecn_threshold 1024 must be below depth 1024"},
      {d("[classes]\necn_treshold = 10"), "classes.ecn_treshold", "did you mean \"ecn_threshold\"?"},
      {d("[classes.8]\ndepth = 10"), "classes.8", "no such class: count = 8, so classes are 0..7"},
      {d("[classes]\ncount = 4\n[classes.4]\ndepth = 10"), "classes.4", "classes are 0..3"},
      {d("[classes.foo]\ndepth = 10"), "classes.foo", "unknown key"},
      {d("[classes.03]\ndepth = 10"), "classes.03", "unknown key"},
      {d("[classes.-1]\ndepth = 10"), "classes.-1", "unknown key"},
      {d("[classes]\n3 = 5"), "classes.3", "expected a table of class settings"},
      {d("[classes.3]\ndeph = 10"), "classes.3.deph", "did you mean \"depth\"?"},
      {d("[classes.3]\ndepth = 0"), "classes.3.depth", "out of range 1..65536"},
      {d("[classes.3]\ncap_burst = \"64KiB\""), "classes.3.cap_burst", "given without cap"},
      {d("[classes.3]\nfloor_burst = \"64KiB\""), "classes.3.floor_burst", "given without floor"},
      {d("[classes.3]\ncap = \"1GB\""), "classes.3.cap", "is not a rate"},
      {d("[classes.3]\ncap = \"10Mbit/s\"\nfloor = \"20Mbit/s\""), "classes.3.floor",
       "floor 20Mbit/s is above cap 10Mbit/s"},
      {d("[classes.3]\nfloor = \"20Mbit/s\"\nfloor_burst = \"8B\""), "classes.3.floor_burst", "out of range"},
      {d("[classes.3]\ndscp = 64"), "classes.3.dscp", "64 is out of range 0..63"},
      {d("[classes.3]\ndscp = -1"), "classes.3.dscp", "out of range 0..63"},
      {d("[classes.3]\ndepth = 256\necn_threshold = 300"), "classes.3.ecn_threshold",
       "ecn_threshold 300 must be below depth 256"},
      {d("[classes]\necn_threshold = 100\n[classes.3]\ndepth = 50"), "classes.3.depth",
       "ecn_threshold 100 must be below depth 50"},
      // [classes.N.<port>]
      {d("[classes.3]\nwire = 5"), "classes.3.wire", "expected a table"},
      {d("[classes.3.mgmt]\ncap = \"1Mbit/s\""), "classes.3.mgmt", "unknown key"},
      {d("[classes.3.wire]\ndepth = 5"), "classes.3.wire.depth", "unknown key"},
      {d("[classes.3.wire]\necn_threshold = 2000"), "classes.3.wire.ecn_threshold",
       "ecn_threshold 2000 must be below depth 1024"},
      {d("[classes.3]\ncap = \"10Mbit/s\"\n[classes.3.host]\nfloor = \"20Mbit/s\""), "classes.3.host.floor",
       "floor 20Mbit/s is above cap 10Mbit/s"},
      {d("[classes.3]\nfloor = \"20Mbit/s\"\n[classes.3.wire]\ncap = \"10Mbit/s\""), "classes.3.wire.cap",
       "floor 20Mbit/s is above cap 10Mbit/s"},
      {d("[classes.3.wire]\ncap_burst = \"64KiB\""), "classes.3.wire.cap_burst", "given without cap"},
      {d("[classes.3.host]\ndscp = 64"), "classes.3.host.dscp", "out of range 0..63"},
      // [[jobs]]
      {d("jobs = 5"), "jobs", "expected an array of tables"},
      {d("jobs = [1]"), "jobs[0]", "expected a table, got integer 1"},
      {d("[[jobs]]\nmatch = [\"proto=tcp\"]"), "jobs[0].id", "missing"},
      {d("[[jobs]]\nid = 0\nmatch = [\"proto=tcp\"]"), "jobs[0].id", "0 is out of range 1..4294967295"},
      {d("[[jobs]]\nid = 4294967296\nmatch = [\"proto=tcp\"]"), "jobs[0].id", "out of range"},
      {d("[[jobs]]\nid = \"1\"\nmatch = [\"proto=tcp\"]"), "jobs[0].id", "expected an integer"},
      {d(job + job), "jobs[1].id", "id 1 is already used by jobs[0]"},
      {d(job + "name = \"\""), "jobs[0].name", "must be 1..64 bytes"},
      {d(job + "name = \"" + std::string(65, 'x') + "\""), "jobs[0].name", "1..64"},
      {d(job + "name = 7"), "jobs[0].name", "expected a string"},
      {d(job + "name = \"a\\u0007b\""), "jobs[0].name", "control character"},
      {d(job + "rank = -1"), "jobs[0].rank", "-1 is out of range 0..4294967295"},
      {d(job + "rank = 1.5"), "jobs[0].rank", "expected an integer, got float 1.5"},
      {d("[[jobs]]\nid = 1"), "jobs[0].match", "missing"},
      {d("[[jobs]]\nid = 1\nmatch = []"), "jobs[0].match", "at least one rule"},
      {d("[[jobs]]\nid = 1\nmatch = \"proto=tcp\""), "jobs[0].match", "expected an array"},
      {d("[[jobs]]\nid = 1\nmatch = [\"proto=tcp\", \"src=10.0.0.5/24\"]"), "jobs[0].match[1]",
       "bad match rule \"src=10.0.0.5/24\": src: \"10.0.0.5/24\" is not an IP prefix: host bits"},
      {d("[[jobs]]\nid = 1\nmatch = [6]"), "jobs[0].match[0]", "expected a rule string"},
      {d(job + "[[jobs]]\nid = 2\nmatch = [\"dport=9-1\"]"), "jobs[1].match[0]", "backwards"},
      {d(job + "police_burst = \"64KiB\""), "jobs[0].police_burst", "given without police"},
      {d(job + "police = \"300Mbit\""), "jobs[0].police", "unknown unit \"Mbit\""},
      {d(job + "prio = 1"), "jobs[0].prio", "unknown key"},
      {d(job + "[[jobs]]\nid = 2\nmatch = [\"proto=udp\"]\n[dataplane]\nmax_jobs = 1"), "dataplane.max_jobs",
       "1 is fewer than the 2 [[jobs]] configured"},
      // [dataplane]
      {d("[dataplane]\nburst = 0"), "dataplane.burst", "0 is out of range 1..64"},
      {d("[dataplane]\nburst = 65"), "dataplane.burst", "out of range 1..64"},
      {d("[dataplane]\nburst = 32.0"), "dataplane.burst", "expected an integer, got float 32"},
      {d("[dataplane]\nring_size = 1000"), "dataplane.ring_size", "1000 is not a power of two"},
      {d("[dataplane]\nring_size = 32"), "dataplane.ring_size", "out of range 64..65536"},
      {d("[dataplane]\nring_size = 131072"), "dataplane.ring_size", "out of range"},
      {d("[dataplane]\nmbufs = 1023"), "dataplane.mbufs", "out of range 1024.."},
      {d("[dataplane]\nmbufs = \"Auto\""), "dataplane.mbufs", "\"Auto\" is not \"auto\" or a number of buffers"},
      {d("[dataplane]\nmbufs = 1.5"), "dataplane.mbufs", "a number of buffers or \"auto\""},
      {d("[dataplane]\nmbufs = 4294967296"), "dataplane.mbufs", "out of range"},
      {d("[dataplane]\nflow_cache = -1"), "dataplane.flow_cache", "out of range"},
      // Start-time limits, refused by the loader so that --check refuses them.
      {d("[dataplane]\nflow_cache = 4"), "dataplane.flow_cache",
       "4 is out of range 8..67108864 (0 turns the cache off)"},
      {d("[dataplane]\nflow_cache = 67108865"), "dataplane.flow_cache", "out of range 8..67108864"},
      {d("[dataplane]\nmbufs = 1073741824"), "dataplane.mbufs", "out of range 1024..1073741823"},
      {d("[dataplane]\nmax_jobs = 0"), "dataplane.max_jobs", "out of range 1..1048576"},
      {d("[dataplane]\nmax_jobs = 1048577"), "dataplane.max_jobs", "out of range"},
      {d("[dataplane]\ndrain_timeout = 500"), "dataplane.drain_timeout",
       "expected a string with a unit like \"500ms\""},
      {d("[dataplane]\ndrain_timeout = \"5 s\""), "dataplane.drain_timeout", "unknown unit"},
      {d("[dataplane]\ndrain_timeout = \"-1s\""), "dataplane.drain_timeout", "negative"},
      {d("[dataplane]\ndrain_timeout = \"3601s\""), "dataplane.drain_timeout", "at most 3600s"},
      {wire("device = \",net_null0\""), "ports.wire.device", "names no device"},
      {wire("device = \" net_null0\""), "ports.wire.device", "holds no spaces"},
      {wire("device = \"net_null0 \""), "ports.wire.device", "holds no spaces"},
      // Not 0, but it would round to 0, which turns headroom off.
      {d("[shaper.host]\nrate = \"1Gbit/s\"\nburst = \"64KiB\"\nheadroom = \"0.04%\""), "shaper.host.headroom",
       "rounds to 0"},
      {d("[dataplane]\ntakeover_hold = \"2s\""), "dataplane.takeover_hold", "at most 1s"},
      // A sleep that saves nothing, or one that overflows any NIC ring.
      {d("[dataplane]\nidle_sleep = \"5us\""), "dataplane.idle_sleep", "10us to 10ms"},
      {d("[dataplane]\nidle_sleep = \"11ms\""), "dataplane.idle_sleep", "10us to 10ms"},
      {d("[dataplane]\nflowcache = 0"), "dataplane.flowcache", "did you mean \"flow_cache\"?"},
      // [stats], [log], [control]
      {d("[stats]\ninterval = \"1\""), "stats.interval", "missing unit"},
      {d("[stats]\ninterval = 1"), "stats.interval", "expected a string with a unit"},
      {d("[stats]\ninterval = \"1ms\""), "stats.interval", "must be \"0s\" (off) or at least 100ms"},
      {d("[stats]\nperiod = \"1s\""), "stats.period", "unknown key"},
      {d("[log]\nlevel = \"verbose\""), "log.level", "\"verbose\" is not a level"},
      {d("[log]\nlevel = \"INFO\""), "log.level", "is not a level"},
      {d("[log]\nlevel = 3"), "log.level", "expected a string"},
      {d("[log]\nlevel = \"a\\nb\""), "log.level", "control character"},
      {d("[control]\nsocket = \"\""), "control.socket", "must not be empty"},
      {d("[control]\nsocket = \"/" + std::string(120, 's') + "\""), "control.socket",
       "longer than a unix socket allows"},
      {d("[control]\nstate = 1"), "control.state", "expected a string"},
      {d("[control]\nstate = \"\""), "control.state", "must not be empty (leave the key out"},
      {d("[control]\nstate = \"/var/lib/psgate/\""), "control.state", "names a directory: it must name a file"},
      {d("[control]\nstate = \"/var/lib/psgate/..\""), "control.state", "names a directory"},
      {d("[control]\nsocket = \"/run/psgate/x\"\nstate = \"/run/psgate/./x\""), "control.state",
       "must not be the control socket's path"},
      {d("[control]\nsockett = \"/x\""), "control.sockett", "did you mean \"socket\"?"},
      {d("[control]\nunread_timeout = \"900ms\""), "control.unread_timeout", "must be 1s..3600s"},
      {d("[control]\nunread_timeout = \"3601s\""), "control.unread_timeout", "must be 1s..3600s"},
      // [metrics]
      {d("[metrics]\nlisten = 9467"), "metrics.listen", "expected a string"},
      {d("[metrics]\nlisten = \"9467\""), "metrics.listen", "expected \"off\", IPv4:port"},
      {d("[metrics]\nlisten = \"localhost:9467\""), "metrics.listen", "\"localhost\" is not an IPv4 address"},
      {d("[metrics]\nlisten = \"127.0.0.1\""), "metrics.listen", "expected \"off\""},
      {d("[metrics]\nlisten = \"127.0.0.1:0\""), "metrics.listen", "port \"0\" is not 1..65535"},
      {d("[metrics]\nlisten = \"127.0.0.1:65536\""), "metrics.listen", "is not 1..65535"},
      {d("[metrics]\nlisten = \"127.0.0.1:\""), "metrics.listen", "is not 1..65535"},
      {d("[metrics]\nlisten = \"::1:9467\""), "metrics.listen", "is not an IPv4 address"},
      {d("[metrics]\nlisten = \"[::g]:9467\""), "metrics.listen", "is not an IPv6 address"},
      {d("[metrics]\nlisten = \"[::1:9467\""), "metrics.listen", "expected \"off\""},
      {d("[metrics]\nport = 9467"), "metrics.port", "unknown key"},
      // [policy]
      {d("[policy]\ninterval = \"1s\""), "policy.name", "missing"},
      {d("[policy]\nname = \"lifo\""), "policy.name", "\"lifo\" is not a policy (static, "},
      {d("[policy]\nname = \"fifo\"\ninterval = \"999us\""), "policy.interval", "at least 1ms"},
      {d("[policy]\nname = \"fifo\"\ninterval = 5"), "policy.interval", "expected a string with a unit"},
      {d("[policy]\nname = \"fifo\"\nrotate_on = \"time\""), "policy.rotate_on", "round-robin only"},
      {d("[policy]\nname = \"round-robin\"\nrotate_on = \"epoch\""), "policy.rotate_on",
       "\"epoch\" is not \"time\" or \"iteration\""},
      {d("[policy]\nname = \"static\"\nrotation = \"time\""), "policy.rotation", "did you mean \"rotate_on\"?"},
      // [cluster]
      {d(cl("name = \"g\"\nprefix = \"/p\"")), "cluster.endpoints", "is required"},
      {d(cl("endpoints = []\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints", "non-empty array"},
      {d(cl("endpoints = [2379]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]", "expected a string"},
      {d(cl("endpoints = [\"http://a:1\", \"http://10.0.0.1\"]\nname = \"g\"\nprefix = \"/p\"")),
       "cluster.endpoints[1]", "no host:port"},
      {d(cl("endpoints = [\"http://h:2379/v3/kv\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]",
       "has a path"},
      {d(cl("endpoints = [\"ftp://h:2379\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]",
       "is not an endpoint URL"},
      {d(cl("endpoints = [\"http://user:pw@127.0.0.1:2379\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]",
       "\"http://...@127.0.0.1:2379\" holds user information"},
      {d(cl("endpoints = [\"http://user:secret@h\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]",
       "\"http://...@h\" holds user information"},
      {d(cl("endpoints = [\"http://h:70000\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.endpoints[0]",
       "no valid port"},
      {d(cl("endpoints = [\"https://h:2379\"]\nname = \"g\"\nprefix = \"/p\"")), "cluster.ca",
       "is required with https"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nca = \"ca.pem\"")), "cluster.ca",
       "no endpoint is https"},
      {d(cl("endpoints = [\"https://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nca = \"a\"\ncert = \"c\"")),
       "cluster.cert", "go together"},
      {d(cl("endpoints = [\"https://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nca = \"a\"\nkey = \"k\"")),
       "cluster.cert", "go together"},
      {d(cl("endpoints = [\"http://h:2379\"]\nprefix = \"/p\"")), "cluster.name", "required"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"")), "cluster.prefix", "required"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"psgate/t\"")), "cluster.prefix",
       "is not a key prefix"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/psgate/t/\"")), "cluster.prefix",
       "is not a key prefix"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/\"")), "cluster.prefix", "is not a key prefix"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nlease_ttl = \"1s\"")), "cluster.lease_ttl",
       "2s..60s"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nlease_ttl = \"61s\"")),
       "cluster.lease_ttl", "2s..60s"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nlease_ttl = \"2500ms\"")),
       "cluster.lease_ttl", "must be whole seconds"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\nleader = true")), "cluster.leader",
       "unknown key"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\ncompact_every = \"500ms\"")),
       "cluster.compact_every", "1s..86400s, or 0s"},
      {d(cl("endpoints = [\"http://h:2379\"]\nname = \"g\"\nprefix = \"/p\"\ncompact_every = \"86401s\"")),
       "cluster.compact_every", "1s..86400s, or 0s"},
      // top level
      {d("[shapers.wire]\nrate = \"1Gbit/s\""), "shapers", "did you mean \"shaper\"?"},
      {d("foo = 1"), "foo", "unknown key"},
      {d("\"odd key\" = 1"), "\"odd key\"", "unknown key"},
  };
}

TEST(ConfigParse, BadValuesNameTheKey) {
  for (const BadCase& c : bad_cases()) {
    SCOPED_TRACE(c.text);
    expect_error(c);
  }
}

TEST(ConfigParse, SyntaxErrorsGiveLineAndColumn) {
  const std::regex one_line_with_position(R"(^t\.toml:[0-9]+:[0-9]+: [^\n]+$)");
  struct Case {
    std::string text;
    int line;
  } cases[] = {
      {"[ports.wire\ndevice = \"a\"\n", 1},
      {"\n\n[log]\nlevel = \"info\nx = 1\n", 4},            // unterminated string
      {"[log]\nlevel = \"info\"\nlevel = \"debug\"\n", 3},  // redefined key
      {"[log]\n[log]\n", 2},                                // redefined table
      {"x = \xff\xfe\n", 1},                                // not UTF-8
      {"a = [1,\n", 1},                                     // toml++ reports the array start at EOF
  };
  for (const auto& c : cases) {
    const auto r = parse_config(c.text, "t.toml");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_TRUE(std::regex_match(r.error(), one_line_with_position)) << r.error();
    EXPECT_EQ(r.error().rfind("t.toml:" + std::to_string(c.line) + ":", 0), 0u)
        << "want line " << c.line << ": " << r.error();
  }
}

TEST(ConfigParse, EmptyDocumentNamesFirstRequiredTable) {
  const auto r = parse_config("", "empty.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "empty.toml: ports: missing (required table)");
}

TEST(ConfigFile, MissingFileSaysWhy) {
  const auto r = load_config_file("/nonexistent-psgate/x.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), "/nonexistent-psgate/x.toml: cannot read config: No such file or directory");
  const auto dir = load_config_file("/");
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.error(), "/: cannot read config: Is a directory");
}

// Opening a FIFO waits for a writer: psgate hung at start, its stop
// signals blocked, until SIGKILL. A FIFO is refused at once.
TEST(ConfigFile, AFifoIsRefusedNotWaitedFor) {
  char tmpl[] = "/tmp/psgate-config-fifo-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/fifo.toml";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const auto r = load_config_file(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error(), path + ": cannot read config: a FIFO with no writer (nothing to read)");
  // A capture net_pcap would open as EAL starts, signals blocked.
  const std::string config =
      "[ports.wire]\ndevice = \"net_pcap0,rx_pcap=" + path + "\"\n[ports.host]\ndevice = \"net_null1\"\n" + kLcores;
  const auto pcap = parse_config(config, "t.toml");
  ASSERT_FALSE(pcap.ok());
  EXPECT_EQ(pcap.error().rfind("t.toml: ports.wire.device: rx_pcap " + path + " is a FIFO", 0), 0u) << pcap.error();
  unlink(path.c_str());
  // A pipe that has something to read (--config <(envsubst < t.toml)) is read.
  int ends[2];
  ASSERT_EQ(pipe(ends), 0);
  const std::string text = doc("");
  ASSERT_EQ(write(ends[1], text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(ends[1]);
  const auto piped = load_config_file("/proc/self/fd/" + std::to_string(ends[0]));
  close(ends[0]);
  EXPECT_TRUE(piped.ok()) << piped.error();
  rmdir(tmpl);
}

// toml++ recursed once per part of a dotted key or table name: 50,000
// parts overflowed the stack, and a reload of such a file killed the
// gateway (SIGSEGV). Inline tables 200 deep, each keyed 200 parts deep,
// build a tree 40,000 deep that the walks over it recurse through. Refused
// before parsing, with the line.
TEST(ConfigParse, KeysOfThousandsOfDottedPartsAreRefused) {
  std::string parts = "a";
  for (int i = 1; i < 50000; ++i) parts += ".a";
  std::string key200 = "k";
  for (int i = 1; i < 200; ++i) key200 += ".k";
  std::string nested = "x = ";
  for (int i = 0; i < 200; ++i) nested += "{" + key200 + " = ";
  nested += "1" + std::string(200, '}') + "\n";
  for (const std::string& text :
       {"[" + parts + "]\n", "\n" + parts + " = 1\n", "x = { " + parts + " = 1 }\n", "[[" + parts + "]]\n",
        "\"q\" . " + parts + " = 1\n", nested, "x = " + std::string(300, '[') + std::string(300, ']') + "\n"}) {
    const auto r = parse_config(text, "t.toml");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.error().find("nested 256 or more levels deep"), std::string::npos) << r.error().substr(0, 200);
  }
  // What a config holds is far from it: a long one-line array of floats,
  // inline tables a few deep.
  std::string floats = "[";
  for (int i = 0; i < 2000; ++i) floats += "1.5, ";
  EXPECT_EQ(line_of_overlong_key("x = " + floats + "2.5]\ny = { a.b = { c.d = [1.0, [2.0]] } }\n[p.q]\nr.s = 1\n"), 0u);
  const auto at = parse_config("# x\n\n[" + parts + "]\n", "t.toml");
  ASSERT_FALSE(at.ok());
  EXPECT_EQ(at.error().rfind("t.toml:3: ", 0), 0u) << at.error();
  // Dots in comments, strings (every kind, escapes and line ends in them)
  // and values are no key's parts.
  const std::string dots(1000, '.');
  for (const std::string& extra :
       {"# " + dots, "[log]\nlevel = \"" + dots + "\"", "[log]\nlevel = '" + dots + "'",
        "[log]\nlevel = \"\"\"\n" + dots + "\\\"\"\"\n" + dots + "\"\"\"",
        "[log]\nlevel = \'\'\'\n" + dots + "\n\'\'\'", "[log]\nlevel = \"\\\"" + dots + "\""}) {
    const auto r = parse_config(doc(extra), "t.toml");
    EXPECT_TRUE(r.ok() || r.error().find("dotted parts") == std::string::npos) << extra << ": " << r.error();
    EXPECT_FALSE(r.ok() && extra[0] != '#') << "a level of dots was taken: " << extra;
  }
  EXPECT_TRUE(parse_config(doc("# " + dots), "t.toml").ok());
}

// The state file and the control socket are compared as files: a relative
// path is the working directory's.
TEST(ConfigParse, StateAndSocketAreComparedAsFiles) {
  const std::string cwd = std::filesystem::current_path().string();
  if (cwd.size() > 90) GTEST_SKIP() << "working directory too long for a socket path";
  const auto r = parse_config(doc("[control]\nsocket = \"" + cwd + "/same.sock\"\nstate = \"same.sock\""), "t.toml");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find("control.state: must not be the control socket's path"), std::string::npos) << r.error();
  EXPECT_TRUE(parse_config(doc("[control]\nsocket = \"" + cwd + "/a.sock\"\nstate = \"b.json\""), "t.toml").ok());
}

TEST(ConfigFile, LoadsAndUsesThePathInErrors) {
  char tmpl[] = "/tmp/psgate-config-test-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  { std::ofstream(path) << kFull; }
  const auto good = load_config_file(path);
  EXPECT_TRUE(good.ok()) << good.error();
  if (good.ok()) {
    EXPECT_EQ(good->source, path);
  }
  { std::ofstream(path) << doc("[log]\nlevel = \"loud\""); }
  const auto bad = load_config_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().rfind(path + ": log.level: ", 0), 0u) << bad.error();
  unlink(path.c_str());
}

TEST(ConfigFile, DemoConfigParses) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";
  const std::string path = std::string(root) + "/config/demo.toml";
  if (access(path.c_str(), F_OK) != 0) GTEST_SKIP() << path << " does not exist yet";
  const auto r = load_config_file(path);
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->classes.size(), r->class_count);
  EXPECT_FALSE(r->data_lcores.empty());
}

// The configurations the Debian package installs in /etc/psgate: the one the
// service runs (null devices, one data lcore sharing CPU 0, metrics on, the
// state file where the unit's StateDirectory is) and the real-NIC example.
TEST(ConfigFile, ShippedConfigsParse) {
  const char* root = std::getenv("PSGATE_SOURCE_ROOT");
  if (root == nullptr) GTEST_SKIP() << "PSGATE_SOURCE_ROOT not set (run through meson test)";
  const auto service = load_config_file(std::string(root) + "/config/psgate.toml");
  ASSERT_TRUE(service.ok()) << service.error();
  EXPECT_EQ(service->wire.device.rfind("net_null", 0), 0u);
  EXPECT_EQ(service->data_lcores, std::vector<unsigned>{0});  // runs on a one-CPU machine too
  EXPECT_EQ(service->control.socket, "/run/psgate/psgate.sock");
  EXPECT_EQ(service->control.state, "/var/lib/psgate/state.json");
  EXPECT_EQ(service->metrics.listen, "127.0.0.1:9467");
  const auto nic = load_config_file(std::string(root) + "/config/nic-example.toml");
  ASSERT_TRUE(nic.ok()) << nic.error();
  EXPECT_EQ(nic->wire.mtu, 9000u);
  EXPECT_EQ(nic->control.socket, service->control.socket);
}

TEST(ConfigClassForRank, Table) {
  auto spec = [](unsigned count, unsigned def) {
    ConfigSpec c;
    c.class_count = count;
    c.default_class = def;
    return c;
  };
  struct Case {
    unsigned count, def;
    uint32_t rank;
    unsigned want;
  } cases[] = {
      // count 8, default 7: job classes 1..6.
      {8, 7, 0, 1},
      {8, 7, 1, 2},
      {8, 7, 5, 6},
      {8, 7, 6, 6},
      {8, 7, 4000000000u, 6},
      // default in the middle is skipped: job classes 1, 2, 4, 5, 6, 7.
      {8, 3, 0, 1},
      {8, 3, 1, 2},
      {8, 3, 2, 4},
      {8, 3, 3, 5},
      {8, 3, 5, 7},
      {8, 3, 9, 7},
      // default first: job classes 2..7.
      {8, 1, 0, 2},
      {8, 1, 5, 7},
      {8, 1, 6, 7},
      // count 2: no job class left, everything shares the default.
      {2, 1, 0, 1},
      {2, 1, 7, 1},
      // count 3: one job class.
      {3, 2, 0, 1},
      {3, 2, 1, 1},
      {3, 1, 0, 2},
      {3, 1, 99, 2},
      {64, 63, 0, 1},
      {64, 63, 61, 62},
      {64, 63, 62, 62},
      {64, 10, 9, 11},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(class_for_rank(spec(c.count, c.def), c.rank), c.want)
        << "count " << c.count << " default " << c.def << " rank " << c.rank;
  }
}

// Reference: walk the classes in order, skipping 0 and the default.
TEST(ConfigClassForRank, MatchesReferenceForAllValidSpecs) {
  for (unsigned count = 2; count <= 64; ++count) {
    for (unsigned def = 1; def < count; ++def) {
      ConfigSpec c;
      c.class_count = count;
      c.default_class = def;
      std::vector<unsigned> job_classes;
      for (unsigned k = 1; k < count; ++k) {
        if (k != def) job_classes.push_back(k);
      }
      for (uint32_t rank = 0; rank < 70; ++rank) {
        const unsigned want = job_classes.empty() ? def : job_classes[std::min<size_t>(rank, job_classes.size() - 1)];
        ASSERT_EQ(class_for_rank(c, rank), want) << count << "/" << def << "/" << rank;
        ASSERT_NE(class_for_rank(c, rank), 0u);
      }
    }
  }
}

TEST(ConfigMetrics, OffByDefaultAndAddressesParse) {
  auto r = parse_config(doc(""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->metrics.on());
  EXPECT_EQ(r->metrics.listen, "off");

  r = parse_config(doc("[metrics]\nlisten = \"127.0.0.1:9467\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_TRUE(r->metrics.on());
  EXPECT_EQ(r->metrics.host, "127.0.0.1");
  EXPECT_EQ(r->metrics.port, 9467);

  r = parse_config(doc("[metrics]\nlisten = \"[::1]:1\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(r->metrics.host, "::1");
  EXPECT_EQ(r->metrics.port, 1);

  r = parse_config(doc("[metrics]\nlisten = \"off\""), "t.toml");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->metrics.on());
}

}  // namespace
}  // namespace psgate
