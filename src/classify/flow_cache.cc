// SPDX-License-Identifier: BSD-3-Clause
// Flow cache: see include/psgate/flow_cache.h for what it promises.
//
// Two tables, because an IPv4 5-tuple (13 bytes) fits a 16-byte key and an
// IPv6 one (37 bytes) needs 40:
//
//   FlowTable4:          sets[0 .. mask], a set = one cache line: a generation,
//                        three values, three 16-byte keys (Set4)
//   FlowTable6:          entries[0 .. mask] of 64 bytes, each with its own
//                        generation; a set = the 2 neighbouring entries
//                        {i & ~1, i | 1}
//   a flow may sit in either of 2 sets, picked by different bits of one
//   CRC32-C hash; each table's insert says which it picks.
//
// A zeroed key can never match: every real key has its family (4 or 6) in
// word 0 (IPv6) or word 1 (IPv4) (flow_key.h).
#include "psgate/flow_cache.h"
#include "psgate/config.h"  // kMinFlowCacheEntries, kMaxFlowCacheEntries

#include <rte_errno.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <bit>
#include <cstddef>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <cstring>

namespace psgate {

namespace {

constexpr unsigned kMaxBurst = FlowCache::kMaxBurst;
// The config loader refuses what this refuses (dataplane.flow_cache), so
// --check finds it: one pair of limits, in config.h.
constexpr uint32_t kMinEntries = kMinFlowCacheEntries;
constexpr uint32_t kMaxEntries = kMaxFlowCacheEntries;
static_assert(kMinEntries >= 8, "at least two IPv4 sets of two entries asked for, and one IPv6 set");

// One hash per family: IPv4 keys use FlowCache::hash (inline, the RX stage
// calls it per packet), IPv6 keys the same CRC chain over their five words.
inline uint32_t hash_key(const FlowKey4& k) { return FlowCache::hash(k); }
inline uint32_t hash_key(const FlowKey6& k) {
  uint32_t h = FlowCache::kHashSeed;
  for (uint64_t w : k.w) h = rte_hash_crc_8byte(w, h);
  return h;
}

template <typename Key>
inline bool same_key(const Key& a, const Key& b) {
  uint64_t diff = 0;  // branch-free: every word compared, then combined
  for (size_t i = 0; i < std::size(a.w); ++i) diff |= a.w[i] ^ b.w[i];
  return diff == 0;
}

template <typename Key>
inline bool is_empty(const Key& k) {
  uint64_t any = 0;
  for (uint64_t w : k.w) any |= w;
  return any == 0;
}

struct alignas(64) Entry6 {
  FlowKey6 key;
  uint32_t generation;
  uint32_t value;
};
static_assert(sizeof(Entry6) == 64, "one IPv6 entry per cache line");

}  // namespace

// The IPv6 table: 64-byte entries, each with its own generation, a set the 2
// neighbouring entries {i & ~1, i | 1} (two adjacent lines).
struct FlowTable6 {
  using Key = FlowKey6;
  using E = Entry6;
  E* entries = nullptr;
  uint32_t mask = 0;  // entries - 1

  E* first_set(uint32_t h) const { return entries + (h & mask & ~1u); }
  // The high half of the hash: independent of the bits that pick the first set.
  E* second_set(uint32_t h) const { return entries + (std::rotr(h, 16) & mask & ~1u); }

  static void prefetch_set(const E* set) {
    rte_prefetch0(set);
    rte_prefetch0(set + 1);
  }

  // The way of one set that holds `key`, or null. At most one way of the two
  // sets holds a key (insert refreshes in place).
  static E* find_in_set(E* set, const Key& key) {
    E* hit = nullptr;
    hit = same_key(set[1].key, key) ? &set[1] : hit;
    hit = same_key(set[0].key, key) ? &set[0] : hit;
    return hit;
  }

  static E* find(E* a, E* b, const Key& key) {
    E* hit = find_in_set(a, key);
    return hit ? hit : find_in_set(b, key);
  }

