// SPDX-License-Identifier: BSD-3-Clause
#include "frame.h"

#include <algorithm>
#include <cstring>

#include "packet_builder.h"

namespace psgate::gen {
namespace {

constexpr size_t kEthHeader = 14;

// One's-complement sum of big-endian 16-bit words; `len` is even.
inline uint32_t sum16(const uint8_t* p, size_t len, uint32_t sum) {
  for (size_t i = 0; i < len; i += 2) sum += static_cast<uint32_t>(p[i] << 8 | p[i + 1]);
  return sum;
}

inline uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

inline void put_be64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<uint8_t>(v);
}

pkt::Ipv4Addr v4_bytes(const Addr& a) {
  return {static_cast<uint8_t>(a.lo >> 24), static_cast<uint8_t>(a.lo >> 16), static_cast<uint8_t>(a.lo >> 8),
          static_cast<uint8_t>(a.lo)};
}

pkt::Ipv6Addr v6_bytes(const Addr& a) {
  pkt::Ipv6Addr b{};
  put_be64(b.data(), a.hi);
  put_be64(b.data() + 8, a.lo);
  return b;
}

}  // namespace

uint32_t min_frame_size(bool v6, Proto proto) {
  const size_t needed = kEthHeader + (v6 ? 40 : 20) + (proto == Proto::kTcp ? 20 : 8) + kStampSize + kFcsBytes;
  return static_cast<uint32_t>(std::max<size_t>(needed, 64));  // 64: Ethernet's minimum frame
}

FrameTemplate build_template(const JobProfile& job, Dir dir, uint32_t frame_size) {
  const bool v6 = job.ps_addr.v6;
  const WorkerEnd w = FlowMap(job).at(0);
  pkt::PacketSpec spec;
  spec.l3 = v6 ? pkt::L3::kIpv6 : pkt::L3::kIpv4;
  spec.proto = job.proto == Proto::kTcp ? pkt::kTcp : pkt::kUdp;
  spec.tcp_flags = pkt::kTcpAck | pkt::kTcpPsh;
  spec.min_frame_size = 0;
  spec.dont_fragment = true;  // atomic datagrams: the Identification field carries the run tag (stamp.h)
  const Addr& src = dir == kPush ? w.addr : job.ps_addr;
  const Addr& dst = dir == kPush ? job.ps_addr : w.addr;
  spec.sport = dir == kPush ? w.port : job.ps_port;
  spec.dport = dir == kPush ? job.ps_port : w.port;
  if (v6) {
    spec.src6 = v6_bytes(src);
    spec.dst6 = v6_bytes(dst);
  } else {
    spec.src4 = v4_bytes(src);
    spec.dst4 = v4_bytes(dst);
  }
  FrameTemplate t;
  FrameLayout& l = t.layout;
  l.v6 = v6;
  l.proto = job.proto;
  l.dir = dir;
  l.l3 = static_cast<uint16_t>(pkt::l3_offset(spec));
  l.l4 = static_cast<uint16_t>(l.l3 + (v6 ? 40 : 20));
  l.stamp = static_cast<uint16_t>(l.l4 + (job.proto == Proto::kTcp ? 20 : 8));
  l.len = static_cast<uint16_t>(frame_size - kFcsBytes);
  spec.payload_len = l.len - l.stamp;
  t.bytes = pkt::build_packet(spec);
  t.bytes.resize(l.len);
  // Zero payload: the checksum of the patched frame then covers headers and stamp only.
  std::memset(t.bytes.data() + l.stamp, 0, l.len - l.stamp);
  return t;
}

std::vector<uint32_t> size_pattern(const JobProfile& job) {
  const uint32_t lo = min_frame_size(job.ps_addr.v6, job.proto);
  auto clamp = [&](uint32_t s) { return s < lo ? lo : s; };
  switch (job.size_model) {
    case SizeModel::kImix: {
      std::vector<uint32_t> v{64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 594, 64};
      for (uint32_t& s : v) s = clamp(s);
      return v;
    }
    case SizeModel::kPsLike:
      return {kMaxFrameSize, kMaxFrameSize, lo};
    case SizeModel::kFixed:
      break;
  }
  return {clamp(job.size)};
}

void patch_frame(uint8_t* frame, const FrameLayout& l, const WorkerEnd& worker, const Stamp& stamp) {
  uint8_t* l3 = frame + l.l3;
  uint8_t* l4 = frame + l.l4;
  const unsigned worker_side = l.dir == kPush ? 0 : 1;  // 0: source, 1: destination
  uint32_t sum;
  if (!l.v6) {
    uint8_t* a = l3 + 12 + 4 * worker_side;
    const uint32_t v = static_cast<uint32_t>(worker.addr.lo);
    a[0] = static_cast<uint8_t>(v >> 24);
    a[1] = static_cast<uint8_t>(v >> 16);
    a[2] = static_cast<uint8_t>(v >> 8);
    a[3] = static_cast<uint8_t>(v);
    put16(l3 + 4, stamp.run);  // Identification: the run tag (stamp.h)
    put16(l3 + 10, 0);
    put16(l3 + 10, static_cast<uint16_t>(~fold(sum16(l3, 20, 0))));
    sum = sum16(l3 + 12, 8, 0);  // pseudo-header addresses
  } else {
    // The flow label's low 16 bits: the run tag (stamp.h); its top 4 bits
    // stay 0, the traffic class's low bits as the template has them.
    l3[1] &= 0xf0;
    put16(l3 + 2, stamp.run);
    uint8_t* a = l3 + 8 + 16 * worker_side;
    put_be64(a, worker.addr.hi);
    put_be64(a + 8, worker.addr.lo);
    sum = sum16(l3 + 8, 32, 0);
  }
  put16(l4 + 2 * worker_side, worker.port);
  write_stamp(frame + l.stamp, stamp);
  const unsigned l4_len = l.len - l.l4;
  const bool tcp = l.proto == Proto::kTcp;
  uint8_t* csum = l4 + (tcp ? 16 : 6);
  put16(csum, 0);
  sum += (tcp ? pkt::kTcp : pkt::kUdp) + l4_len;
  // Header and stamp; the rest of the payload is zero.
  sum = sum16(l4, static_cast<size_t>(l.stamp - l.l4) + kStampSize, sum);
  uint16_t c = static_cast<uint16_t>(~fold(sum));
  if (!tcp && c == 0) c = 0xffff;  // UDP: 0 means "no checksum"
  put16(csum, c);
}

}  // namespace psgate::gen
