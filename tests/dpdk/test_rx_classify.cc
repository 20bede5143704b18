// SPDX-License-Identifier: BSD-3-Clause
// Classification through the real RX stage of what carries no ports. A
// fragmented datagram's later fragments must still go to the job its first
// fragment's ports chose, not to the first rule their addresses and protocol
// match; ICMP, ESP and the like are classified once per hosts and protocol
// and then found in the flow cache. One data lcore driven by run_once on the
// test's thread, so each burst is classified before the next is injected.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "packet_builder.h"
#include "pipeline_harness.h"

namespace psgate::testing {
namespace {

namespace pkt = psgate::pkt;
constexpr unsigned kWire = 0;
constexpr unsigned kHost = 1;

// Two jobs on one PS address, told apart by source port only. Job 1's rule
// comes first, so a port-less later fragment of job 2's datagram matches it
// on addresses and protocol alone.
const std::string kTwoJobs =
    "[lcores]\nmain = 0\ndata = [1]\n[classes]\ncount = 8\ndepth = 256\n"
    "[dataplane]\nmbufs = 8191\nmax_jobs = 8\n[stats]\ninterval = \"0s\"\n"
    "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"src=10.0.0.5/32,sport=5000,proto=udp\", "
    "\"src=fd00::5/128,sport=5000,proto=udp\"]\n"
    "[[jobs]]\nid = 2\nrank = 1\nmatch = [\"src=10.0.0.5/32,sport=6000,proto=udp\", "
    "\"src=fd00::5/128,sport=6000,proto=udp\"]\n";

// A UDP datagram of 2960 payload bytes from the PS's `sport`, cut as a
// 1500-byte MTU cuts it: fragments at offsets 0, 1480 and 2960 bytes.
std::vector<std::vector<uint8_t>> ipv4_datagram(uint16_t sport, uint16_t ident) {
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t k = 0; k < 3; ++k) {
    pkt::PacketSpec s = pkt::from_ps(sport, ident, 1472);
    s.proto = pkt::kUdp;
    s.src4 = {10, 0, 0, 5};
    s.ip_id = ident;
    s.more_fragments = k < 2;
    s.frag_offset = static_cast<uint16_t>(k * 185);
    if (k > 0) s.payload_len = k == 1 ? 1480 : 16;
    frames.push_back(pkt::build_packet(s));
  }
  return frames;
}

// The same authenticated (AH in transport mode, RFC 4302): the IP header
// names AH, and only the first fragment shows the UDP header after it.
std::vector<std::vector<uint8_t>> ipv4_ah_datagram(uint16_t sport, uint16_t ident) {
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t k = 0; k < 2; ++k) {
    pkt::PacketSpec s = pkt::from_ps(sport, ident, 1000);
    s.src4 = {10, 0, 0, 5};
    s.proto = 51;
    s.raw_l4 = true;
    s.more_fragments = k == 0;
    s.frag_offset = static_cast<uint16_t>(k * 125);
    std::vector<uint8_t> f = pkt::build_packet(s);
    if (k == 0) {
      const uint8_t ah_udp[20] = {17,
                                  1,
                                  0,
                                  0,
                                  0,
                                  0,
                                  0,
                                  1,
                                  0,
                                  0,
                                  0,
                                  7,  // next UDP, length (1 + 2) * 4
                                  static_cast<uint8_t>(sport >> 8),
                                  static_cast<uint8_t>(sport),
                                  0x9c,
                                  0x40,
                                  0x03,
                                  0xd0};
      std::copy(std::begin(ah_udp), std::end(ah_udp), f.begin() + 34);
    }
    frames.push_back(f);
  }
  return frames;
}