  // Compares the keys selected by `mask` (bit i: keys[i], hashes[i]) with
  // their sets; out[i] gets the value of each live hit. Returns the hit mask.
  // The first sets (which the caller prefetched) for the whole burst, then
  // the second sets of the keys not found there, prefetched together as the
  // first pass finds them.
  uint64_t compare(const Key keys[], const uint32_t hashes[], uint64_t mask, uint32_t generation,
                   uint32_t out[]) const {
    uint64_t hits = 0;
    uint64_t second = 0;
    for (uint64_t todo = mask; todo != 0; todo &= todo - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctzll(todo));
      const E* e = find_in_set(first_set(hashes[i]), keys[i]);
      if (e == nullptr) {
        second |= uint64_t{1} << i;
        prefetch_set(second_set(hashes[i]));
        continue;
      }
      // A key is in at most one way of its two sets: found here, it is not
      // in the second set, live or stale.
      if (e->generation != generation) continue;  // cached under an older snapshot
      out[i] = e->value;
      hits |= uint64_t{1} << i;
    }
    for (uint64_t todo = second; todo != 0; todo &= todo - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctzll(todo));
      const E* e = find_in_set(second_set(hashes[i]), keys[i]);
      if (e == nullptr || e->generation != generation) continue;  // absent, or cached under an older snapshot
      out[i] = e->value;
      hits |= uint64_t{1} << i;
    }
    return hits;
  }

  // Two choices: the set with fewer live entries (ties go to the first),
  // which keeps overflow rare at half load. Returns whether a live entry
  // was evicted.
  bool insert(const Key& key, uint32_t h, uint32_t generation, uint32_t value) {
    E* a = first_set(h);
    E* b = second_set(h);
    E* target = find(a, b, key);  // refresh in place (stale generation, or a re-insert)
    bool evicted = false;
    if (target == nullptr) {
      auto live = [generation](const E& e) { return !is_empty(e.key) && e.generation == generation; };
      E* set = live(b[0]) + live(b[1]) < live(a[0]) + live(a[1]) ? b : a;
      // Way 0 holds the set's newest entry, way 1 the older one.
      if (live(set[0])) {
        evicted = live(set[1]);
        set[1] = set[0];
      }
      target = &set[0];
    }
    target->key = key;
    target->generation = generation;
    target->value = value;
    return evicted;
  }

  void free() { rte_free(entries); }
};

// The IPv4 table: sets of three ways in one cache line, one generation per
// set. A set holds one snapshot's results: it is emptied when another
// generation's result goes in, so a way needs no generation of its own, and
// the line that two 32-byte entries with their own generations filled holds
// three.
//
// Three ways make overflow rare enough to fill a flow's first set until it is
// full rather than balance the two: at the sizing docs/configuration.md
// advises (twice the flows in entries, so a third of the ways), about 2% of
// random flows go to their second set (a Poisson(1) load of 3-way sets),
// against about a quarter with two ways balanced. A lookup so costs one
// line for nearly every flow, which is what a table too big for the caches
// waits on.
struct alignas(64) Set4 {
  static constexpr unsigned kWays = 3;
  uint32_t generation;  // of every live way
  uint32_t value[kWays];
  FlowKey4 key[kWays];  // live ways first, newest first; the rest zero
};
static_assert(sizeof(Set4) == 64, "one IPv4 set per cache line (FlowCache::kSet4Bytes)");
static_assert(offsetof(Set4, key) % 16 == 0, "keys compared as aligned 16-byte loads");

struct FlowTable4 {
  Set4* sets = nullptr;
  uint32_t mask = 0;  // sets - 1

  Set4* first_set(uint32_t h) const { return sets + FlowCache::first_set4(h, mask); }
  Set4* second_set(uint32_t h) const { return sets + FlowCache::second_set4(h, mask); }

  // The way of `set` that holds `key`, or -1. At most one way of a key's two
  // sets holds it (insert refreshes in place).
  static int find_way(const Set4& set, const FlowKey4& key) {
#if defined(__SSE2__)
    // One 16-byte compare per way; each way's four 32-bit lane results as
    // four bits of one movemask.
    const __m128i k = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key.w));
    auto eq = [&k](const FlowKey4& w) {
      return _mm_movemask_ps(
          _mm_castsi128_ps(_mm_cmpeq_epi32(k, _mm_load_si128(reinterpret_cast<const __m128i*>(w.w)))));
    };
    const int m0 = eq(set.key[0]);
    const int m1 = eq(set.key[1]);
    const int m2 = eq(set.key[2]);
    return m0 == 0xf ? 0 : m1 == 0xf ? 1 : m2 == 0xf ? 2 : -1;
