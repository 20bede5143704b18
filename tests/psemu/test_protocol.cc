// SPDX-License-Identifier: BSD-3-Clause
// Tests of psemu's framing and checksum: the pieces that decide whether a run
// "proved every byte arrived", so they must catch what they claim to catch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "protocol.h"
#include "runtime.h"

namespace psemu {
namespace {

// Reference: the checksum fed in one call. Streaming in any split must match.
TEST(Checksum, AnySplitMatchesOneShot) {
  std::mt19937_64 rng(42);
  for (size_t len : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 4099u}) {
    std::vector<uint8_t> data(len);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    const uint64_t ref = checksum_of(data.data(), data.size());
    for (int trial = 0; trial < 50; ++trial) {
      Checksum c;
      size_t pos = 0;
      while (pos < len) {
        const size_t n = std::min<size_t>(len - pos, 1 + rng() % 17);
        c.update(data.data() + pos, n);
        pos += n;
      }
      ASSERT_EQ(c.value(), ref) << "len " << len << " trial " << trial;
      ASSERT_EQ(c.bytes(), len);
    }
  }
}

// What the checksum must detect: one flipped bit anywhere, two swapped words,
// a lost or an extra trailing zero byte.
TEST(Checksum, DetectsCorruption) {
  std::mt19937_64 rng(7);
  std::vector<uint8_t> data(4096);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  const uint64_t ref = checksum_of(data.data(), data.size());
  for (int trial = 0; trial < 200; ++trial) {
    auto bad = data;
    bad[rng() % bad.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
    EXPECT_NE(checksum_of(bad.data(), bad.size()), ref);
  }
  auto swapped = data;
  std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
  EXPECT_NE(checksum_of(swapped.data(), swapped.size()), ref);
  std::vector<uint8_t> zeros(16, 0);
  EXPECT_NE(checksum_of(zeros.data(), 15), checksum_of(zeros.data(), 16));
  EXPECT_NE(checksum_of(data.data(), data.size() - 1), ref);
}

TEST(Header, RoundTripAndRejects) {
  const Header cases[] = {
      {MsgType::kHello, 0, 0, 30, 0, 4u << 20},
      {MsgType::kPush, 5, 19, 29, 4u << 20, 0x0123456789abcdefull},
      {MsgType::kPull, 0xffffffffu, 0xffffffffu, 0xffffffffu, ~0ull, ~0ull},
  };
  for (const Header& h : cases) {
    uint8_t buf[kHeaderSize];
    encode_header(h, buf);
    Header out;
    const char* err = nullptr;
    ASSERT_TRUE(decode_header(buf, out, err)) << err;
    EXPECT_EQ(out, h);
    // Every single-byte change must be rejected (magic, version, type, check)
    // or decode to a different header whose check then fails.
    for (size_t i = 0; i < kHeaderSize; ++i) {
      uint8_t bad[kHeaderSize];
      std::memcpy(bad, buf, kHeaderSize);
      bad[i] ^= 0x5a;
      Header o2;
      EXPECT_FALSE(decode_header(bad, o2, err)) << "byte " << i;
    }
  }
}

struct Recorder {
  std::vector<Header> headers;
  std::vector<bool> ok;
  int starts = 0;
  bool accept = true;
  void on_start() { ++starts; }
  bool on_header(const Header& h) {
    headers.push_back(h);
    return accept;
  }
  void on_message(const Header&, bool checksum_ok) { ok.push_back(checksum_ok); }
};

std::vector<uint8_t> stream_of(const std::vector<std::pair<Header, std::vector<uint8_t>>>& msgs) {
  std::vector<uint8_t> s;
  for (const auto& [h, payload] : msgs) {
    uint8_t buf[kHeaderSize];
    encode_header(h, buf);
    s.insert(s.end(), buf, buf + kHeaderSize);
    s.insert(s.end(), payload.begin(), payload.end());
  }
  return s;
}

// The reader must give the same messages however read() split the stream.
TEST(MessageReader, RandomFragmentation) {
  std::mt19937_64 rng(1234);
  std::vector<std::pair<Header, std::vector<uint8_t>>> msgs;
  for (uint32_t i = 0; i < 20; ++i) {
    std::vector<uint8_t> payload(rng() % 3000);
    for (auto& b : payload) b = static_cast<uint8_t>(rng());
    msgs.push_back({{i % 2 ? MsgType::kPull : MsgType::kPush, 1, 2, i, payload.size(),
                     checksum_of(payload.data(), payload.size())},
                    payload});
  }
  const auto stream = stream_of(msgs);
  for (int trial = 0; trial < 100; ++trial) {
    MessageReader reader(1 << 20, true);
    Recorder rec;
    size_t pos = 0;
    while (pos < stream.size()) {
      const size_t n = std::min<size_t>(stream.size() - pos, 1 + rng() % (trial % 2 ? 50 : 5000));
      ASSERT_TRUE(reader.feed(stream.data() + pos, n, rec)) << reader.error();
      pos += n;
    }
    ASSERT_EQ(rec.headers.size(), msgs.size());
    EXPECT_EQ(rec.starts, static_cast<int>(msgs.size()));
    for (size_t i = 0; i < msgs.size(); ++i) {
      EXPECT_EQ(rec.headers[i], msgs[i].first);
      EXPECT_TRUE(rec.ok[i]);
    }
    EXPECT_TRUE(reader.between_messages());
    EXPECT_EQ(reader.messages(), msgs.size());
  }
}

TEST(MessageReader, ReportsBadPayloadAndBadHeaders) {
  std::vector<uint8_t> payload(100, 7);
  Header h{MsgType::kPush, 0, 0, 0, payload.size(), checksum_of(payload.data(), payload.size())};
  auto stream = stream_of({{h, payload}});
  {  // corrupted payload byte: message delivered with checksum_ok = false
    auto bad = stream;
    bad[kHeaderSize + 50] ^= 1;
    MessageReader reader(1 << 20, true);
    Recorder rec;
    ASSERT_TRUE(reader.feed(bad.data(), bad.size(), rec));
    ASSERT_EQ(rec.ok.size(), 1u);
    EXPECT_FALSE(rec.ok[0]);
  }
  {  // without verification the same stream passes
    auto bad = stream;
    bad[kHeaderSize + 50] ^= 1;
    MessageReader reader(1 << 20, false);
    Recorder rec;
    ASSERT_TRUE(reader.feed(bad.data(), bad.size(), rec));
    EXPECT_TRUE(rec.ok.at(0));
  }
  {  // length beyond the limit
    MessageReader reader(99, true);
    Recorder rec;
    EXPECT_FALSE(reader.feed(stream.data(), stream.size(), rec));
    EXPECT_NE(reader.error().find("exceeds"), std::string::npos);
  }
  {  // the sink refuses the header
    MessageReader reader(1 << 20, true);
    Recorder rec;
    rec.accept = false;
    EXPECT_FALSE(reader.feed(stream.data(), stream.size(), rec));
  }
  {  // garbage instead of a header
    std::vector<uint8_t> junk(kHeaderSize, 0xab);
    MessageReader reader(1 << 20, true);
    Recorder rec;
    EXPECT_FALSE(reader.feed(junk.data(), junk.size(), rec));
    EXPECT_NE(reader.error().find("magic"), std::string::npos);
  }
}

TEST(ParseSize, Table) {
  const struct {
    const char* text;
    bool ok;
    uint64_t bytes;
  } cases[] = {
      {"65536", true, 65536}, {"4MiB", true, 4u << 20},  {"4MB", true, 4000000}, {"512KiB", true, 524288},
      {"1.5KB", true, 1500},  {"1GB", true, 1000000000}, {"0", true, 0},         {"", false, 0},
      {"4 MB", false, 0},     {"4mb", false, 0},         {"-1", false, 0},       {"0.5B", false, 0},
      {"MB", false, 0},
  };
  for (const auto& c : cases) {
    uint64_t out = 0;
    EXPECT_EQ(parse_size(c.text, out), c.ok) << c.text;
    if (c.ok) {
      EXPECT_EQ(out, c.bytes) << c.text;
    }
  }
}

TEST(Pattern, DeterministicAndChecksummed) {
  const Pattern a = make_pattern(1000003, 9), b = make_pattern(1000003, 9), c = make_pattern(1000003, 10);
  EXPECT_EQ(a.data, b.data);
  EXPECT_NE(a.data, c.data);
  EXPECT_EQ(a.checksum, checksum_of(a.data.data(), a.data.size()));
}

// The worker and every PS host must agree on each shard's size, or the PS
// refuses the worker's hello: the shards add up to M exactly and differ by
// at most one byte.
TEST(ShardBytes, AddUpToTheModel) {
  for (uint64_t m : {1ull, 2ull, 7ull, 1000001ull, 2ull << 20}) {
    for (unsigned hosts = 1; hosts <= 8 && hosts <= m; ++hosts) {
      uint64_t sum = 0, lo = UINT64_MAX, hi = 0;
      for (unsigned k = 0; k < hosts; ++k) {
        const uint64_t b = shard_bytes(m, hosts, k);
        sum += b;
        lo = std::min(lo, b);
        hi = std::max(hi, b);
      }
      EXPECT_EQ(sum, m) << m << " over " << hosts;
      EXPECT_LE(hi - lo, 1u) << m << " over " << hosts;
    }
  }
  EXPECT_EQ(shard_bytes(10, 1, 0), 10u);
}

}  // namespace
}  // namespace psemu
