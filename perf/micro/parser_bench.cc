// SPDX-License-Identifier: BSD-3-Clause
// The parser alone: parse_ipv4_flow_key (the RX stage's fast key, flow_key.h)
// and parse_packet (packet_parser.h) over a burst of real frames in mbufs,
// read where the RX stage reads them (rte_pktmbuf_mtod, data_len, pkt_len).
// Each frame of a burst is another flow (ports differ), as on a busy wire.
#include <string>
#include <vector>

#include "micro.h"
#include "packet_builder.h"
#include "psgate/flow_key.h"
#include "psgate/packet_parser.h"

namespace psgate::micro {

namespace {

using pkt::PacketSpec;

// kBurst frames of one shape, flows differing by port.
std::vector<std::vector<uint8_t>> frames(PacketSpec spec) {
  std::vector<std::vector<uint8_t>> out;
  for (unsigned i = 0; i < kBurst; ++i) {
    spec.sport = static_cast<uint16_t>(40000 + i);
    out.push_back(pkt::build_packet(spec));
  }
  return out;
}

PacketSpec ipv4_tcp() {
  PacketSpec s;
  s.l3 = pkt::L3::kIpv4;
  s.proto = pkt::kTcp;
  s.dport = 2222;
  s.payload_len = 64;
  return s;
}

PacketSpec vlan_ipv4_tcp() {
  PacketSpec s = ipv4_tcp();
  s.vlans = {{pkt::kTpid8021Q, 100}};
  return s;
}

PacketSpec ipv6_tcp() {
  PacketSpec s = ipv4_tcp();
  s.l3 = pkt::L3::kIpv6;
  return s;
}

// Hop-by-hop, routing, fragment (the first, with more to come: it carries the
// TCP header) and destination options before TCP: every extension header the
// parser walks.
PacketSpec ipv6_ext_tcp() {
  PacketSpec s = ipv6_tcp();
  s.ext = {{.type = pkt::kIpv6HopByHop, .len = 8},
           {.type = pkt::kIpv6Routing, .len = 24},
           {.type = pkt::kIpv6Fragment, .frag_offset = 0, .more_fragments = true, .ident = 7},
           {.type = pkt::kIpv6DstOpts, .len = 16}};
  return s;
}

void bench_parse_packet(benchmark::State& state, const PacketSpec& spec) {
  MbufBurst burst(frames(spec));
  if (!burst.ok()) return state.SkipWithError("no mbufs");
  ParsedPacket out[kBurst];
  // A frame that does not parse as intended would measure the wrong path.
  for (unsigned i = 0; i < kBurst; ++i) {
    rte_mbuf* m = burst.m[i];
    parse_packet(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, m->pkt_len, out[i]);
    if (out[i].malformed || !out[i].has_ports) return state.SkipWithError("frame did not parse with ports");
  }
  PerPacket pp(state);
  for (auto _ : state) {
    for (unsigned i = 0; i < kBurst; ++i) {
      rte_mbuf* m = burst.m[i];
      parse_packet(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, m->pkt_len, out[i]);
    }
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  pp.finish();
}

void bench_fast_key(benchmark::State& state, const PacketSpec& spec) {
  MbufBurst burst(frames(spec));
  if (!burst.ok()) return state.SkipWithError("no mbufs");
  FlowKey4 keys[kBurst];
  PerPacket pp(state);
  for (auto _ : state) {
    uint64_t keyed = 0;
    for (unsigned i = 0; i < kBurst; ++i) {
      rte_mbuf* m = burst.m[i];
      keyed |= uint64_t{parse_ipv4_flow_key(rte_pktmbuf_mtod(m, const uint8_t*), m->data_len, keys[i])} << i;
    }
    benchmark::DoNotOptimize(keyed);
    benchmark::DoNotOptimize(keys);
    benchmark::ClobberMemory();
  }
  pp.finish();
}

}  // namespace

void register_parser() {
  benchmark::RegisterBenchmark("parser/fast_key/ipv4_tcp", bench_fast_key, ipv4_tcp());
  // The fast key's refusal: what a tagged frame costs before parse_packet.
  benchmark::RegisterBenchmark("parser/fast_key/vlan_reject", bench_fast_key, vlan_ipv4_tcp());
  benchmark::RegisterBenchmark("parser/parse_packet/ipv4_tcp", bench_parse_packet, ipv4_tcp());
  benchmark::RegisterBenchmark("parser/parse_packet/vlan_ipv4_tcp", bench_parse_packet, vlan_ipv4_tcp());
  benchmark::RegisterBenchmark("parser/parse_packet/ipv6_tcp", bench_parse_packet, ipv6_tcp());
  benchmark::RegisterBenchmark("parser/parse_packet/ipv6_ext_tcp", bench_parse_packet, ipv6_ext_tcp());
}

}  // namespace psgate::micro
