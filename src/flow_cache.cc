// Flow cache: see include/psgate/flow_cache.h for what it promises.
//
// Two tables, because an IPv4 5-tuple (13 bytes) fits a 32-byte entry and an
// IPv6 one (37 bytes) needs 64: IPv4 entries go two to a cache line, so an
// IPv4 lookup touches at most two lines (its two candidate sets).
//
//   table<Key>:  entries[0 .. mask], a set = the 2 neighbouring entries
//                {i & ~1, i | 1}: one line (IPv4) or two adjacent (IPv6)
//   a flow may sit in either of 2 sets, picked by different bits of one CRC32-C
//   hash; insert picks the set with fewer live entries ("two choices", which
//   keeps overflow rare at half load), and evicts the older way when full.
//
// A zeroed entry can never match: every real key has its family (4 or 6) in
// word 0 (IPv6) or word 1 (IPv4).
#include "psgate/flow_cache.h"

#include <rte_errno.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_prefetch.h>

#include <bit>
#include <cstring>

namespace psgate {

namespace {

constexpr unsigned kMaxBurst = 64;                   // hit masks are uint64_t
constexpr unsigned kPrefetchAhead = 8;               // packets whose sets are in flight while one is compared
constexpr uint32_t kMaxEntries = uint32_t{1} << 26;  // 4 GiB of IPv6 entries: beyond any sane config

struct Key4 {
  uint64_t w[2];  // src | dst << 32 (network order bytes); sport | dport << 16 | proto << 32 | 4 << 40
};
struct Key6 {
  uint64_t w[5];  // family | proto << 8 | sport << 16 | dport << 32; src (16 B); dst (16 B)
};

inline void make_key(const ParsedPacket& p, Key4& k) {
  uint32_t src, dst;
  std::memcpy(&src, p.src.data(), 4);
  std::memcpy(&dst, p.dst.data(), 4);
  k.w[0] = uint64_t{src} | uint64_t{dst} << 32;
  k.w[1] = uint64_t{p.sport} | uint64_t{p.dport} << 16 | uint64_t{p.proto} << 32 | uint64_t{4} << 40;
}

inline void make_key(const ParsedPacket& p, Key6& k) {
  k.w[0] = uint64_t{6} | uint64_t{p.proto} << 8 | uint64_t{p.sport} << 16 | uint64_t{p.dport} << 32;
  std::memcpy(&k.w[1], p.src.data(), 16);
  std::memcpy(&k.w[3], p.dst.data(), 16);
}

template <typename Key>
inline uint32_t hash_key(const Key& k) {
  uint32_t h = 0x9e3779b9u;
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

template <typename Key>
struct alignas(std::bit_ceil(sizeof(Key) + 8)) Entry {
  Key key;
  uint32_t generation;
  uint32_t value;
};
static_assert(sizeof(Entry<Key4>) == 32, "two IPv4 entries per cache line");
static_assert(sizeof(Entry<Key6>) == 64, "one IPv6 entry per cache line");

}  // namespace

// One table of one key type.
template <typename Key>
struct FlowTable {
  using E = Entry<Key>;
  E* entries = nullptr;
  uint32_t mask = 0;  // entries - 1

  E* first_set(uint32_t h) const { return entries + (h & mask & ~1u); }
  // The high half of the hash: independent of the bits that pick the first set.
  E* second_set(uint32_t h) const { return entries + (std::rotr(h, 16) & mask & ~1u); }

  static void prefetch_set(const E* set) {
    rte_prefetch0(set);
    if constexpr (sizeof(E) * 2 > RTE_CACHE_LINE_SIZE) rte_prefetch0(set + 1);
  }

  static E* find(E* a, E* b, const Key& key) {
    if (same_key(a[0].key, key)) return &a[0];
    if (same_key(a[1].key, key)) return &a[1];
    if (same_key(b[0].key, key)) return &b[0];
    if (same_key(b[1].key, key)) return &b[1];
    return nullptr;
  }

