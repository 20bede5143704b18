// SPDX-License-Identifier: BSD-3-Clause
// Frame sizing for the configured MTU (see frame_plan.h).
#include "psgate/frame_plan.h"

#include <algorithm>

#include "psgate/packet_parser.h"

namespace psgate {

namespace {

const char* const kRoles[2] = {"wire", "host"};

uint32_t round_up(uint32_t v, uint32_t to) { return (v + to - 1) / to * to; }
uint32_t segments_of(uint32_t frame, uint32_t room) { return (frame + room - 1) / room; }

}  // namespace

std::string FramePlan::describe(unsigned port) const {
  std::string out = "mtu " + std::to_string(mtu) + ", frames up to " + std::to_string(max_frame) + " B, ";
  if (max_frame <= kDefaultDataRoom) {
    out += "one " + std::to_string(data_room) + " B mbuf per frame";
  } else if (data_room >= max_frame) {
    out += std::to_string(data_room) + " B mbufs (one per frame: a device here cannot chain)";
  } else {
    out += std::string("mbuf chains of ") + std::to_string(data_room) + " B segments" +
           (scatter[port] ? " (scatter RX offload)" : " (the driver chains by itself)");
  }
  if (multi_seg_tx[port] && max_segs[port] != kAnySegmentCount)
    out += ", sends at most " + std::to_string(max_segs[port]) + " segments a packet";
  out += multi_seg_tx[port] ? ", multi-segment TX offload" : ", no multi-segment TX offload offered";
  return out;
}

Result<FramePlan> plan_frames(const ConfigSpec& config, const PortCapacity caps[2]) {
  const PortSpec* specs[2] = {&config.wire, &config.host};
  FramePlan plan;
  plan.mtu = config.wire.mtu;
  plan.max_frame = max_frame_bytes(plan.mtu, kMaxVlanTags);
  bool all_chain = true;
  uint32_t min_room = kDefaultDataRoom;
  for (unsigned p = 0; p < 2; ++p) {
    const PortCapacity& cap = caps[p];
    if (specs[p]->mtu > cap.mtu_limit) {
      return Result<FramePlan>::failure("ports." + std::string(kRoles[p]) + ".mtu: " + std::to_string(specs[p]->mtu) +
                                        " is above what device " + cap.name + " carries (MTU " +
                                        std::to_string(cap.mtu_limit) + ", from " + cap.limit_source + ")");
    }
    // A chain received on one port leaves by the other: both must be able
    // to send one.
    all_chain = all_chain && (cap.scatter_offload || cap.chains_by_itself) && cap.multi_seg_tx;
    if (cap.min_data_room > min_room) min_room = cap.min_data_room;
    plan.multi_seg_tx[p] = cap.multi_seg_tx;
    // Without multi-segment TX enabled a device may send only a chain's
    // first segment (af_xdp copies pkt_len bytes from it): one segment.
    plan.max_segs[p] = !cap.multi_seg_tx ? 1 : cap.tx_max_segs == 0 ? kAnySegmentCount : cap.tx_max_segs;
  }
  uint32_t room = min_room;
  if (plan.max_frame > room && !all_chain) room = plan.max_frame;
  // A chain received on either port leaves by the other: no frame may take
  // more segments than the stricter port sends. Whole KiB, because ixgbe
  // sizes its receive buffers in 1 KiB steps (rounding the room down) and
  // i40e in 128 B ones: a room between steps would chain in smaller pieces.
  const uint32_t seg_limit = std::min(plan.max_segs[0], plan.max_segs[1]);
  if (plan.max_frame > room && segments_of(plan.max_frame, room) > seg_limit)
    room = round_up(segments_of(plan.max_frame, seg_limit), 1024);
  // Whole cache lines: the pool rounds element sizes anyway.
  room = round_up(room, 64);
  if (room > kMaxDataRoom) {
    // Only reachable with an MTU near 64 KiB on a device that cannot chain.
    return Result<FramePlan>::failure(
        "ports.wire.mtu: " + std::to_string(plan.mtu) + " needs mbufs of " + std::to_string(room) + " B, above the " +
        std::to_string(kMaxDataRoom) + " B an mbuf can hold, and a device here cannot chain segments" +
        (seg_limit == kAnySegmentCount ? "" : " (or sends at most " + std::to_string(seg_limit) + " a packet)"));
  }
  plan.data_room = room;
  for (unsigned p = 0; p < 2; ++p) plan.scatter[p] = plan.max_frame > room && caps[p].scatter_offload;
  return plan;
}

}  // namespace psgate
