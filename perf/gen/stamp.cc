// SPDX-License-Identifier: BSD-3-Clause
#include "stamp.h"

#include <random>

namespace psgate::gen {

uint16_t draw_run_tag() {
  std::random_device rd;
  for (;;) {
    const auto tag = static_cast<uint16_t>(rd());
    if (tag != 0) return tag;
  }
}

bool find_stamp(const uint8_t* f, size_t len, Stamp* out) {
  size_t off = 12;
  if (len < off + 2) return false;
  uint16_t type = static_cast<uint16_t>(f[off] << 8 | f[off + 1]);
  if (type == 0x8100 || type == 0x88a8) {  // one VLAN tag (a bridge may add it)
    off += 4;
    if (len < off + 2) return false;
    type = static_cast<uint16_t>(f[off] << 8 | f[off + 1]);
  }
  off += 2;
  uint8_t proto;
  uint16_t run;
  if (type == 0x0800) {
    if (len < off + 20) return false;
    const size_t ihl = (f[off] & 0x0fu) * 4u;
    const bool later_fragment = ((f[off + 6] & 0x1fu) << 8 | f[off + 7]) != 0;
    if ((f[off] >> 4) != 4 || ihl < 20 || later_fragment) return false;
    proto = f[off + 9];
    run = static_cast<uint16_t>(f[off + 4] << 8 | f[off + 5]);  // Identification
    off += ihl;
  } else if (type == 0x86dd) {
    if (len < off + 40 || (f[off] >> 4) != 6) return false;
    proto = f[off + 6];
    run = static_cast<uint16_t>(f[off + 2] << 8 | f[off + 3]);  // the flow label's low 16 bits
    off += 40;
  } else {
    return false;
  }
  if (proto == 17) {
    off += 8;
  } else if (proto == 6) {
    if (len < off + 13 || (f[off + 12] >> 4) < 5) return false;
    off += (f[off + 12] >> 4) * 4u;
  } else {
    return false;
  }
  if (len < off + kStampSize) return false;
  const uint8_t* p = f + off;
  uint16_t magic;
  std::memcpy(&magic, p, 2);
  if (magic != kStampMagic) return false;
  uint64_t flow_tsc;
  out->run = run;
  std::memcpy(&out->stream, p + 2, 2);
  std::memcpy(&out->seq, p + 4, 4);
  std::memcpy(&flow_tsc, p + 8, 8);
  out->flow = static_cast<uint32_t>(flow_tsc >> kStampTscBits);
  out->tsc = flow_tsc & kStampTscMask;
  return true;
}

}  // namespace psgate::gen
