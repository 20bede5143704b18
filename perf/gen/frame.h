// SPDX-License-Identifier: BSD-3-Clause
// Packet templates and the per-packet patch.
//
// Setup (allocates): one template per (job, direction, frame size), built for
// flow 0 with an all-zero payload. Per packet (no allocation): the TX loop
// copies the template into an mbuf and patch_frame() writes the flow's worker
// address and port, the stamp and the run tag (IPv4 Identification, IPv6
// flow label: stamp.h), and recomputes the IPv4 header and L4 checksums.
// IPv4 templates have DF set. The payload after the stamp stays zero, so it
// adds nothing to the L4 checksum and only headers + stamp are summed.
#pragma once

#include <cstdint>
#include <vector>

#include "flow_map.h"
#include "profile.h"
#include "stamp.h"

namespace psgate::gen {

struct FrameLayout {
  uint16_t len = 0;  // bytes in the mbuf: the frame without its FCS
  uint16_t l3 = 0;   // offsets from the start of the frame
  uint16_t l4 = 0;
  uint16_t stamp = 0;  // = L4 payload
  bool v6 = false;
  Proto proto = Proto::kUdp;
  Dir dir = kPush;
};

struct FrameTemplate {
  FrameLayout layout;
  std::vector<uint8_t> bytes;  // layout.len bytes
};

// `frame_size` includes the FCS and must be >= min_frame_size().
FrameTemplate build_template(const JobProfile& job, Dir dir, uint32_t frame_size);

// The repeating sequence of frame sizes (incl. FCS) of a job, sizes below the
// job's minimum raised to it:
//   fixed: {size}
//   imix:  7:4:1 of 64/594/1518, interleaved over 12 packets
//   ps:    {1518, 1518, min}: MTU data, one ACK-size segment per two
std::vector<uint32_t> size_pattern(const JobProfile& job);

void patch_frame(uint8_t* frame, const FrameLayout& layout, const WorkerEnd& worker, const Stamp& stamp);

}  // namespace psgate::gen
