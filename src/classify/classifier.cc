// SPDX-License-Identifier: BSD-3-Clause
// Rule matcher on DPDK ACL. Six tries, one per (family, what of L4 is known):
//
//   packet ──┬─ IPv4 with ports ─────────> ctx v4      (proto, src, dst, sport, dport)
//            ├─ IPv4, non-first fragment ─> ctx v4frag  (proto, src, dst)
//            ├─ IPv4 without ports ──────> ctx v4nop   (proto, src, dst; rules without ports only)
//            ├─ IPv6 with ports ─────────> ctx v6      (proto, src 4x32, dst 4x32, ports)
//            ├─ IPv6, non-first fragment ─> ctx v6frag  (proto, src 4x32, dst 4x32)
//            └─ IPv6 without ports ──────> ctx v6nop   (proto, src 4x32, dst 4x32; rules without ports only)
//
// The fragment tries simply have no port fields, which is exactly "a non-first
// fragment ignores the rule's port ranges". The no-ports tries have none
// either and hold only the rules without a port range: a packet of a
// protocol without ports (ICMP, GRE, ESP, ...), a later fragment's too,
// matches no rule with one, even a range that holds 0 (as ports 0/0 in the
// main tries, `dport=0-1023` took the hosts' ICMP). Job rules nearly all name ports, so these tries are
// small or absent (nullptr: no such rule). A rule without a prefix goes into
// both families' tries.
//
// rte_acl conventions this file relies on (see app/test/test_acl.c in DPDK):
//   - rule values are in host byte order, the classified data buffer in
//     network byte order (ACL walks the input byte by byte, MSB first);
//   - the first field must be 1 byte; each later input_index covers 4 bytes of
//     the data buffer, so the two 16-bit ports share one input index;
//   - the highest priority wins; we give the first rule the highest priority
//     so that first-match-wins holds. userdata 0 means "no match", so
//     userdata = rule index + 1.
#include "psgate/classifier.h"

#include <rte_acl.h>
#include <rte_byteorder.h>
#include <rte_errno.h>

#include <tbb/parallel_for.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <new>
#include <vector>

namespace psgate {

// ---------------------------------------------------------------------------
// Reference semantics.

namespace {

bool prefix_matches(const IpPrefix& p, const std::array<uint8_t, 16>& addr) {
  unsigned bits = p.length;
  unsigned i = 0;
  for (; bits >= 8; bits -= 8, ++i) {
    if (p.addr[i] != addr[i]) return false;
  }
  if (bits == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff << (8 - bits));
  return ((p.addr[i] ^ addr[i]) & mask) == 0;
}

}  // namespace

bool rule_matches(const MatchRule& rule, const ParsedPacket& pkt) {
  if (pkt.malformed || pkt.l3 == L3Kind::kNonIp) return false;
  const uint8_t fam = pkt.l3 == L3Kind::kIpv4 ? 4 : 6;
  const uint8_t rule_fam = rule.family();
  if (rule_fam != 0 && rule_fam != fam) return false;
  if (rule.src && (rule.src->family != fam || !prefix_matches(*rule.src, pkt.src))) return false;
  if (rule.dst && (rule.dst->family != fam || !prefix_matches(*rule.dst, pkt.dst))) return false;
  if (rule.proto && *rule.proto != pkt.proto) return false;
  // ICMP, GRE, ESP, ...: no ports, which a port range cannot match, whether
  // or not this is a later fragment.
  if (pkt.non_first_fragment) return protocol_has_ports(pkt.proto) || !rule.has_ports();
  if (!pkt.has_ports) return !rule.has_ports();
  return pkt.sport >= rule.sport.lo && pkt.sport <= rule.sport.hi && pkt.dport >= rule.dport.lo &&
         pkt.dport <= rule.dport.hi;
}

uint32_t classify_reference(std::span<const ClassifierRule> rules, const ParsedPacket& pkt) {
  for (const ClassifierRule& r : rules) {
    if (rule_matches(r.match, pkt)) return r.value;
  }
  return Classifier::kNoMatch;
}

// ---------------------------------------------------------------------------
// ACL layouts.

namespace {

constexpr unsigned kMaxBurst = 64;

// Data buffers handed to rte_acl_classify, in network byte order. Padding is
// never read by a field but is inside an input word, so it is zeroed.
template <size_t kAddrBytes>
struct AclKey {
  uint8_t proto;
  uint8_t pad[3];
  uint8_t src[kAddrBytes];
  uint8_t dst[kAddrBytes];
  rte_be16_t sport;
  rte_be16_t dport;
};
using V4Key = AclKey<4>;
using V6Key = AclKey<16>;
static_assert(sizeof(V4Key) == 16);
static_assert(sizeof(V6Key) == 40);

// Fills an ACL key from a parsed packet; the ACL reads it through the pointer returned.
template <size_t kAddrBytes>
const uint8_t* fill_acl_key(AclKey<kAddrBytes>& k, const ParsedPacket& p, rte_be16_t sport, rte_be16_t dport) {
  k.proto = p.proto;
  k.pad[0] = k.pad[1] = k.pad[2] = 0;
  std::memcpy(k.src, p.src.data(), kAddrBytes);
  std::memcpy(k.dst, p.dst.data(), kAddrBytes);
  k.sport = sport;
  k.dport = dport;
  return reinterpret_cast<const uint8_t*>(&k);
}

// Field numbering: v4 {proto, src, dst, sport, dport}; v6 {proto, src0..3,
// dst0..3, sport, dport}. The fragment tries use the same keys and the same
// defs minus the trailing two port fields.
constexpr uint32_t kV4Fields = 5;
constexpr uint32_t kV6Fields = 11;
constexpr uint32_t kPortFields = 2;

constexpr rte_acl_field_def field(uint8_t type, uint8_t size, uint8_t idx, uint8_t input, uint32_t offset) {
  return rte_acl_field_def{type, size, idx, input, offset};
}

const rte_acl_field_def kV4Defs[kV4Fields] = {
    field(RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, 0, offsetof(V4Key, proto)),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 1, 1, offsetof(V4Key, src)),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 2, 2, offsetof(V4Key, dst)),
    field(RTE_ACL_FIELD_TYPE_RANGE, 2, 3, 3, offsetof(V4Key, sport)),
    field(RTE_ACL_FIELD_TYPE_RANGE, 2, 4, 3, offsetof(V4Key, dport)),
};