// The same over IPv6, with a destination options header after the Fragment
// header (RFC 8200 puts it in the fragmentable part): a later fragment's
// Fragment header names that, not UDP, as its next header.
std::vector<std::vector<uint8_t>> ipv6_datagram(uint16_t sport, uint32_t ident) {
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t k = 0; k < 3; ++k) {
    pkt::PacketSpec s = pkt::from_ps(sport, 0, 1400);
    s.proto = pkt::kUdp;
    s.l3 = pkt::L3::kIpv6;
    s.src6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
    s.ext = {{.type = 44, .frag_offset = static_cast<uint16_t>(k * 176), .more_fragments = k < 2, .ident = ident},
             {.type = 60}};
    if (k > 0) {
      s.ext.resize(1);  // the options travel in the first fragment only
      s.ext[0].type = 44;
      s.proto = 60;  // what a later fragment's Fragment header names
      s.payload_len = k == 1 ? 1408 : 24;
    }
    frames.push_back(pkt::build_packet(s));
  }
  return frames;
}

// A frame from the PS host 10.0.0.5 with 100 payload bytes; the ports count
// only for a protocol that has them.
std::vector<uint8_t> host_frame(uint8_t proto, uint16_t ident, uint16_t sport = 0, uint16_t dport = 0) {
  pkt::PacketSpec s = pkt::from_ps(sport, ident, 100);
  s.src4 = {10, 0, 0, 5};
  s.proto = proto;
  if (dport != 0) s.dport = dport;
  return pkt::build_packet(s);
}

class Gateway {
 public:
  Gateway() : h_(kTwoJobs, /*start_lcores=*/false) {}
  bool ok() const { return h_.ok(); }
  const std::string& error() const { return h_.error(); }

  // Each frame its own burst, one pass each, in order.
  void send(const std::vector<std::vector<uint8_t>>& frames) {
    for (const auto& f : frames) {
      rte_mbuf* m = h_.mbuf_of(f);
      ASSERT_NE(m, nullptr);
      ASSERT_EQ(h_.inject(kHost, &m, 1), 1u);
      ASSERT_TRUE(h_.dataplane().run_once());
    }
  }
  // All frames in one burst.
  void send_burst(const std::vector<std::vector<uint8_t>>& frames) {
    std::vector<rte_mbuf*> burst;
    for (const auto& f : frames) {
      burst.push_back(h_.mbuf_of(f));
      ASSERT_NE(burst.back(), nullptr);
    }
    ASSERT_EQ(h_.inject(kHost, burst.data(), static_cast<unsigned>(burst.size())), burst.size());
    ASSERT_TRUE(h_.dataplane().run_once());
  }

  // Pull packets admitted per job id, and the host port's fragment counters.
  std::map<uint32_t, uint64_t> admitted() {
    const nlohmann::json reply = h_.control().handle({{"cmd", "stats"}});
    std::map<uint32_t, uint64_t> out;
    for (const auto& j : reply.at("result").at("jobs"))
      out[j.at("id").get<uint32_t>()] = j.at("pull").at("admitted_packets").get<uint64_t>();
    return out;
  }
  Totals totals() { return h_.dataplane().read_totals(false); }
  nlohmann::json control(const nlohmann::json& request) { return h_.control().handle(request); }
  // A job with one rule, added as psgatectl adds it.
  ::testing::AssertionResult add_job(uint32_t id, uint32_t rank, const std::string& rule) {
    const nlohmann::json reply = control({{"cmd", "jobs.add"}, {"job", id}, {"rank", rank}, {"match", {rule}}});
    if (reply.at("ok").get<bool>()) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << reply.dump();
  }
  FlowCacheTotals flow_cache() { return h_.dataplane().read_totals(false).flow_cache; }
  uint64_t followed() { return h_.dataplane().read_totals(false).ports[kHost].rx_fragments_followed; }
  uint64_t unclassified() { return h_.dataplane().read_totals(false).ports[kHost].rx_unclassified; }
  uint64_t orphaned() { return h_.dataplane().read_totals(false).ports[kHost].rx_fragments_orphaned; }

 private:
  PipelineHarness h_;
};

using Admitted = std::map<uint32_t, uint64_t>;

