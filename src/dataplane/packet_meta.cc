// SPDX-License-Identifier: BSD-3-Clause
#include "psgate/packet_meta.h"

namespace psgate {

int g_packet_meta_offset = -1;

int register_packet_meta() {
  static const rte_mbuf_dynfield desc = {"psgate_packet_meta", sizeof(PacketMeta), alignof(PacketMeta), 0};
  g_packet_meta_offset = rte_mbuf_dynfield_register(&desc);
  return g_packet_meta_offset;
}

}  // namespace psgate