const rte_acl_field_def kV6Defs[kV6Fields] = {
    field(RTE_ACL_FIELD_TYPE_BITMASK, 1, 0, 0, offsetof(V6Key, proto)),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 1, 1, offsetof(V6Key, src) + 0),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 2, 2, offsetof(V6Key, src) + 4),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 3, 3, offsetof(V6Key, src) + 8),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 4, 4, offsetof(V6Key, src) + 12),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 5, 5, offsetof(V6Key, dst) + 0),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 6, 6, offsetof(V6Key, dst) + 4),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 7, 7, offsetof(V6Key, dst) + 8),
    field(RTE_ACL_FIELD_TYPE_MASK, 4, 8, 8, offsetof(V6Key, dst) + 12),
    field(RTE_ACL_FIELD_TYPE_RANGE, 2, 9, 9, offsetof(V6Key, sport)),
    field(RTE_ACL_FIELD_TYPE_RANGE, 2, 10, 9, offsetof(V6Key, dport)),
};

// A family's three tries are kCtxV4/kCtxV6 + kWithPorts, kFragment, kNoPorts.
enum Ctx : unsigned { kCtxV4 = 0, kCtxV6 = 3, kNumCtx = 6 };
enum CtxKind : unsigned { kWithPorts = 0, kFragment = 1, kNoPorts = 2 };

struct CtxLayout {
  const char* suffix;
  const rte_acl_field_def* defs;
  uint32_t num_fields;
  uint8_t family;
  bool portless_rules_only;
};

const CtxLayout kLayouts[kNumCtx] = {
    {"v4", kV4Defs, kV4Fields, 4, false},
    {"v4f", kV4Defs, kV4Fields - kPortFields, 4, false},
    {"v4n", kV4Defs, kV4Fields - kPortFields, 4, true},
    {"v6", kV6Defs, kV6Fields, 6, false},
    {"v6f", kV6Defs, kV6Fields - kPortFields, 6, false},
    {"v6n", kV6Defs, kV6Fields - kPortFields, 6, true},
};

// A rule in the widest layout; narrower layouts take a prefix of `field`.
RTE_ACL_RULE_DEF(WideRule, kV6Fields);
static_assert(RTE_ACL_RULE_SZ(0) % sizeof(uint64_t) == 0 && sizeof(rte_acl_field) == 16);

