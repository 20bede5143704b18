// SPDX-License-Identifier: BSD-3-Clause
// Templates + per-packet patch: the headers are what packet_builder builds
// for the flow's 5-tuple, both checksums verify, and the stamp is found again;
// the run tag survives psgate's header rewrite, and another run's frames are
// told apart from this run's and from an earlier run's.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "frame.h"
#include "packet_builder.h"
#include "psgate/header_rewrite.h"

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
  s.dont_fragment = true;
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
            const Stamp st{static_cast<uint16_t>(rng() | 1), static_cast<uint16_t>(rng()), static_cast<uint32_t>(flow),
                           static_cast<uint32_t>(rng()), rng() & kStampTscMask};
            std::vector<uint8_t> f(t.bytes.size(), 0xee);
            std::memcpy(f.data(), t.bytes.data(), f.size());
            patch_frame(f.data(), t.layout, w, st);

            // The run tag in the IPv4 Identification (DF set) or the IPv6 flow label.
            pkt::PacketSpec ref_spec = spec_for(j, dir, w, t.layout.len - t.layout.stamp);
            ref_spec.ip_id = st.run;
            ref_spec.flow_label = st.run;
            const auto ref = pkt::build_packet(ref_spec);
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

            if (!v6) {
              EXPECT_EQ(pkt::internet_checksum(f.data() + t.layout.l3, 20), 0);
            }
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
            EXPECT_EQ(got.run, st.run);
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
  write_stamp(f.data() + off, Stamp{0, 3, 4, 5, 6});
  return f;
}

// Every field survives the trip at its full width: 24-bit flow ids up to
// 2^24 - 1 and the low 40 bits of the TSC (higher TSC bits are not carried).
TEST(Frame, StampFieldWidths) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 1000; ++i) {
    const uint32_t flow = i == 0 ? (1u << 24) - 1 : static_cast<uint32_t>(rng() % (1u << 24));
    const uint64_t tsc = i == 0 ? UINT64_MAX : rng();
    const Stamp st{0, static_cast<uint16_t>(rng()), flow, static_cast<uint32_t>(rng()), tsc};
    auto f = stamped_udp({});
    const size_t off = 14 + 20 + 8;
    write_stamp(f.data() + off, st);
    Stamp got;
    ASSERT_TRUE(find_stamp(f.data(), f.size(), &got));
    EXPECT_EQ(got.stream, st.stream);
    EXPECT_EQ(got.flow, flow);
    EXPECT_EQ(got.seq, st.seq);
    EXPECT_EQ(got.tsc, tsc & ((uint64_t{1} << 40) - 1));
  }
  static_assert(kMaxFlowsPerJob <= (uint64_t{1} << kStampFlowBits), "flow ids must fit the stamp");
}

