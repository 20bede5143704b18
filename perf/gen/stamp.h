// SPDX-License-Identifier: BSD-3-Clause
// The 16 bytes psgate-gen writes at the start of every packet's L4 payload,
// and how the receive side finds them again.
//
//   offset 0  u16 magic    0x5047 ("PG")
//          2  u16 stream   job index * 2 + direction (kPush 0, kPull 1)
//          4  u32 seq      per-flow sequence number, from 0; the receiver
//                          extends it to 64 bits (wraps are fine while
//                          reordering stays below 2^31 packets)
//          8  u64          flow << 40 | tsc
//                            flow: 24 bits, flow id within the job and
//                                  direction (at most 2^24 flows per job)
//                            tsc:  low 40 bits of the TX TSC
//
// Latency = (rx - tx) mod 2^40 cycles (stamp_age). 2^40 cycles is
// 4.6 minutes at 4 GHz; and a frame cannot have been sent before the run
// began, so a delay the 40 bits cannot represent is caught as long as the
// run is shorter than 2^40 cycles, as are frames of an earlier run and
// corrupt stamps (stamp_age: counted as stale, never recorded as a short
// latency, never part of a flow's accounting).
//
// Host byte order (sender and receiver are the same process, or two on one
// host). 16 bytes is what fits a 64-byte IPv4/UDP frame: 14 + 20 + 8 + 16 +
// 4 (FCS) = 62 <= 64, so the 2 bytes left have no room for more.
//
// The run tag. Each run picks a random non-zero 16-bit tag, and every frame
// carries it in its IP header, which has room the payload has not: the IPv4
// Identification field, the low 16 bits of the IPv6 flow label. Stream and
// flow ids mean the same in every run of the same profile, so without it a
// frame of another generator (two wired to each other, or a loop that brings
// another's frames here) whose stream and flow exist here was taken into
// this run's per-flow accounting: counted received for the other's frames
// while its own were lost. Why the IP header:
//   - psgate rewrites DSCP/ECN (the IPv4 TOS byte, IPv6 traffic class) and
//     the IPv4 header checksum, nothing else of it: the tag arrives as sent
//     (the IPv6 traffic class shares a 32-bit word with the flow label, not
//     its bits: src/sched/header_rewrite.cc; gen-unit rewrites with it);
//   - the Identification field's other use is reassembly, which a constant
//     ID would confuse for fragments of different datagrams. psgate-gen sets
//     DF on every IPv4 frame: the datagrams are atomic (RFC 6864 4.1: their
//     ID may be any value), never fragmented on the way, and the receiver
//     only ever sees whole frames (a later fragment carries no stamp anyway:
//     find_stamp). The frames used to carry ID 0 without DF, so that a
//     fragmenting hop could have mixed fragments of different datagrams;
//   - the flow label is a per-flow constant a sender may choose (RFC 6437);
//     one per run keeps every flow's frames on one ECMP path as before.
// A tag is never 0, so the frames of an older psgate-gen (ID 0, label 0)
// read as another run's. Two runs draw the same tag once in 65535.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace psgate::gen {

inline constexpr uint16_t kStampMagic = 0x5047;
inline constexpr size_t kStampSize = 16;
inline constexpr unsigned kStampTscBits = 40;
inline constexpr uint64_t kStampTscMask = (uint64_t{1} << kStampTscBits) - 1;
inline constexpr unsigned kStampFlowBits = 64 - kStampTscBits;  // 24

struct Stamp {
  uint16_t run = 0;  // the run tag: in the IP header, not in the 16 bytes (patch_frame writes it)
  uint16_t stream = 0;
  uint32_t flow = 0;  // < 2^24
  uint32_t seq = 0;
  uint64_t tsc = 0;  // the TX TSC; only its low 40 bits travel
};

inline void write_stamp(uint8_t* p, const Stamp& s) {
  const uint16_t magic = kStampMagic;
  const uint64_t flow_tsc = uint64_t{s.flow} << kStampTscBits | (s.tsc & kStampTscMask);
  std::memcpy(p, &magic, 2);
  std::memcpy(p + 2, &s.stream, 2);
  std::memcpy(p + 4, &s.seq, 4);
  std::memcpy(p + 8, &flow_tsc, 8);
}

// Cycles from TX to `now`, from the low 40 bits of the TX TSC. `epoch` is a
// TSC reading taken before any frame of this run was sent. False when the
// delay is implausible: the TX time it implies lies before the epoch (a frame
// of an earlier run, a corrupt stamp, a TX TSC ahead of `now`, or a delay
// beyond 2^40 cycles in a run shorter than that).
// How a stamp's 40 bits of TX TSC relate to this run, at RX time `now`:
//   kValid   sent during the run: *cycles = the TX -> RX delay;
//   kSkewed  the TX TSC is ahead of `now` by at most `max_skew` cycles: a
//            frame of this run sent on a core whose TSC runs ahead of the
//            receiver's; it counts as received, with no latency sample;
//   kStale   it claims a TX time before the run began: a frame of an earlier
//            run that a long-lived peer still had queued, or a corrupt stamp.
//            Not this run's: it must not touch any flow's sequence state,
//            which it would drag past this run's frames and make them "late".
enum class StampAge { kValid, kSkewed, kStale };

//   A stamp at most `max_skew` ahead is skewed even in a run older than
//   2^40 cycles, where it would also read as a delay of nearly 2^40 cycles
//   (minutes: no frame of a run waits that long; a skewed core is common).
inline StampAge stamp_age(uint64_t now, uint64_t tx_tsc40, uint64_t epoch, uint64_t max_skew, uint64_t* cycles) {
  const uint64_t ahead = (tx_tsc40 - now) & kStampTscMask;
  if (ahead != 0 && ahead <= max_skew) return StampAge::kSkewed;
  const uint64_t d = (now - tx_tsc40) & kStampTscMask;
  if (d <= now - epoch) {
    *cycles = d;
    return StampAge::kValid;
  }
  return StampAge::kStale;
}

// Whose frame a stamped arrival is, from its run tag and its StampAge.
// Checked before the frame touches any flow:
//   kThisRun    this run's: accounted on its flow (skewed or not);
//   kStale      sent before this run began, whatever its tag: an earlier
//               run's frame a long-lived peer still had queued (its tag
//               differs, as it should), or a corrupt stamp; counted as stale
//               on its stream, as before run tags;
//   kOtherRun   another run's tag, sent while this run runs: a generator
//               running now whose frames reach this one (two generators
//               wired to each other). Counted on the port it arrived on and
//               nowhere else: never received, lost, excess, reordered or a
//               latency sample, whether or not its stream and flow exist here.
// The TX time tells an earlier run from one running now only on one host
// (one TSC); another host's generator has unrelated TSCs and mostly reads
// as stale.
enum class StampOwner { kThisRun, kStale, kOtherRun };

inline StampOwner stamp_owner(uint16_t frame_run, uint16_t run, StampAge age) {
  if (age == StampAge::kStale) return StampOwner::kStale;
  return frame_run == run ? StampOwner::kThisRun : StampOwner::kOtherRun;
}

// A random run tag, never 0.
uint16_t draw_run_tag();

// Parses Ethernet (one optional VLAN tag), IPv4 or IPv6 (no extension
// headers), UDP or TCP and reads the stamp, and the run tag from the IP
// header. False for anything else, for a non-first fragment and for a
// missing or wrong magic.
bool find_stamp(const uint8_t* frame, size_t len, Stamp* out);

}  // namespace psgate::gen