TEST(Fragments, LaterIpv4FragmentsFollowTheirFirstFragmentsJob) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  g.send(ipv4_datagram(6000, 0x1234));
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 3}})) << "a later fragment went by its addresses alone";
  EXPECT_EQ(g.followed(), 2u);
  EXPECT_EQ(g.orphaned(), 0u);
  // The flow's next datagram: its first fragment is in the flow cache by
  // now, and must still be remembered for the fragments after it.
  g.send(ipv4_datagram(6000, 0x1235));
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 6}}));
  EXPECT_EQ(g.followed(), 4u);
}

TEST(Fragments, LaterIpv6FragmentsFollowEvenWhenTheirNextHeaderIsNotUdp) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  g.send(ipv6_datagram(6000, 0xabcdef01));
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 3}}));
  EXPECT_EQ(g.followed(), 2u);
}

// AH: the datagram is named by the IP header's protocol (51), not by the
// UDP its first fragment carries after AH. (Before, the first fragment was
// remembered under UDP and the rest never found it.)
TEST(Fragments, LaterFragmentsOfAnAuthenticatedDatagramFollowTheirFirst) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  g.send(ipv4_ah_datagram(6000, 0x4242));
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 2}}));
  EXPECT_EQ(g.followed(), 1u);
  EXPECT_EQ(g.orphaned(), 0u);
}

// Link control behind AH (OSPF authenticated, TTL 1): the first fragment is
// network control (class 0), and its later fragment, whose own header says
// only AH, must go with it, not to the job its addresses match (before, it
// was an orphan and job 2 took it).
TEST(Fragments, LaterFragmentsOfANetworkControlDatagramStayNetworkControl) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  auto frames = ipv4_ah_datagram(6000, 0x4343);
  constexpr size_t kIp = 14;              // untagged
  for (auto& f : frames) f[kIp + 8] = 1;  // TTL 1: link-local
  frames[0][34] = 89;                     // AH's next header: OSPF
  g.send(frames);
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 0}})) << "the later fragment went to a job by its addresses";
  EXPECT_EQ(g.followed(), 1u);
  EXPECT_EQ(g.orphaned(), 0u);
  const nlohmann::json stats = g.control({{"cmd", "stats"}});
  EXPECT_EQ(stats.at("result").at("ports").at("host").at("rx_network_control"), 2) << stats.dump();
  // Network control whatever the rules: a rules change between the
  // fragments leaves the datagram's entry current.
  auto next = ipv4_ah_datagram(6000, 0x4344);
  for (auto& f : next) f[kIp + 8] = 1;
  next[0][34] = 89;
  g.send({next[0]});
  const nlohmann::json removed = g.control({{"cmd", "jobs.remove"}, {"job", 1}});
  ASSERT_TRUE(removed.at("ok").get<bool>()) << removed.dump();
  g.send({next[1]});
  EXPECT_EQ(g.followed(), 2u);
  EXPECT_EQ(g.orphaned(), 0u);
  EXPECT_EQ(g.control({{"cmd", "stats"}}).at("result").at("ports").at("host").at("rx_network_control"), 4);
}

// Within one burst, a later fragment that arrives ahead of its first still
// follows it; two datagrams of the same hosts apart by Identification each
// follow their own.
TEST(Fragments, ReorderedFragmentsInOneBurstFollowTheirOwnDatagram) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  const auto a = ipv4_datagram(6000, 1);
  const auto b = ipv4_datagram(5000, 2);
  g.send_burst({a[2], b[1], a[0], a[1], b[0], b[2]});
  EXPECT_EQ(g.admitted(), (Admitted{{1, 3}, {2, 3}}));
  EXPECT_EQ(g.followed(), 4u);
}

// A first fragment too short to hold its UDP header (RFC 1858's tiny
// fragment) is malformed: no job. Its later fragments must go where it went,
// not to the job their addresses alone match first (before, they were
// orphans and job 1 took them).
TEST(Fragments, LaterFragmentsOfATinyFirstFragmentGetNoJob) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  auto frames = ipv4_datagram(6000, 0x77);
  std::vector<uint8_t>& first = frames[0];
  constexpr size_t kIp = 14;  // untagged
  first[kIp + 2] = 0;
  first[kIp + 3] = 24;  // total length: the IP header and 4 bytes of UDP
  first.resize(60);     // Ethernet's minimum, padded past the datagram
  g.send(frames);
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 0}})) << "a later fragment went by its addresses alone";
  EXPECT_EQ(g.followed(), 2u);
  EXPECT_EQ(g.orphaned(), 0u);
  EXPECT_EQ(g.unclassified(), 2u);
}

