// SPDX-License-Identifier: BSD-3-Clause
// packet_meta_word1 composes PacketMeta's second word in a register (the RX
// stage's one store per packet): it must put every field exactly where the
// struct's own layout has it, or later stages would read the wrong job, class
// or header offset.
#include <gtest/gtest.h>

#include <cstring>

#include "psgate/packet_meta.h"

namespace psgate {
namespace {

PacketMeta from_word1(uint64_t rx_tsc, uint64_t word1) {
  uint8_t bytes[sizeof(PacketMeta)];
  std::memcpy(bytes, &rx_tsc, 8);
  std::memcpy(bytes + 8, &word1, 8);
  PacketMeta m;
  std::memcpy(&m, bytes, sizeof(m));
  return m;
}

TEST(PacketMeta, Word1PutsEveryFieldWhereTheStructHasIt) {
  struct Case {
    uint32_t slot;
    uint16_t l3;
    uint8_t version;
    uint8_t cls;
  };
  for (const Case& c : {Case{0, 14, 4, 0}, Case{kNoJob, 0, 0, 7}, Case{12345, 18, 6, 63}, Case{1, 0xffff, 0x7f, 0xff},
                        Case{0xfffffffe, 22, 4, 1}}) {
    const PacketMeta m = from_word1(0x0123456789abcdefull, packet_meta_word1(c.slot, c.l3, c.version, c.cls));
    EXPECT_EQ(m.rx_tsc, 0x0123456789abcdefull);
    EXPECT_EQ(m.job_slot, c.slot);
    EXPECT_EQ(m.l3_offset, c.l3);
    EXPECT_EQ(m.ip_version, c.version);
    EXPECT_EQ(m.mark_ce, 0) << "RX never marks";
    EXPECT_EQ(m.cls, c.cls);
  }
  // And the other way: a struct filled field by field reads back as the word.
  PacketMeta m{};
  m.job_slot = 77;
  m.l3_offset = 14;
  m.ip_version = 4;
  m.cls = 3;
  uint64_t word1;
  std::memcpy(&word1, reinterpret_cast<const uint8_t*>(&m) + 8, 8);
  EXPECT_EQ(word1, packet_meta_word1(77, 14, 4, 3));
}

}  // namespace
}  // namespace psgate
