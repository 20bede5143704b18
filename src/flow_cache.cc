// Flow cache on rte_hash. One table per RX lcore, which is its only reader
// and writer: no RW-concurrency or multi-writer flags, so no locks on lookup.
//
// The 64-bit "data pointer" of each entry is not a pointer but the packed
// result: generation << 32 | value. A hit from an older generation is a miss,
// so publishing a new snapshot needs no table flush.
#include "psgate/classifier.h"

#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>

#include <atomic>
#include <cstring>

namespace psgate {

namespace {

constexpr unsigned kMaxBurst = RTE_HASH_LOOKUP_BULK_MAX;  // 64, the bulk lookup limit
static_assert(kMaxBurst == 64, "hit masks are uint64_t");
static_assert(sizeof(void*) == sizeof(uint64_t), "entry data packs 64 bits into a pointer");

// family(1) proto(1) pad(2) sport(2) dport(2) src(16) dst(16). The hash reads
// all 40 bytes, so the padding is always zeroed.
struct FlowKey {
  uint8_t family;
  uint8_t proto;
  uint8_t pad[2];
  uint16_t sport;  // host order: the key never leaves this process
  uint16_t dport;
  uint8_t src[16];
  uint8_t dst[16];
};
static_assert(sizeof(FlowKey) == 40);

void make_key(const ParsedPacket& p, FlowKey& k) {
  k.family = static_cast<uint8_t>(p.l3);
  k.proto = p.proto;
  k.pad[0] = k.pad[1] = 0;
  k.sport = p.sport;
  k.dport = p.dport;
  // ParsedPacket zeroes IPv4's unused address bytes, so copying 16 is exact.
  std::memcpy(k.src, p.src.data(), 16);
  std::memcpy(k.dst, p.dst.data(), 16);
}

// rte_hash_create fails on a duplicate name; a process-wide counter keeps names
// unique even when the caller reuses one (e.g. rebuilding a cache).
std::atomic<uint64_t> g_hash_serial{0};

}  // namespace

struct FlowCache::Impl {
  rte_hash* hash = nullptr;
  ~Impl() {
    if (hash != nullptr) rte_hash_free(hash);
  }
};

Result<std::unique_ptr<FlowCache>> FlowCache::create(uint32_t entries, const std::string& name,
                                                     int socket_id) {
  using R = Result<std::unique_ptr<FlowCache>>;
  if (entries < 8 || entries > RTE_HASH_ENTRIES_MAX)
    return R::failure("flow cache entries must be in [8, " +
                      std::to_string(RTE_HASH_ENTRIES_MAX) + "], got " + std::to_string(entries));
  // rte_hash also names an internal ring "HT_<name>" (RTE_RING_NAMESIZE 32),
  // so keep the whole name well below 28 characters.
  const std::string unique = name.substr(0, 12) + "." + std::to_string(g_hash_serial.fetch_add(1));
  if (unique.size() >= 28) return R::failure("flow cache name too long: " + unique);

  rte_hash_parameters params{};
  params.name = unique.c_str();
  params.entries = entries;
  params.key_len = sizeof(FlowKey);
  params.hash_func = rte_hash_crc;
  params.hash_func_init_val = 0;
  params.socket_id = socket_id;
  params.extra_flag = 0;  // single writer = the reader: no locking flavour needed

  std::unique_ptr<FlowCache> c(new FlowCache());
  c->impl_ = std::make_unique<Impl>();
  c->impl_->hash = rte_hash_create(&params);
  if (c->impl_->hash == nullptr)
    return R::failure("rte_hash_create(" + unique + ", " + std::to_string(entries) +
                      ") failed: " + rte_strerror(rte_errno));
  return R(std::move(c));
}

FlowCache::~FlowCache() = default;

uint64_t FlowCache::lookup(const ParsedPacket* const pkts[], unsigned n, uint32_t generation,
                           uint32_t out[]) {
  if (n > kMaxBurst) n = kMaxBurst;  // contract: n <= 64; never overrun the mask
  FlowKey keys[kMaxBurst];
  const void* key_ptrs[kMaxBurst];
  uint8_t slot[kMaxBurst];  // position in the burst of each key
  unsigned m = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!cacheable(*pkts[i])) continue;
    make_key(*pkts[i], keys[m]);
    key_ptrs[m] = &keys[m];
    slot[m++] = static_cast<uint8_t>(i);
  }
  if (m == 0) return 0;

  uint64_t found = 0;
  void* data[kMaxBurst];
  if (rte_hash_lookup_bulk_data(impl_->hash, key_ptrs, m, &found, data) <= 0) return 0;

  uint64_t hits = 0;
  for (unsigned j = 0; j < m; ++j) {
    if ((found & (uint64_t{1} << j)) == 0) continue;
    const uint64_t packed = reinterpret_cast<uintptr_t>(data[j]);
    if (static_cast<uint32_t>(packed >> 32) != generation) continue;  // stale snapshot
    out[slot[j]] = static_cast<uint32_t>(packed);
    hits |= uint64_t{1} << slot[j];
  }
  return hits;
}

void FlowCache::insert(const ParsedPacket& pkt, uint32_t generation, uint32_t value) {
  if (!cacheable(pkt)) return;
  FlowKey key;
  make_key(pkt, key);
  const uint64_t packed = uint64_t{generation} << 32 | value;
  // Adding an existing key overwrites its data in place, which is how a stale
  // entry gets refreshed.
  if (rte_hash_add_key_data(impl_->hash, &key, reinterpret_cast<void*>(packed)) < 0)
    ++insert_failures_;
}

}  // namespace psgate
