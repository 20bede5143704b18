// SPDX-License-Identifier: BSD-3-Clause
#include "protocol.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

namespace psemu {

namespace {

template <typename T>
void put(uint8_t* out, T v) {
  std::memcpy(out, &v, sizeof v);
}
template <typename T>
T get(const uint8_t* in) {
  T v;
  std::memcpy(&v, in, sizeof v);
  return v;
}

// Catches a stream that lost its framing (a header read from the middle of a
// payload) before its length field is trusted.
uint32_t header_check(const Header& h) {
  uint64_t x = kMagic ^ (static_cast<uint64_t>(h.type) << 40) ^ (static_cast<uint64_t>(h.job) << 8) ^
               (static_cast<uint64_t>(h.worker) << 24) ^ (static_cast<uint64_t>(h.iter) << 32) ^ h.length ^
               std::rotl(h.checksum, 17);
  x *= 0x9E3779B97F4A7C15ull;  // golden-ratio multiply spreads every bit
  return static_cast<uint32_t>(x >> 32);
}

}  // namespace

const char* msg_type_name(MsgType t) {
  switch (t) {
    case MsgType::kHello:
      return "hello";
    case MsgType::kPush:
      return "push";
    case MsgType::kPull:
      return "pull";
  }
  return "?";
}

void encode_header(const Header& h, uint8_t out[kHeaderSize]) {
  put<uint32_t>(out + 0, kMagic);
  out[4] = kVersion;
  out[5] = static_cast<uint8_t>(h.type);
  put<uint16_t>(out + 6, 0);
  put<uint32_t>(out + 8, h.job);
  put<uint32_t>(out + 12, h.worker);
  put<uint32_t>(out + 16, h.iter);
  put<uint32_t>(out + 20, header_check(h));
  put<uint64_t>(out + 24, h.length);
  put<uint64_t>(out + 32, h.checksum);
}

bool decode_header(const uint8_t in[kHeaderSize], Header& out, const char*& error) {
  if (get<uint32_t>(in) != kMagic) {
    error = "bad magic (stream out of sync)";
    return false;
  }
  if (in[4] != kVersion) {
    error = "unsupported protocol version";
    return false;
  }
  if (in[5] < 1 || in[5] > 3) {
    error = "unknown message type";
    return false;
  }
  if (get<uint16_t>(in + 6) != 0) {
    error = "reserved header bytes are not zero";
    return false;
  }
  Header h;
  h.type = static_cast<MsgType>(in[5]);
  h.job = get<uint32_t>(in + 8);
  h.worker = get<uint32_t>(in + 12);
  h.iter = get<uint32_t>(in + 16);
  h.length = get<uint64_t>(in + 24);
  h.checksum = get<uint64_t>(in + 32);
  if (get<uint32_t>(in + 20) != header_check(h)) {
    error = "header check mismatch (corrupted header)";
    return false;
  }
  out = h;
  return true;
}

void Checksum::update(const uint8_t* p, size_t n) {
  total_ += n;
  while (carry_n_ != 0 && n > 0) {
    carry_ |= static_cast<uint64_t>(*p++) << (8 * carry_n_++);
    --n;
    if (carry_n_ == 8) {
      add(carry_);
      carry_ = 0;
      carry_n_ = 0;
    }
  }
  while (n >= 8) {
    add(get<uint64_t>(p));
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    carry_ |= static_cast<uint64_t>(*p++) << (8 * carry_n_++);
    --n;
  }
}

uint64_t Checksum::value() const {
  uint64_t a = a_, b = b_;
  if (carry_n_ != 0) {
    a += carry_;
    b += a;
  }
  // The length is mixed in so that trailing zero bytes change the result.
  return a ^ std::rotl(b, 29) ^ (total_ * 0x9E3779B97F4A7C15ull);
}

long MessageWriter::send_some(int fd) {
  long written = 0;
  while (sent_ < total_) {
    iovec iov[2];
    int cnt = 0;
    if (sent_ < kHeaderSize) {
      iov[cnt++] = {hdr_ + sent_, kHeaderSize - sent_};
      if (total_ > kHeaderSize) iov[cnt++] = {const_cast<uint8_t*>(payload_), total_ - kHeaderSize};
    } else {
      const uint64_t off = sent_ - kHeaderSize;
      iov[cnt++] = {const_cast<uint8_t*>(payload_ + off), total_ - sent_};
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = cnt;
    const ssize_t rc = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (rc < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return -errno;
    }
    sent_ += static_cast<uint64_t>(rc);
    written += rc;
  }
  if (sent_ == total_) active_ = false;
  return written;
}

}  // namespace psemu