// A later fragment whose first was never seen is classified on addresses and
// protocol, as before, and counted; so is one of another Identification.
TEST(Fragments, AnOrphanIsClassifiedByAddressesAndCounted) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  const auto a = ipv4_datagram(6000, 7);
  const auto other = ipv4_datagram(6000, 8);
  g.send({a[0], other[1]});
  EXPECT_EQ(g.admitted(), (Admitted{{1, 1}, {2, 1}})) << "job 1's rule comes first on addresses";
  EXPECT_EQ(g.followed(), 0u);
  EXPECT_EQ(g.orphaned(), 1u);
}

// A rules change between a datagram's first and later fragments makes its
// entry stale (the slot it names may hold another job by then): the later
// fragments are classified afresh on their addresses.
TEST(Fragments, ARulesChangeMakesAnEntryStale) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  const auto a = ipv4_datagram(6000, 9);
  g.send({a[0]});
  ASSERT_EQ(g.admitted()[2], 1u);
  const nlohmann::json reply = g.control({{"cmd", "jobs.remove"}, {"job", 2}});
  ASSERT_TRUE(reply.at("ok").get<bool>()) << reply.dump();
  g.send({a[1], a[2]});
  EXPECT_EQ(g.admitted(), (Admitted{{1, 2}}));
  EXPECT_EQ(g.orphaned(), 2u);
}

// Packets of a protocol without ports take the flow cache after their first:
// an IPsec or GRE tunnel between two hosts is one flow, not an ACL lookup per
// packet, and still matches the rules the ACL would match.
TEST(PortlessPackets, AreClassifiedOnceThenFoundInTheFlowCache) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_TRUE(g.add_job(3, 2, "src=10.0.0.5/32,proto=icmp"));
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t i = 0; i < 4; ++i) {
    frames.push_back(host_frame(pkt::kIcmp, i));
    frames.push_back(host_frame(pkt::kEsp, i));
  }
  g.send(frames);
  const FlowCacheTotals fc = g.flow_cache();
  EXPECT_EQ(fc.misses, 2u) << "one lookup per packet went to the ACL";
  EXPECT_EQ(fc.hits, 6u);
  // ICMP is job 3's whether the ACL or the cache answered; no rule takes ESP.
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 0}, {3, 4}}));
  EXPECT_EQ(g.unclassified(), 4u);
}

// A port range that holds 0 asks for ports all the same: `dport=0-1023`
// takes the hosts' UDP to port 80, not their ICMP, which has no ports (it
// did, as ports 0/0, whether the ACL or the flow cache answered).
TEST(PortlessPackets, AreNotTakenByAPortRangeThatHoldsZero) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  ASSERT_TRUE(g.add_job(3, 2, "src=10.0.0.5/32,dport=0-1023"));
  std::vector<std::vector<uint8_t>> frames;
  for (uint16_t i = 0; i < 3; ++i) {
    frames.push_back(host_frame(pkt::kIcmp, i));
    frames.push_back(host_frame(pkt::kUdp, i, 7000, 80));
  }
  g.send(frames);
  EXPECT_EQ(g.admitted(), (Admitted{{1, 0}, {2, 0}, {3, 3}}));
  EXPECT_EQ(g.unclassified(), 3u) << "the ICMP";
}