// TX -> RX delay from 40 bits of TX TSC, on an injected clock: this run's
// frames give their delay (or, with a TX TSC slightly ahead, count as skewed);
// frames that claim a TX time before the run are stale.
TEST(Frame, StampAgeFromFortyBits) {
  constexpr uint64_t k40 = uint64_t{1} << 40;
  constexpr uint64_t k33 = uint64_t{1} << 33;
  constexpr uint64_t kSkew = 1'000'000;
  using A = StampAge;
  struct Case {
    const char* what;
    uint64_t epoch, tx, now;  // full TSC values; the stamp carries tx's low 40 bits
    A age;
    uint64_t cycles;
  } cases[] = {
      {"plain", 1000, 5000, 7500, A::kValid, 2500},
      {"zero delay", 1000, 5000, 5000, A::kValid, 0},
      {"across a wrap of the 40 bits", k40 - 100, k40 - 10, k40 + 5, A::kValid, 15},
      {"high TSC bits above the 40", 7 * k40 + 5, 7 * k40 + 123, 7 * k40 + 1123, A::kValid, 1000},
      {"over 2^32 cycles: aliased to 7 cycles with the old 32-bit stamp", 10, 100, 100 + k33 + 7, A::kValid, k33 + 7},
      {"a run over 2^40 cycles old, delay 2^40 - 2 * skew", 0, 5 * k40 + 2 * kSkew, 6 * k40, A::kValid,
       k40 - 2 * kSkew},
      // Beyond the skew bound below 2^40 it is a core ahead, not a 7-minute
      // delay (it read as one in runs over 2^40 cycles, and set max_ns).
      {"a run over 2^40 cycles old, TX TSC 10 cycles ahead", 0, 2 * k40 + 10, 2 * k40, A::kSkewed, 0},
      {"frame of an earlier run: TX before the epoch", 3 * k40 + 1000, 3 * k40 + 10, 3 * k40 + 2000, A::kStale, 0},
      {"frame of a run 2^39 cycles earlier", 4 * k40, 4 * k40 - k40 / 2, 4 * k40 + 50, A::kStale, 0},
      {"TX TSC ahead of now (cores' TSCs skewed)", 1000, 5000, 4000, A::kSkewed, 0},
      {"TX TSC ahead by exactly the skew bound", 1000, 4000 + kSkew, 4000, A::kSkewed, 0},
      {"TX TSC ahead by more than any skew", 1000, 4000 + kSkew + 1, 4000, A::kStale, 0},
  };
  for (const Case& c : cases) {
    uint64_t cycles = 12345;
    EXPECT_EQ(stamp_age(c.now, c.tx & kStampTscMask, c.epoch, kSkew, &cycles), c.age) << c.what;
    if (c.age == A::kValid) {
      EXPECT_EQ(cycles, c.cycles) << c.what;
    }
  }
  // In a run younger than 2^40 cycles no delay can reach 2^40 (its frame was
  // sent after the epoch), so every delay that comes out is exact: check all
  // delays of one run at coarse steps, across a wrap of the 40 bits.
  const uint64_t epoch = 9 * k40 - (k40 >> 2);
  uint64_t cycles = 0;
  for (uint64_t age = 0; age < k40; age += k40 >> 12) {
    const uint64_t now = epoch + age;
    for (uint64_t delay : {uint64_t{0}, age / 3, age}) {
      ASSERT_EQ(stamp_age(now, (now - delay) & kStampTscMask, epoch, kSkew, &cycles), A::kValid) << age << " " << delay;
      ASSERT_EQ(cycles, delay) << age;
    }
  }
}

// The run tag travels in the IP header, where psgate rewrites DSCP and ECN
// (and so the IPv4 header checksum): what arrives is the tag sent, whatever
// the rewrite, and the IPv4 frame keeps DF (atomic: the ID is free to carry
// the tag, RFC 6864) and a valid header checksum.
TEST(Frame, RunTagSurvivesPsgatesRewriteOfDscpAndEcn) {
  for (bool v6 : {false, true}) {
    for (Proto proto : {Proto::kUdp, Proto::kTcp}) {
      const JobProfile j = make_job(v6, proto);
      const FrameTemplate t = build_template(j, kPush, min_frame_size(v6, proto));
      for (uint16_t tag : {uint16_t{1}, uint16_t{0x5a5a}, uint16_t{0xffff}}) {
        for (int dscp : {kKeepDscp, 0, 46, 63}) {
          SCOPED_TRACE("v6 " + std::to_string(v6) + " tag " + std::to_string(tag) + " dscp " + std::to_string(dscp));
          std::vector<uint8_t> f = t.bytes;
          patch_frame(f.data(), t.layout, FlowMap(j).at(3), Stamp{tag, 1, 3, 7, 1000});
          uint8_t* l3 = f.data() + t.layout.l3;
          // ECT(0), so that psgate's CE marking changes the header too.
          if (v6) {
            l3[1] |= 0x20;
          } else {
            l3[1] |= 0x02;
            l3[10] = l3[11] = 0;
            const uint16_t c = ipv4_header_checksum(l3, 20);
            l3[10] = static_cast<uint8_t>(c >> 8);
            l3[11] = static_cast<uint8_t>(c);
          }
          const unsigned changed = rewrite_traffic_class(l3, v6 ? L3Kind::kIpv6 : L3Kind::kIpv4, dscp, true);
          EXPECT_NE(changed & kMarkedCe, 0u);
          Stamp got;
          ASSERT_TRUE(find_stamp(f.data(), f.size(), &got));
          EXPECT_EQ(got.run, tag);
          EXPECT_EQ(got.seq, 7u);
          if (!v6) {
            EXPECT_EQ(l3[6] & 0x40, 0x40) << "DF";
            EXPECT_EQ(pkt::internet_checksum(l3, 20), 0);
          } else {
            EXPECT_EQ(l3[1] & 0x0f, 0) << "the flow label's top 4 bits";
          }
        }
      }
    }
  }
}

