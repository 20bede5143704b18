// SPDX-License-Identifier: BSD-3-Clause
// Which job a fragmented datagram's first fragment went to, so that its later
// fragments follow it. A later fragment carries no ports: matched on its own
// it takes the first rule whose addresses and protocol hold, which may be
// another job's (another class, another policer) than the rule its first
// fragment's ports chose. One table per RX lcore (single writer, no locks).
//
// A datagram is named as the receiver's reassembly names it: addresses, IP
// Identification and, for IPv4, the protocol (RFC 791; RFC 8200 leaves the
// protocol out for IPv6, whose later fragments may even name another next
// header than the first's final one). With several RX queues, this assumes
// the NIC's RSS keeps a datagram's fragments on one queue, as NICs that hash
// every fragment, the first too, on the addresses alone do; where one does
// not, its later fragments are counted as orphaned.
//
// A cache, not a reassembler: nothing is held back or copied. A later
// fragment whose first has not been seen (reordered ahead of it, lost, or its
// entry aged or pushed out) is classified on addresses and protocol as before
// and counted. Entries carry the rules generation that classified them (a
// rules change makes them stale, as in the flow cache) and their arrival
// time: an entry older than the table's lifetime is never used, so a
// recycled IPv4 Identification of the same hosts cannot name a datagram long
// gone. Pure C++: the clock is the caller's (TSC ticks in the data path).
#pragma once

#include <cstdint>
#include <memory>

#include "psgate/packet_parser.h"

namespace psgate {

class FragmentTable {
 public:
  // 256 sets of 4 ways of 64 bytes: 64 KiB, room for about a thousand
  // datagrams in flight at once on one RX lcore.
  static constexpr unsigned kWays = 4;
  static constexpr unsigned kSets = 256;

  // `lifetime_ticks`: how long a first fragment's job stays valid for its
  // later fragments (the data path: one second).
  explicit FragmentTable(uint64_t lifetime_ticks);
  ~FragmentTable();
  FragmentTable(const FragmentTable&) = delete;
  FragmentTable& operator=(const FragmentTable&) = delete;

  // Records the job (`value`, which may be "no job") of the datagram whose
  // first fragment is `first` (fragment, not non_first_fragment). Replaces
  // the datagram's entry if it has one, else an empty or stale way, else the
  // set's oldest.
  void remember(const ParsedPacket& first, uint32_t generation, uint64_t now, uint32_t value);
  // A `generation` for what no rules change makes stale (a datagram that is
  // network control is so whatever the rules say).
  static constexpr uint32_t kAnyGeneration = UINT32_MAX;
  // The value remembered for the datagram of `later` (a non-first fragment)
  // under `generation` (or kAnyGeneration), no older than the lifetime.
  // false: none.
  bool recall(const ParsedPacket& later, uint32_t generation, uint64_t now, uint32_t& value) const;

 private:
  struct Key {
    // w[0]: family | fragment_id << 32 (IPv4: protocol and Identification);
    // w[1..2]: source address, w[3..4]: destination (IPv4: first 4 bytes).
    uint64_t w[5];
  };
  struct alignas(64) Entry {
    Key key;
    uint64_t stamp;  // arrival of the first fragment (key.w[0] == 0: an empty way)
    uint32_t generation;
    uint32_t value;
  };
  static Key key_of(const ParsedPacket& p);
  static unsigned set_of(const Key& k);
  bool live(const Entry& e, uint32_t generation, uint64_t now) const;

  std::unique_ptr<Entry[]> entries_;  // [set * kWays + way]
  uint64_t lifetime_;
};

}  // namespace psgate