uint32_t be32_at(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// One 32-bit MASK field covering bits [32*word, 32*word+32) of a prefix.
rte_acl_field mask_field(const std::optional<IpPrefix>& p, unsigned word) {
  rte_acl_field f{};
  if (!p) return f;  // 0/0: any
  const int len = std::clamp(int{p->length} - 32 * int(word), 0, 32);
  const uint32_t mask = len == 0 ? 0 : ~uint32_t{0} << (32 - len);
  f.value.u32 = be32_at(&p->addr[4 * word]) & mask;  // host bits may be set by a caller
  f.mask_range.u32 = static_cast<uint32_t>(len);
  return f;
}

void fill_fields(const MatchRule& m, uint8_t family, WideRule& r) {
  r.field[0].value.u8 = m.proto.value_or(0);
  r.field[0].mask_range.u8 = m.proto ? 0xff : 0;
  unsigned f = 1;
  const unsigned words = family == 4 ? 1 : 4;
  for (unsigned w = 0; w < words; ++w) r.field[f++] = mask_field(m.src, w);
  for (unsigned w = 0; w < words; ++w) r.field[f++] = mask_field(m.dst, w);
  r.field[f].value.u16 = m.sport.lo;
  r.field[f++].mask_range.u16 = m.sport.hi;
  r.field[f].value.u16 = m.dport.lo;
  r.field[f].mask_range.u16 = m.dport.hi;
}

std::string validate(const ClassifierRule& r) {
  if (r.value == Classifier::kNoMatch) return "value must not be kNoMatch";
  for (const auto* p : {&r.match.src, &r.match.dst}) {
    if (!*p) continue;
    if ((*p)->family != 4 && (*p)->family != 6) return "prefix family must be 4 or 6";
    if ((*p)->length > ((*p)->family == 4 ? 32 : 128)) return "prefix length too long";
  }
  if (r.match.src && r.match.dst && r.match.src->family != r.match.dst->family)
    return "src and dst prefixes of different families";
  if (r.match.sport.lo > r.match.sport.hi || r.match.dport.lo > r.match.dport.hi) return "port range with lo > hi";
  return {};
}

// Unique ACL context names: rte_acl_create returns an EXISTING context of the
// same name instead of failing, which would make two classifiers share (and
// double-free) one trie. A process-wide counter rules that out.
std::atomic<uint64_t> g_ctx_serial{0};

}  // namespace

struct Classifier::Impl {
  rte_acl_ctx* ctx[kNumCtx] = {};  // nullptr: no rule for that family
  std::vector<uint32_t> values;    // userdata - 1 -> value

  ~Impl() {
    for (rte_acl_ctx* c : ctx) {
      if (c != nullptr) rte_acl_free(c);
    }
  }
};

namespace {

// Builds one context from the rules of `layout.family` (and family-less
// ones; for a no-ports trie, those of them without a port range).
// Returns an error string, empty on success; *out stays nullptr when no rule
// applies.
std::string build_ctx(std::span<const ClassifierRule> rules, const CtxLayout& layout, const std::string& base_name,
                      int socket_id, rte_acl_ctx** out) {
  const uint32_t rule_sz = RTE_ACL_RULE_SZ(layout.num_fields);
  std::vector<uint64_t> buf;  // uint64_t: rte_acl_field holds u64 unions
  uint32_t count = 0;
  for (size_t i = 0; i < rules.size(); ++i) {
    const uint8_t fam = rules[i].match.family();
    if (fam != 0 && fam != layout.family) continue;
    if (layout.portless_rules_only && rules[i].match.has_ports()) continue;
    WideRule w{};
    w.data.category_mask = 1;
    // Earlier rules get higher priorities; i < RTE_ACL_MAX_PRIORITY is checked by the caller.
    w.data.priority = static_cast<int32_t>(RTE_ACL_MAX_PRIORITY - i);
    w.data.userdata = static_cast<uint32_t>(i + 1);
    fill_fields(rules[i].match, layout.family, w);
    buf.resize((size_t{count} + 1) * rule_sz / sizeof(uint64_t));
    std::memcpy(reinterpret_cast<uint8_t*>(buf.data()) + size_t{count} * rule_sz, &w, rule_sz);
    ++count;
  }
  if (count == 0) return {};  // rte_acl_build refuses an empty rule set

  const std::string name = base_name + "." + std::to_string(g_ctx_serial.fetch_add(1)) + "." + layout.suffix;
  if (name.size() >= RTE_ACL_NAMESIZE) return "ACL context name too long: " + name;
  if (rte_acl_find_existing(name.c_str()) != nullptr) return "ACL context exists: " + name;

  rte_acl_param param{};
  param.name = name.c_str();
  param.socket_id = socket_id;
  param.rule_size = rule_sz;
  param.max_rule_num = count;
  rte_acl_ctx* ctx = rte_acl_create(&param);
  if (ctx == nullptr) return "rte_acl_create(" + name + ") failed: " + rte_strerror(rte_errno);

  int rc = rte_acl_add_rules(ctx, reinterpret_cast<const rte_acl_rule*>(buf.data()), count);
  if (rc == 0) {
    rte_acl_config cfg{};
    cfg.num_categories = 1;
    cfg.num_fields = layout.num_fields;
    std::copy_n(layout.defs, layout.num_fields, cfg.defs);
    cfg.max_size = 0;  // no limit: rte_malloc failing still reports -ENOMEM
    rc = rte_acl_build(ctx, &cfg);
  }
  if (rc != 0) {
    rte_acl_free(ctx);
    return "ACL build of " + name + " (" + std::to_string(count) + " rules) failed: " + rte_strerror(-rc);
  }
  *out = ctx;
  return {};
}

}  // namespace