// Whose frame an arrival is, checked before it touches any flow: this
// run's, an earlier run's (sent before this run began, whatever its tag), or
// another run's sent while this one runs: two generators wired together,
// where each took the other's frames for its own (same stream and flow
// ids), reported no loss for its own lost frames and "excess" for the
// other's. Frames of two runs go through the receive side's whole check:
// find_stamp, stamp_age, stamp_owner.
TEST(Frame, AnotherRunsFramesAreNotThisRuns) {
  using O = StampOwner;
  constexpr uint64_t kSkew = 1'000'000;
  struct Case {
    const char* what;
    uint16_t frame_run;
    StampAge age;
    O owner;
  } cases[] = {
      {"this run's", 7, StampAge::kValid, O::kThisRun},
      {"this run's, TX core ahead", 7, StampAge::kSkewed, O::kThisRun},
      {"this run's tag, sent before the run: corrupt", 7, StampAge::kStale, O::kStale},
      {"an earlier run's", 9, StampAge::kStale, O::kStale},
      {"another run's, sent now", 9, StampAge::kValid, O::kOtherRun},
      {"another run's, its core ahead", 9, StampAge::kSkewed, O::kOtherRun},
      {"an older psgate-gen's (no tag: 0)", 0, StampAge::kValid, O::kOtherRun},
  };
  for (const Case& c : cases) EXPECT_EQ(stamp_owner(c.frame_run, 7, c.age), c.owner) << c.what;

  // Runs A (tag 0x1111) and B (tag 0x2222) of the same profile: same stream,
  // flow and sequence numbers. B's receive side, epoch 10'000, at TSC 50'000.
  const JobProfile j = make_job(false, Proto::kUdp);
  const FrameTemplate t = build_template(j, kPull, 64);
  const uint64_t epoch = 10'000, now = 50'000;
  auto owner_at_b = [&](uint16_t run, uint64_t tx_tsc) {
    std::vector<uint8_t> f = t.bytes;
    patch_frame(f.data(), t.layout, FlowMap(j).at(1), Stamp{run, 1, 1, 42, tx_tsc});
    Stamp got;
    EXPECT_TRUE(find_stamp(f.data(), f.size(), &got));
    uint64_t cycles = 0;
    return stamp_owner(got.run, 0x2222, stamp_age(now, got.tsc, epoch, kSkew, &cycles));
  };
  EXPECT_EQ(owner_at_b(0x2222, 40'000), O::kThisRun);
  EXPECT_EQ(owner_at_b(0x1111, 40'000), O::kOtherRun) << "A running now: not B's, though its stream and flow are";
  EXPECT_EQ(owner_at_b(0x1111, 5'000), O::kStale) << "A's, sent before B began: an earlier run's";
  EXPECT_EQ(owner_at_b(0x2222, 5'000), O::kStale);
}

TEST(Frame, RunTagsAreNeverZero) {
  for (int i = 0; i < 1000; ++i) ASSERT_NE(draw_run_tag(), 0);
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
