// The 16 bytes psgate-gen writes at the start of every packet's L4 payload,
// and how the receive side finds them again.
//
//   offset 0  u16 magic    0x5047 ("PG")
//          2  u16 stream   job index * 2 + direction (kPush 0, kPull 1)
//          4  u32 flow     flow id within the job and direction
//          8  u32 seq      per-flow sequence number, from 0; the receiver
//                          extends it to 64 bits (wraps are fine while
//                          reordering stays below 2^31 packets)
//         12  u32 tsc      low 32 bits of the TX TSC: latency = (rx - tx) mod
//                          2^32 cycles, valid below 2^32 cycles (> 1 s at 4 GHz)
//
// Host byte order (sender and receiver are the same process). 16 bytes is
// what fits a 64-byte IPv4/UDP frame: 14 + 20 + 8 + 16 + 4 (FCS) = 62 <= 64.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace psgate::gen {

inline constexpr uint16_t kStampMagic = 0x5047;
inline constexpr size_t kStampSize = 16;

struct Stamp {
  uint16_t stream = 0;
  uint32_t flow = 0;
  uint32_t seq = 0;
  uint32_t tsc = 0;
};

inline void write_stamp(uint8_t* p, const Stamp& s) {
  const uint16_t magic = kStampMagic;
  std::memcpy(p, &magic, 2);
  std::memcpy(p + 2, &s.stream, 2);
  std::memcpy(p + 4, &s.flow, 4);
  std::memcpy(p + 8, &s.seq, 4);
  std::memcpy(p + 12, &s.tsc, 4);
}

// Parses Ethernet (one optional VLAN tag), IPv4 or IPv6 (no extension
// headers), UDP or TCP and reads the stamp. False for anything else, for a
// non-first fragment and for a missing or wrong magic.
bool find_stamp(const uint8_t* frame, size_t len, Stamp* out);

}  // namespace psgate::gen
