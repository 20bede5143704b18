// SPDX-License-Identifier: BSD-3-Clause
// Profile parsing: good profiles produce the expected jobs, bad ones one line
// naming the key.
#include <gtest/gtest.h>

#include "profile.h"

namespace psgate::gen {
namespace {

Result<Profile> parse(const std::string& text, const std::vector<std::string>& sets = {}) {
  toml::table overrides;
  for (const auto& s : sets) EXPECT_TRUE(add_override(overrides, s).ok()) << s;
  return parse_profile_text(text, overrides, "p.toml");
}

TEST(Profile, DefaultsWithoutJobs) {
  auto p = parse("");
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->jobs.size(), 1u);
  const JobProfile& j = p->jobs[0];
  EXPECT_EQ(j.id, 1u);
  EXPECT_EQ(j.name, "job-1");
  EXPECT_EQ(format_addr(j.ps_addr), "10.0.0.5");
  EXPECT_EQ(j.ps_port, 2222);
  EXPECT_EQ(j.workers, 2u);
  EXPECT_EQ(j.flows, 2u);
  EXPECT_EQ(format_addr(j.worker_addr), "10.1.0.1");
  EXPECT_EQ(j.dirs, 3u);
  EXPECT_EQ(j.rate_mode, RateMode::kMax);
  EXPECT_EQ(j.size_model, SizeModel::kFixed);
  EXPECT_EQ(j.size, 64u);
  EXPECT_EQ(p->duration_ns, 0u);
  EXPECT_EQ(p->tx_burst, 32u);
  EXPECT_EQ(p->host_port, "0");
  EXPECT_EQ(p->wire_port, "1");
}

TEST(Profile, FullJob) {
  auto p = parse(R"(
[generator]
duration = "5s"
drain = "200ms"
interval = "0s"
burst = 16
tx_retries = 2
mbufs = 8191
host_port = "net_memif0"
wire_port = 3

[[jobs]]
id = 7
name = "bert"
ps = "[fd00::5]:3000"
workers = 4
worker_addr = "fd01::100"
worker_port = 50000
flows = 1000
proto = "tcp"
size = "1518B"
direction = "pull"
rate = "2.5Gbit/s"
pacer_depth = "1ms"

[[jobs]]
id = 9
ps = "10.0.0.9:2222"
size = "imix"
rate = "1.5Mpps"
pattern = "iteration"
push = "64KiB"
pull = "1MB"
gap = "5ms"
)");
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->duration_ns, 5'000'000'000u);
  EXPECT_EQ(p->drain_ns, 200'000'000u);
  EXPECT_EQ(p->interval_ns, 0u);
  EXPECT_EQ(p->tx_burst, 16u);
  EXPECT_EQ(p->tx_retries, 2u);
  EXPECT_EQ(p->mbufs, 8191u);
  EXPECT_EQ(p->host_port, "net_memif0");
  EXPECT_EQ(p->wire_port, "3");
  ASSERT_EQ(p->jobs.size(), 2u);
  const JobProfile& a = p->jobs[0];
  EXPECT_EQ(a.id, 7u);
  EXPECT_EQ(a.name, "bert");
  EXPECT_TRUE(a.ps_addr.v6);
  EXPECT_EQ(format_addr(a.ps_addr), "fd00::5");
  EXPECT_EQ(a.ps_port, 3000);
  EXPECT_EQ(format_addr(a.worker_addr), "fd01::100");
  EXPECT_EQ(a.worker_port, 50000);
  EXPECT_EQ(a.flows, 1000u);
  EXPECT_EQ(a.proto, Proto::kTcp);
  EXPECT_EQ(a.size, 1518u);
  EXPECT_EQ(a.dirs, 1u << kPull);
  EXPECT_EQ(a.rate_mode, RateMode::kBps);
  EXPECT_EQ(a.rate, 2'500'000'000u);
  EXPECT_EQ(a.pacer_depth_ns, 1'000'000u);
  const JobProfile& b = p->jobs[1];
  EXPECT_EQ(b.size_model, SizeModel::kImix);
  EXPECT_EQ(b.rate_mode, RateMode::kPps);
  EXPECT_EQ(b.rate, 1'500'000u);
  EXPECT_EQ(b.pattern, Pattern::kIteration);
  EXPECT_EQ(b.push_bytes, 65536u);
  EXPECT_EQ(b.pull_bytes, 1'000'000u);
  EXPECT_EQ(b.gap_ns, 5'000'000u);
}

TEST(Profile, CountExpandsJobs) {
  auto p = parse("[[jobs]]\nid = 10\nname = \"w\"\ncount = 3\nps = \"10.0.0.5:2300\"\n");
  ASSERT_TRUE(p.ok()) << p.error();
  ASSERT_EQ(p->jobs.size(), 3u);
  for (unsigned k = 0; k < 3; ++k) {
    EXPECT_EQ(p->jobs[k].id, 10 + k);
    EXPECT_EQ(p->jobs[k].ps_port, 2300 + k);
    EXPECT_EQ(p->jobs[k].name, "w-" + std::to_string(k));
  }
}

TEST(Profile, OverridesApplyToEveryJob) {
  auto p = parse("[[jobs]]\nid = 1\nrate = \"1kpps\"\n[[jobs]]\nid = 2\nps = \"10.0.0.6:2222\"\n",
                 {"rate=5kpps", "workers=3", "size=imix", "direction=push"});
  ASSERT_TRUE(p.ok()) << p.error();
  for (const JobProfile& j : p->jobs) {
    EXPECT_EQ(j.rate_mode, RateMode::kPps);
    EXPECT_EQ(j.rate, 5000u);
    EXPECT_EQ(j.workers, 3u);
    EXPECT_EQ(j.flows, 3u);
    EXPECT_EQ(j.size_model, SizeModel::kImix);
    EXPECT_EQ(j.dirs, 1u << kPush);
  }
  // Without a profile the overrides are the job.
  auto q = parse("", {"count=4", "flows=100"});
  ASSERT_TRUE(q.ok()) << q.error();
  ASSERT_EQ(q->jobs.size(), 4u);
  EXPECT_EQ(q->jobs[3].ps_port, 2225);
  EXPECT_EQ(q->jobs[3].flows, 100u);
}

// --jobs N is --set count=N. With one [[jobs]] entry (or none) it makes N
// copies; with several it would give every entry N copies starting at the
// same id and port: refused, naming the flag, as are id and ps.
TEST(Profile, JobIdentityOverridesNeedASingleEntry) {
  auto one = parse("[[jobs]]\nid = 5\nps = \"10.0.0.5:3000\"\n", {"count=3"});
  ASSERT_TRUE(one.ok()) << one.error();
  ASSERT_EQ(one->jobs.size(), 3u);
  EXPECT_EQ(one->jobs[2].id, 7u);
  EXPECT_EQ(one->jobs[2].ps_port, 3002);
  const std::string two = "[[jobs]]\nid = 1\n[[jobs]]\nid = 2\nps = \"10.0.0.6:2222\"\n";
  for (const char* set : {"count=2", "id=9", "ps=10.0.0.9:2000"}) {
    auto p = parse(two, {set});
    ASSERT_FALSE(p.ok()) << set;
    const std::string key = std::string(set).substr(0, std::string(set).find('='));
    EXPECT_EQ(p.error().rfind("p.toml: " + key + ": cannot be set from the command line", 0), 0u) << p.error();
    EXPECT_NE(p.error().find("2 [[jobs]] entries"), std::string::npos) << p.error();
    EXPECT_EQ(p.error().find("--jobs") != std::string::npos, key == "count") << p.error();
  }
  // Keys that do not identify a job still apply to every entry (see above).
  EXPECT_TRUE(parse(two, {"workers=3"}).ok());
}

TEST(Profile, AddOverrideTypes) {
  toml::table t;
  ASSERT_TRUE(add_override(t, "workers=4").ok());
  ASSERT_TRUE(add_override(t, "rate=10kpps").ok());
  ASSERT_TRUE(add_override(t, "name=\"x y\"").ok());
  EXPECT_TRUE(t.get("workers")->is_integer());
  EXPECT_EQ(t.get("rate")->as_string()->get(), "10kpps");
  EXPECT_EQ(t.get("name")->as_string()->get(), "x y");
  EXPECT_FALSE(add_override(t, "novalue").ok());
  EXPECT_FALSE(add_override(t, "=3").ok());
  // As a profile's strings: no control characters, escaped or raw (an
  // escape sequence or a newline in a name printed into the table).
  for (const char* bad : {R"(name="evil\u001b[31mRED")", "name=\"a\\nb\"", "name=a\nb", "na\x01me=x"}) {
    toml::table u;
    auto r = add_override(u, bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().find("control character"), std::string::npos) << r.error();
    EXPECT_TRUE(u.empty()) << bad;
  }
  EXPECT_TRUE(add_override(t, "name=\"a\\tb\"").ok()) << "tab is allowed, as in a file";
}

// An error in a value the command line gave names the option typed: a
// shortcut's said "--set rate", and a key's error named the profile's key
// ("p.toml: jobs[0].rate") for a value the file does not hold.
TEST(Profile, AnOverridesErrorNamesTheOptionTyped) {
  toml::table unused;
  auto shortcut = add_override(unused, "rate=a\x1b", "--rate");
  ASSERT_FALSE(shortcut.ok());
  EXPECT_EQ(shortcut.error().rfind("--rate: holds a control character", 0), 0u) << shortcut.error();
  auto set = add_override(unused, "rate=a\x1b");
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.error().rfind("--set rate: holds a control character", 0), 0u) << set.error();

  const OverrideOptions options{{"rate", "--rate"}, {"size", "--size"}, {"workers", "--set workers"}};
  auto overrides = [](const std::vector<std::string>& sets) {
    toml::table t;
    for (const std::string& s : sets) EXPECT_TRUE(add_override(t, s).ok()) << s;
    return t;
  };
  struct Case {
    const char* profile;  // "": none
    std::vector<std::string> sets;
    const char* error;  // prefix
  };
  const Case cases[] = {
      // No [[jobs]]: the job is the command line's.
      {"", {"rate=1.5pps"}, "--rate: \"1.5pps\" is not a whole number of packets per second"},
      {"", {"workers=0"}, "--set workers: 0 is out of range 1.."},
      // The profile's entry it failed in: 64 B holds IPv4/UDP's headers, not IPv6's.
      {"[[jobs]]\nid = 1\n[[jobs]]\nid = 2\nps = \"[fd00::5]:2222\"\n",
       {"size=64B"},
       "--size (for jobs[1] of p.toml): 64 bytes is outside 82..1518"},
      // A key the command line did not set is the profile's.
      {"[[jobs]]\nworkers = 3\nflows = 2\n", {"rate=1kpps"}, "p.toml: jobs[0].flows: 2 is fewer than the 3 workers"},
  };
  for (const Case& c : cases) {
    auto p = parse_profile_text(c.profile, overrides(c.sets), *c.profile ? "p.toml" : "command line", options);
    ASSERT_FALSE(p.ok()) << c.error;
    EXPECT_EQ(p.error().rfind(c.error, 0), 0u) << p.error();
  }
}

TEST(Profile, SizeAndRateErrorsSayWhatIsWrong) {
  auto negative = parse({}, {"size=-64"});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.error().find("-64 is not a size (negative)"), std::string::npos) << negative.error();
  auto huge = parse_pps("99999999999999999999pps");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.error().find("is too large"), std::string::npos) << huge.error();
}

