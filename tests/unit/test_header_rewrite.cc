// SPDX-License-Identifier: BSD-3-Clause
// DSCP remarking / ECN CE marking: the incremental IPv4 checksum is checked
// against a full recompute on thousands of random headers (fixed seed), and
// every byte outside the traffic class (and checksum) must stay untouched.
#include "psgate/header_rewrite.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "packet_builder.h"
#include "psgate/packet_parser.h"

namespace psgate {
namespace {

// Independent reference for the checksum field value (RFC 791): the one's
// complement of the one's complement sum, checksum field taken as zero.
uint16_t reference_checksum(const uint8_t* h, unsigned len) {
  uint64_t sum = 0;
  for (unsigned i = 0; i < len; i += 2) {
    if (i != 10) sum += (uint64_t{h[i]} << 8) | h[i + 1];
  }
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

uint16_t stored_checksum(const uint8_t* h) { return static_cast<uint16_t>((h[10] << 8) | h[11]); }

void store_checksum(uint8_t* h, uint16_t c) {
  h[10] = static_cast<uint8_t>(c >> 8);
  h[11] = static_cast<uint8_t>(c);
}

// What the traffic class must become, written the obvious way.
uint8_t expected_tc(uint8_t tc, int dscp, bool mark_ce) {
  uint8_t ecn = tc & 3;
  uint8_t d = tc >> 2;
  if (dscp != kKeepDscp) d = static_cast<uint8_t>(dscp);
  if (mark_ce && (ecn == 1 || ecn == 2)) ecn = 3;
  return static_cast<uint8_t>(d << 2 | ecn);
}

unsigned expected_bits(uint8_t before, uint8_t after) {
  return ((before >> 2) != (after >> 2) ? kRewroteDscp : 0u) | ((before & 3) != (after & 3) ? kMarkedCe : 0u);
}

// A random IPv4 header of 20..60 bytes with a correct checksum.
std::vector<uint8_t> random_ipv4_header(std::mt19937& rng) {
  const unsigned ihl = 5 + rng() % 11;
  std::vector<uint8_t> h(ihl * 4);
  for (auto& b : h) b = static_cast<uint8_t>(rng());
  h[0] = static_cast<uint8_t>(0x40 | ihl);
  store_checksum(h.data(), reference_checksum(h.data(), ihl * 4));
  return h;
}

TEST(HeaderRewrite, ChecksumMatchesReferenceOnRandomHeaders) {
  std::mt19937 rng(12345);
  for (int i = 0; i < 500; ++i) {
    const auto h = random_ipv4_header(rng);
    ASSERT_EQ(ipv4_header_checksum(h.data(), static_cast<unsigned>(h.size())),
              reference_checksum(h.data(), static_cast<unsigned>(h.size())));
  }
}

TEST(HeaderRewrite, ChecksumKnownAnswer) {
  // Worked example from RFC 1071 practice / Wikipedia "IPv4 header checksum".
  const uint8_t h[20] = {0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
                         0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7};
  EXPECT_EQ(ipv4_header_checksum(h, 20), 0xb861);
}

TEST(HeaderRewrite, Ipv4IncrementalChecksumOnRandomHeaders) {
  std::mt19937 rng(20240611);
  int dscp_changes = 0, ce_marks = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> h = random_ipv4_header(rng);
    const std::vector<uint8_t> before = h;
    const int dscp = (rng() % 4 == 0) ? kKeepDscp : static_cast<int>(rng() % 64);
    const bool mark_ce = rng() % 2 == 0;

    const unsigned got = rewrite_traffic_class(h.data(), L3Kind::kIpv4, dscp, mark_ce);

    const uint8_t want_tc = expected_tc(before[1], dscp, mark_ce);
    ASSERT_EQ(h[1], want_tc) << "iteration " << i;
    ASSERT_EQ(got, expected_bits(before[1], want_tc)) << "iteration " << i;
    ASSERT_EQ(stored_checksum(h.data()), reference_checksum(h.data(), static_cast<unsigned>(h.size())))
        << "iteration " << i << " dscp " << dscp << " ce " << mark_ce;
    for (size_t b = 0; b < h.size(); ++b) {
      if (b != 1 && b != 10 && b != 11) {
        ASSERT_EQ(h[b], before[b]) << "byte " << b;
      }
    }
    dscp_changes += (got & kRewroteDscp) != 0;
    ce_marks += (got & kMarkedCe) != 0;
  }
  // The random mix must actually exercise both paths.
  EXPECT_GT(dscp_changes, 10000);
  EXPECT_GT(ce_marks, 3000);
}

// RFC 1624's point: eqn. 2 can produce 0xffff where a recompute gives 0x0000.
// Search (deterministically) for headers whose checksum is 0x0000 before or
// after the rewrite and check both edges.
TEST(HeaderRewrite, Ipv4ChecksumZeroEdges) {
  std::mt19937 rng(7);
  std::vector<uint8_t> base = random_ipv4_header(rng);
  base[1] = 0x02;  // DSCP 0, ECT(0)
  bool found_after = false, found_before = false;
  for (uint32_t id = 0; id <= 0xffff && !(found_after && found_before); ++id) {
    std::vector<uint8_t> h = base;
    h[4] = static_cast<uint8_t>(id >> 8);
    h[5] = static_cast<uint8_t>(id);
    store_checksum(h.data(), reference_checksum(h.data(), static_cast<unsigned>(h.size())));
    const uint16_t before = stored_checksum(h.data());
    rewrite_traffic_class(h.data(), L3Kind::kIpv4, 46, true);
    const uint16_t after = stored_checksum(h.data());
    ASSERT_EQ(after, reference_checksum(h.data(), static_cast<unsigned>(h.size()))) << "id " << id;
    ASSERT_NE(after, 0xffff);
    found_after |= after == 0;
    found_before |= before == 0;
  }
  EXPECT_TRUE(found_after);
  EXPECT_TRUE(found_before);
}

struct EcnCase {
  uint8_t ecn_in;
  bool mark_ce;
  uint8_t ecn_out;
  unsigned bits;
};

TEST(HeaderRewrite, EcnMarkingTable) {
  const EcnCase cases[] = {
      {0, true, 0, 0},          // Not-ECT is never marked
      {1, true, 3, kMarkedCe},  // ECT(1) -> CE
      {2, true, 3, kMarkedCe},  // ECT(0) -> CE
      {3, true, 3, 0},          // CE stays CE, nothing changed
      {0, false, 0, 0},        {1, false, 1, 0}, {2, false, 2, 0}, {3, false, 3, 0},
  };
  for (const auto& c : cases) {
    for (L3Kind kind : {L3Kind::kIpv4, L3Kind::kIpv6}) {
      pkt::PacketSpec s;
      s.l3 = kind == L3Kind::kIpv4 ? pkt::L3::kIpv4 : pkt::L3::kIpv6;
      s.tos = static_cast<uint8_t>(0x28 << 2 | c.ecn_in);  // DSCP AF11... 40
      s.flow_label = 0xabcde;
      auto f = pkt::build_packet(s);
      const auto before = f;
      const unsigned got = rewrite_traffic_class(f.data() + 14, kind, kKeepDscp, c.mark_ce);
      ParsedPacket p;
      parse_packet(f.data(), static_cast<uint32_t>(f.size()), p);
      SCOPED_TRACE(testing::Message() << "ecn " << int{c.ecn_in} << " mark " << c.mark_ce << " v"
                                      << static_cast<int>(kind));
      EXPECT_EQ(got, c.bits);
      EXPECT_EQ(p.traffic_class, 0x28 << 2 | c.ecn_out);
      if (c.bits == 0) {
        EXPECT_EQ(f, before);
      }
    }
  }
}

TEST(HeaderRewrite, DscpRewriteKeepsEcnAndReportsOnlyRealChanges) {
  uint8_t h[20] = {0x45, 0xb9 /* EF, ECT(1) */};
  store_checksum(h, reference_checksum(h, 20));
  EXPECT_EQ(rewrite_traffic_class(h, L3Kind::kIpv4, 46, false), 0u);  // already EF
  EXPECT_EQ(h[1], 0xb9);
  EXPECT_EQ(rewrite_traffic_class(h, L3Kind::kIpv4, 10, false), kRewroteDscp);
  EXPECT_EQ(h[1], 10 << 2 | 1);
  EXPECT_EQ(rewrite_traffic_class(h, L3Kind::kIpv4, 0, true), kRewroteDscp | kMarkedCe);
  EXPECT_EQ(h[1], 0x03);
  EXPECT_EQ(stored_checksum(h), reference_checksum(h, 20));
  EXPECT_EQ(rewrite_traffic_class(h, L3Kind::kIpv4, kKeepDscp, false), 0u);
}

TEST(HeaderRewrite, NonIpIsLeftAlone) {
  uint8_t buf[40];
  std::memset(buf, 0x5a, sizeof buf);
  EXPECT_EQ(rewrite_traffic_class(buf, L3Kind::kNonIp, 46, true), 0u);
  for (uint8_t b : buf) EXPECT_EQ(b, 0x5a);
}

TEST(HeaderRewrite, Ipv6TrafficClassOnRandomHeaders) {
  std::mt19937 rng(99);
  for (int i = 0; i < 5000; ++i) {
    uint8_t h[40];
    for (auto& b : h) b = static_cast<uint8_t>(rng());
    h[0] = static_cast<uint8_t>(0x60 | (h[0] & 0x0f));
    uint8_t before[40];
    std::memcpy(before, h, sizeof h);
    const uint8_t tc_before = static_cast<uint8_t>((h[0] & 0x0f) << 4 | h[1] >> 4);
    const uint32_t flow_before = (uint32_t{h[1]} & 0x0f) << 16 | uint32_t{h[2]} << 8 | h[3];
    const int dscp = (rng() % 4 == 0) ? kKeepDscp : static_cast<int>(rng() % 64);
    const bool mark_ce = rng() % 2 == 0;

    const unsigned got = rewrite_traffic_class(h, L3Kind::kIpv6, dscp, mark_ce);

    const uint8_t tc_after = static_cast<uint8_t>((h[0] & 0x0f) << 4 | h[1] >> 4);
    const uint32_t flow_after = (uint32_t{h[1]} & 0x0f) << 16 | uint32_t{h[2]} << 8 | h[3];
    const uint8_t want = expected_tc(tc_before, dscp, mark_ce);
    ASSERT_EQ(tc_after, want) << "iteration " << i;
    ASSERT_EQ(got, expected_bits(tc_before, want));
    ASSERT_EQ(h[0] >> 4, 6);  // version untouched
    ASSERT_EQ(flow_after, flow_before);
    ASSERT_EQ(std::memcmp(h + 2, before + 2, 38), 0);
  }
}

// End to end: parse a frame, rewrite at the parser's l3_offset, parse again.
TEST(HeaderRewrite, RewriteThroughParserOffsets) {
  for (pkt::L3 l3 : {pkt::L3::kIpv4, pkt::L3::kIpv6}) {
    pkt::PacketSpec s;
    s.l3 = l3;
    s.vlans = {{pkt::kTpid8021ad, 100}, {pkt::kTpid8021Q, 200}};
    s.proto = pkt::kTcp;
    s.tos = 0x02;  // DSCP 0, ECT(0)
    s.ipv4_options = {1, 1, 1, 0};
    auto f = pkt::build_packet(s);
    ParsedPacket p;
    parse_packet(f.data(), static_cast<uint32_t>(f.size()), p);
    ASSERT_FALSE(p.malformed);
    ASSERT_EQ(p.l3_offset, 22);
    EXPECT_EQ(rewrite_traffic_class(f.data() + p.l3_offset, p.l3, 34, true), kRewroteDscp | kMarkedCe);
    parse_packet(f.data(), static_cast<uint32_t>(f.size()), p);
    EXPECT_EQ(p.traffic_class, 34 << 2 | 3);
    EXPECT_FALSE(p.malformed);
    EXPECT_TRUE(p.has_ports);
    if (l3 == pkt::L3::kIpv4) {
      const unsigned hlen = (f[22] & 0x0f) * 4u;
      EXPECT_EQ(hlen, 24u);
      EXPECT_EQ(stored_checksum(f.data() + 22), reference_checksum(f.data() + 22, hlen));
    }
  }
}

}  // namespace
}  // namespace psgate
