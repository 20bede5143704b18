// SPDX-License-Identifier: BSD-3-Clause
// Exact-match cache of classification results keyed by 5-tuple, one per RX
// lcore (single writer, no locks). Entries carry the snapshot generation that
// produced them (an IPv4 set one for its three ways), so a new snapshot
// invalidates the cache without clearing it.
//
// It is a cache, not a map: set-associative tables, each flow with two
// candidate sets. IPv4 sets are one cache line of three ways; IPv6 sets two
// 64-byte entries. An IPv4 lookup costs one CRC32 hash and one cache line for
// nearly every flow (two for the few its first set had no room for). When a
// flow's sets are full the oldest entry of one is evicted (and counted): a
// flow that lost its entry is classified again by the ACL, never
// misclassified.
//
// Two ways in:
//   - the IPv4 burst path the RX stage uses at line rate: the caller builds
//     keys from the wire (parse_ipv4_flow_key), hashes them and prefetches
//     their sets while it parses the rest of the burst, then compares them all
//     with lookup4 and inserts the misses with insert4;
//   - lookup/insert on ParsedPackets, for everything the full parser handled
//     (IPv6, VLAN-tagged, IPv4 with options).
// Both ways address the same entries: a flow is one entry whichever way it
// came in.
#pragma once

#include <bit>
#include <cstdint>
#include <memory>
#include <string>

#include <rte_hash_crc.h>
#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif
#include <rte_prefetch.h>

#include "psgate/flow_key.h"
#include "psgate/packet_parser.h"
#include "psgate/result.h"

namespace psgate {

class FlowCache {
 public:
  static constexpr unsigned kMaxBurst = 64;  // hit masks are uint64_t
  static constexpr uint32_t kHashSeed = 0x9e3779b9u;

  // `entries` (per family) is rounded up to a power of two, at least 8.
  // Memory: 96 bytes per entry (32 IPv4 + 64 IPv6) from DPDK's heap on `socket_id`.
  static Result<std::unique_ptr<FlowCache>> create(uint32_t entries, const std::string& name, int socket_id);
  ~FlowCache();
  FlowCache(const FlowCache&) = delete;
  FlowCache& operator=(const FlowCache&) = delete;

  // --- IPv4 burst path.
  // The two sets an IPv4 flow with hash `h` may sit in, of a table of
  // `set_mask` + 1 sets: the one rule the table, prefetch4 and the tests use.
  // Bits 1 and up pick the first set, bits 17 and up (wrapping) the second:
  // the lines the earlier 2-way table of 32-byte entries picked (its bit 0
  // was the way). CRC32-C is linear, so keys that differ in a few bits, such
  // as consecutive addresses, fill the sets in patterns that depend on which
  // bits pick them: with bits 0 and up, 100,000 consecutive addresses came
  // out 40% slower (perf/micro flow_cache/lookup4_hit/100k_flows), and these
  // bits measured as before.
  static uint32_t first_set4(uint32_t h, uint32_t set_mask) { return (h >> 1) & set_mask; }
  static uint32_t second_set4(uint32_t h, uint32_t set_mask) { return std::rotr(h, 17) & set_mask; }
  static uint32_t hash(const FlowKey4& key) {
#if defined(__SSE4_2__)
    // The CRC32-C instruction itself: rte_hash_crc_8byte computes the same
    // value, but first loads and tests DPDK's run-time algorithm choice on
    // every call. DPDK's build flags (-march=corei7) already require SSE4.2.
    return static_cast<uint32_t>(_mm_crc32_u64(_mm_crc32_u64(kHashSeed, key.w[0]), key.w[1]));
#else
    return rte_hash_crc_8byte(key.w[1], rte_hash_crc_8byte(key.w[0], kHashSeed));
#endif
  }
  // Starts fetching the first set a key with this hash may sit in (lookup4
  // fetches the second itself, for the keys the first does not hold).
  void prefetch4(uint32_t h) const { prefetcher4()(h); }
  // prefetch4 for a loop over a burst: the table's address and mask copied
  // into the caller's registers. The loop's stores of keys and hashes could
  // alias the cache's members as far as the compiler knows, so a loop calling
  // prefetch4 would reload both for every packet.
  struct Prefetcher4 {
    const uint8_t* sets;
    uint32_t set_mask;
    void operator()(uint32_t h) const { rte_prefetch0(sets + first_set4(h, set_mask) * kSet4Bytes); }
  };
  Prefetcher4 prefetcher4() const { return {v4_sets_, v4_set_mask_}; }
  // Compares the keys selected by `mask` (bit i: keys[i], hashes[i]).
  // Returns the mask of hits; out[i] is set for hits only.
  uint64_t lookup4(const FlowKey4 keys[], const uint32_t hashes[], uint64_t mask, uint32_t generation,
                   uint32_t out[]) const;
  // Stores a result under `generation`. A cache's inserts must not go back
  // to an older generation (the data path's only moves on): an IPv4 set
  // holds one generation's entries and is emptied, without counting
  // evictions, when an entry of another goes in.
  void insert4(const FlowKey4& key, uint32_t hash, uint32_t generation, uint32_t value);

  // --- Parsed packets. Only cacheable packets are looked up (the others are
  // misses). n <= kMaxBurst. Returns a bit mask of hits; out[i] is set for hits only.
  uint64_t lookup(const ParsedPacket* const pkts[], unsigned n, uint32_t generation, uint32_t out[]) const;
  // Always stores a cacheable packet's result, evicting the set's oldest live
  // entry if it must (counted in evictions()); generations as for insert4.
  void insert(const ParsedPacket& pkt, uint32_t generation, uint32_t value);

  // Entries the IPv4 and IPv6 tables hold: `entries` (rounded) for IPv6, and
  // half as many again for IPv4 in the same 32 bytes per entry asked for.
  uint32_t ipv4_capacity() const;
  uint32_t ipv6_capacity() const;
  uint64_t evictions() const { return evictions_; }

  // Ports are part of the key, and a malformed or later-fragment packet has
  // no trustworthy ones (a later fragment is also matched without ports, by
  // other tries). A packet of a protocol without ports (ICMP, GRE, ESP, ...)
  // has ports 0/0 in the key, and the rule matcher gives every packet of its
  // hosts and protocol the same result (from the rules without a port range
  // alone: classifier.cc's no-ports tries): cached like any flow, rather
  // than an ACL lookup for each packet of an IPsec or GRE tunnel.
  static bool cacheable(const ParsedPacket& pkt) {
    return pkt.l3 != L3Kind::kNonIp && !pkt.malformed && !pkt.non_first_fragment;
  }

 private:
  static constexpr size_t kSet4Bytes = 64;
  struct Tables;  // flow_cache.cc: the IPv4 and IPv6 tables
  FlowCache();
  std::unique_ptr<Tables> tables_;
  const uint8_t* v4_sets_ = nullptr;  // = the IPv4 table's sets, for prefetch4
  uint32_t v4_set_mask_ = 0;          // sets - 1
  uint64_t evictions_ = 0;
};

}  // namespace psgate
