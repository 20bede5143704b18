// SPDX-License-Identifier: BSD-3-Clause
// psgate-demo-traffic: writes the two captures the demo replays.
//
//   host-in.pcap  what the PS host sends (replayed forever, infinite_rx=1):
//                 the pull traffic of three jobs' parameter servers to their
//                 workers in 9000-byte packets (--mtu), unknown traffic, an
//                 ARP reply
//   wire-in.pcap  what the network sends (replayed once): workers' pushes
//                 (IPv4 and IPv6), ARP, LLDP, and one truncated IPv4 packet
//
// The three jobs' PSes share one host (10.0.0.5 / fd00::5) and differ by port,
// as TensorLights' jobs did: job 1 on 2222, job 2 on 2223, job 3 on 2224.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "packet_builder.h"
#include "pcap_file.h"

namespace pkt = psgate::pkt;

namespace {

constexpr pkt::Ipv4Addr kPs4{10, 0, 0, 5};
constexpr pkt::Mac kPsMac{0x02, 0, 0, 0, 0, 0x05};
constexpr pkt::Mac kSwitchMac{0x02, 0, 0, 0, 0, 0xfe};

pkt::Ipv4Addr worker4(unsigned job, unsigned w) {
  return {10, 0, static_cast<uint8_t>(job), static_cast<uint8_t>(10 + w)};
}

pkt::PacketSpec pull(unsigned job, unsigned worker, uint32_t seq, size_t payload) {
  pkt::PacketSpec s;
  s.src_mac = kPsMac;
  s.dst_mac = kSwitchMac;
  s.src4 = kPs4;
  s.dst4 = worker4(job, worker);
  s.proto = pkt::kTcp;
  s.sport = static_cast<uint16_t>(2221 + job);
  s.dport = static_cast<uint16_t>(40000 + worker);
  s.seq = seq;
  s.tos = 0x02;  // ECT(0): ECN-capable, so class thresholds can mark it
  s.payload_len = payload;
  return s;
}

pkt::PacketSpec push(unsigned job, unsigned worker, uint32_t seq, size_t payload) {
  pkt::PacketSpec s = pull(job, worker, seq, payload);
  std::swap(s.src_mac, s.dst_mac);
  std::swap(s.src4, s.dst4);
  std::swap(s.sport, s.dport);
  return s;
}

bool write_all(const std::string& path, const std::vector<std::vector<uint8_t>>& frames) {
  psgate::pkt::PcapWriter writer;
  if (!writer.open(path)) {
    std::fprintf(stderr, "psgate-demo-traffic: %s\n", writer.error().c_str());
    return false;
  }
  uint64_t ts = 0;
  for (const auto& f : frames) {
    writer.write(f, ts);
    ts += 1000;
  }
  if (!writer.close()) {
    std::fprintf(stderr, "psgate-demo-traffic: %s\n", writer.error().c_str());
    return false;
  }
  std::printf("wrote %zu frames to %s\n", frames.size(), path.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes host-in.pcap and wire-in.pcap, the captures config/demo.toml replays."};
  std::string out_dir = ".";
  unsigned workers = 4;
  unsigned mtu = 9000;
  app.add_option("-o,--out-dir", out_dir, "Directory for the two captures (default: current directory)");
  app.add_option("-w,--workers", workers, "Workers per job (default 4)")->check(CLI::Range(1, 200));
  app.add_option("-m,--mtu", mtu, "IP packet size of the pulls, as ports.<p>.mtu in the demo config (default 9000)")
      ->check(CLI::Range(576, 9000));
  CLI11_PARSE(app, argc, argv);

  // Host side: per cycle each job's PS sends one MTU-sized segment to each
  // worker (jumbo frames by default, as ML clusters run); unknown traffic is
  // a quarter of a job's share.
  std::vector<std::vector<uint8_t>> host;
  const size_t mtu_payload = mtu - 40;  // IPv4 and TCP headers
  for (uint32_t seq = 0; seq < 64; ++seq) {
    for (unsigned job = 1; job <= 3; ++job)
      for (unsigned w = 0; w < workers; ++w)
        host.push_back(pkt::build_packet(pull(job, w, seq * mtu_payload, mtu_payload)));
    pkt::PacketSpec other = pull(9, seq % workers, seq, mtu_payload);
    other.sport = 8080;  // no job matches it: default class
    host.push_back(pkt::build_packet(other));
  }
  pkt::PacketSpec arp_reply;
  arp_reply.l3 = pkt::L3::kArp;
  arp_reply.src_mac = kPsMac;
  arp_reply.src4 = kPs4;
  arp_reply.dst4 = worker4(1, 0);
  host.push_back(pkt::build_packet(arp_reply));

  // Wire side: small pushes (gradient segments would be large too; what
  // matters here is that they reach the host and are counted as pushes).
  std::vector<std::vector<uint8_t>> wire;
  for (unsigned job = 1; job <= 3; ++job)
    for (unsigned w = 0; w < workers; ++w) wire.push_back(pkt::build_packet(push(job, w, 1, 512)));
  wire.push_back(pkt::build_packet(push(1, 0, 513, mtu_payload)));  // one full-size gradient segment
  pkt::PacketSpec v6 = push(1, 0, 1, 256);
  v6.l3 = pkt::L3::kIpv6;
  v6.src6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x10};
  v6.dst6 = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05};
  wire.push_back(pkt::build_packet(v6));
  pkt::PacketSpec arp_request;
  arp_request.l3 = pkt::L3::kArp;
  arp_request.src_mac = kSwitchMac;
  arp_request.dst_mac = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  arp_request.src4 = worker4(1, 0);
  arp_request.dst4 = kPs4;
  wire.push_back(pkt::build_packet(arp_request));
  pkt::PacketSpec lldp;
  lldp.l3 = pkt::L3::kNone;
  lldp.ethertype = pkt::kEtherTypeLldp;
  lldp.dst_mac = {0x01, 0x80, 0xc2, 0, 0, 0x0e};
  lldp.payload_len = 40;
  wire.push_back(pkt::build_packet(lldp));
  pkt::PacketSpec truncated = push(2, 0, 1, 64);
  truncated.ipv4_total_length_override = 1400;  // claims more than the frame holds
  wire.push_back(pkt::build_packet(truncated));

  return write_all(out_dir + "/host-in.pcap", host) && write_all(out_dir + "/wire-in.pcap", wire) ? 0 : 1;
}
