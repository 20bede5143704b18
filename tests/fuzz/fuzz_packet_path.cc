// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the whole per-packet path, RX guard -> parse -> classify
// -> class queue -> schedule -> DSCP/CE rewrite -> TX, on the real data plane
// over ring-backed ports, one synchronous pass at a time (Dataplane::run_once).
// The input's first byte picks the data plane: one lcore (run to completion,
// its cut-through) or 1 RX + 1 scheduler lcore (the rings' hand-off, the
// scheduler's pass-through), each passing in turn; and whether class 0 (the
// network control the raw frames' ethertypes reach) goes through its limit
// (control_limit.h), one too large ever to drop.
//
// Each input describes a burst of up to 32 packets: for each, a frame (raw
// bytes, or a job's IPv4/IPv6 or an ARP header, VLAN tags before, followed
// by raw bytes), any length
// up to 20,000 bytes, cut into up to 8 mbuf segments of any sizes (empty
// ones too), and optionally one of the broken-buffer faults drivers are known
// for (pkt_len or nb_segs that disagree with the chain, data outside the
// buffer), or transmit requests in its offload flags, or a chain shared with
// another holder (a clone's reference: the fuzzer keeps one). After the pass,
// every packet must be accounted for exactly as psgate's contract says:
//   broken buffer              -> bad_mbuf
//   shorter than 17 bytes      -> runt (kMinForwardFrame)
//   longer than MTU + 14 + 4 x its VLAN tags (up to 4) -> oversize
//   MAC control (PAUSE, PFC)   -> mac_control
//   anything else              -> transmitted, as a sane mbuf without transmit
//                                 requests or empty segments (a shared chain:
//                                 as a copy, the other holder's bytes left as
//                                 they were), its IPv4 header checksum still
//                                 valid after the rewrite
// and every mbuf must be back in its pool. Any deviation aborts (a crash for
// libFuzzer), as does anything ASan or UBSan sees.
#include <fuzzer/FuzzedDataProvider.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "psgate/config.h"
#include "psgate/dataplane.h"
#include "psgate/header_rewrite.h"
#include "psgate/packet_parser.h"
#include "psgate/rx_guard.h"

namespace {

using namespace psgate;

constexpr uint32_t kMtu = 9000;
constexpr unsigned kMaxPackets = 32;
constexpr unsigned kMaxSegments = 8;
constexpr uint32_t kMaxLen = 20000;

struct World {
  rte_ring* rx[2][2] = {};  // [port][RX queue]
  unsigned rx_queues = 1;
  rte_ring* tx[2] = {};
  rte_mempool* pool = nullptr;
  std::unique_ptr<Dataplane> dataplane;
};
// The data lcores of each world: one; two, a direction each; two pipelined;
// three hybrid (two a direction each on RX queue 0, an RX lcore on queue 1
// handing off to both through rings).
const char* const kWorldLcores[] = {"[1]", "[1, 2]", "[1, 2]\nmode = \"pipelined\"", "[1, 2, 3]\nmode = \"hybrid\""};
constexpr unsigned kLcoreModes = std::size(kWorldLcores);
// Each without the network-control limit, then with it: its drops would
// depend on how many control frames earlier inputs sent, which one input
// cannot account for, so its rate and burst are the largest the loader
// takes (1 Tbit/s, 512 MiB: far beyond what the fuzzer sends), and policing
// runs on every class 0 frame (both data paths: the run-to-completion burst
// and the scheduler's ring take) with nothing to drop. Its drops:
// tests/unit/test_control_limit.cc, tests/dpdk/test_control_flood.cc.
constexpr unsigned kWorlds = 2 * kLcoreModes;
World* g_worlds[kWorlds] = {};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "invariant broken: %s\n", what.c_str());
  std::abort();
}

