// SPDX-License-Identifier: BSD-3-Clause
// Header parser for the fast path. See include/psgate/packet_parser.h.
//
// Shape: one pass, front to back, over at most a few dozen bytes. Every read
// is preceded by a bounds check against an `end` offset: first the bytes in
// view, then (once the IP header is trusted) the end of the IP datagram or of
// the view, whichever comes first, so Ethernet padding after the datagram is
// never mistaken for L4 bytes. Lengths the headers state are checked against
// the whole frame, which may be longer than the view (an mbuf chain's first
// segment).
//
//   Ethernet -> VLAN* -> IPv4 ------------------------> L4 ports
//                     -> IPv6 -> ext headers (walk) -->
//                     -> anything else: non-IP (network control when the
//                        ethertype is the link's own: ARP, LLDP, LACP, ...)
//
// All offsets are uint32_t and only ever compared as `off + n <= end` with
// off <= end already established, so nothing can wrap.
#include "psgate/packet_parser.h"

namespace psgate {
namespace {

constexpr uint32_t kEthHeaderLen = 14;  // dst MAC, src MAC, ethertype
constexpr uint32_t kVlanTagLen = 4;     // TCI + next ethertype
constexpr uint32_t kIpv4MinHeaderLen = 20;
constexpr uint32_t kIpv6HeaderLen = 40;

constexpr uint16_t kEtherTypeIpv4 = 0x0800;
constexpr uint16_t kEtherTypeIpv6 = 0x86dd;
constexpr uint16_t kEtherTypeMacControl = 0x8808;  // 802.3 clause 31: PAUSE, PFC

constexpr uint8_t kProtoHopByHop = 0;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoRouting = 43;
constexpr uint8_t kProtoFragment = 44;
constexpr uint8_t kProtoEsp = 50;
constexpr uint8_t kProtoAh = 51;
constexpr uint8_t kProtoIcmpv6 = 58;
constexpr uint8_t kProtoNoNext = 59;
constexpr uint8_t kProtoDstOpts = 60;
constexpr uint8_t kProtoSctp = 132;

// RFC 8200 allows each extension header once (destination options twice), so
// a legitimate chain has well under 8 headers. Capping the walk bounds the
// per-packet cost of a hostile chain of hundreds of 8-byte headers.
constexpr unsigned kMaxIpv6ExtHeaders = 8;

inline uint16_t load_be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t load_be32(const uint8_t* p) { return uint32_t{load_be16(p)} << 16 | load_be16(p + 2); }

// The link's own control frames: tiny, and a delayed one breaks the link or
// its neighbours (a lost LACP frame takes a bond member down, an unanswered
// ARP makes a host believe its peer is gone). Every other non-IP ethertype
// (MPLS, PPPoE, FCoE, RoCEv1, MACsec, ...) can carry bulk traffic and must not
// get the uncapped top class: it is forwarded unclassified.
// MAC control (0x8808) is not among them: it is never relayed at all
// (ParsedPacket::mac_control).
inline bool is_link_control_ethertype(uint16_t type) {
  switch (type) {
    case 0x0806:  // ARP
    case 0x8035:  // RARP
    case 0x8809:  // slow protocols (LACP, marker, OAM)
    case 0x888e:  // EAPOL (802.1X)
    case 0x88cc:  // LLDP
    case 0x88f7:  // PTP
    case 0x8902:  // CFM (802.1ag, Y.1731)
      return true;
    default:
      return false;  // 802.3 lengths (< 0x0600) are for is_link_control_llc
  }
}

// An 802.3 frame: the type field is the LLC payload's length (at most 1500).
// LLC carries the link's own control (STP, CDP, ...), small frames whose
// length agrees with the frame: the payload holds `length` bytes and at most
// Ethernet's minimum padding besides. Anything else with a small type field
// (a jumbo frame with a length that contradicts it, or a bulk protocol
// choosing a type below 0x0600) gets no top class; nor does SNAP with OUI
// 00-00-00 (RFC 1042), which carries an ethertype, unless that ethertype is
// itself link control. `llc`: the payload's offset; bytes in view end at
// `len`, the frame at `frame_len`.
enum class Llc { kControl, kOther, kOutOfView };
inline Llc classify_llc(const uint8_t* data, uint32_t llc, uint16_t length, uint32_t len, uint32_t frame_len) {
  constexpr uint32_t kMax8023Length = 1500;
  constexpr uint32_t kMinPayload = 46;  // Ethernet's minimum frame, untagged, less header and FCS
  constexpr uint32_t kSnapHeader = 8;   // DSAP, SSAP, control, OUI, type
  const uint32_t payload = frame_len - llc;
  if (length > kMax8023Length || length > payload || payload > (length > kMinPayload ? length : kMinPayload))
    return Llc::kOther;
  if (length < kSnapHeader) return Llc::kControl;
  // Whether it is SNAP cannot be told from a view that ends before the
  // header (an mbuf chain's tiny first segment): not trusted.
  if (len - llc < kSnapHeader) return Llc::kOutOfView;
  const uint8_t* p = data + llc;
  if (p[0] == 0xaa && p[1] == 0xaa && p[2] == 0x03 && p[3] == 0 && p[4] == 0 && p[5] == 0) {
    const uint16_t inner = load_be16(p + 6);
    return inner >= 0x0600 && is_link_control_ethertype(inner) ? Llc::kControl : Llc::kOther;
  }
  return Llc::kControl;
}

// Link-scoped IP control protocols: routing and first-hop redundancy whose
// loss flaps a route or a gateway. Only with the TTL (hop limit) such a
// packet is sent with: 1, or 255 (RFC 5082: a receiver knows it came from the
// link), so traffic from further away never gets the top class by choosing a
// protocol number.
inline bool is_link_control_protocol(uint8_t proto, uint8_t ttl) {
  if (ttl != 1 && ttl != 255) return false;
  return proto == 2 || proto == 89 || proto == 103 || proto == 112;  // IGMP, OSPF, PIM, VRRP
}

inline bool is_vlan_tpid(uint16_t type) {
  // 802.1Q, 802.1ad (S-tag), and the pre-standard QinQ TPID some switches use.
  return type == 0x8100 || type == 0x88a8 || type == 0x9100;
}

// Reads the L4 header at data[off, end) for `proto`. Returns false when the
// header is too short for what the protocol requires (the packet is then
// malformed). Protocols without ports leave sport/dport at 0.
inline bool parse_l4(const uint8_t* data, uint32_t off, uint32_t end, ParsedPacket& out) {
  const uint32_t avail = end - off;
  const uint8_t* l4 = data + off;
  switch (out.proto) {
    case kProtoTcp:
      // Fewer than 20 bytes, or a data offset below the minimum header, cannot
      // be a real segment (and a tiny first fragment is a known firewall
      // evasion trick, RFC 1858), so do not trust its ports.
      if (avail < 20 || (l4[12] >> 4) < 5) return false;
      break;
    case kProtoUdp:
      if (avail < 8) return false;
      break;
    case kProtoSctp:
      if (avail < 4) return false;
      break;
    case kProtoIcmpv6: {
      // Type, code, checksum. Neighbour discovery (133-137, hop limit 255 as
      // RFC 4861 requires of it) and multicast listener discovery (130-132,
      // 143, hop limit 1) must never queue behind jobs: a delayed NS/NA
      // makes the host believe its peer is gone.
      if (avail < 4) return false;
      const uint8_t hop_limit = out.l3 == L3Kind::kIpv6 ? data[out.l3_offset + 7] : 0;
      const uint8_t type = l4[0];
      const bool nd = type >= 133 && type <= 137 && hop_limit == 255;
      const bool mld = ((type >= 130 && type <= 132) || type == 143) && hop_limit == 1;
      out.network_control = nd || mld;
      return true;
    }
    default: {
      // ICMP, GRE, ...: classified on addresses and proto only.
      const uint8_t ttl = data[out.l3_offset + (out.l3 == L3Kind::kIpv6 ? 7 : 8)];
      out.network_control = is_link_control_protocol(out.proto, ttl);
      return true;
    }
  }
  out.sport = load_be16(l4);
  out.dport = load_be16(l4 + 2);
  out.has_ports = true;
  return true;
}

inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

// `off` is the IPv4 header; bytes in view end at `len`, the frame at `frame_len`.
inline void parse_ipv4(const uint8_t* data, uint32_t off, uint32_t len, uint32_t frame_len, ParsedPacket& out) {
  if (len - off < kIpv4MinHeaderLen) return;  // too short to know anything
  const uint8_t* ip = data + off;
  if ((ip[0] >> 4) != 4) return;  // ethertype says IPv4, header disagrees
  out.l3 = L3Kind::kIpv4;
  out.l3_offset = static_cast<uint16_t>(off);

  // The fixed 20 bytes are in bounds: fill them in even if the checks below
  // fail, so a malformed packet can still be counted per address.
  out.traffic_class = ip[1];
  out.proto = ip[9];
  for (int i = 0; i < 4; ++i) {
    out.src[i] = ip[12 + i];
    out.dst[i] = ip[16 + i];
  }

  const uint32_t hlen = (ip[0] & 0x0fu) * 4;
  const uint32_t total = load_be16(ip + 2);
  // IHL >= 5; options in view; total_length covers the header and no more
  // than the frame (anything past total_length is Ethernet padding).
  if (hlen < kIpv4MinHeaderLen || hlen > len - off || total < hlen || total > frame_len - off) return;
  out.ip_header_sound = true;
  // Fragment offset (low 13 bits) != 0: no L4 header here. MF with offset 0 is
  // a first fragment and carries the L4 header like an unfragmented packet.
  const uint16_t flags_offset = load_be16(ip + 6);
  if ((flags_offset & 0x3fff) != 0) {  // MF or an offset
    out.fragment = true;
    // RFC 791 names a datagram by its Identification and protocol (with the
    // addresses). The header's protocol, not the one after AH (below): that
    // is all a later fragment has.
    out.fragment_id = uint32_t{ip[9]} << 16 | load_be16(ip + 4);
  }
  if ((flags_offset & 0x1fff) != 0) {
    out.non_first_fragment = true;
    out.malformed = false;
    // The rest of a fragmented OSPF or PIM message goes where its first
    // fragment went: class 0, when sent link-local.
    out.network_control = is_link_control_protocol(out.proto, ip[8]);
    return;
  }
  uint32_t l4 = off + hlen;
  const uint32_t end = min_u32(off + total, len);
  if (out.proto == kProtoAh) {
    // AH in transport mode (RFC 4302), as the IPv6 walk skips it: the ports
    // are those of the header after it, so a port rule matches the flow
    // whether or not it is authenticated.
    if (end - l4 < 2) return;
    const uint32_t ah_len = (data[l4 + 1] + 2u) * 4;  // 4-octet units, minus 2
    if (ah_len > off + total - l4) return;            // past the datagram
    out.proto = data[l4];
    l4 += ah_len;
    if (l4 > end) return;  // the next header is out of view
  }
  out.malformed = !parse_l4(data, l4, end, out);
}

// `off` is the IPv6 header; bytes in view end at `len`, the frame at `frame_len`.
inline void parse_ipv6(const uint8_t* data, uint32_t off, uint32_t len, uint32_t frame_len, ParsedPacket& out) {
  if (len - off < kIpv6HeaderLen) return;
  const uint8_t* ip = data + off;
  if ((ip[0] >> 4) != 6) return;
  out.l3 = L3Kind::kIpv6;
  out.l3_offset = static_cast<uint16_t>(off);

  out.traffic_class = static_cast<uint8_t>(((ip[0] & 0x0f) << 4) | (ip[1] >> 4));
  out.proto = ip[6];  // refined by the extension header walk
  for (int i = 0; i < 16; ++i) {
    out.src[i] = ip[8 + i];
    out.dst[i] = ip[24 + i];
  }

  const uint32_t payload = load_be16(ip + 4);
  // Payload length 0 with a jumbo option (RFC 2675) cannot occur on Ethernet;
  // it fails the walk below as malformed.
  if (payload > frame_len - off - kIpv6HeaderLen) return;
  out.ip_header_sound = true;
  // The datagram ends at `dgram_end`; what can be read of it, at `end`:
  // never past kMaxHeaderBytes, so that a chain is judged the same in one
  // buffer as in segments.
  const uint32_t dgram_end = off + kIpv6HeaderLen + payload;
  const uint32_t end = min_u32(min_u32(dgram_end, len), kMaxHeaderBytes);

  uint8_t nh = ip[6];
  uint32_t pos = off + kIpv6HeaderLen;
  for (unsigned n = 0;; ++n) {
    uint32_t ext_len;
    switch (nh) {
      case kProtoHopByHop:
      case kProtoRouting:
      case kProtoDstOpts:
        if (end - pos < 2) return;
        ext_len = (data[pos + 1] + 1u) * 8;  // units of 8 octets, not counting the first 8
        break;
      case kProtoAh:
        if (end - pos < 2) return;
        ext_len = (data[pos + 1] + 2u) * 4;  // RFC 4302: 4-octet units, minus 2
        break;
      case kProtoFragment:
        ext_len = 8;
        if (end - pos < ext_len) return;
        // Offset 0 without M is an atomic fragment (RFC 6946): a whole
        // datagram, classified as one.
        if ((load_be16(data + pos + 2) & 0xfff9) != 0) {
          out.fragment = true;
          out.fragment_id = load_be32(data + pos + 4);
        }
        if ((load_be16(data + pos + 2) >> 3) != 0) {
          // Later fragment: the L4 header is in the first one only.
          out.proto = data[pos];
          out.non_first_fragment = true;
          out.malformed = false;
          out.network_control = is_link_control_protocol(out.proto, ip[7]);
          return;
        }
        break;
      default:
        // Upper-layer protocol, or ESP / no-next-header whose contents are
        // opaque: the walk ends here.
        out.proto = nh;
        if (nh == kProtoEsp || nh == kProtoNoNext) {
          out.malformed = false;
          return;
        }
        out.malformed = !parse_l4(data, pos, end, out);
        return;
    }
    // A header may end past the view (its successor is then not readable and
    // the next step returns), never past the datagram.
    if (n == kMaxIpv6ExtHeaders || ext_len > dgram_end - pos) return;
    nh = data[pos];
    pos += ext_len;
    if (pos > end) return;  // the next header is out of view
  }
}

}  // namespace

void parse_packet(const uint8_t* data, uint32_t len, ParsedPacket& out) { parse_packet(data, len, len, out); }

void parse_packet(const uint8_t* data, uint32_t len, uint32_t frame_len, ParsedPacket& out) {
  out = ParsedPacket{};
  // Until a header proves otherwise the packet is malformed: every early
  // return below then reports it without another assignment.
  out.malformed = true;
  if (frame_len < len) frame_len = len;  // a frame is never shorter than what is in view
  if (len < kEthHeaderLen) return;       // runt: not even an ethertype

  uint32_t off = 12;  // ethertype / first TPID
  uint16_t type = load_be16(data + off);
  for (unsigned tags = 0; is_vlan_tpid(type); ++tags) {
    // A tag needs 4 bytes: TCI and the next ethertype. More tags than we
    // support is treated as junk rather than guessed at.
    if (tags == kMaxVlanTags || len - off < 2 + kVlanTagLen) return;
    off += kVlanTagLen;
    type = load_be16(data + off);
  }
  off += 2;  // past the final ethertype: start of L3

  if (type == kEtherTypeIpv4) {
    parse_ipv4(data, off, len, frame_len, out);
  } else if (type == kEtherTypeIpv6) {
    parse_ipv6(data, off, len, frame_len, out);
  } else if (type < 0x0600) {
    const Llc llc = classify_llc(data, off, type, len, frame_len);
    out.malformed = llc == Llc::kOutOfView;
    out.network_control = llc == Llc::kControl;
  } else {
    out.malformed = false;
    out.network_control = is_link_control_ethertype(type);
    out.mac_control = type == kEtherTypeMacControl;
  }
}

}  // namespace psgate