#else
    int way = -1;
    for (int w = Set4::kWays - 1; w >= 0; --w) way = same_key(set.key[w], key) ? w : way;
    return way;
#endif
  }

  // See FlowTable6::compare: the same two passes, over one line per set.
  uint64_t compare(const FlowKey4 keys[], const uint32_t hashes[], uint64_t mask, uint32_t generation,
                   uint32_t out[]) const {
    // The table in locals: a store to out[] could alias `sets` and `mask`
    // as far as the compiler knows, and would make it reload them per key.
    const FlowTable4 table = *this;
    uint64_t hits = 0;
    uint64_t second = 0;
    for (uint64_t todo = mask; todo != 0; todo &= todo - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctzll(todo));
      const Set4& s = *table.first_set(hashes[i]);
      const int way = find_way(s, keys[i]);
      if (way < 0) {
        second |= uint64_t{1} << i;
        rte_prefetch0(table.second_set(hashes[i]));
        continue;
      }
      // A key is in at most one way of its two sets: found here, it is not
      // in the second set, live or stale.
      if (s.generation != generation) continue;  // cached under an older snapshot
      out[i] = s.value[way];
      hits |= uint64_t{1} << i;
    }
    for (uint64_t todo = second; todo != 0; todo &= todo - 1) {
      const unsigned i = static_cast<unsigned>(__builtin_ctzll(todo));
      const Set4& s = *table.second_set(hashes[i]);
      const int way = find_way(s, keys[i]);
      if (way < 0 || s.generation != generation) continue;  // absent, or cached under an older snapshot
      out[i] = s.value[way];
      hits |= uint64_t{1} << i;
    }
    return hits;
  }

  // Returns whether a live entry was evicted. A set of another generation
  // than this result's holds nothing live for it (the data path's inserts
  // carry its current snapshot's generation, which only moves on): it is
  // emptied to take this entry.
  bool insert(const FlowKey4& key, uint32_t h, uint32_t generation, uint32_t value) {
    Set4* a = first_set(h);
    Set4* b = second_set(h);
    auto renew = [generation](Set4& s) {
      s = Set4{};
      s.generation = generation;
    };
    // Refresh in place: a re-insert, or the flow's entry of another snapshot.
    Set4* set = a;
    int way = find_way(*a, key);
    if (way < 0) {
      set = b;
      way = find_way(*b, key);
    }
    if (way >= 0) {
      if (set->generation != generation) {
        renew(*set);
        way = 0;
        set->key[0] = key;
      }
      set->value[way] = value;
      return false;
    }
    // A new entry: the first set unless it is full, then the second, and
    // when both are full the first set's oldest way goes.
    auto room = [generation](const Set4& s) {
      return s.generation != generation || is_empty(s.key[Set4::kWays - 1]);  // live ways come first
    };
    set = room(*a) || !room(*b) ? a : b;
    if (set->generation != generation) renew(*set);
    const bool evicted = !is_empty(set->key[Set4::kWays - 1]);
    for (unsigned w = Set4::kWays - 1; w > 0; --w) {
      set->key[w] = set->key[w - 1];
      set->value[w] = set->value[w - 1];
    }
    set->key[0] = key;
    set->value[0] = value;
    return evicted;
  }

  void free() { rte_free(sets); }
};

struct FlowCache::Tables {
  FlowTable4 v4;
  FlowTable6 v6;
};