TEST(Profile, PpsAndEndpoints) {
  struct Case {
    const char* text;
    uint64_t pps;  // 0: error
  } cases[] = {{"100pps", 100},          {"10kpps", 10'000}, {"1.5Mpps", 1'500'000},
               {"2Gpps", 2'000'000'000}, {"0.001kpps", 1},   {"pps", 0},
               {"10 kpps", 0},           {"10Kpps", 0},      {"-1pps", 0}};
  for (const Case& c : cases) {
    auto r = parse_pps(c.text);
    EXPECT_EQ(r.ok(), c.pps != 0) << c.text;
    if (r.ok()) {
      EXPECT_EQ(*r, c.pps) << c.text;
    }
  }
  auto v4 = parse_endpoint("192.168.1.2:80");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->first.lo, 0xc0a80102u);
  EXPECT_EQ(v4->second, 80);
  auto v6 = parse_endpoint("[2001:db8::1:2]:443");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->first.hi, 0x20010db800000000ull);
  EXPECT_EQ(v6->first.lo, 0x0000000000010002ull);
  for (const char* bad :
       {"10.0.0.1", "10.0.0.1:0", "10.0.0.1:65536", "fd00::1:80", "[fd00::1]80", "x:1", "1.2.3.4:a"}) {
    EXPECT_FALSE(parse_endpoint(bad).ok()) << bad;
  }
}

