# SPDX-License-Identifier: BSD-3-Clause
"""The target lines: each goal of the benchmark and whether this run met it."""
import stages

from .classify import sum_classify
from .common import f
from .isolation import sum_isolation
from .shaping import sum_shaping
from .throughput import sum_throughput_a, sum_throughput_b


def targets(res):
    sc = res["scenarios"]
    t = []
    if "throughput" in sc:
        a = sum_throughput_a(sc["throughput"])
        for size, goal in ((64, 0.8), (1518, 0.95)):
            row = a.get(size, {})
            rc, rw = row.get("ratio_cpu"), row.get("ratio_wall")
            t.append((f"{size} B full path, 1 data lcore, path A (in-process), psgate/testpmd per CPU-second", goal, rc))
            t.append((f"{size} B full path, 1 data lcore, path A (in-process), psgate/testpmd wall-clock Mpps", goal, rw))
        # Issue 16's step towards those (per-packet cost): half of testpmd io at 64 B, 0.9 at 1518 B.
        for size, goal in ((64, 0.5), (1518, 0.9)):
            t.append((f"issue 16 step: {size} B, path A, psgate/testpmd per CPU-second", goal,
                      a.get(size, {}).get("ratio_cpu")))
        b = sum_throughput_b(sc["throughput"])
        for size, goal in ((64, 0.8), (1518, 0.95)):
            row = b.get(size, {})
            # A ratio of two generator-bound figures says nothing about psgate: say which side limited.
            lim = "; ".join(f"{app} runs: {row[app]['limit']}" for app in ("psgate", "testpmd")
                            if (row.get(app) or {}).get("limit"))
            t.append((f"{size} B, path B (memif + psgate-gen), psgate/testpmd median of reps"
                      + (f" [limit: {lim}]" if lim else ""), goal, row.get("ratio_median")))
    prof = sc.get("profile") or {}
    if isinstance(prof.get("psgate-64"), dict) and prof["psgate-64"].get("cycles_per_packet"):
        own = stages.own_cycles(prof["psgate-64"]["profile"]["stages"])
        t.append(("issue 16: psgate's own cycles per 64 B packet (stage budget: all but the driver, DPDK's "
                  "libraries and the kernel)", 40, own, "le"))
    if isinstance(prof.get("psgate-64-jobs8"), dict) and prof["psgate-64-jobs8"].get("cycles_per_packet"):
        own8 = stages.own_cycles(prof["psgate-64-jobs8"]["profile"]["stages"])
        t.append(("issue 16: psgate's own cycles per 64 B packet, 8 jobs / 8 classes", 40, own8, "le"))
    if "classify" in sc:
        c = sum_classify(sc["classify"])
        big = c.get("rules100000+flows1000000", {})
        t.append(("100,000 rules + 1,000,000 flows vs 1 rule / 1,000 flows, 64 B path A, per CPU-second", 0.7,
                  big.get("vs_rule1_cpu")))
        t.append(("100,000 rules + 1,000,000 flows vs 1 rule / 1,000 flows, 64 B path A, wall-clock", 0.7,
                  big.get("vs_rule1_wall")))
        t.append(("the same per CPU-second, less the replay's own extra cost for 1,000,000 flows (testpmd on the "
                  "same captures)", 0.7, big.get("vs_rule1_cpu_replay_adjusted")))
        # Issue 16's own terms: 8 jobs in 8 classes against testpmd io, and the
        # 100,000 rules (1,000 jobs, 8 carrying traffic) + 1,000,000 flows against that.
        j8 = c.get("jobs8", {})
        t.append(("issue 16: 64 B, 8 jobs / 8 classes, path A, psgate/testpmd per CPU-second (classify scenario)",
                  0.5, j8.get("vs_testpmd_cpu")))
        big8 = c.get("rules100000x1000jobs+flows1000000", {})
        t.append(("issue 16: 100,000 rules (1,000 jobs) + 1,000,000 flows vs 8 jobs / 1,000 flows, 64 B path A, "
                  "per CPU-second", 0.7, big8.get("vs_jobs8_cpu")))
        t.append(("the same, less the replay's own extra cost for 1,000,000 flows", 0.7,
                  big8.get("vs_jobs8_cpu_replay_adjusted")))
    if "shaping" in sc:
        rows = [r for r in sum_shaping(sc["shaping"]) if r["burst"] == "100ms"]
        worst = max((abs(r["err_pct_worst"]) for r in rows if r["err_pct_worst"] is not None), default=None)
        t.append(("shaping error at every rate (burst = 100 ms of rate), worst |error| % (target <= 0.5)", 0.5, worst,
                  "le"))
        inrange = [r for r in rows if r["frac_of_unshaped"] is not None and r["frac_of_unshaped"] <= 0.2]
        worst2 = max((abs(r["err_pct_worst"]) for r in inrange if r["err_pct_worst"] is not None), default=None)
        t.append(("shaping error at rates <= 20% of unshaped capacity (the CPU is not the limit), worst |error| %",
                  0.5, worst2, "le"))
        # Near the unshaped capacity the CPU sets the rate: capacity itself varies by a few
        # percent between repetitions, and a 100 ms bucket repays (or fails to repay) a
        # deficit inside the window. These two lines tell the shaper from the CPU.
        half = [r for r in rows if r["frac_of_unshaped"] is not None and r["frac_of_unshaped"] <= 0.501]  # rates are rounded to 1 Mbit/s
        worst3 = max((abs(r["err_pct_worst"]) for r in half if r["err_pct_worst"] is not None), default=None)
        t.append(("shaping error at rates <= 50% of unshaped capacity, worst |error| %", 0.5, worst3, "le"))
        med_all = max((abs(r["err_pct_median"]) for r in rows if r.get("err_pct_median") is not None), default=None)
        t.append(("shaping error at every rate, median of repetitions, worst point |error| %", 0.5, med_all, "le"))
    if "isolation" in sc:
        i = sum_isolation(sc["isolation"])
        t.append(("top job under 2x overload: packets lost (target 0)", 0, (i.get("loaded") or {}).get("lost"), "le"))
        t.append(("top job p99 loaded / p99 alone, end to end at psgate-gen (target <= 1.2)", 1.2, i.get("p99_ratio"),
                  "le"))
        t.append(("top job p99 loaded / p99 alone, psgate's own RX->TX sojourn of class 1 (target <= 1.2)", 1.2,
                  i.get("sojourn_p99_ratio"), "le"))
    cl = ((sc.get("cluster") or {}).get("result") or {}).get("runs") or []
    for r in cl:
        p99 = ((r.get("latency") or {}).get("applied_everywhere") or {}).get("p99_ms")
        t.append((f"cluster, {r.get('gateways')} gateways + 3 etcd members on this machine: order write -> applied on "
                  "every gateway, p99 ms (target <= 100)", 100, p99, "le"))
    return t


def targets_text(res):
    lines = ["targets (ratios within this run; benchmark figures, not asserts):"]
    for item in targets(res):
        name, goal, val = item[:3]
        kind = item[3] if len(item) > 3 else "ge"
        if val is None:
            verdict = "n/a"
        elif kind == "ge":
            verdict = "PASS" if val >= goal else "MISS"
        else:
            verdict = "PASS" if val <= goal else "MISS"
        lines.append(f"  {verdict:4}  {name}: {f(val, '{:.3f}')} (target {'>=' if kind == 'ge' else '<='} {goal})")
    return "\n".join(lines)
