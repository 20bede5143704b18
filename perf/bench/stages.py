# SPDX-License-Identifier: BSD-3-Clause
"""The stage budget: where each cycle of a forwarded packet goes.

A perf profile of the data thread (cpu-clock samples, finish_profile) gives
every sampled (object, symbol) a share of the thread's time. Each share is
put in exactly one stage below, the first whose pattern matches, so the
stages' shares add up to 100% and their cycles to the measured cycles per
packet of the same run (TSC Hz / packets per CPU-second).

psgate's stages are separate functions for this (rx_stage.cc keeps the guard,
classification and admission out of line: one call per burst, nothing per
packet). Functions of Debian's stripped DPDK drivers cannot be told apart, so
a driver is one stage: for net_pcap it is the replay itself (copying each
frame in, freeing it on TX), the same work testpmd's profile shows.
"""
import re

# (stage, object regex, symbol regex): first match wins; the last row takes the rest.
STAGES = [
    ("driver rx+tx (net_pcap replay)", r"librte_net_pcap", r""),
    ("driver rx+tx (other PMD)", r"librte_net_", r""),
    ("mbuf pool, ethdev, TLS (DPDK libs)", r"librte_|ld-linux|libc\.so", r""),
    ("testpmd forwarding", r"dpdk-testpmd", r""),
    ("rx guard (buffer checks)", r"psgate", r"guard_burst|rx_guard|mbuf_is_sane"),
    ("flow key + hash (classify_burst)", r"psgate", r"classify_burst"),
    ("flow cache lookup", r"psgate", r"FlowCache::lookup"),
    ("flow cache insert", r"psgate", r"FlowCache::insert"),
    ("slow path: parse + ACL", r"psgate", r"classify_slow|parse_packet|Classifier::|JobMatcher::|rte_acl"),
    ("admit (class, policer, job counters, metadata)", r"psgate", r"admit_burst|count_admitted"),
    ("cut-through (order by class, class counters, ECN)", r"psgate", r"sched_cut_through"),
    ("enqueue (class FIFOs)", r"psgate", r"sched_accept_burst|settle_job_class|migrate"),
    ("schedule (dequeue, sojourn)", r"psgate", r"sched_transmit|dequeue|PortScheduler"),
    ("DSCP/CE rewrite", r"psgate", r"rewrite"),
    ("tx counting + telemetry", r"psgate", r"tx_burst_counted|telemetry"),
    ("pipelined hand-off (rings)", r"psgate", r"hand_off|stick_to_rings|sched_drain_rings|rte_ring"),
    ("loop (rx_poll, snapshot, link check)", r"psgate", r""),
    ("kernel / other", r"", r""),
]

_COMPILED = [(name, re.compile(o), re.compile(s)) for name, o, s in STAGES]


def stage_of(dso, symbol):
    for name, o, s in _COMPILED:
        if o.search(dso) and s.search(symbol):
            return name
    return STAGES[-1][0]


def budget(rows, cycles_per_packet):
    """rows: [{"pct", "dso", "symbol"}] covering the whole profile. Returns the
    stages present, in STAGES order: [{"stage", "pct", "cycles"}], whose cycles
    add up to cycles_per_packet (the shares are rescaled to exactly 100%)."""
    total = sum(r["pct"] for r in rows) or 1.0
    share = {}
    for r in rows:
        st = stage_of(r["dso"], r["symbol"])
        share[st] = share.get(st, 0.0) + r["pct"] * 100.0 / total
    out = []
    for name, _, _ in STAGES:
        if name in share:
            pct = share[name]
            out.append({"stage": name, "pct": pct,
                        "cycles": pct / 100.0 * cycles_per_packet if cycles_per_packet else None})
    return out


def own_cycles(budget_stages):
    """psgate's own work in a budget (budget()'s list, cycles filled in): every
    stage but the driver, DPDK's libraries and the kernel."""
    return sum(s["cycles"] for s in budget_stages
               if s.get("cycles") is not None and not s["stage"].startswith(("driver", "mbuf pool", "kernel")))


def tsc_hz():
    """The TSC rate the cycles are counted in: DPDK's own measure is not at hand
    outside the process, so the kernel's (tsc_khz via cpuinfo's 'cpu MHz' on a VM
    with a constant TSC). None when unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1]) * 1e6
    except OSError:
        pass
    return None