Result<std::unique_ptr<FlowCache>> FlowCache::create(uint32_t entries, const std::string& name, int socket_id) {
  using R = Result<std::unique_ptr<FlowCache>>;
  if (entries < kMinEntries || entries > kMaxEntries)
    return R::failure("flow cache entries must be in [" + std::to_string(kMinEntries) + ", " +
                      std::to_string(kMaxEntries) + "], got " + std::to_string(entries));
  const uint32_t rounded = rte_align32pow2(entries);
  std::unique_ptr<FlowCache> c(new FlowCache());
  c->tables_ = std::make_unique<Tables>();
  const uint32_t v4_sets = rounded / 2;  // 64 B for every two entries asked for, as two 32 B entries were
  const size_t v4_bytes = size_t{v4_sets} * sizeof(Set4);
  const size_t v6_bytes = size_t{rounded} * sizeof(Entry6);
  auto fail = [&](size_t bytes) {
    return R::failure("flow cache " + name + ": cannot allocate " + std::to_string(bytes >> 20) + " MiB (" +
                      std::to_string(rounded) + " entries) from DPDK memory: " + rte_strerror(rte_errno) +
                      "; lower dataplane.flow_cache or give the EAL more memory");
  };
  c->tables_->v4.sets =
      static_cast<Set4*>(rte_zmalloc_socket((name + ".v4").c_str(), v4_bytes, alignof(Set4), socket_id));
  if (c->tables_->v4.sets == nullptr) return fail(v4_bytes);
  c->tables_->v6.entries = static_cast<Entry6*>(rte_zmalloc_socket((name + ".v6").c_str(), v6_bytes, 128, socket_id));
  if (c->tables_->v6.entries == nullptr) return fail(v6_bytes);
  c->tables_->v4.mask = v4_sets - 1;
  c->tables_->v6.mask = rounded - 1;
  c->v4_sets_ = reinterpret_cast<const uint8_t*>(c->tables_->v4.sets);
  c->v4_set_mask_ = v4_sets - 1;
  return R(std::move(c));
}

FlowCache::FlowCache() = default;

FlowCache::~FlowCache() {
  if (tables_) {
    tables_->v4.free();
    tables_->v6.free();
  }
}

uint32_t FlowCache::ipv4_capacity() const { return (tables_->v4.mask + 1) * Set4::kWays; }
uint32_t FlowCache::ipv6_capacity() const { return tables_->v6.mask + 1; }

uint64_t FlowCache::lookup4(const FlowKey4 keys[], const uint32_t hashes[], uint64_t mask, uint32_t generation,
                            uint32_t out[]) const {
  return tables_->v4.compare(keys, hashes, mask, generation, out);
}

void FlowCache::insert4(const FlowKey4& key, uint32_t h, uint32_t generation, uint32_t value) {
  evictions_ += tables_->v4.insert(key, h, generation, value);
}

uint64_t FlowCache::lookup(const ParsedPacket* const pkts[], unsigned n, uint32_t generation, uint32_t out[]) const {
  if (n > kMaxBurst) n = kMaxBurst;  // contract: n <= 64; never overrun the mask
  const FlowTable6& t6 = tables_->v6;
  // Keys, hashes and prefetches for the whole burst first, compares after.
  FlowKey4 keys4[kMaxBurst];
  uint32_t hashes4[kMaxBurst];
  FlowKey6 keys6[kMaxBurst];
  uint32_t hashes6[kMaxBurst];
  uint64_t v4 = 0, v6 = 0;
  for (unsigned i = 0; i < n; ++i) {
    const ParsedPacket& p = *pkts[i];
    if (!cacheable(p)) continue;
    if (p.l3 == L3Kind::kIpv4) {
      keys4[i] = flow_key4(p);
      hashes4[i] = hash_key(keys4[i]);
      prefetch4(hashes4[i]);
      v4 |= uint64_t{1} << i;
    } else {
      keys6[i] = flow_key6(p);
      hashes6[i] = hash_key(keys6[i]);
      FlowTable6::prefetch_set(t6.first_set(hashes6[i]));  // the second only if needed (compare)
      v6 |= uint64_t{1} << i;
    }
  }
  return t6.compare(keys6, hashes6, v6, generation, out) | lookup4(keys4, hashes4, v4, generation, out);
}

void FlowCache::insert(const ParsedPacket& pkt, uint32_t generation, uint32_t value) {
  if (!cacheable(pkt)) return;
  if (pkt.l3 == L3Kind::kIpv4) {
    const FlowKey4 key = flow_key4(pkt);
    insert4(key, hash_key(key), generation, value);
  } else {
    const FlowKey6 key = flow_key6(pkt);
    evictions_ += tables_->v6.insert(key, hash_key(key), generation, value);
  }
}

}  // namespace psgate