Result<std::unique_ptr<Classifier>> Classifier::build(std::span<const ClassifierRule> rules, const std::string& name,
                                                      int socket_id) {
  using R = Result<std::unique_ptr<Classifier>>;
  if (rules.size() >= RTE_ACL_MAX_PRIORITY) return R::failure("too many rules: " + std::to_string(rules.size()));
  for (size_t i = 0; i < rules.size(); ++i) {
    std::string err = validate(rules[i]);
    if (!err.empty()) return R::failure("rule " + std::to_string(i) + ": " + err);
  }
  // Leave room for ".<serial>.<suffix>" inside RTE_ACL_NAMESIZE (32).
  const std::string base = name.substr(0, 10);
  try {
    std::unique_ptr<Classifier> c(new Classifier());
    c->impl_ = std::make_unique<Impl>();
    c->impl_->values.reserve(rules.size());
    for (const ClassifierRule& r : rules) c->impl_->values.push_back(r.value);
    // The six tries are independent: built in parallel (TBB, on the control
    // path only; a caller already on a TBB worker shares the same pool).
    std::string errors[kNumCtx];
    tbb::parallel_for(0u, static_cast<unsigned>(kNumCtx), [&](unsigned k) {
      try {
        errors[k] = build_ctx(rules, kLayouts[k], base, socket_id, &c->impl_->ctx[k]);
      } catch (const std::bad_alloc&) {
        errors[k] = "out of memory building the " + std::string(kLayouts[k].suffix) + " trie";
      }
    });
    for (const std::string& err : errors)
      if (!err.empty()) return R::failure(err);  // Impl's destructor frees what was built
    c->rule_count_ = rules.size();
    return R(std::move(c));
  } catch (const std::bad_alloc&) {
    return R::failure("out of memory building classifier of " + std::to_string(rules.size()) + " rules");
  }
}

Classifier::~Classifier() = default;

void Classifier::classify(const ParsedPacket* const pkts[], unsigned n, uint32_t out[]) const {
  // Bigger bursts than the contract allows are handled in chunks rather than
  // overrunning the stack buffers.
  while (n > kMaxBurst) {
    classify(pkts, kMaxBurst, out);
    pkts += kMaxBurst;
    out += kMaxBurst;
    n -= kMaxBurst;
  }

  V4Key k4[kMaxBurst];
  V6Key k6[kMaxBurst];
  const uint8_t* data[kNumCtx][kMaxBurst];
  uint8_t slot[kNumCtx][kMaxBurst];  // position in the burst
  unsigned cnt[kNumCtx] = {};
  unsigned n4 = 0;
  unsigned n6 = 0;

  for (unsigned i = 0; i < n; ++i) {
    out[i] = kNoMatch;
    const ParsedPacket& p = *pkts[i];
    if (p.malformed || p.l3 == L3Kind::kNonIp) continue;
    const bool v6 = p.l3 == L3Kind::kIpv6;
    // A later fragment of a protocol without ports goes where its first
    // fragment would: no port range matches it either.
    const bool ported = p.non_first_fragment ? protocol_has_ports(p.proto) : p.has_ports;
    const unsigned c = (v6 ? kCtxV6 : kCtxV4) + (!ported ? kNoPorts : p.non_first_fragment ? kFragment : kWithPorts);
    if (impl_->ctx[c] == nullptr) continue;
    // No L4 header read -> ports 0/0 (only the main tries read them).
    const rte_be16_t sport = rte_cpu_to_be_16(p.has_ports ? p.sport : 0);
    const rte_be16_t dport = rte_cpu_to_be_16(p.has_ports ? p.dport : 0);
    data[c][cnt[c]] = v6 ? fill_acl_key(k6[n6++], p, sport, dport) : fill_acl_key(k4[n4++], p, sport, dport);
    slot[c][cnt[c]++] = static_cast<uint8_t>(i);
  }

  uint32_t res[kMaxBurst];
  for (unsigned c = 0; c < kNumCtx; ++c) {
    if (cnt[c] == 0) continue;
    // Cannot fail with a built context, 1 category and valid pointers.
    rte_acl_classify(impl_->ctx[c], data[c], res, cnt[c], 1);
    for (unsigned j = 0; j < cnt[c]; ++j) {
      if (res[j] != 0) out[slot[c][j]] = impl_->values[res[j] - 1];
    }
  }
}

}  // namespace psgate