  // Returns whether a live entry was evicted.
  bool insert(const Key& key, uint32_t generation, uint32_t value) {
    const uint32_t h = hash_key(key);
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

struct FlowCache::Tables {
  FlowTable<Key4> v4;
  FlowTable<Key6> v6;
};

Result<std::unique_ptr<FlowCache>> FlowCache::create(uint32_t entries, const std::string& name,
                                                     int socket_id) {
  using R = Result<std::unique_ptr<FlowCache>>;
  if (entries < 8 || entries > kMaxEntries)
    return R::failure("flow cache entries must be in [8, " + std::to_string(kMaxEntries) + "], got " +
                      std::to_string(entries));
  const uint32_t rounded = rte_align32pow2(entries);
  std::unique_ptr<FlowCache> c(new FlowCache());
  c->tables_ = std::make_unique<Tables>();
  const size_t v4_bytes = size_t{rounded} * sizeof(Entry<Key4>);
  const size_t v6_bytes = size_t{rounded} * sizeof(Entry<Key6>);
  auto fail = [&](size_t bytes) {
    return R::failure("flow cache " + name + ": cannot allocate " + std::to_string(bytes >> 20) + " MiB (" +
                      std::to_string(rounded) + " entries) from DPDK memory: " + rte_strerror(rte_errno) +
                      "; lower dataplane.flow_cache or give the EAL more memory");
  };
  c->tables_->v4.entries =
      static_cast<Entry<Key4>*>(rte_zmalloc_socket((name + ".v4").c_str(), v4_bytes, 64, socket_id));
  if (c->tables_->v4.entries == nullptr) return fail(v4_bytes);
  c->tables_->v6.entries =
      static_cast<Entry<Key6>*>(rte_zmalloc_socket((name + ".v6").c_str(), v6_bytes, 128, socket_id));
  if (c->tables_->v6.entries == nullptr) return fail(v6_bytes);
  c->tables_->v4.mask = c->tables_->v6.mask = rounded - 1;
  return R(std::move(c));
}

FlowCache::FlowCache() = default;

FlowCache::~FlowCache() {
  if (tables_) {
    tables_->v4.free();
    tables_->v6.free();
  }
}

uint32_t FlowCache::capacity() const { return tables_->v4.mask + 1; }

uint64_t FlowCache::lookup(const ParsedPacket* const pkts[], unsigned n, uint32_t generation,
                           uint32_t out[]) {
  if (n > kMaxBurst) n = kMaxBurst;  // contract: n <= 64; never overrun the mask
  FlowTable<Key4>& t4 = tables_->v4;
  FlowTable<Key6>& t6 = tables_->v6;
  // Per packet: its key and both candidate sets (IPv4 or IPv6 table).
  union AnyKey {
    Key4 k4;
    Key6 k6;
  } keys[kMaxBurst];
  void* first[kMaxBurst];
  void* second[kMaxBurst];
  uint64_t candidates = 0, is_v6 = 0;
  // Pass 1: hash every key and find both of its sets.
  for (unsigned i = 0; i < n; ++i) {
    const ParsedPacket& p = *pkts[i];
    if (!cacheable(p)) continue;
    candidates |= uint64_t{1} << i;
    if (p.l3 == L3Kind::kIpv4) {
      make_key(p, keys[i].k4);
      const uint32_t h = hash_key(keys[i].k4);
      first[i] = t4.first_set(h);
      second[i] = t4.second_set(h);
    } else {
      is_v6 |= uint64_t{1} << i;
      make_key(p, keys[i].k6);
      const uint32_t h = hash_key(keys[i].k6);
      first[i] = t6.first_set(h);
      second[i] = t6.second_set(h);
    }
  }
  // Pass 2: compare the ways, with the sets of the packet kPrefetchAhead
  // positions later being fetched meanwhile: enough misses in flight to hide
  // memory latency, not so many that the prefetches themselves stall.
  auto prefetch = [&](unsigned i) {
    if (!(candidates >> i & 1)) return;
    if (is_v6 >> i & 1) {
      FlowTable<Key6>::prefetch_set(static_cast<Entry<Key6>*>(first[i]));
      FlowTable<Key6>::prefetch_set(static_cast<Entry<Key6>*>(second[i]));
    } else {
      FlowTable<Key4>::prefetch_set(static_cast<Entry<Key4>*>(first[i]));
      FlowTable<Key4>::prefetch_set(static_cast<Entry<Key4>*>(second[i]));
    }
  };
  for (unsigned i = 0; i < kPrefetchAhead && i < n; ++i) prefetch(i);
  uint64_t hits = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (i + kPrefetchAhead < n) prefetch(i + kPrefetchAhead);
    if (!(candidates >> i & 1)) continue;
    uint32_t gen, value;
    if (is_v6 >> i & 1) {
      const auto* e = FlowTable<Key6>::find(static_cast<Entry<Key6>*>(first[i]),
                                            static_cast<Entry<Key6>*>(second[i]), keys[i].k6);
      if (e == nullptr) continue;
      gen = e->generation;
      value = e->value;
    } else {
      const auto* e = FlowTable<Key4>::find(static_cast<Entry<Key4>*>(first[i]),
                                            static_cast<Entry<Key4>*>(second[i]), keys[i].k4);
      if (e == nullptr) continue;
      gen = e->generation;
      value = e->value;
    }
    if (gen != generation) continue;  // cached under an older snapshot
    out[i] = value;
    hits |= uint64_t{1} << i;
  }
  return hits;
}

void FlowCache::insert(const ParsedPacket& pkt, uint32_t generation, uint32_t value) {
  if (!cacheable(pkt)) return;
  bool evicted;
  if (pkt.l3 == L3Kind::kIpv4) {
    Key4 key;
    make_key(pkt, key);
    evicted = tables_->v4.insert(key, generation, value);
  } else {
    Key6 key;
    make_key(pkt, key);
    evicted = tables_->v6.insert(key, generation, value);
  }
  evictions_ += evicted;
}

}  // namespace psgate