World* make_world(unsigned mode) {
  auto* w = new World;
  std::string devices[2];
  for (unsigned p = 0; p < 2; ++p) {
    const std::string base = std::string(p == 0 ? "fz_wire" : "fz_host") + std::to_string(mode);
    w->rx_queues = std::string(kWorldLcores[mode % kLcoreModes]).find("hybrid") != std::string::npos ? 2 : 1;
    for (unsigned q = 0; q < w->rx_queues; ++q)
      w->rx[p][q] = rte_ring_create((base + "_rx" + std::to_string(q)).c_str(), 1024, SOCKET_ID_ANY,
                                    RING_F_SP_ENQ | RING_F_SC_DEQ);
    w->tx[p] = rte_ring_create((base + "_tx").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    const int port =
        rte_eth_from_rings(("net_ring_" + base).c_str(), w->rx[p], w->rx_queues, &w->tx[p], 1, SOCKET_ID_ANY);
    char name[RTE_ETH_NAME_MAX_LEN];
    if (port < 0 || rte_eth_dev_get_name_by_port(static_cast<uint16_t>(port), name) != 0) fail("ring port");
    devices[p] = name;
  }
  // The frames the fuzzer builds come from a pool of ordinary 2 KB mbufs, so
  // every frame above 2 KB is a chain, as from a scatter-RX device.
  w->pool = rte_pktmbuf_pool_create(("fz_frames" + std::to_string(mode)).c_str(), 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                    SOCKET_ID_ANY);
  if (!w->pool) fail("frame pool");
  const std::string toml =
      "[eal]\nargs = []\n"
      "[ports.wire]\ndevice = \"" +
      devices[0] + "\"\nmtu = " + std::to_string(kMtu) +
      "\n"
      "[ports.host]\ndevice = \"" +
      devices[1] + "\"\nmtu = " + std::to_string(kMtu) +
      "\n"
      "[lcores]\nmain = 0\ndata = " +
      std::string(kWorldLcores[mode % kLcoreModes]) +
      "\n"
      "[dataplane]\nmbufs = 4095\n"
      "[stats]\ninterval = \"0s\"\n"
      "[classes]\ncount = 4\ndefault = 3\ndepth = 1024\n" +
      std::string(mode < kLcoreModes ? "control_rate = \"off\"\n"
                                     : "control_rate = \"1Tbit/s\"\ncontrol_burst = \"512MiB\"\n") +
      // DSCP on every job class and a CE mark from the first queued packet on:
      // most carried packets get rewritten, wherever their header lies.
      "[classes.1]\ndscp = 46\necn_threshold = 1\n"
      "[classes.2]\ndscp = 10\n"
      "[classes.3]\ndscp = 0\n"
      "[[jobs]]\nid = 1\nrank = 0\nmatch = [\"dst=10.0.0.5/32\", \"src=10.0.0.5/32\", \"dst=fd00::5/128\"]\n"
      "[[jobs]]\nid = 2\nrank = 1\nmatch = [\"dst=10.0.0.6/32,proto=udp\"]\n";
  auto config = parse_config(toml, "fuzz.toml");
  if (!config.ok()) fail(config.error());
  auto dp = Dataplane::create(*config);
  if (!dp.ok()) fail(dp.error());
  w->dataplane = std::move(*dp);
  return w;
}

void set_up() {
  const std::string prefix = "--file-prefix=psgate-fuzz-" + std::to_string(getpid());
  const char* argv[] = {
      "fuzz_packet_path", "--no-huge",      "-m",          "1536", "--no-pci", "--lcores=0@0,1@0,2@0,3@0",
      "--log-level=1",    "--no-telemetry", prefix.c_str()};
  if (rte_eal_init(static_cast<int>(sizeof(argv) / sizeof(argv[0])), const_cast<char**>(argv)) < 0)
    fail("rte_eal_init failed");
  for (unsigned mode = 0; mode < kWorlds; ++mode) g_worlds[mode] = make_world(mode);
}

// Frame headers the fuzzer may start a frame with, so that deep paths
// (classification, rewrites, chains split inside the IP header) are reached
// quickly; the rest of the frame is the fuzzer's bytes.
std::vector<uint8_t> header_template(unsigned kind, uint8_t tags) {
  std::vector<uint8_t> h = {0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01};
  for (unsigned t = 0; t < tags; ++t) {
    h.push_back(t % 2 ? 0x81 : 0x88);
    h.push_back(t % 2 ? 0x00 : 0xa8);
    h.push_back(0);
    h.push_back(static_cast<uint8_t>(10 + t));
  }
  if (kind == 1) {
    // IPv4 to job 1, ECT(0); total length and checksum are filled in later.
    const uint8_t ip[] = {0x45, 0x02, 0, 0, 0, 1, 0, 0, 64, 6, 0, 0, 10, 0, 1, 10, 10, 0, 0, 5};
    h.push_back(0x08);
    h.push_back(0x00);
    h.insert(h.end(), ip, ip + sizeof(ip));
    const uint8_t tcp[] = {0x9c, 0x40, 0x08, 0xae, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0};
    h.insert(h.end(), tcp, tcp + sizeof(tcp));
  } else if (kind == 2) {
    // IPv6 to job 1 with a hop-by-hop header; payload length filled in later.
    const uint8_t ip[] = {0x60, 0x20, 0, 0, 0,    0, 0, 64, 0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                          0,    0,    0, 1, 0xfd, 0, 0, 0,  0,    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5};
    h.push_back(0x86);
    h.push_back(0xdd);
    h.insert(h.end(), ip, ip + sizeof(ip));
    const uint8_t hbh[] = {17, 0, 1, 4, 0, 0, 0, 0};
    h.insert(h.end(), hbh, hbh + sizeof(hbh));
    const uint8_t udp[] = {0x9c, 0x40, 0x08, 0xae, 0, 0, 0, 0};
    h.insert(h.end(), udp, udp + sizeof(udp));
  } else if (kind == 3) {
    // ARP: network control, class 0 (its limit, where the world has one).
    const uint8_t arp[] = {0x08, 0x06, 0, 1, 0x08, 0, 6, 4, 0, 1};
    h.insert(h.end(), arp, arp + sizeof(arp));
  }
  return h;
}

// Completes the IP lengths (and IPv4 checksum) of a templated frame of `len`
// bytes so that it is a well-formed datagram.
void finish_template(std::vector<uint8_t>& f, unsigned kind, unsigned l3) {
  if (kind == 1 && f.size() >= l3 + 20) {
    const uint32_t total = static_cast<uint32_t>(f.size() - l3) > 65535 ? 65535 : static_cast<uint32_t>(f.size() - l3);
    f[l3 + 2] = static_cast<uint8_t>(total >> 8);
    f[l3 + 3] = static_cast<uint8_t>(total);
    f[l3 + 10] = f[l3 + 11] = 0;
    const uint16_t c = ipv4_header_checksum(f.data() + l3, 20);
    f[l3 + 10] = static_cast<uint8_t>(c >> 8);
    f[l3 + 11] = static_cast<uint8_t>(c);
  } else if (kind == 2 && f.size() >= l3 + 40) {
    const uint32_t payload = static_cast<uint32_t>(f.size() - l3 - 40);
    f[l3 + 4] = static_cast<uint8_t>(payload >> 8);
    f[l3 + 5] = static_cast<uint8_t>(payload);
  }
}

unsigned count_tags(const std::vector<uint8_t>& f) {
  unsigned tags = 0;
  while (tags < 4 && f.size() >= 14 + 4 * tags) {
    const unsigned type = f[12 + 4 * tags] << 8 | f[13 + 4 * tags];
    if (type != 0x8100 && type != 0x88a8 && type != 0x9100) break;
    ++tags;
  }
  return tags;
}

// What the parser makes of the whole frame: the data path must agree,
// however the frame was cut into segments.
bool is_mac_control(const std::vector<uint8_t>& frame) {
  ParsedPacket parsed;
  parse_packet(frame.data(), static_cast<uint32_t>(frame.size()), parsed);
  return parsed.mac_control;
}

enum class Fate { kCarried, kBad, kRunt, kOversize, kMacControl };

struct Packet {
  std::vector<uint8_t> frame;
  std::vector<rte_mbuf*> segments;  // every segment allocated, in chain order
  unsigned declared_segments = 0;   // nb_segs as handed over (a fault may lower it)
  Fate fate = Fate::kCarried;
  bool ipv4_checksum_ok = false;  // the frame parses as IPv4 with a valid header checksum
  bool shared = false;            // the fuzzer holds a reference on every segment too
  bool transmitted = false;
};

// Each packet's index, in a field psgate never writes and a copy keeps
// (rte_pktmbuf_copy copies `port`): a copy psgate sends instead of a shared
// chain is known by it.
constexpr uint16_t kFirstPacketTag = 1000;

std::vector<uint8_t> read_chain(const rte_mbuf* m) {
  std::vector<uint8_t> out;
  for (const rte_mbuf* s = m; s != nullptr; s = s->next) {
    const auto* p = rte_pktmbuf_mtod(s, const uint8_t*);
    out.insert(out.end(), p, p + s->data_len);
  }
  return out;
}

bool ipv4_checksum_valid(const std::vector<uint8_t>& f) {
  ParsedPacket p;
  parse_packet(f.data(), static_cast<uint32_t>(f.size()), p);
  if (p.l3 != L3Kind::kIpv4 || p.malformed) return false;
  const uint8_t* ip = f.data() + p.l3_offset;
  const unsigned ihl = (ip[0] & 0x0f) * 4u;
  std::vector<uint8_t> copy(ip, ip + ihl);
  const uint16_t stored = static_cast<uint16_t>(copy[10] << 8 | copy[11]);
  copy[10] = copy[11] = 0;
  return ipv4_header_checksum(copy.data(), ihl) == stored;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (g_worlds[0] == nullptr) set_up();
  FuzzedDataProvider in(data, size);
  World& w = *g_worlds[in.ConsumeIntegralInRange<unsigned>(0, kWorlds - 1)];
  const unsigned avail_before = rte_mempool_avail_count(w.pool);
  const Totals before = w.dataplane->read_totals(false);

  std::vector<Packet> packets;
  const unsigned n = in.ConsumeIntegralInRange<unsigned>(1, kMaxPackets);
  for (unsigned i = 0; i < n && in.remaining_bytes() > 0; ++i) {
    Packet pk;
    const unsigned kind = in.ConsumeIntegralInRange<unsigned>(0, 3);
    const uint8_t tags = in.ConsumeIntegralInRange<uint8_t>(0, 5);
    const uint32_t len = in.ConsumeIntegralInRange<uint32_t>(0, kMaxLen);
    pk.frame = kind == 0 ? std::vector<uint8_t>() : header_template(kind, tags);
    const std::vector<uint8_t> raw = in.ConsumeBytes<uint8_t>(in.ConsumeIntegralInRange<size_t>(0, 256));
    pk.frame.insert(pk.frame.end(), raw.begin(), raw.end());
    // The rest up to `len` is a pattern: long frames without long inputs.
    for (size_t k = pk.frame.size(); k < len; ++k) pk.frame.push_back(static_cast<uint8_t>(k * 7));
    if (pk.frame.size() > len && kind == 0) pk.frame.resize(len);
    finish_template(pk.frame, kind, 14 + 4 * tags);
    const uint32_t flen = static_cast<uint32_t>(pk.frame.size());

    // Segments: cut points chosen by the input, each segment within one mbuf.
    const unsigned want = in.ConsumeIntegralInRange<unsigned>(1, kMaxSegments);
    std::vector<uint32_t> sizes;
    uint32_t left = flen;
    for (unsigned s = 0; s + 1 < want && left > 0; ++s) {
      const uint32_t cut = in.ConsumeIntegralInRange<uint32_t>(0, std::min<uint32_t>(left, 2048));
      sizes.push_back(cut);
      left -= cut;
    }
    while (left > 0 || sizes.empty()) {
      const uint32_t cut = std::min<uint32_t>(left, 2048);
      sizes.push_back(cut);
      left -= cut;
      if (cut == 0) break;
    }
    bool alloc_failed = false;
    uint32_t off = 0;
    for (uint32_t sz : sizes) {
      rte_mbuf* m = rte_pktmbuf_alloc(w.pool);
      if (m == nullptr) {
        alloc_failed = true;
        break;
      }
      if (sz) std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(sz)), pk.frame.data() + off, sz);
      off += sz;
      if (!pk.segments.empty()) pk.segments.back()->next = m;
      pk.segments.push_back(m);
    }
    if (alloc_failed || pk.segments.size() > 255) {
      for (rte_mbuf* m : pk.segments) {
        m->next = nullptr;
        rte_pktmbuf_free_seg(m);
      }
      break;
    }
    rte_mbuf* head = pk.segments[0];
    head->nb_segs = static_cast<uint16_t>(pk.segments.size());
    head->pkt_len = flen;
    pk.declared_segments = head->nb_segs;

    // A driver fault, sometimes.
    const unsigned fault = in.ConsumeIntegralInRange<unsigned>(0, 11);
    bool broken = true;
    switch (fault) {
      case 0:
        head->pkt_len += in.ConsumeIntegralInRange<uint32_t>(1, 70000);
        break;
      case 1:
        if (head->pkt_len == 0) {
          broken = false;
          break;
        }
        head->pkt_len -= in.ConsumeIntegralInRange<uint32_t>(1, head->pkt_len);
        break;
      case 2:
        ++head->nb_segs;
        break;
      case 3:
        if (head->nb_segs < 2) {
          broken = false;
          break;
        }
        --head->nb_segs;
        --pk.declared_segments;
        break;
      case 4: {
        rte_mbuf* s = pk.segments[in.ConsumeIntegralInRange<size_t>(0, pk.segments.size() - 1)];
        s->data_off = static_cast<uint16_t>(s->buf_len - s->data_len + 1);
        break;
      }
      case 5:  // transmit requests on a received frame: cleared, never acted on
        head->ol_flags |= RTE_MBUF_F_TX_VLAN | RTE_MBUF_F_TX_TCP_SEG | RTE_MBUF_F_TX_IP_CKSUM;
        broken = false;
        break;
      case 6:  // shared with another holder: psgate must leave its chain as it is
        for (rte_mbuf* seg : pk.segments) rte_mbuf_refcnt_update(seg, 1);
        pk.shared = true;
        broken = false;
        break;
      default:
        broken = false;
    }
    const unsigned tags_seen = count_tags(pk.frame);
    if (broken) {
      pk.fate = Fate::kBad;
    } else if (flen < kMinForwardFrame) {
      pk.fate = Fate::kRunt;
    } else if (flen > max_frame_bytes(kMtu, tags_seen)) {
      pk.fate = Fate::kOversize;
    } else if (is_mac_control(pk.frame)) {
      pk.fate = Fate::kMacControl;  // PAUSE, PFC: never relayed
    } else {
      pk.fate = Fate::kCarried;
      pk.ipv4_checksum_ok = ipv4_checksum_valid(pk.frame);
    }
    packets.push_back(std::move(pk));
  }

  // Half the packets arrive on the wire, half from the host; with two RX
  // queues (hybrid), every other pair on the second.
  std::map<const rte_mbuf*, const Packet*> by_head;
  unsigned injected[2] = {0, 0};
  for (size_t i = 0; i < packets.size(); ++i) {
    const unsigned port = i & 1;
    rte_mbuf* head = packets[i].segments[0];
    head->port = static_cast<uint16_t>(kFirstPacketTag + i);
    by_head[head] = &packets[i];
    if (rte_ring_sp_enqueue(w.rx[port][(i >> 1) % w.rx_queues], head) != 0) fail("rx ring full");
    ++injected[port];
  }
  // Passes until everything left (a burst is at most 32 per port and pass).
  for (int pass = 0; pass < 8; ++pass) w.dataplane->run_once();

  unsigned carried = 0, bad = 0, runt = 0, oversize = 0, mac_control = 0;
  for (const Packet& p : packets) {
    carried += p.fate == Fate::kCarried;
    bad += p.fate == Fate::kBad;
    runt += p.fate == Fate::kRunt;
    oversize += p.fate == Fate::kOversize;
    mac_control += p.fate == Fate::kMacControl;
  }
  unsigned transmitted = 0;
  for (unsigned port = 0; port < 2; ++port) {
    void* objs[64];
    unsigned got;
    while ((got = rte_ring_sc_dequeue_burst(w.tx[port], objs, 64, nullptr)) != 0) {
      for (unsigned k = 0; k < got; ++k) {
        rte_mbuf* m = static_cast<rte_mbuf*>(objs[k]);
        auto it = by_head.find(m);
        Packet* found = nullptr;
        if (it != by_head.end()) {
          found = const_cast<Packet*>(it->second);
        } else if (m->port >= kFirstPacketTag && m->port - kFirstPacketTag < packets.size() &&
                   packets[m->port - kFirstPacketTag].shared) {
          found = &packets[m->port - kFirstPacketTag];  // a copy of a shared chain
        }
        if (found == nullptr) fail("transmitted an mbuf that was never sent in");
        if (found->shared && it != by_head.end()) fail("transmitted a shared chain itself, not a copy");
        if (found->transmitted) fail("transmitted a packet twice");
        found->transmitted = true;
        const Packet& p = *found;
        if (p.fate != Fate::kCarried) fail("transmitted a packet that must be dropped");
        if (!mbuf_is_sane(m)) fail("transmitted a broken mbuf");
        if (has_empty_segment(m)) fail("transmitted an empty segment (a 0-byte TX descriptor)");
        if (m->ol_flags & RTE_MBUF_F_TX_OFFLOAD_MASK) fail("transmitted with a transmit request it came with");
        const std::vector<uint8_t> out = read_chain(m);
        if (out.size() != p.frame.size()) fail("length changed in transit");
        if (p.ipv4_checksum_ok && !ipv4_checksum_valid(out)) fail("IPv4 checksum broken by the rewrite");
        ++transmitted;
        rte_pktmbuf_free(m);
      }
    }
  }
  // Segments past a lowered nb_segs are the fuzzer's to free (psgate must
  // never follow a chain past what nb_segs vouches for), and so is its
  // reference on a shared chain, which must be as it was handed over.
  for (const Packet& p : packets) {
    if (p.shared) {
      if (read_chain(p.segments[0]) != p.frame) fail("a shared chain changed under its other holder");
      rte_pktmbuf_free(p.segments[0]);
    }
    for (size_t s = p.declared_segments; s < p.segments.size(); ++s) {
      p.segments[s]->next = nullptr;
      rte_pktmbuf_free_seg(p.segments[s]);
    }
  }

  const Totals after = w.dataplane->read_totals(false);
  auto delta = [&](DropReason r) {
    return after.ports[0].drops[r] + after.ports[1].drops[r] - before.ports[0].drops[r] - before.ports[1].drops[r];
  };
  const uint64_t rx = after.rx_total() - before.rx_total();
  const uint64_t tx = after.tx_total() - before.tx_total();
  const uint64_t dropped = after.drop_total() - before.drop_total();
  if (rx != packets.size()) fail("received " + std::to_string(rx) + " of " + std::to_string(packets.size()));
  if (tx != transmitted || transmitted != carried)
    fail("transmitted " + std::to_string(transmitted) + " (counted " + std::to_string(tx) + "), expected " +
         std::to_string(carried));
  if (rx != tx + dropped) fail("conservation: received != transmitted + dropped");
  if (delta(kDropBadMbuf) != bad)
    fail("bad_mbuf " + std::to_string(delta(kDropBadMbuf)) + ", expected " + std::to_string(bad));
  if (delta(kDropRunt) != runt) fail("runt count");
  if (delta(kDropOversize) != oversize) fail("oversize count");
  if (delta(kDropMacControl) != mac_control) fail("mac_control count");
  if (rte_mempool_avail_count(w.pool) != avail_before) fail("mbufs leaked from the frame pool");
  return 0;
}
