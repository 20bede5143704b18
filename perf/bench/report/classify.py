# SPDX-License-Identifier: BSD-3-Clause
"""Section 1b: jobs, rules and flows at 64 B."""
from .common import f, med, ok


def sum_classify(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault(r["variant"], []).append(r)
    out = {}
    for v, rs in by.items():
        out[v] = {"mpps": med(r.get("mpps") for r in rs), "mpps_per_cpu": med(r.get("mpps_per_cpu") for r in rs),
                  "cpu_share": med(r.get("cpu_share") for r in rs), "ready_s": med(r.get("ready_s") for r in rs),
                  "rules": rs[0].get("rules"), "jobs": rs[0].get("jobs"), "flows": rs[0].get("flows"), "n": len(rs)}
    base = out.get("rule1")
    for v in out.values():
        if base and base["mpps"] and v["mpps"]:
            v["vs_rule1_wall"] = v["mpps"] / base["mpps"]
        if base and base["mpps_per_cpu"] and v["mpps_per_cpu"]:
            v["vs_rule1_cpu"] = v["mpps_per_cpu"] / base["mpps_per_cpu"]
    # Issue 16's reference figure: 8 jobs in 8 classes (every burst spans them all).
    j8 = out.get("jobs8")
    for v in out.values():
        if j8 and j8["mpps"] and v["mpps"]:
            v["vs_jobs8_wall"] = v["mpps"] / j8["mpps"]
        if j8 and j8["mpps_per_cpu"] and v["mpps_per_cpu"]:
            v["vs_jobs8_cpu"] = v["mpps_per_cpu"] / j8["mpps_per_cpu"]
    # The replay touches a different mbuf per packet with 1,000,000 flows: testpmd on the
    # same two captures measures that cost, which a NIC's receive path does not have.
    # Taking it out of psgate's per-packet time gives psgate's own cost of the flows.
    t1k, t1m = out.get("testpmd-flows1000"), out.get("testpmd-flows1000000")
    if j8 and t1k and t1k.get("mpps_per_cpu") and j8.get("mpps_per_cpu"):
        j8["vs_testpmd_cpu"] = j8["mpps_per_cpu"] / t1k["mpps_per_cpu"]
        if j8.get("mpps") and t1k.get("mpps"):
            j8["vs_testpmd_wall"] = j8["mpps"] / t1k["mpps"]
    if t1k and t1m and t1k.get("mpps_per_cpu") and t1m.get("mpps_per_cpu"):
        replay_extra_ns = 1e3 / t1m["mpps_per_cpu"] - 1e3 / t1k["mpps_per_cpu"]
        for name, ref, key in (("flows1000000", base, "vs_rule1_cpu_replay_adjusted"),
                               ("rules100000+flows1000000", base, "vs_rule1_cpu_replay_adjusted"),
                               ("rules100000x1000jobs+flows1000000", j8, "vs_jobs8_cpu_replay_adjusted")):
            v = out.get(name)
            if v and v.get("mpps_per_cpu") and ref and ref.get("mpps_per_cpu"):
                own_ns = 1e3 / v["mpps_per_cpu"] - replay_extra_ns
                v["replay_extra_ns"] = replay_extra_ns
                v[key] = (1e3 / ref["mpps_per_cpu"]) / own_ns if own_ns > 0 else None
    return out


def markdown(sc):
    """Section 1b of results.md."""
    L = []
    c = sum_classify(sc["classify"])
    L += ["## 1b. Jobs, rules, flows (64 B, path A)", "",
          "Each job has two rules (its PS address and port, both directions); `rulesN` adds non-matching "
          "rules to reach N; `flowsN` is the number of distinct 5-tuples in the two captures together "
          "(1,000,000 flows: `dataplane.flow_cache = 2097152`). The replay itself touches a different mbuf "
          "per flow, so testpmd on the same captures is shown too. `jobs8` is issue 16's reference: 8 jobs in "
          "8 classes (ranks 0-7), their frames interleaved, so every burst spans all the classes.", "",
          "| variant | rules | jobs | flows | Mpps | Mpps/CPU-s | vs rule1 (wall) | vs rule1 (/CPU) | "
          "vs jobs8 (/CPU) | cpu | ready (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for v, r in c.items():
        L.append(f"| {v} | {r.get('rules') or '–'} | {r.get('jobs') or '–'} | {r.get('flows')} | {f(r['mpps'])} | "
                 f"{f(r['mpps_per_cpu'])} | {f(r.get('vs_rule1_wall'))} | {f(r.get('vs_rule1_cpu'))} | "
                 f"{f(r.get('vs_jobs8_cpu'))} | {f(r['cpu_share'])} | {f(r.get('ready_s'), '{:.1f}')} |")
    L.append("")
    return L
