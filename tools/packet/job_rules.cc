// SPDX-License-Identifier: BSD-3-Clause
#include "job_rules.h"

#include <random>

namespace psgate::pkt {

std::vector<MatchRule> job_like_rules(uint32_t n) {
  constexpr uint8_t kTcp = 6, kUdp = 17;
  std::mt19937 rng(99);
  std::vector<MatchRule> rules;
  rules.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    MatchRule m;
    const bool v6 = i % 3 == 2;
    IpPrefix p;
    p.family = v6 ? 6 : 4;
    const uint32_t host = rng();
    if (v6) {
      p.addr = {0xfd};  // fd00::/8
      for (int b = 0; b < 4; ++b) p.addr[12 + b] = static_cast<uint8_t>(host >> (24 - 8 * b));
      p.length = i % 10 == 0 ? 120 : 128;
    } else {
      p.addr = {10, static_cast<uint8_t>(host >> 16), static_cast<uint8_t>(host >> 8), static_cast<uint8_t>(host)};
      p.length = i % 10 == 0 ? 24 : 32;
    }
    for (unsigned bit = p.length; bit < 128; ++bit) p.addr[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
    if (i % 2) m.src = p;
    else m.dst = p;
    const uint16_t port = static_cast<uint16_t>(1024 + rng() % 60000);
    if (i % 4 == 0) m.dport = {port, static_cast<uint16_t>(port + rng() % 16)};
    else if (i % 4 == 1) m.sport = {port, port};
    if (i % 5 != 0) m.proto = i % 2 ? kTcp : kUdp;
    rules.push_back(m);
  }
  return rules;
}

}  // namespace psgate::pkt
