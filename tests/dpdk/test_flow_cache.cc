// SPDX-License-Identifier: BSD-3-Clause
// FlowCache behaviour: hits, generations, keys, capacity and eviction, bulk masks.
#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "psgate/flow_cache.h"

namespace psgate {
namespace {

ParsedPacket v4(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t proto = 6) {
  ParsedPacket p;
  p.l3 = L3Kind::kIpv4;
  p.has_ports = true;
  p.proto = proto;
  p.sport = sport;
  p.dport = dport;
  for (int i = 0; i < 4; ++i) {
    p.src[i] = static_cast<uint8_t>(src >> (24 - 8 * i));
    p.dst[i] = static_cast<uint8_t>(dst >> (24 - 8 * i));
  }
  return p;
}

// The same leading bytes as v4(src, dst, ...) but an IPv6 packet.
ParsedPacket v6(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport, uint8_t proto = 6) {
  ParsedPacket p = v4(src, dst, sport, dport, proto);
  p.l3 = L3Kind::kIpv6;
  return p;
}

std::unique_ptr<FlowCache> must_create(uint32_t entries, const std::string& name = "fc") {
  auto r = FlowCache::create(entries, name, 0);
  EXPECT_TRUE(r.ok()) << r.error();
  return r.ok() ? std::move(*r) : nullptr;
}

// Single-packet lookup: the value on a hit, nullopt on a miss.
std::optional<uint32_t> get(FlowCache& fc, const ParsedPacket& p, uint32_t gen) {
  const ParsedPacket* ptrs[1] = {&p};
  uint32_t out[1] = {0xabababab};
  const uint64_t mask = fc.lookup(ptrs, 1, gen, out);
  EXPECT_EQ(mask & ~uint64_t{1}, 0u);
  if (mask == 0) {
    EXPECT_EQ(out[0], 0xababababu) << "out[] written on a miss";
    return std::nullopt;
  }
  return out[0];
}

TEST(FlowCache, HitAfterInsertAndGenerations) {
  auto fc = must_create(1024);
  ASSERT_NE(fc, nullptr);
  const ParsedPacket a = v4(0x0a000001, 0x0a000002, 1000, 2222);
  EXPECT_EQ(get(*fc, a, 1), std::nullopt);
  fc->insert(a, 1, 42);
  EXPECT_EQ(get(*fc, a, 1), 42u);
  EXPECT_EQ(get(*fc, a, 2), std::nullopt) << "other generation must miss";
  EXPECT_EQ(get(*fc, a, 0), std::nullopt);
  // Overwrite: same key, new generation and value.
  fc->insert(a, 2, 7);
  EXPECT_EQ(get(*fc, a, 2), 7u);
  EXPECT_EQ(get(*fc, a, 1), std::nullopt);
  // Overwrite within a generation.
  fc->insert(a, 2, 0xfffffffe);
  EXPECT_EQ(get(*fc, a, 2), 0xfffffffeu);
  // Generation and value use their full 32 bits independently.
  fc->insert(a, 0xffffffff, 0);
  EXPECT_EQ(get(*fc, a, 0xffffffff), 0u);
  EXPECT_EQ(fc->evictions(), 0u);
}

TEST(FlowCache, EveryKeyFieldMatters) {
  auto fc = must_create(1024);
  ASSERT_NE(fc, nullptr);
  const ParsedPacket base = v4(0x0a000001, 0x0a000002, 1000, 2222);
  fc->insert(base, 1, 1);
  struct Variant {
    const char* what;
    ParsedPacket p;
  };
  std::vector<Variant> variants = {
      {"v6 with the same leading bytes", v6(0x0a000001, 0x0a000002, 1000, 2222)},
      {"proto", v4(0x0a000001, 0x0a000002, 1000, 2222, 17)},
      {"sport", v4(0x0a000001, 0x0a000002, 1001, 2222)},
      {"dport", v4(0x0a000001, 0x0a000002, 1000, 2223)},
      {"src", v4(0x0a000003, 0x0a000002, 1000, 2222)},
      {"dst", v4(0x0a000001, 0x0a000003, 1000, 2222)},
      {"swapped direction", v4(0x0a000002, 0x0a000001, 2222, 1000)},
  };
  ParsedPacket v6_tail = v6(0x0a000001, 0x0a000002, 1000, 2222);
  v6_tail.src[15] = 1;
  variants.push_back({"v6 differing in the last src byte", v6_tail});
  uint32_t value = 2;
  for (const Variant& v : variants) {
    EXPECT_EQ(get(*fc, v.p, 1), std::nullopt) << v.what;
    fc->insert(v.p, 1, value);
    EXPECT_EQ(get(*fc, v.p, 1), value) << v.what;
    ++value;
  }
  EXPECT_EQ(get(*fc, base, 1), 1u) << "base entry clobbered";
  // Fields outside the key (traffic class, offsets) do not split flows.
  ParsedPacket tos = base;
  tos.traffic_class = 0xb8;
  tos.l3_offset = 18;
  EXPECT_EQ(get(*fc, tos, 1), 1u);
}

// ICMP, GRE, ESP...: one entry per hosts and protocol (ports 0/0 in the key;
// the rule matcher's result is one per hosts and protocol too).
TEST(FlowCache, PacketsWithoutPortsAreCachedPerHostsAndProtocol) {
  auto fc = must_create(64);
  ASSERT_NE(fc, nullptr);
  ParsedPacket icmp = v4(1, 2, 0, 0, 1);
  icmp.has_ports = false;
  ASSERT_TRUE(FlowCache::cacheable(icmp));
  fc->insert(icmp, 1, 9);
  EXPECT_EQ(get(*fc, icmp, 1), 9u);
  ParsedPacket esp = icmp;
  esp.proto = 50;
  EXPECT_EQ(get(*fc, esp, 1), std::nullopt) << "another protocol shares the entry";
  ParsedPacket v6 = icmp;
  v6.l3 = L3Kind::kIpv6;
  v6.proto = 58;
  fc->insert(v6, 1, 10);
  EXPECT_EQ(get(*fc, v6, 1), 10u);
}

TEST(FlowCache, NonCacheablePacketsNeitherInsertNorHit) {
  auto fc = must_create(64);
  ASSERT_NE(fc, nullptr);
  ParsedPacket non_ip = v4(1, 2, 0, 0, 1);
  non_ip.l3 = L3Kind::kNonIp;
  ParsedPacket frag = v4(1, 2, 0, 0, 17);
  frag.non_first_fragment = true;
  frag.has_ports = false;
  ParsedPacket frag_with_ports = v4(1, 2, 3, 4, 17);  // inconsistent, but must not be cached
  frag_with_ports.non_first_fragment = true;
  ParsedPacket malformed = v4(1, 2, 3, 4);
  malformed.malformed = true;
  for (const ParsedPacket* p : {&non_ip, &frag, &frag_with_ports, &malformed}) {
    EXPECT_FALSE(FlowCache::cacheable(*p));
    fc->insert(*p, 1, 9);
    EXPECT_EQ(get(*fc, *p, 1), std::nullopt);
  }
  // The same 5-tuple as a cacheable packet was never inserted.
  EXPECT_EQ(get(*fc, v4(1, 2, 3, 4), 1), std::nullopt);
  EXPECT_EQ(fc->evictions(), 0u);
}

TEST(FlowCache, CapacityIsBoundedAndEvictionsCounted) {
  constexpr uint32_t kEntries = 256;
  auto fc = must_create(kEntries);
  ASSERT_NE(fc, nullptr);
  // IPv4 flows: one 64-byte set of three ways per two entries asked for.
  ASSERT_EQ(fc->ipv4_capacity(), kEntries * 3 / 2);
  ASSERT_EQ(fc->ipv6_capacity(), kEntries);
  const uint32_t capacity = fc->ipv4_capacity();
  const uint32_t kTries = 4 * capacity;
  auto flow = [](uint32_t i) { return v4(i, 0x0a000001, 1, 2); };
  for (uint32_t i = 0; i < kTries; ++i) {
    fc->insert(flow(i), 1, i);
    // The newest entry of its set is never the one evicted.
    ASSERT_EQ(get(*fc, flow(i), 1), i) << "just-inserted flow " << i << " missing";
  }
  uint32_t present = 0;
  for (uint32_t i = 0; i < kTries; ++i) {
    auto got = get(*fc, flow(i), 1);
    if (got) {
      EXPECT_EQ(*got, i);
      ++present;
    }
  }
  EXPECT_LE(present, capacity);
  EXPECT_GE(present, capacity * 3 / 4) << "table far below its nominal size";
  EXPECT_EQ(present + fc->evictions(), kTries) << "every insert is stored, and every loss is an eviction";

  // Entries of an older generation are free: refilling with a new generation
  // evicts nothing until the sets fill with live entries again.
  const uint64_t before = fc->evictions();
  for (uint32_t i = 0; i < kEntries / 8; ++i) fc->insert(flow(kTries + i), 2, i);
  EXPECT_EQ(fc->evictions(), before) << "stale entries were counted as evictions";

  // A re-insert updates the entry in place, without eviction.
  const uint64_t before_update = fc->evictions();
  fc->insert(flow(kTries), 3, 77);
  EXPECT_EQ(get(*fc, flow(kTries), 3), 77u);
  EXPECT_EQ(fc->evictions(), before_update);
}

// Two candidate sets per flow: at the sizing docs/configuration.md advises
// (twice the flows in entries: half load for IPv6, a third for IPv4)
// virtually every flow keeps its entry.
TEST(FlowCache, HalfLoadKeepsVirtuallyEveryFlow) {
  constexpr uint32_t kEntries = 1 << 14;
  auto fc = must_create(kEntries);
  ASSERT_NE(fc, nullptr);
  std::mt19937 rng(11);
  std::vector<ParsedPacket> flows;
  for (uint32_t i = 0; i < kEntries / 2; ++i) {
    const uint32_t src = static_cast<uint32_t>(rng()), dst = static_cast<uint32_t>(rng());
    const auto sport = static_cast<uint16_t>(rng()), dport = static_cast<uint16_t>(rng());
    flows.push_back(v4(src, dst, sport, dport, 17));
    flows.push_back(v6(src, dst, sport, dport, 17));
  }
  for (uint32_t i = 0; i < flows.size(); ++i) fc->insert(flows[i], 1, i);
  uint32_t present = 0;
  for (uint32_t i = 0; i < flows.size(); ++i) {
    const auto got = get(*fc, flows[i], 1);
    if (got) {
      ASSERT_EQ(*got, i);
      ++present;
    }
  }
  EXPECT_GE(present, flows.size() * 99 / 100) << "evictions: " << fc->evictions();
  EXPECT_EQ(present + fc->evictions(), flows.size());
}

// The IPv4 placement rule, driven through keys whose sets are known: the
// smallest cache (8 entries: 4 sets of 3 ways), sets picked by the table's
// own rule (FlowCache::first_set4 / second_set4).
class FlowCacheSets : public ::testing::Test {
 protected:
  static constexpr uint32_t kSets = 4;
  struct Key {
    FlowKey4 key;
    uint32_t hash;
  };
  static unsigned first_set(uint32_t h) { return FlowCache::first_set4(h, kSets - 1); }
  static unsigned second_set(uint32_t h) { return FlowCache::second_set4(h, kSets - 1); }
  // The next `n` keys (from a fixed sequence) whose first and second sets are
  // `first` and `second`.
  std::vector<Key> keys_in(unsigned first, unsigned second, unsigned n) {
    std::vector<Key> out;
    while (out.size() < n) {
      FlowKey4 k = flow_key4(v4(static_cast<uint32_t>(rng_()), static_cast<uint32_t>(rng_()),
                                static_cast<uint16_t>(rng_()), static_cast<uint16_t>(rng_()), 17));
      const uint32_t h = FlowCache::hash(k);
      if (first_set(h) == first && second_set(h) == second) out.push_back({k, h});
    }
    return out;
  }
  static std::optional<uint32_t> get4(const FlowCache& fc, const Key& k, uint32_t gen) {
    uint32_t v = 0xabababab;
    const uint64_t hit = fc.lookup4(&k.key, &k.hash, 1, gen, &v);
    if (hit == 0) {
      EXPECT_EQ(v, 0xababababu) << "out[] written on a miss";
      return std::nullopt;
    }
    return v;
  }
  std::mt19937 rng_{23};
};

// A full first set sends a new flow to its second set, where the lookup's
// second pass finds it; nothing is evicted while either set has room.
TEST_F(FlowCacheSets, FullFirstSetSpillsToTheSecond) {
  auto fc = must_create(8);
  ASSERT_NE(fc, nullptr);
  ASSERT_EQ(fc->ipv4_capacity(), 3 * kSets);
  const std::vector<Key> a = keys_in(0, 1, 4);  // first set 0, second set 1
  for (unsigned i = 0; i < a.size(); ++i) fc->insert4(a[i].key, a[i].hash, 1, 10 + i);
  for (unsigned i = 0; i < a.size(); ++i) EXPECT_EQ(get4(*fc, a[i], 1), 10 + i) << "key " << i;
  // Set 1 holds a[3] now: two more flows whose first set is 1 still fit.
  const std::vector<Key> b = keys_in(1, 2, 2);
  for (unsigned i = 0; i < b.size(); ++i) fc->insert4(b[i].key, b[i].hash, 1, 20 + i);
  for (unsigned i = 0; i < b.size(); ++i) EXPECT_EQ(get4(*fc, b[i], 1), 20 + i) << "key b" << i;
  EXPECT_EQ(get4(*fc, a[3], 1), 13u) << "the spilled flow was pushed out";
  EXPECT_EQ(fc->evictions(), 0u);
  // A burst of all six, as the RX stage looks them up: one pass over first
  // sets, a second for the flow that is not in its first.
  FlowKey4 keys[6];
  uint32_t hashes[6];
  uint32_t out[6];
  for (unsigned i = 0; i < 6; ++i) {
    const Key& k = i < 4 ? a[i] : b[i - 4];
    keys[i] = k.key;
    hashes[i] = k.hash;
  }
  ASSERT_EQ(fc->lookup4(keys, hashes, 0x3f, 1, out), 0x3fu);
  for (unsigned i = 0; i < 6; ++i) EXPECT_EQ(out[i], i < 4 ? 10 + i : 20 + (i - 4));
}

// Both picks the same set: three flows fit, a fourth evicts the oldest
// (counted), and a refresh moves nothing.
TEST_F(FlowCacheSets, OneCandidateSetEvictsItsOldest) {
  auto fc = must_create(8);
  ASSERT_NE(fc, nullptr);
  const std::vector<Key> k = keys_in(2, 2, 4);
  for (unsigned i = 0; i < 3; ++i) fc->insert4(k[i].key, k[i].hash, 1, 30 + i);
  fc->insert4(k[0].key, k[0].hash, 1, 99);  // a refresh, not a new entry
  EXPECT_EQ(fc->evictions(), 0u);
  fc->insert4(k[3].key, k[3].hash, 1, 33);
  EXPECT_EQ(fc->evictions(), 1u);
  EXPECT_EQ(get4(*fc, k[0], 1), std::nullopt) << "the oldest entry is the one evicted";
  EXPECT_EQ(get4(*fc, k[1], 1), 31u);
  EXPECT_EQ(get4(*fc, k[2], 1), 32u);
  EXPECT_EQ(get4(*fc, k[3], 1), 33u);
}

// A set of an older generation holds nothing live: the first entry of the
// new generation empties it, without counting evictions, and none of its old
// entries comes back under either generation.
TEST_F(FlowCacheSets, NewGenerationEmptiesASetWithoutEvicting) {
  auto fc = must_create(8);
  ASSERT_NE(fc, nullptr);
  const std::vector<Key> k = keys_in(3, 0, 3);
  for (unsigned i = 0; i < 3; ++i) fc->insert4(k[i].key, k[i].hash, 1, 40 + i);
  fc->insert4(k[1].key, k[1].hash, 2, 50);  // refreshed under generation 2
  EXPECT_EQ(fc->evictions(), 0u);
  EXPECT_EQ(get4(*fc, k[1], 2), 50u);
  EXPECT_EQ(get4(*fc, k[1], 1), std::nullopt);
  for (unsigned i : {0u, 2u}) {
    EXPECT_EQ(get4(*fc, k[i], 1), std::nullopt) << "key " << i;
    EXPECT_EQ(get4(*fc, k[i], 2), std::nullopt) << "key " << i;
  }
  // The set has room again: two new flows of generation 2 evict nothing.
  const std::vector<Key> more = keys_in(3, 1, 2);
  for (unsigned i = 0; i < 2; ++i) fc->insert4(more[i].key, more[i].hash, 2, 60 + i);
  EXPECT_EQ(fc->evictions(), 0u);
  EXPECT_EQ(get4(*fc, more[0], 2), 60u);
  EXPECT_EQ(get4(*fc, more[1], 2), 61u);
  EXPECT_EQ(get4(*fc, k[1], 2), 50u);
}

TEST(FlowCache, SizeRoundsUpToPowerOfTwo) {
  auto fc = must_create(100);
  ASSERT_NE(fc, nullptr);
  EXPECT_EQ(fc->ipv6_capacity(), 128u);
  EXPECT_EQ(fc->ipv4_capacity(), 192u);
}

TEST(FlowCache, BulkLookupMasks) {
  auto fc = must_create(4096);
  ASSERT_NE(fc, nullptr);
  std::mt19937 rng(5);
  // Pool of flows; even-numbered ones inserted (gen 3), every 3rd of those
  // re-inserted with a stale generation; some packets not cacheable.
  std::vector<ParsedPacket> pool;
  for (uint32_t i = 0; i < 512; ++i) {
    ParsedPacket p = i % 2 ? v6(0xfd000000 + i, 7, static_cast<uint16_t>(i), 80)
                           : v4(0x0a000000 + i, 7, static_cast<uint16_t>(i), 80);
    if (i % 11 == 0) {  // never cached
      p.non_first_fragment = true;
      p.has_ports = false;
      p.sport = p.dport = 0;
    }
    pool.push_back(p);
  }
  auto expected = [](uint32_t i) -> std::optional<uint32_t> {
    if (i % 11 == 0 || i % 4 != 0 || i % 3 == 0) return std::nullopt;
    return 1000 + i;
  };
  // The stale entries first, as the data path makes them: its generation
  // only moves on (an IPv4 set holds one generation's entries).
  for (uint32_t gen : {2u, 3u}) {
    for (uint32_t i = 0; i < pool.size(); ++i) {
      if (i % 4 == 0 && (i % 3 == 0 ? 2u : 3u) == gen) fc->insert(pool[i], gen, 1000 + i);
    }
  }
  for (unsigned n = 1; n <= 64; ++n) {
    for (int round = 0; round < 8; ++round) {
      std::vector<uint32_t> idx(n);
      std::vector<const ParsedPacket*> ptrs(n);
      for (unsigned k = 0; k < n; ++k) {
        idx[k] = static_cast<uint32_t>(rng() % pool.size());
        ptrs[k] = &pool[idx[k]];
      }
      std::vector<uint32_t> out(n, 0xcdcdcdcd);
      const uint64_t mask = fc->lookup(ptrs.data(), n, 3, out.data());
      if (n < 64) {
        ASSERT_EQ(mask >> n, 0u) << "bits beyond n set, n=" << n;
      }
      for (unsigned k = 0; k < n; ++k) {
        const auto want = expected(idx[k]);
        const bool hit = (mask >> k) & 1;
        ASSERT_EQ(hit, want.has_value()) << "n=" << n << " k=" << k << " flow=" << idx[k];
        ASSERT_EQ(out[k], want ? *want : 0xcdcdcdcdu) << "n=" << n << " k=" << k;
      }
    }
  }
}

TEST(FlowCache, CreateValidatesAndNamesAreUnique) {
  EXPECT_FALSE(FlowCache::create(0, "fc", 0).ok());
  EXPECT_FALSE(FlowCache::create(4, "fc", 0).ok());
  auto a = must_create(64, "dup-name");
  auto b = must_create(64, "dup-name");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const ParsedPacket p = v4(1, 2, 3, 4);
  a->insert(p, 1, 10);
  EXPECT_EQ(get(*a, p, 1), 10u);
  EXPECT_EQ(get(*b, p, 1), std::nullopt) << "two caches share one table";
}

}  // namespace
// The wire-key burst path (lookup4/insert4) and the parsed-packet path address
// the same entries: whichever way a flow went in, the other finds it. Masks
// select exactly the keys to compare; out[] is written for hits only.
// FlowCache::hash uses the CRC32-C instruction directly where the compiler
// may: it must give DPDK's rte_hash_crc values, whichever form is compiled.
TEST(FlowCache, HashIsDpdksCrc32c) {
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 1000; ++i) {
    FlowKey4 k;
    k.w[0] = x;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    k.w[1] = x;
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    EXPECT_EQ(FlowCache::hash(k), rte_hash_crc_8byte(k.w[1], rte_hash_crc_8byte(k.w[0], FlowCache::kHashSeed)));
  }
}

