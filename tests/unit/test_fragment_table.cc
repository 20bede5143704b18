// SPDX-License-Identifier: BSD-3-Clause
// The fragment table's rules, with an injected clock: what names a datagram,
// when an entry is stale, and which way a full set gives up.
#include "psgate/fragment_table.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace psgate {
namespace {

constexpr uint64_t kLifetime = 1000;
constexpr uint32_t kGen = 3;

ParsedPacket fragment(L3Kind l3, uint32_t id, bool later, uint8_t proto = 17, uint8_t src_last = 1) {
  ParsedPacket p;
  p.l3 = l3;
  p.fragment = true;
  p.non_first_fragment = later;
  p.fragment_id = l3 == L3Kind::kIpv4 ? uint32_t{proto} << 16 | id : id;  // as the parser names them
  p.proto = proto;
  p.src[l3 == L3Kind::kIpv4 ? 3 : 15] = src_last;
  p.dst[l3 == L3Kind::kIpv4 ? 3 : 15] = 2;
  if (l3 == L3Kind::kIpv6) p.src[0] = p.dst[0] = 0xfd;
  return p;
}

uint32_t recalled(const FragmentTable& t, const ParsedPacket& p, uint32_t gen, uint64_t now) {
  uint32_t v = 0xdead;
  return t.recall(p, gen, now, v) ? v : UINT32_MAX;
}

TEST(FragmentTable, ALaterFragmentFindsItsDatagramsFirst) {
  FragmentTable t(kLifetime);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 10, true), kGen, 0), UINT32_MAX) << "an empty table knew it";
  t.remember(fragment(L3Kind::kIpv4, 10, false), kGen, 100, 42);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 10, true), kGen, 150), 42u);
}

TEST(FragmentTable, IdentificationAddressesAndIpv4ProtocolNameTheDatagram) {
  FragmentTable t(kLifetime);
  t.remember(fragment(L3Kind::kIpv4, 10, false, 17), kGen, 0, 1);
  t.remember(fragment(L3Kind::kIpv6, 10, false, 17), kGen, 0, 2);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 11, true), kGen, 1), UINT32_MAX) << "another Identification";
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 10, true, 6), kGen, 1), UINT32_MAX) << "another IPv4 protocol";
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 10, true, 17, 9), kGen, 1), UINT32_MAX) << "another source";
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 10, true), kGen, 1), 1u);
  // IPv6 leaves the protocol out: a later fragment names the header after
  // the Fragment header, which need not be the first's upper layer.
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv6, 10, true, 60), kGen, 1), 2u);
}

TEST(FragmentTable, AnEntryOfAnotherGenerationOrPastItsLifetimeIsNotUsed) {
  FragmentTable t(kLifetime);
  t.remember(fragment(L3Kind::kIpv4, 1, false), kGen, 500, 7);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 1, true), kGen + 1, 501), UINT32_MAX);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 1, true), kGen, 500 + kLifetime), 7u) << "the last tick it lives";
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 1, true), kGen, 501 + kLifetime), UINT32_MAX);
}

TEST(FragmentTable, AFirstFragmentSeenAgainUpdatesItsOwnEntry) {
  FragmentTable t(kLifetime);
  t.remember(fragment(L3Kind::kIpv4, 1, false), kGen, 0, 7);
  t.remember(fragment(L3Kind::kIpv4, 1, false), kGen, 10, 8);
  EXPECT_EQ(recalled(t, fragment(L3Kind::kIpv4, 1, true), kGen, 11), 8u);
}

// More datagrams than the table holds: the newest are all still there (a
// full set gives up its oldest), and stale entries are taken before live
// ones, so a table full of old datagrams costs a new one nothing.
TEST(FragmentTable, AFullSetGivesUpItsOldestAndStaleEntriesGoFirst) {
  constexpr uint32_t kCapacity = FragmentTable::kSets * FragmentTable::kWays;
  constexpr uint32_t kDatagrams = 16 * kCapacity;
  FragmentTable t(2 * kDatagrams);  // none ages out here: each arrives a tick after the one before
  for (uint32_t id = 0; id < kDatagrams; ++id) t.remember(fragment(L3Kind::kIpv4, id, false), kGen, id, id);
  unsigned oldest_kept = 0;
  for (uint32_t id = 0; id < kCapacity; ++id)
    oldest_kept += recalled(t, fragment(L3Kind::kIpv4, id, true), kGen, kDatagrams) != UINT32_MAX;
  EXPECT_EQ(oldest_kept, 0u) << "the oldest datagrams outlived newer ones";
  unsigned newest_kept = 0;
  for (uint32_t id = kDatagrams - 32; id < kDatagrams; ++id)
    newest_kept += recalled(t, fragment(L3Kind::kIpv4, id, true), kGen, kDatagrams) == id;
  EXPECT_EQ(newest_kept, 32u);
  // Everything above is stale for generation kGen + 1: 32 new datagrams
  // each take a stale way, and none pushes out another of them.
  for (uint32_t id = 0; id < 32; ++id) t.remember(fragment(L3Kind::kIpv4, id, false, 6), kGen + 1, kDatagrams, id + 1);
  unsigned kept = 0;
  for (uint32_t id = 0; id < 32; ++id)
    kept += recalled(t, fragment(L3Kind::kIpv4, id, true, 6), kGen + 1, kDatagrams) == id + 1;
  EXPECT_EQ(kept, 32u);
}

}  // namespace
}  // namespace psgate
