// SPDX-License-Identifier: BSD-3-Clause
// Whether this kernel can give DPDK's af_xdp driver what it asks for, asked
// of the kernel itself: the tests of af_xdp ports skip on this alone. A
// psgate that exits non-zero where this finds nothing missing has failed (a
// broken config, a regression in the port's start), whatever its output
// names; reading "af_xdp" in that output as "no AF_XDP here" hid both.
#pragma once

#include <linux/bpf.h>
#include <linux/if_xdp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#ifndef AF_XDP
#define AF_XDP 44
#endif

namespace psgate::testing {

// "" where the kernel has XDP sockets, the XSKMAP that the driver's XDP
// program redirects frames through to them, and XDP programs; otherwise what
// it lacks: the kernel has none, or denies this process them (capabilities,
// RLIMIT_MEMLOCK before Linux 5.11), which would deny psgate them alike.
inline std::string af_xdp_missing() {
  const int xsk = ::socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0);
  if (xsk < 0) return std::string("no XDP socket for this process (socket(AF_XDP): ") + std::strerror(errno) + ")";
  ::close(xsk);

  union bpf_attr map;
  std::memset(&map, 0, sizeof map);
  map.map_type = BPF_MAP_TYPE_XSKMAP;
  map.key_size = 4;
  map.value_size = 4;
  map.max_entries = 1;
  const long map_fd = ::syscall(SYS_bpf, BPF_MAP_CREATE, &map, sizeof map);
  if (map_fd < 0) return std::string("no XSKMAP for this process (bpf(BPF_MAP_CREATE): ") + std::strerror(errno) + ")";
  ::close(static_cast<int>(map_fd));

  // r0 = XDP_PASS; exit: the smallest XDP program.
  const bpf_insn insns[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, XDP_PASS},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  static const char kLicense[] = "GPL";
  union bpf_attr prog;
  std::memset(&prog, 0, sizeof prog);
  prog.prog_type = BPF_PROG_TYPE_XDP;
  prog.insns = reinterpret_cast<uintptr_t>(insns);
  prog.insn_cnt = sizeof insns / sizeof insns[0];
  prog.license = reinterpret_cast<uintptr_t>(kLicense);
  const long prog_fd = ::syscall(SYS_bpf, BPF_PROG_LOAD, &prog, sizeof prog);
  if (prog_fd < 0)
    return std::string("no XDP program for this process (bpf(BPF_PROG_LOAD): ") + std::strerror(errno) + ")";
  ::close(static_cast<int>(prog_fd));
  return "";
}

}  // namespace psgate::testing