// A burst the guard takes a runt out of: the packets it kept pass through
// their class's FIFO (a cut-through of one class) counted with their own
// bytes, not the runt's too, which the guard's sum of what was received
// holds (rx_bytes).
TEST(Admission, CountsTheBytesOfWhatTheGuardKept) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  std::vector<std::vector<uint8_t>> frames;
  uint64_t kept = 0;
  for (uint16_t i = 0; i < 3; ++i) {
    pkt::PacketSpec s = pkt::from_ps(5000, i, 100);
    s.src4 = {10, 0, 0, 5};
    frames.push_back(pkt::build_packet(s));
    kept += frames.back().size();
  }
  frames.insert(frames.begin() + 1, std::vector<uint8_t>(13, 0xee));  // a runt
  g.send_burst(frames);
  const Totals t = g.totals();
  EXPECT_EQ(t.ports[kWire].drops[kDropRunt], 1u);
  EXPECT_EQ(t.ports[kHost].rx_bytes, kept + 13) << "received: the runt too";
  uint64_t enqueued = 0, dequeued = 0;
  for (unsigned c = 0; c < t.class_count; ++c) {
    enqueued += t.cls(kWire, c).enqueued_bytes;
    dequeued += t.cls(kWire, c).dequeued_bytes;
  }
  EXPECT_EQ(enqueued, kept);
  EXPECT_EQ(dequeued, kept);
  EXPECT_EQ(t.ports[kWire].tx_bytes, kept);
}

// MAC control (PAUSE, PFC) is the link's business: relayed across the bump
// it would pause the far side's sender for a congestion that is not its own
// (802.3 never relays it; a bridge discards it). Dropped and counted as
// such, in a burst with a policed packet and the rest forwarded: each drop
// under its own reason, the bytes of what was kept counted through the FIFO.
TEST(Admission, MacControlIsDroppedAndCountedNeverRelayed) {
  Gateway g;
  ASSERT_TRUE(g.ok()) << g.error();
  // Job 3 polices to next to nothing: its second packet is over the burst.
  const nlohmann::json added = g.control({{"cmd", "jobs.add"},
                                          {"job", 3},
                                          {"rank", 2},
                                          {"match", {"src=10.0.0.7/32,proto=udp"}},
                                          {"police", "8kbit/s"},
                                          {"police_burst", "1500B"}});
  ASSERT_TRUE(added.at("ok").get<bool>()) << added.dump();
  auto raw = [](uint16_t ethertype, std::vector<pkt::VlanTag> tags) {
    pkt::PacketSpec s;
    s.l3 = pkt::L3::kNone;
    s.ethertype = ethertype;
    s.vlans = std::move(tags);
    s.dst_mac = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
    s.payload_len = 46;
    return pkt::build_packet(s);
  };
  auto policed_job = [](uint16_t id) {
    pkt::PacketSpec s = pkt::from_ps(7000, id, 1000);
    s.proto = pkt::kUdp;
    s.src4 = {10, 0, 0, 7};
    return pkt::build_packet(s);
  };
  const std::vector<uint8_t> job1 = host_frame(pkt::kUdp, 1, 5000);
  const std::vector<uint8_t> pause = raw(0x8808, {});
  const std::vector<uint8_t> pfc_tagged = raw(0x8808, {{pkt::kTpid8021Q, 3}});
  const std::vector<uint8_t> lacp = raw(0x8809, {});
  const std::vector<uint8_t> within = policed_job(1), over = policed_job(2);
  g.send_burst({job1, pause, within, lacp, pfc_tagged, over, job1});
  const Totals t = g.totals();
  EXPECT_EQ(t.ports[kWire].drops[kDropMacControl], 2u);
  EXPECT_EQ(t.ports[kWire].drops[kDropPoliced], 1u);
  EXPECT_EQ(t.ports[kHost].rx_network_control, 1u) << "LACP is link control, relayed in class 0";
  EXPECT_EQ(t.ports[kWire].tx_packets, 4u);
  const uint64_t kept = 2 * job1.size() + within.size() + lacp.size();
  EXPECT_EQ(t.ports[kWire].tx_bytes, kept);
  uint64_t enqueued = 0;
  for (unsigned c = 0; c < t.class_count; ++c) enqueued += t.cls(kWire, c).enqueued_bytes;
  EXPECT_EQ(enqueued, kept);
  EXPECT_EQ(t.rx_total(), t.tx_total() + t.drop_total());
}

}  // namespace
}  // namespace psgate::testing
