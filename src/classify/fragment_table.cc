// SPDX-License-Identifier: BSD-3-Clause
// The fragment table (fragment_table.h). Only fragments come here, which are
// rare on a PS host's links: plain loops, no prefetching.
#include "psgate/fragment_table.h"

#include <cstring>

namespace psgate {

FragmentTable::FragmentTable(uint64_t lifetime_ticks)
    : entries_(new Entry[kSets * kWays]()), lifetime_(lifetime_ticks) {
  static_assert((kSets & (kSets - 1)) == 0, "set index is a mask");
  static_assert(sizeof(Entry) == 64, "one cache line per entry");
}

FragmentTable::~FragmentTable() = default;

FragmentTable::Key FragmentTable::key_of(const ParsedPacket& p) {
  Key k{};
  // IPv4's fragment_id holds the protocol too; IPv6 names a datagram
  // without it (RFC 8200).
  k.w[0] = uint64_t{static_cast<uint8_t>(p.l3)} | uint64_t{p.fragment_id} << 32;
  // The parser zeroes an IPv4 address's last 12 bytes.
  std::memcpy(&k.w[1], p.src.data(), 16);
  std::memcpy(&k.w[3], p.dst.data(), 16);
  return k;
}

unsigned FragmentTable::set_of(const Key& k) {
  // A multiply-xorshift mix of the five words: the Identification alone
  // differs between one host pair's datagrams, so it must reach every bit.
  uint64_t h = 0;
  for (uint64_t w : k.w) {
    h = (h ^ w) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  }
  return static_cast<unsigned>(h >> 40) & (kSets - 1);
}

bool FragmentTable::live(const Entry& e, uint32_t generation, uint64_t now) const {
  return e.key.w[0] != 0 && (e.generation == generation || e.generation == kAnyGeneration) &&
         now - e.stamp <= lifetime_;
}

void FragmentTable::remember(const ParsedPacket& first, uint32_t generation, uint64_t now, uint32_t value) {
  const Key k = key_of(first);
  Entry* set = &entries_[size_t{set_of(k)} * kWays];
  Entry* victim = nullptr;
  for (unsigned w = 0; w < kWays; ++w) {
    Entry& e = set[w];
    if (std::memcmp(&e.key, &k, sizeof(k)) == 0) {  // the datagram's own (a first fragment sent again)
      victim = &e;
      break;
    }
    if (!live(e, generation, now)) {
      if (victim == nullptr || live(*victim, generation, now)) victim = &e;
    } else if (victim == nullptr || (live(*victim, generation, now) && e.stamp < victim->stamp)) {
      victim = &e;
    }
  }
  victim->key = k;
  victim->stamp = now;
  victim->generation = generation;
  victim->value = value;
}

bool FragmentTable::recall(const ParsedPacket& later, uint32_t generation, uint64_t now, uint32_t& value) const {
  const Key k = key_of(later);
  const Entry* set = &entries_[size_t{set_of(k)} * kWays];
  for (unsigned w = 0; w < kWays; ++w) {
    const Entry& e = set[w];
    if (std::memcmp(&e.key, &k, sizeof(k)) == 0 && live(e, generation, now)) {
      value = e.value;
      return true;
    }
  }
  return false;
}

}  // namespace psgate
