// Templates + per-packet patch: the headers are what packet_builder builds
// for the flow's 5-tuple, both checksums verify, and the stamp is found again.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "frame.h"
#include "packet_builder.h"

namespace psgate::gen {
namespace {

JobProfile make_job(bool v6, Proto proto) {
  JobProfile j;
  j.ps_addr = v6 ? Addr{true, 0xfd00ull << 48, 5} : Addr{false, 0, 0x0a000005};
  j.ps_port = 2222;
  j.worker_addr = v6 ? Addr{true, 0xfd01ull << 48, 1} : Addr{false, 0, 0x0a010001};
  j.worker_port = 65000;  // 536 ports: flows above that use further addresses
  j.workers = 3;
  j.flows = 5000;
  j.proto = proto;
  return j;
}

pkt::PacketSpec spec_for(const JobProfile& j, Dir dir, const WorkerEnd& w, size_t payload_len) {
  pkt::PacketSpec s;
  s.l3 = j.ps_addr.v6 ? pkt::L3::kIpv6 : pkt::L3::kIpv4;
  s.proto = j.proto == Proto::kTcp ? pkt::kTcp : pkt::kUdp;
  s.tcp_flags = pkt::kTcpAck | pkt::kTcpPsh;
  s.min_frame_size = 0;
  s.payload_len = payload_len;
  auto bytes = [](const Addr& a, uint8_t* out, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const size_t bit = 8 * (n - 1 - i);
      out[i] = static_cast<uint8_t>(n == 4 ? a.lo >> bit : (i < 8 ? a.hi >> (56 - 8 * i) : a.lo >> (56 - 8 * (i - 8))));
    }
  };
  const Addr& src = dir == kPush ? w.addr : j.ps_addr;
  const Addr& dst = dir == kPush ? j.ps_addr : w.addr;
  if (j.ps_addr.v6) {
    bytes(src, s.src6.data(), 16);
    bytes(dst, s.dst6.data(), 16);
  } else {
    bytes(src, s.src4.data(), 4);
    bytes(dst, s.dst4.data(), 4);
  }
  s.sport = dir == kPush ? w.port : j.ps_port;
  s.dport = dir == kPush ? j.ps_port : w.port;
  return s;
}

TEST(Frame, PatchedFramesMatchBuilderAndChecksumsVerify) {
  std::mt19937_64 rng(7);
  for (bool v6 : {false, true}) {
    for (Proto proto : {Proto::kUdp, Proto::kTcp}) {
      const JobProfile j = make_job(v6, proto);
      const FlowMap map(j);
      for (Dir dir : {kPush, kPull}) {
        for (uint32_t size : {min_frame_size(v6, proto), 128u, 594u, 1518u}) {
          const FrameTemplate t = build_template(j, dir, size);
          ASSERT_EQ(t.layout.len, size - 4);
          ASSERT_EQ(t.bytes.size(), t.layout.len);
          for (int k = 0; k < 20; ++k) {
            const uint64_t flow = rng() % j.flows;
            const WorkerEnd w = map.at(flow);
            const Stamp st{static_cast<uint16_t>(rng()), static_cast<uint32_t>(flow), static_cast<uint32_t>(rng()),
                           static_cast<uint32_t>(rng())};
            std::vector<uint8_t> f(t.bytes.size(), 0xee);
            std::memcpy(f.data(), t.bytes.data(), f.size());
            patch_frame(f.data(), t.layout, w, st);

            const auto ref = pkt::build_packet(spec_for(j, dir, w, t.layout.len - t.layout.stamp));
            ASSERT_EQ(ref.size(), f.size());
            // Headers equal except the checksum fields (the payloads differ).
            std::vector<uint8_t> a(f.begin(), f.begin() + t.layout.stamp);
            std::vector<uint8_t> b(ref.begin(), ref.begin() + t.layout.stamp);
            const size_t l4_csum = t.layout.l4 + (proto == Proto::kTcp ? 16 : 6);
            for (auto* v : {&a, &b}) {
              (*v)[l4_csum] = (*v)[l4_csum + 1] = 0;
              if (!v6) (*v)[t.layout.l3 + 10] = (*v)[t.layout.l3 + 11] = 0;
            }
            ASSERT_EQ(pkt::hex(a), pkt::hex(b)) << "v6 " << v6 << " dir " << dir << " flow " << flow;

            if (!v6) EXPECT_EQ(pkt::internet_checksum(f.data() + t.layout.l3, 20), 0);
            const size_t l4_len = f.size() - t.layout.l4;
            const uint8_t p = proto == Proto::kTcp ? pkt::kTcp : pkt::kUdp;
            uint32_t pseudo;
            if (v6) {
              pkt::Ipv6Addr s6, d6;
              std::memcpy(s6.data(), f.data() + t.layout.l3 + 8, 16);
              std::memcpy(d6.data(), f.data() + t.layout.l3 + 24, 16);
              pseudo = pkt::pseudo_header_sum_v6(s6, d6, p, l4_len);
            } else {
              pkt::Ipv4Addr s4, d4;
              std::memcpy(s4.data(), f.data() + t.layout.l3 + 12, 4);
              std::memcpy(d4.data(), f.data() + t.layout.l3 + 16, 4);
              pseudo = pkt::pseudo_header_sum_v4(s4, d4, p, l4_len);
            }
            EXPECT_EQ(pkt::internet_checksum(f.data() + t.layout.l4, l4_len, pseudo), 0) << "L4 checksum";

            Stamp got;
            ASSERT_TRUE(find_stamp(f.data(), f.size(), &got));
            EXPECT_EQ(got.stream, st.stream);
            EXPECT_EQ(got.flow, st.flow);
            EXPECT_EQ(got.seq, st.seq);
            EXPECT_EQ(got.tsc, st.tsc);
            for (size_t i = t.layout.stamp + kStampSize; i < f.size(); ++i) ASSERT_EQ(f[i], 0) << i;
          }
        }
      }
    }
  }
}

std::vector<uint8_t> stamped_udp(pkt::PacketSpec spec) {
  spec.payload_len = 40;
  auto f = pkt::build_packet(spec);
  const size_t off = pkt::l3_offset(spec) + (spec.l3 == pkt::L3::kIpv6 ? 40 : 20) + 8;
  write_stamp(f.data() + off, Stamp{3, 4, 5, 6});
  return f;
}

TEST(Frame, FindStampAcceptsAndRejects) {
  Stamp st;
  auto plain = stamped_udp({});
  EXPECT_TRUE(find_stamp(plain.data(), plain.size(), &st));
  EXPECT_EQ(st.flow, 4u);
  auto vlan = stamped_udp({.vlans = {pkt::VlanTag{}}});
  EXPECT_TRUE(find_stamp(vlan.data(), vlan.size(), &st));
  auto v6 = stamped_udp({.l3 = pkt::L3::kIpv6});
  EXPECT_TRUE(find_stamp(v6.data(), v6.size(), &st));

  struct Case {
    const char* what;
    std::vector<uint8_t> frame;
  } rejects[] = {
      {"arp", pkt::build_packet({.l3 = pkt::L3::kArp})},
      {"truncated", std::vector<uint8_t>(plain.begin(), plain.begin() + 50)},
      {"later fragment", stamped_udp({.frag_offset = 10})},
      {"icmp", pkt::build_packet({.proto = pkt::kIcmp, .payload_len = 40})},
      {"ipv6 extension header", stamped_udp({.l3 = pkt::L3::kIpv6, .ext = {pkt::Ipv6Ext{}}})},
      {"no magic", pkt::build_packet({.payload_len = 40})},
  };
  for (const Case& c : rejects) EXPECT_FALSE(find_stamp(c.frame.data(), c.frame.size(), &st)) << c.what;
}

TEST(Frame, SizePatterns) {
  JobProfile j = make_job(false, Proto::kUdp);
  j.size_model = SizeModel::kImix;
  auto imix = size_pattern(j);
  ASSERT_EQ(imix.size(), 12u);
  EXPECT_EQ(std::count(imix.begin(), imix.end(), 64u), 7);
  EXPECT_EQ(std::count(imix.begin(), imix.end(), 594u), 4);
  EXPECT_EQ(std::count(imix.begin(), imix.end(), 1518u), 1);
  j.proto = Proto::kTcp;  // 64 is below the IPv4/TCP minimum of 74: raised
  imix = size_pattern(j);
  EXPECT_EQ(std::count(imix.begin(), imix.end(), 74u), 7);
  j.size_model = SizeModel::kPsLike;
  EXPECT_EQ(size_pattern(j), (std::vector<uint32_t>{1518, 1518, 74}));
  j.size_model = SizeModel::kFixed;
  j.size = 300;
  EXPECT_EQ(size_pattern(j), (std::vector<uint32_t>{300}));
}

}  // namespace
}  // namespace psgate::gen