// Brackets set an IPv6 address apart from the port (its colons would read
// as the port's); "[10.0.0.1]:5000" was taken as 10.0.0.1 port 5000.
TEST(Profile, BracketsAreForIPv6AddressesOnly) {
  auto bracketed = parse_endpoint("[10.0.0.1]:5000");
  ASSERT_FALSE(bracketed.ok()) << "taken as " << format_addr(bracketed->first);
  EXPECT_NE(bracketed.error().find("brackets are for IPv6 addresses only"), std::string::npos) << bracketed.error();
  EXPECT_NE(bracketed.error().find("10.0.0.1:5000"), std::string::npos) << "the form to give: " << bracketed.error();
  auto p = parse("[[jobs]]\nps = \"[10.0.0.1]:5000\"\n");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().rfind("p.toml: jobs[0].ps: ", 0), 0u) << p.error();
  // An IPv6 address that holds an IPv4 one is IPv6.
  auto mapped = parse_endpoint("[::ffff:10.0.0.1]:5000");
  ASSERT_TRUE(mapped.ok()) << mapped.error();
  EXPECT_TRUE(mapped->first.v6);
}

// Only the profile refused fractions of a packet: parse_pps itself rounded
// ("1.5pps" was 2, "0.0005kpps" 1), so any other caller sent another rate.
TEST(Profile, ParsePpsRefusesAFractionOfAPacket) {
  for (const char* fraction : {"1.5pps", "0.4pps", "0.0005kpps", "1.0005kpps", "2.50pps"}) {
    auto r = parse_pps(fraction);
    ASSERT_FALSE(r.ok()) << fraction << " read as " << *r;
    EXPECT_NE(r.error().find("\"" + std::string(fraction) + "\" is not a whole number of packets per second"),
              std::string::npos)
        << r.error();
  }
  const std::pair<const char*, uint64_t> whole[] = {
      {"1.5kpps", 1500}, {"2.0pps", 2}, {"0.001kpps", 1}, {"1.000001Mpps", 1'000'001}, {"7pps", 7}};
  for (const auto& [text, pps] : whole) {
    auto r = parse_pps(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.error();
    EXPECT_EQ(*r, pps) << text;
  }
}

TEST(Profile, BadProfilesNameTheKey) {
  struct Case {
    const char* text;
    const char* error;  // substring
  } cases[] = {
      {"[generatr]\n", "generatr: unknown key"},
      {"[generator]\nburst = 65\n", "generator.burst: 65 is out of range"},
      {"[generator]\nduration = \"5\"\n", "generator.duration"},
      {"[generator]\nduration = 5\n", "generator.duration: 5 is not a string"},
      {"[generator]\nduration = \"10000000000s\"\n", "generator.duration: at most 100000000s"},
      {"[generator]\nhost_port = -1\n", "generator.host_port"},
      {"jobs = 3\n", "jobs: must be an array"},
      {"[[jobs]]\nrat = \"1kpps\"\n", "jobs[0].rat: unknown key"},
      {"[[jobs]]\nid = 0\n", "jobs[0].id: 0 is out of range 1.."},
      {"[[jobs]]\nrate = \"1kbit\"\n", "jobs[0].rate"},
      {"[[jobs]]\nrate = \"0pps\"\n", "jobs[0].rate: must be above zero"},
      // Fractions of a unit were rounded: 1.5 pps went out as 2, 0.4 pps was "0".
      {"[[jobs]]\nrate = \"1.5pps\"\n", "jobs[0].rate: \"1.5pps\" is not a whole number of packets per second"},
      {"[[jobs]]\nrate = \"0.4pps\"\n", "jobs[0].rate: \"0.4pps\" is not a whole number of packets"},
      {"[[jobs]]\nrate = \"1.0005kpps\"\n", "not a whole number of packets per second"},
      {"[[jobs]]\nrate = \"1000.5bit/s\"\n", "jobs[0].rate: \"1000.5bit/s\" is not a whole number of bits"},
      {"[[jobs]]\nsize = \"64.5B\"\n", "jobs[0].size: \"64.5B\" is not a whole number of bytes"},
      {"[[jobs]]\nsize = \"1.4KiB\"\n", "jobs[0].size: \"1.4KiB\" is not a whole number of bytes"},
      {"[[jobs]]\npattern = \"iteration\"\npull = \"1.5B\"\n", "jobs[0].pull: \"1.5B\" is not a whole number of bytes"},
      // Rounded to 0: a run until SIGINT.
      {"[generator]\nduration = \"0.4ns\"\n", "generator.duration: \"0.4ns\" is not a whole number of nanoseconds"},
      {"[[jobs]]\nrate = \"1kpps\"\npacer_depth = \"1.5ns\"\n", "jobs[0].pacer_depth: \"1.5ns\" is not a whole number"},
      {"[[jobs]]\nsize = \"63B\"\n", "jobs[0].size: 63 bytes is outside 64..1518"},
      {"[[jobs]]\nsize = \"1519B\"\n", "jobs[0].size"},
      {"[[jobs]]\nproto = \"tcp\"\nsize = 64\n", "minimum holds the IPv4/TCP"},
      {"[[jobs]]\nps = \"[fd00::1]:1\"\nsize = 64\n", "outside 82..1518"},
      {"[[jobs]]\nsize = \"jumbo\"\n", "jobs[0].size"},
      {"[[jobs]]\nproto = \"sctp\"\n", "jobs[0].proto"},
      {"[[jobs]]\ndirection = \"up\"\n", "jobs[0].direction"},
      {"[[jobs]]\npattern = \"burst\"\n", "jobs[0].pattern"},
      {"[[jobs]]\npattern = \"iteration\"\ndirection = \"push\"\n", "iteration pattern sends both"},
      {"[[jobs]]\npattern = \"iteration\"\npush = \"0B\"\npull = \"0B\"\n", "both zero"},
      {"[[jobs]]\npush = \"1MB\"\n", "jobs[0].push: only with pattern"},
      {"[[jobs]]\nworkers = 4\nflows = 3\n", "jobs[0].flows: 3 is fewer than the 4 workers"},
      {"[[jobs]]\nflows = 16777217\n", "jobs[0].flows"},
      {"[[jobs]]\nps = \"10.0.0.5\"\n", "jobs[0].ps"},
      {"[[jobs]]\nworker_addr = \"fd00::1\"\n", "same family"},
      {"[[jobs]]\nworker_addr = \"255.255.255.250\"\nworkers = 10\n", "overflow the IPv4 address space"},
      // Worker addresses count up in the low 64 bits: that is what overflows,
      // not "the address space" (fd01::ffff:... has plenty above it).
      {"[[jobs]]\nps = \"[fd00::5]:1\"\nworker_addr = \"fd01::ffff:ffff:ffff:fffe\"\nworkers = 4\n",
       "fd01::ffff:ffff:ffff:fffe + 4 worker addresses overflow the address's low 64 bits"},
      {"[[jobs]]\nworker_port = 0\n", "jobs[0].worker_port"},
      {"[[jobs]]\nps = \"10.0.0.5:65535\"\ncount = 2\n", "jobs[0].count"},
      // Copies of job 4294967295 were numbered from it on, wrapping to 0.
      {"[[jobs]]\nid = 4294967295\ncount = 2\n", "jobs[0].count"},
      {"[[jobs]]\nid = 1\n[[jobs]]\nid = 1\nps = \"10.0.0.6:1\"\n", "job id 1 is used twice"},
      {"[[jobs]]\nid = 1\n[[jobs]]\nid = 2\n", "PS endpoint 10.0.0.5:2222 is used by another job"},
      {"[[jobs]]\nflows = 16777216\ncount = 2\n", "flows x directions in total"},
      {"[[jobs]]\nname = 3\n", "jobs[0].name: 3 is not a string"},
      // psgate's own rule for job names (name_problem): these were taken.
      {"[[jobs]]\nname = \"\"\n", "jobs[0].name: \"\" must be 1..64 bytes"},
      {"[[jobs]]\nname = \"a\u202Eb\"\n", "jobs[0].name: \"a\\u202eb\" must not contain bidirectional"},
      {"[[jobs]]\nname = \"a\u200Bb\"\n", "jobs[0].name: \"a\\u200bb\" must not contain invisible"},
      {"[[jobs]]\nname = \"a\u0085b\"\n", "jobs[0].name: \"a\\u0085b\" must not contain control"},
      {"[[jobs]]\nname = \"a\u2028b\"\n", "must not contain line or paragraph separators"},
      {"[[jobs]]\nname = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\n",
       "must be 1..64 bytes"},
      // 62 bytes, and its copies' "-10" takes them past 64.
      {"[[jobs]]\nname = \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"\ncount = 11\n",
       "x-10\" must be 1..64 bytes (the name of copy 10"},
      // Ticks added to the TSC: past 1e8 s a gap's end wrapped and the gap was skipped.
      {"[[jobs]]\npattern = \"iteration\"\ngap = \"7000000000s\"\n", "jobs[0].gap: at most 100000000s"},
      {"[[jobs]]\nrate = \"1kpps\"\npacer_depth = \"7000000000s\"\n", "jobs[0].pacer_depth: at most 100000000s"},
      // Ignored: "max" has no pacer.
      {"[[jobs]]\npacer_depth = \"1ms\"\n", "jobs[0].pacer_depth: only with a packet or bit rate"},
      {"[[jobs]]\nrate = \"max\"\npacer_depth = \"1ms\"\n", "jobs[0].pacer_depth: only with a packet or bit rate"},
      // 1 TiB x 2^24 workers is 2^64 bytes: the phase wrapped to nothing.
      {"[[jobs]]\npattern = \"iteration\"\npush = \"1024GiB\"\nworkers = 16777216\n", "2^64 bytes or more"},
      {"[[jobs]\n", "p.toml:1"},
  };
  for (const Case& c : cases) {
    auto p = parse(c.text);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_NE(p.error().find(c.error), std::string::npos) << "profile:\n" << c.text << "\nerror: " << p.error();
    EXPECT_EQ(p.error().rfind("p.toml", 0), 0u) << p.error();
  }
}

// A fraction in the text is fine where the unit makes it whole: the rate is
// kept exactly, not rounded.
TEST(Profile, FractionsThatMakeWholeUnitsAreKeptExactly) {
  const std::pair<const char*, uint64_t> rates[] = {{"1.5kpps", 1500},
                                                    {"0.001kpps", 1},
                                                    {"2.50pps", 0},
                                                    {"2.0pps", 2},
                                                    {"1.000001Mpps", 1'000'001},
                                                    {"9.5Gbit/s", 9'500'000'000},
                                                    {"1.5kbps", 1500},
                                                    {"0.5bit/s", 0}};
  for (const auto& [text, rate] : rates) {
    auto p = parse({}, {std::string("rate=") + text});
    ASSERT_EQ(p.ok(), rate != 0) << text << ": " << (p.ok() ? "" : p.error());
    if (p.ok()) {
      EXPECT_EQ(p->jobs[0].rate, rate) << text;
    }
  }
  auto push = parse({}, {"pattern=iteration", "push=1.5KiB", "pull=0.5KB"});
  ASSERT_TRUE(push.ok()) << push.error();
  EXPECT_EQ(push->jobs[0].push_bytes, 1536u);
  EXPECT_EQ(push->jobs[0].pull_bytes, 500u);
  auto times = parse("[generator]\nduration = \"0.5us\"\ndrain = \"1.25s\"\n");
  ASSERT_TRUE(times.ok()) << times.error();
  EXPECT_EQ(times->duration_ns, 500u);
  EXPECT_EQ(times->drain_ns, 1'250'000'000u);
}

// A bare number where a key holds text: `--rate 1000` or `--set ps=2222`
// was told "1000 is not a string", which says nothing of what to give. The
// error names the form, whether it came from --set or from a profile.
TEST(Profile, ANumberWhereTextBelongsNamesTheForm) {
  const std::pair<const char*, const char*> sets[] = {
      {"rate=1000", "jobs[0].rate: 1000 is not \"max\", a packet rate (\"10kpps\") or a bit rate"},
      {"rate=0", "jobs[0].rate: 0 is not \"max\", a packet rate"},
      {"ps=2222", "jobs[0].ps: 2222 is not an endpoint ADDRESS:PORT (\"10.0.0.5:2222\""},
      {"worker_addr=5", "jobs[0].worker_addr: 5 is not an address (\"10.1.0.1\""},
      {"proto=6", "jobs[0].proto: 6 is not udp or tcp"},
      {"direction=1", "jobs[0].direction: 1 is not push, pull or both"},
      {"pattern=2", "jobs[0].pattern: 2 is not constant or iteration"},
  };
  for (const auto& [set, error] : sets) {
    auto p = parse({}, {set});
    ASSERT_FALSE(p.ok()) << set;
    EXPECT_NE(p.error().find(error), std::string::npos) << set << ": " << p.error();
  }
  auto in_profile = parse("[[jobs]]\nrate = 5000\n");
  ASSERT_FALSE(in_profile.ok());
  EXPECT_NE(in_profile.error().find("jobs[0].rate: 5000 is not \"max\", a packet rate"), std::string::npos)
      << in_profile.error();
}

// Not UTF-8: only a --set value can hold such bytes (a profile is read as
// UTF-8), and the name was shown with U+FFFD in the report.
TEST(Profile, ANameThatIsNotUtf8IsRefused) {
  auto p = parse({}, {std::string("name=caf") + '\xe9'});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.error().find("jobs[0].name: "), std::string::npos) << p.error();
  EXPECT_NE(p.error().find("must be valid UTF-8"), std::string::npos) << p.error();
  auto ok = parse({}, {"name=caf\u00e9-\u4f5c\u696d"});
  ASSERT_TRUE(ok.ok()) << ok.error();
}

TEST(Profile, MinFrameSizes) {
  EXPECT_EQ(min_frame_size(false, Proto::kUdp), 64u);
  EXPECT_EQ(min_frame_size(false, Proto::kTcp), 74u);
  EXPECT_EQ(min_frame_size(true, Proto::kUdp), 82u);
  EXPECT_EQ(min_frame_size(true, Proto::kTcp), 94u);
}

// Without a size, a TCP or IPv6 job's frames are the smallest its headers
// allow, and the profile (so the report) says so: it said 64 B while 74 B
// frames went out.
TEST(Profile, TheDefaultSizeIsTheSmallestFrameTheJobsHeadersAllow) {
  auto tcp = parse("[[jobs]]\nproto = \"tcp\"\n");
  ASSERT_TRUE(tcp.ok()) << tcp.error();
  EXPECT_EQ(tcp->jobs[0].size, 74u);
  auto v6 = parse("[[jobs]]\nps = \"[fd00::1]:2222\"\nproto = \"tcp\"\n");
  ASSERT_TRUE(v6.ok()) << v6.error();
  EXPECT_EQ(v6->jobs[0].size, 94u);
  auto udp = parse("[[jobs]]\n");
  ASSERT_TRUE(udp.ok()) << udp.error();
  EXPECT_EQ(udp->jobs[0].size, 64u);
}

}  // namespace
}  // namespace psgate::gen
