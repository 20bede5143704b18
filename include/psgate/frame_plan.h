// SPDX-License-Identifier: BSD-3-Clause
// How the two ports carry frames of the configured MTU: the size of the mbufs
// and whether a large frame arrives as an mbuf chain. Pure decision logic (no
// DPDK): ports.cc reads what each device can do into a PortCapacity, this
// file decides, and the data plane sizes its mbuf pool and offloads from the
// plan.
//
//   ports.<p>.mtu ──▶ max frame = mtu + 14 + 4 x kMaxVlanTags
//        device limit?  ──no──▶ config error naming the key and the limit
//        fits 2048 B?   ──yes─▶ default mbufs
//        both ports chain large frames (scatter RX, or the driver's own)
//        and send chains (multi-segment TX)?
//                       ──yes─▶ default mbufs, chains, unless a frame
//                               would be more segments than a device
//                               sends as one packet: then mbufs large
//                               enough (whole KiB) for that many
//                       ──no──▶ mbufs as large as a frame
#pragma once

#include <cstdint>
#include <string>

#include "psgate/config.h"
#include "psgate/result.h"

namespace psgate {

// The data room of DPDK's default mbuf (RTE_MBUF_DEFAULT_DATAROOM) and its
// headroom (RTE_PKTMBUF_HEADROOM), restated so this file needs no DPDK.
inline constexpr uint32_t kDefaultDataRoom = 2048;
inline constexpr uint32_t kMbufHeadroom = 128;
// An mbuf's buf_len is 16 bits: the data room plus headroom must fit.
inline constexpr uint32_t kMaxDataRoom = 65535 - kMbufHeadroom;

struct PortCapacity {
  std::string name;               // device name, for messages
  uint32_t mtu_limit = 0;         // the largest MTU the device carries
  std::string limit_source;       // where mtu_limit comes from, for messages
  bool scatter_offload = false;   // RTE_ETH_RX_OFFLOAD_SCATTER offered
  bool chains_by_itself = false;  // the driver chains a large frame without the offload (memif, pcap)
  bool multi_seg_tx = false;      // RTE_ETH_TX_OFFLOAD_MULTI_SEGS offered
  // A driver that copies a whole received frame into one mbuf without
  // checking its size (af_packet in DPDK 22.11: up to framesz - 52 bytes,
  // while its queue set-up asks for framesz - 32: that is what is asked).
  uint32_t min_data_room = 0;
  // The most segments the device sends as one packet (its tx_desc_lim's
  // nb_mtu_seg_max, or nb_seg_max if lower); 0 when it states none. Intel's
  // i40e, iavf and ice take 8: a longer chain given to them is refused by
  // tx_prepare and, sent without it, stops the queue (a malicious driver
  // event).
  uint16_t tx_max_segs = 0;
  // The kernel's packet socket (af_packet) sends at most the MTU plus the
  // Ethernet header, plus 4 bytes only when the outer tag is 802.1Q
  // (0x8100): a frame with more tags, or an 802.1ad outer tag, is refused
  // by the kernel ("packet size is too long") after the driver counted it
  // sent. RX drops those as oversize instead.
  bool one_dot1q_tag_room = false;
};

// No limit on the segments of a packet.
inline constexpr uint16_t kAnySegmentCount = UINT16_MAX;

struct FramePlan {
  uint32_t mtu = 1500;
  uint32_t max_frame = 0;                 // the largest frame forwarded (bytes, no FCS)
  uint32_t data_room = kDefaultDataRoom;  // bytes of packet data per mbuf
  bool scatter[2] = {false, false};       // by port: enable RTE_ETH_RX_OFFLOAD_SCATTER
  bool multi_seg_tx[2] = {false, false};  // by port: enable RTE_ETH_TX_OFFLOAD_MULTI_SEGS
  // By port: the most segments a packet leaving it may have (1 without
  // multi-segment TX). A chain the plan's mbufs make always fits; a driver
  // that chains in smaller pieces (ixgbe rounds its buffers down to whole
  // KiB) can make a longer one, which RX drops as too_many_segments.
  uint16_t max_segs[2] = {kAnySegmentCount, kAnySegmentCount};
  std::string describe(unsigned port) const;  // one line for the start-up log
};

// caps[0] is the wire port, caps[1] the host port. Fails with one line
// naming ports.<p>.mtu when a device cannot carry the configured MTU.
Result<FramePlan> plan_frames(const ConfigSpec& config, const PortCapacity caps[2]);

}  // namespace psgate
