#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Writes a pcap of IPv4/UDP parameter-server frames for the in-process
benchmark path (psgate and testpmd replay it with net_pcap infinite_rx=1).

Flow f (0 <= f < flows) belongs to job j = f % jobs (PS port ps_port + j) and
worker w = f // jobs (address 10.(64 + w>>16).(w>>8 & 255).(w & 255), port
40000), so every flow is a distinct 5-tuple and the same on every run.
  --dir pull: PS -> worker (what the host port receives)
  --dir push: worker -> PS (what the wire port receives)
One frame per flow, flows interleaved across jobs; the capture holds
max(flows, --min-packets) frames (flows repeated round robin).
--size counts the 4-byte FCS, as psgate-gen does: a 64 B frame is 60 bytes in
the capture. With --jobs-weights "a,b,c" the jobs' shares of the frames are
a:b:c (used for the floor scenario), otherwise equal.
"""
import argparse
import struct
import sys

PS_IP = (10 << 24) | 5  # 10.0.0.5
PS_MAC = bytes.fromhex("020000000005")
SW_MAC = bytes.fromhex("0200000000fe")


def ip_csum(hdr: bytes) -> int:
    s = sum(struct.unpack("!10H", hdr))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


def frame(src_ip, dst_ip, sport, dport, size, ident):
    l2 = 14
    total = size - 4  # without FCS
    ip_len = total - l2
    udp_len = ip_len - 20
    iph = struct.pack("!BBHHHBBHII", 0x45, 0, ip_len, ident & 0xFFFF, 0, 64, 17, 0, src_ip, dst_ip)
    iph = iph[:10] + struct.pack("!H", ip_csum(iph)) + iph[12:]
    udph = struct.pack("!HHHH", sport, dport, udp_len, 0)  # IPv4: checksum 0 = none
    if src_ip == PS_IP:
        eth = SW_MAC + PS_MAC + b"\x08\x00"
    else:
        eth = PS_MAC + SW_MAC + b"\x08\x00"
    return eth + iph + udph + bytes(udp_len - 8)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dir", choices=["pull", "push"], required=True)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--ps-port", type=int, default=2222)
    ap.add_argument("--min-packets", type=int, default=1024)
    ap.add_argument("--jobs-weights", default="")
    a = ap.parse_args()
    if a.size < 64 or a.size > 1518:
        sys.exit("mkpcap: --size must be 64..1518")
    if a.flows < a.jobs:
        sys.exit("mkpcap: --flows must be at least --jobs")
    # Job sequence: equal shares, or weighted (smooth round robin).
    if a.jobs_weights:
        weights = [int(x) for x in a.jobs_weights.split(",")]
        if len(weights) != a.jobs:
            sys.exit("mkpcap: --jobs-weights needs one weight per job")
        # interleave: spread each job's slots evenly over one cycle (smooth weighted round robin)
        cycle, credit = [], [0.0] * a.jobs
        tot = sum(weights)
        for _ in range(tot):
            for j in range(a.jobs):
                credit[j] += weights[j]
            k = max(range(a.jobs), key=lambda j: credit[j])
            credit[k] -= tot
            cycle.append(k)
    else:
        cycle = list(range(a.jobs))
    n = max(a.flows, a.min_packets)
    per_job_next = [0] * a.jobs  # next worker index of each job
    flows_per_job = [a.flows // a.jobs + (1 if j < a.flows % a.jobs else 0) for j in range(a.jobs)]
    with open(a.out, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i in range(n):
            j = cycle[i % len(cycle)]
            w = per_job_next[j]
            per_job_next[j] = (w + 1) % flows_per_job[j]
            wip = (10 << 24) | ((64 + (w >> 16)) << 16) | (((w >> 8) & 255) << 8) | (w & 255)
            psport = a.ps_port + j
            if a.dir == "pull":
                f = frame(PS_IP, wip, psport, 40000, a.size, i)
            else:
                f = frame(wip, PS_IP, 40000, psport, a.size, i)
            out.write(struct.pack("<IIII", i // 1000000, i % 1000000, len(f), len(f)))
            out.write(f)
    print(f"mkpcap: {a.out}: {n} frames of {a.size} B, {a.flows} flows, {a.jobs} jobs", file=sys.stderr)


if __name__ == "__main__":
    main()