TEST(FlowCache, WireKeyPathAndParsedPathShareEntries) {
  auto fc = must_create(4096);
  ASSERT_NE(fc, nullptr);
  std::mt19937 rng(17);
  constexpr unsigned kFlows = 64;
  std::vector<ParsedPacket> flows;
  FlowKey4 keys[kFlows];
  uint32_t hashes[kFlows];
  for (unsigned i = 0; i < kFlows; ++i) {
    flows.push_back(v4(static_cast<uint32_t>(rng()), static_cast<uint32_t>(rng()), static_cast<uint16_t>(rng()),
                       static_cast<uint16_t>(rng()), i % 2 ? 6 : 17));
    keys[i] = flow_key4(flows[i]);
    hashes[i] = FlowCache::hash(keys[i]);
  }
  // Even flows in by wire key, odd ones by parsed packet.
  for (unsigned i = 0; i < kFlows; ++i) {
    if (i % 2 == 0) {
      fc->insert4(keys[i], hashes[i], 5, 100 + i);
    } else {
      fc->insert(flows[i], 5, 100 + i);
    }
  }
  for (unsigned i = 0; i < kFlows; ++i) EXPECT_EQ(get(*fc, flows[i], 5), 100 + i) << "parsed lookup of flow " << i;
  uint32_t out[kFlows];
  std::fill(std::begin(out), std::end(out), 0xcdcdcdcdu);
  const uint64_t every_third = 0x9249249249249249ull;  // bits 0, 3, 6, ...
  const uint64_t hits = fc->lookup4(keys, hashes, every_third, 5, out);
  EXPECT_EQ(hits, every_third) << "hits outside the mask, or missing inside it";
  for (unsigned i = 0; i < kFlows; ++i) {
    EXPECT_EQ(out[i], (every_third >> i & 1) ? 100 + i : 0xcdcdcdcdu) << "flow " << i;
  }
  // Another generation misses everywhere and writes nothing.
  std::fill(std::begin(out), std::end(out), 0xcdcdcdcdu);
  EXPECT_EQ(fc->lookup4(keys, hashes, ~uint64_t{0}, 6, out), 0u);
  for (unsigned i = 0; i < kFlows; ++i) EXPECT_EQ(out[i], 0xcdcdcdcdu);
  // A key that differs in any one byte is another flow.
  for (unsigned byte = 0; byte < 13; ++byte) {
    FlowKey4 k = keys[0];
    reinterpret_cast<uint8_t*>(k.w)[byte] ^= 0x01;  // bytes 0-7 addresses, 8-11 ports, 12 proto
    const uint32_t h = FlowCache::hash(k);
    uint32_t v = 0;
    EXPECT_EQ(fc->lookup4(&k, &h, 1, 5, &v), 0u) << "byte " << byte;
  }
  EXPECT_EQ(fc->evictions(), 0u);
}

}  // namespace psgate
