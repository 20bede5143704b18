// SPDX-License-Identifier: BSD-3-Clause
// psemu wire protocol: every message is a fixed 40-byte header followed by
// `length` payload bytes. Both ends count and checksum every payload byte, so
// a run proves that each byte sent arrived, in order, unaltered.
//
//   offset  size  field
//        0     4  magic "PSEM" (0x4D455350, little endian)
//        4     1  version (1)
//        5     1  type: 1 hello, 2 push (gradient), 3 pull (model)
//        6     2  reserved, 0
//        8     4  job
//       12     4  worker
//       16     4  iteration (hello: the iteration count K)
//       20     4  header check: mix of every other field
//       24     8  payload length in bytes (hello: 0)
//       32     8  payload checksum (hello: the message size M)
//
// Little endian throughout (psemu runs on x86 and ARM hosts alike).
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace psemu {

static_assert(std::endian::native == std::endian::little, "psemu encodes headers in host order = little endian");

inline constexpr uint32_t kMagic = 0x4D455350;
inline constexpr uint8_t kVersion = 1;
inline constexpr size_t kHeaderSize = 40;

enum class MsgType : uint8_t { kHello = 1, kPush = 2, kPull = 3 };
const char* msg_type_name(MsgType t);

struct Header {
  MsgType type = MsgType::kHello;
  uint32_t job = 0;
  uint32_t worker = 0;
  uint32_t iter = 0;
  uint64_t length = 0;
  uint64_t checksum = 0;
  bool operator==(const Header&) const = default;
};

void encode_header(const Header& h, uint8_t out[kHeaderSize]);

// Decodes and validates magic, version, type and header check. On failure
// returns false and sets `error` (a static string).
bool decode_header(const uint8_t in[kHeaderSize], Header& out, const char*& error);

// Fletcher-style checksum over 64-bit little-endian words, fed in arbitrary
// chunks: two additions per 8 bytes (~10 GB/s), so verifying every byte costs
// little CPU, yet it catches reordered, dropped or altered words, which a
// plain sum would not.
class Checksum {
 public:
  void update(const uint8_t* p, size_t n);
  uint64_t value() const;
  uint64_t bytes() const { return total_; }

 private:
  void add(uint64_t w) {
    a_ += w;
    b_ += a_;
  }
  uint64_t a_ = 0, b_ = 0;
  uint64_t carry_ = 0;    // bytes of an incomplete word, little endian
  unsigned carry_n_ = 0;  // how many
  uint64_t total_ = 0;
};

inline uint64_t checksum_of(const uint8_t* p, size_t n) {
  Checksum c;
  c.update(p, n);
  return c.value();
}

// Incremental parser: feed it whatever read() returned. Calls the sink with
//   sink.on_start()                         first byte of a message consumed
//   sink.on_header(const Header&) -> bool   header decoded; false aborts
//   sink.on_message(const Header&, bool checksum_ok)
// Returns false on a malformed header or when the sink aborted; error() says why.
class MessageReader {
 public:
  MessageReader(uint64_t max_payload, bool verify) : max_payload_(max_payload), verify_(verify) {}

  template <typename Sink>
  bool feed(const uint8_t* p, size_t n, Sink& sink);

  bool between_messages() const { return hdr_fill_ == 0 && !in_payload_; }
  const std::string& error() const { return error_; }
  uint64_t messages() const { return messages_; }
  uint64_t payload_bytes() const { return payload_bytes_; }

 private:
  uint64_t max_payload_;
  bool verify_;
  uint8_t hdr_buf_[kHeaderSize]{};
  size_t hdr_fill_ = 0;
  bool in_payload_ = false;
  Header hdr_{};
  uint64_t remaining_ = 0;
  Checksum sum_;
  std::string error_;
  uint64_t messages_ = 0;
  uint64_t payload_bytes_ = 0;
};

template <typename Sink>
bool MessageReader::feed(const uint8_t* p, size_t n, Sink& sink) {
  while (n > 0) {
    if (!in_payload_) {
      if (hdr_fill_ == 0) sink.on_start();
      const size_t take = std::min(n, kHeaderSize - hdr_fill_);
      std::memcpy(hdr_buf_ + hdr_fill_, p, take);
      hdr_fill_ += take;
      p += take;
      n -= take;
      if (hdr_fill_ < kHeaderSize) return true;
      hdr_fill_ = 0;
      const char* why = nullptr;
      if (!decode_header(hdr_buf_, hdr_, why)) {
        error_ = why;
        return false;
      }
      if (hdr_.length > max_payload_) {
        error_ = "payload length " + std::to_string(hdr_.length) + " exceeds the limit " + std::to_string(max_payload_);
        return false;
      }
      if (!sink.on_header(hdr_)) {
        error_ = "unexpected message";
        return false;
      }
      sum_ = Checksum{};
      remaining_ = hdr_.length;
      in_payload_ = true;
    }
    const size_t take = static_cast<size_t>(std::min<uint64_t>(n, remaining_));
    if (verify_) sum_.update(p, take);
    p += take;
    n -= take;
    remaining_ -= take;
    payload_bytes_ += take;
    if (remaining_ == 0) {
      in_payload_ = false;
      ++messages_;
      sink.on_message(hdr_, !verify_ || sum_.value() == hdr_.checksum);
    }
  }
  return true;
}

// One outgoing message: header plus a payload that lives elsewhere (the shared
// pattern buffer), sent with writev until complete.
class MessageWriter {
 public:
  void start(const Header& h, const uint8_t* payload) {
    encode_header(h, hdr_);
    payload_ = payload;
    total_ = kHeaderSize + h.length;
    sent_ = 0;
    active_ = true;
  }
  bool active() const { return active_; }
  uint64_t sent() const { return sent_; }
  // Writes as much as the socket takes. Returns bytes written (0 when it would
  // block), or -errno on a socket error. Clears active() when complete.
  long send_some(int fd);

 private:
  uint8_t hdr_[kHeaderSize]{};
  const uint8_t* payload_ = nullptr;
  uint64_t total_ = 0;
  uint64_t sent_ = 0;
  bool active_ = false;
};

}  // namespace psemu
