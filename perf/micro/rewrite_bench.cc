// SPDX-License-Identifier: BSD-3-Clause
// The egress header rewrite alone (mbuf_rewrite.h, header_rewrite.h): a DSCP
// remark, and a DSCP remark with an ECN CE mark, of the IPv4 (checksum updated
// incrementally) or IPv6 header of each mbuf of a burst, as the TX side does
// for a class with a dscp and a packet that found its queue past
// ecn_threshold.
//
// Every pass must really change the header: the DSCP alternates between two
// values from burst to burst, and for the CE cases each packet's ECN field is
// set back to ECT(0) first (one byte store, included in the figure) since a
// packet already marked CE is left alone.
#include <vector>

#include "micro.h"
#include "packet_builder.h"
#include "psgate/mbuf_rewrite.h"

namespace psgate::micro {

namespace {

void bench_rewrite(benchmark::State& state, L3Kind kind, bool mark_ce) {
  pkt::PacketSpec spec;
  spec.l3 = kind == L3Kind::kIpv4 ? pkt::L3::kIpv4 : pkt::L3::kIpv6;
  spec.proto = pkt::kTcp;
  spec.tos = 0x02;  // ECT(0): ECN-capable, so a CE mark applies
  spec.payload_len = 64;
  std::vector<std::vector<uint8_t>> frames;
  for (unsigned i = 0; i < kBurst; ++i) {
    spec.sport = static_cast<uint16_t>(40000 + i);
    frames.push_back(pkt::build_packet(spec));
  }
  MbufBurst burst(frames);
  if (!burst.ok()) return state.SkipWithError("no mbufs");
  constexpr unsigned kL3 = 14;
  // Where the ECN bits live: IPv4's TOS byte, IPv6's second byte (low nibble
  // of the traffic class straddles it: bits 4-5 are ECN).
  const unsigned ecn_byte = kL3 + 1;
  const uint8_t ecn_mask = kind == L3Kind::kIpv4 ? 0x03 : 0x30;
  const uint8_t ect0 = kind == L3Kind::kIpv4 ? 0x02 : 0x20;
  unsigned changed = 0;
  int flip = 0;
  PerPacket pp(state);
  for (auto _ : state) {
    const int dscp = (flip ^= 1) ? 46 : 10;
    for (unsigned i = 0; i < kBurst; ++i) {
      rte_mbuf* m = burst.m[i];
      if (mark_ce) {
        uint8_t* b = rte_pktmbuf_mtod_offset(m, uint8_t*, ecn_byte);
        *b = static_cast<uint8_t>((*b & ~ecn_mask) | ect0);
      }
      changed |= rewrite_traffic_class_mbuf(m, kL3, kind, dscp, mark_ce);
    }
    benchmark::DoNotOptimize(changed);
    benchmark::ClobberMemory();
  }
  pp.finish();
  const unsigned want = kRewroteDscp | (mark_ce ? kMarkedCe : 0);
  if (state.iterations() > 0 && changed != want) state.SkipWithError("the rewrite did not change what it should");
}

}  // namespace

void register_rewrite() {
  benchmark::RegisterBenchmark("rewrite/dscp/ipv4", bench_rewrite, L3Kind::kIpv4, false);
  benchmark::RegisterBenchmark("rewrite/dscp_ce/ipv4", bench_rewrite, L3Kind::kIpv4, true);
  benchmark::RegisterBenchmark("rewrite/dscp/ipv6", bench_rewrite, L3Kind::kIpv6, false);
  benchmark::RegisterBenchmark("rewrite/dscp_ce/ipv6", bench_rewrite, L3Kind::kIpv6, true);
}

}  // namespace psgate::micro
