// SPDX-License-Identifier: BSD-3-Clause
// How much of the store's prefix one call of a full read asks for, and how
// long it may take, learnt from how the calls went (etcd_follow.cc's follow
// thread; pure, so tests drive it directly).
//
// A full read is paged, each page under its own deadline, so that a dead
// member is given up on soon. With the page a fixed number of keys, a
// prefix of large values (a script's junk, big job documents) made each
// page larger than a slow store or a narrow link can deliver within the
// deadline: 128 keys of 1.4 MB are 180 MB, which a loaded 2-core host's
// etcd took longer than 2 s to send, and a 100 Mbit/s link 15 s. Every
// read failed at its first page, and the gateway never connected. Now a
// page that missed its deadline (or outgrew the receive limit) while the
// member still answers is asked again at half the keys still to read; at
// one key the deadline doubles instead, up to a bound. A page that arrives
// well inside its deadline lets the next ask for more again, so one slow
// moment does not leave every later read in small pages.
//
// Pages also start small and are sized by bytes: the first asks for a few
// keys, each page that arrives in time doubles the next, and none asks for
// more keys than `page_bytes` holds at the most bytes a key the pages so
// far carried. A first page of 128 keys of 6 MB values (an etcd with
// --max-request-bytes raised) made etcd build a 768 MB answer, which no
// link could carry in time and which was thrown away; its memory with it.
#pragma once

#include <algorithm>
#include <cstdint>

namespace psgate {

class FullReadPages {
 public:
  // `first_keys`: the keys of the first page; `most_keys`: of the largest;
  // `page_bytes`: what a page should carry at most, once the bytes a key
  // are known; `deadline_ns`: a page's deadline, which at one key grows to
  // at most `longest_deadline_ns`.
  FullReadPages(int64_t first_keys, int64_t most_keys, uint64_t page_bytes, uint64_t deadline_ns,
                uint64_t longest_deadline_ns)
      : most_keys_(std::max<int64_t>(1, most_keys)),
        page_bytes_(page_bytes),
        base_deadline_ns_(deadline_ns),
        longest_deadline_ns_(std::max(deadline_ns, longest_deadline_ns)),
        keys_(std::clamp<int64_t>(first_keys, 1, most_keys_)),
        deadline_ns_(deadline_ns) {}

  int64_t keys() const { return keys_; }
  uint64_t deadline_ns() const { return deadline_ns_; }

  // A page of `keys` keys and `bytes` bytes arrived `took_ns` after it was
  // asked for. Within a quarter of its deadline the next may take twice as
  // long (back towards the first deadline) or, at that deadline, ask for
  // twice the keys (up to the most). Never more keys than `page_bytes`
  // holds at the most bytes a key seen.
  void arrived(uint64_t took_ns, int64_t keys, uint64_t bytes) {
    if (keys > 0) key_bytes_ = std::max(key_bytes_, (bytes + static_cast<uint64_t>(keys) - 1) / keys);
    if (took_ns < deadline_ns_ / 4) {
      if (deadline_ns_ > base_deadline_ns_) {
        deadline_ns_ = std::max(base_deadline_ns_, deadline_ns_ / 2);
      } else {
        keys_ = std::min(most_keys_, keys_ * 2);
      }
    }
    if (key_bytes_ > 0) keys_ = std::clamp<int64_t>(static_cast<int64_t>(page_bytes_ / key_bytes_), 1, keys_);
  }

  // A page was too large to arrive: it missed its deadline, or was larger
  // than the receive limit. `keys_left`: how many keys the read still has
  // to read (0: not known). Halves the keys still to read, or at one key
  // doubles the deadline. False when neither is left (one key at the
  // longest deadline): the read cannot be paged any smaller.
  bool too_large(int64_t keys_left) {
    const int64_t asked = keys_left > 0 ? std::min(keys_, keys_left) : keys_;
    if (asked > 1) {
      keys_ = asked / 2;
      return true;
    }
    keys_ = 1;
    if (deadline_ns_ >= longest_deadline_ns_) return false;
    deadline_ns_ = std::min(longest_deadline_ns_, deadline_ns_ * 2);
    return true;
  }

 private:
  const int64_t most_keys_;
  const uint64_t page_bytes_;
  const uint64_t base_deadline_ns_, longest_deadline_ns_;
  int64_t keys_;
  uint64_t deadline_ns_;
  uint64_t key_bytes_ = 0;  // the most bytes a key of any page so far (0: none seen)
};

}  // namespace psgate
