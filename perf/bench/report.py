"""results.md, PNG plots and the target lines from a run-bench JSON."""
import math
import os
import statistics

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the report is still written, without plots
    plt = None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, fmt="{:.2f}", none="–"):
    return none if x is None else fmt.format(x)


def ok(rs):
    return [r for r in rs if not r.get("error")]


# ---------------------------------------------------------------- summaries


def sum_throughput_a(sc):
    out = {}
    for r in ok(sc.get("A", [])):
        out.setdefault(r["size"], {}).setdefault(r["app"], []).append(r)
    table = {}
    for size, apps in sorted(out.items()):
        row = {}
        for app, rs in apps.items():
            row[app] = {"mpps": med(r.get("mpps") for r in rs), "mpps_per_cpu": med(r.get("mpps_per_cpu") for r in rs),
                        "gbps": med(r.get("gbps") for r in rs), "cpu_share": med(r.get("cpu_share") for r in rs),
                        "n": len(rs), "all_mpps": [r.get("mpps") for r in rs],
                        "all_mpps_per_cpu": [r.get("mpps_per_cpu") for r in rs]}
        p, t = row.get("psgate"), row.get("testpmd")
        if p and t:
            row["ratio_wall"] = p["mpps"] / t["mpps"] if p["mpps"] and t["mpps"] else None
            row["ratio_cpu"] = (p["mpps_per_cpu"] / t["mpps_per_cpu"]
                                if p["mpps_per_cpu"] and t["mpps_per_cpu"] else None)
        table[size] = row
    return table


def split_modes(vals):
    """Splits values at the largest ratio gap if it is >= 1.6x: (slow, fast) lists, or (None, all)."""
    v = sorted(x for x in vals if x)
    if len(v) < 2:
        return None, v
    gaps = [(v[i + 1] / v[i], i) for i in range(len(v) - 1)]
    g, i = max(gaps)
    if g >= 1.6:
        return v[:i + 1], v[i + 1:]
    return None, v


def run_limit(r):
    """Which side set a path-B run's rate at rate max: "forwarder" when psgate-gen's frames
    were refused by a full memif TX ring (tx_dropped) or lost on the way (together more than
    0.1% of what was offered), "generator" when the forwarder took everything it was sent.
    Runs recorded before the suite kept tx_dropped can only show loss: None when they lost
    nothing (a refusing ring cannot be ruled out)."""
    sent = r.get("tx_packets")
    if sent is None:  # older JSON: the per-second TX rates over 1-s intervals add up to about what was sent
        sent = sum(p[1] for p in r.get("gen_progress") or [] if len(p) > 1)
    if not sent:
        return None
    offered = sent + (r.get("tx_dropped") or 0)
    refused, lost = r.get("tx_dropped") or 0, max(r.get("lost") or 0, 0)
    if refused + lost > 1e-3 * offered:
        # Newer psgate-gens say when their own RX fell behind or dropped while frames were lost:
        # then the loss may be theirs, and only the refusals speak against the forwarder.
        if (r.get("generator_side") or {}).get("loss_may_be_own") and refused <= 1e-3 * offered:
            return "generator RX"
        return "forwarder"
    return "generator" if r.get("tx_dropped") is not None else None


def tx_gbps_of(r):
    """The generator's TX Gbit/s of a run (median-rate based, like rx_gbps). Older JSONs lack it;
    every stream of a path-B run has one frame size, so it is then tx_mpps x the RX frame length."""
    if r.get("tx_gbps") is not None:
        return r["tx_gbps"]
    if r.get("tx_mpps") and r.get("rx_gbps") and r.get("rx_mpps"):
        return r["tx_mpps"] * r["rx_gbps"] / r["rx_mpps"]
    return None


def gen_side(rs):
    """psgate-gen's side of path-B runs: what it sent, next to what came back."""
    txp = [r.get("tx_packets") for r in rs]
    drops = [r.get("tx_dropped") for r in rs]
    limits = [run_limit(r) for r in rs]
    counts = {k: limits.count(k) for k in ("generator", "generator RX", "forwarder") if k in limits}
    if counts and None in limits:
        counts["unknown"] = limits.count(None)
    return {"tx_mpps": med(r.get("tx_mpps") for r in rs), "tx_all": [r.get("tx_mpps") for r in rs],
            "tx_gbps": med(tx_gbps_of(r) for r in rs), "tx_gbps_mean": med(r.get("tx_gbps_mean") for r in rs),
            "rx_gbps": med(r.get("rx_gbps") for r in rs),
            "lost": sum(r.get("lost") or 0 for r in rs),
            "tx_packets": sum(txp) if txp and None not in txp else None,
            "tx_dropped": sum(drops) if drops and None not in drops else None,
            "limit": ", ".join(f"{k} {v}/{len(rs)}" for k, v in counts.items()) if counts else None,
            "fwd_cpu": med((r.get("psgate_side") or r.get("testpmd_side") or {}).get("cpu_share") for r in rs),
            "gen_cpu": med(r.get("gen_cpu_share") for r in rs)}


def lost_of(lost, sent):
    """"lost of sent (share)" for a table cell; just the count when `sent` is unknown."""
    if lost is None:
        return "–"
    if not sent:
        return f"{lost:.0f}"
    share = f" ({lost / sent:.2%})" if lost else ""
    return f"{lost:.0f} of {sent:.0f}{share}"


def sum_throughput_b(sc):
    out = {}
    for r in ok(sc.get("B", [])):
        out.setdefault(r["size"], {}).setdefault(r["app"], []).append(r)
    table = {}
    for size, apps in sorted(out.items()):
        row = {}
        for app, rs in apps.items():
            vals = [r.get("rx_mpps") for r in rs]
            slow, fast = split_modes(vals)
            row[app] = dict(gen_side(rs), all=vals, median=med(vals), max=max([v for v in vals if v] or [0]) or None,
                            slow=slow, fast=fast, fast_median=med(fast), slow_median=med(slow or []),
                            gbps=med(r.get("rx_gbps") for r in rs))
        p, t = row.get("psgate"), row.get("testpmd")
        if p and t:
            # An app whose repetitions did not split has one cluster: it belongs to the mode
            # (of the other app) nearest to it; with no split at all there is one mode.
            for a, b in ((p, t), (t, p)):
                if a["slow"] is None and b["slow"] is not None:
                    m = med(a["fast"])
                    d_slow = abs(math.log(m / b["slow_median"])) if m and b["slow_median"] else 1e9
                    d_fast = abs(math.log(m / b["fast_median"])) if m and b["fast_median"] else 1e9
                    if d_slow < d_fast:
                        a["slow"], a["fast"] = a["fast"], []
                        a["slow_median"], a["fast_median"] = m, None
            row["one_mode"] = p["slow"] is None and t["slow"] is None
            row["ratio_median"] = p["median"] / t["median"] if p["median"] and t["median"] else None
            row["ratio_max"] = p["max"] / t["max"] if p["max"] and t["max"] else None
            row["ratio_fast"] = (p["fast_median"] / t["fast_median"] if p["fast_median"] and t["fast_median"] else None)
            row["ratio_slow"] = (p["slow_median"] / t["slow_median"] if p["slow_median"] and t["slow_median"] else None)
        table[size] = row
    return table


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
    # The replay touches a different mbuf per packet with 1,000,000 flows: testpmd on the
    # same two captures measures that cost, which a NIC's receive path does not have.
    # Taking it out of psgate's per-packet time gives psgate's own cost of the flows.
    t1k, t1m = out.get("testpmd-flows1000"), out.get("testpmd-flows1000000")
    if base and base.get("mpps_per_cpu") and t1k and t1m and t1k.get("mpps_per_cpu") and t1m.get("mpps_per_cpu"):
        replay_extra_ns = 1e3 / t1m["mpps_per_cpu"] - 1e3 / t1k["mpps_per_cpu"]
        for name in ("flows1000000", "rules100000+flows1000000"):
            v = out.get(name)
            if v and v.get("mpps_per_cpu"):
                own_ns = 1e3 / v["mpps_per_cpu"] - replay_extra_ns
                v["replay_extra_ns"] = replay_extra_ns
                v["vs_rule1_cpu_replay_adjusted"] = (1e3 / base["mpps_per_cpu"]) / own_ns if own_ns > 0 else None
    return out


ISO_CASES = ("alone", "loaded", "loaded-no-headroom", "testpmd-alone", "testpmd-loaded")


def sum_isolation(sc):
    out = {}
    for case in ISO_CASES:
        rs = [r for r in ok(sc.get("runs", [])) if r.get("case") == case and r.get("top")]
        if not rs:
            continue
        out[case] = {"sojourn_p99_ns": med((r.get("top_sojourn") or {}).get("p99_ns") for r in rs),
                     "sojourn_p50_ns": med((r.get("top_sojourn") or {}).get("p50_ns") for r in rs),
                     "gen_cpu": med(r.get("gen_cpu_share") for r in rs),
                     "fwd_cpu": med((r.get("psgate_side") or r.get("testpmd_side") or {}).get("cpu_share")
                                    for r in rs),
                     "rx_bps": med(r["top"]["rx_bps"] for r in rs), "tx_bps": med(r["top"]["tx_bps"] for r in rs),
                     "lost": sum(r["top"]["lost"] for r in rs), "tx_packets": sum(r["top"]["tx_packets"] for r in rs),
                     "p50_ns": med(r["top"]["latency"]["p50_ns"] for r in rs),
                     "p99_ns": med(r["top"]["latency"]["p99_ns"] for r in rs),
                     "p999_ns": med(r["top"]["latency"]["p999_ns"] for r in rs),
                     "max_ns": med(r["top"]["latency"]["max_ns"] for r in rs),
                     "all_rx_bps": med(r.get("all_rx_bps") for r in rs),
                     "all_tx_bps": med(r.get("all_tx_bps") for r in rs), "n": len(rs),
                     "p99_all": [r["top"]["latency"]["p99_ns"] for r in rs]}
    # testpmd io on the same path and load: what the path costs with no scheduling at all.
    for case, ref in (("alone", "testpmd-alone"), ("loaded", "testpmd-loaded")):
        if case in out and ref in out and out[case]["p99_ns"] and out[ref]["p99_ns"]:
            out[f"p99_vs_testpmd_{case}"] = out[case]["p99_ns"] / out[ref]["p99_ns"]
    if "alone" not in out or "loaded" not in out:
        return out
    a, l = out["alone"], out["loaded"]
    if "loaded-no-headroom" in out and a["sojourn_p99_ns"] and out["loaded-no-headroom"]["sojourn_p99_ns"]:
        out["sojourn_p99_ratio_no_headroom"] = out["loaded-no-headroom"]["sojourn_p99_ns"] / a["sojourn_p99_ns"]
    if a["p99_ns"] and l["p99_ns"]:
        out["p99_ratio"] = l["p99_ns"] / a["p99_ns"]
    if a["rx_bps"] and l["rx_bps"]:
        out["thr_ratio"] = l["rx_bps"] / a["rx_bps"]
    if a["sojourn_p99_ns"] and l["sojourn_p99_ns"]:
        out["sojourn_p99_ratio"] = l["sojourn_p99_ns"] / a["sojourn_p99_ns"]
    return out


def sum_shaping(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault((r["size"], r.get("burst", "64KiB"), r["rate_bps"]), []).append(r)
    rows = []
    for (size, burst, R), rs in sorted(by.items(), key=lambda kv: (-kv[0][0], kv[0][1] != "100ms", kv[0][2])):
        errs = [e for r in rs for e in r.get("errors_pct", [])]
        rows.append({"size": size, "burst": burst, "rate_bps": R, "achieved_bps": med(sum(r["port_bps"]) / 2 for r in rs),
                     "err_pct_median": med(errs), "err_pct_worst": max(errs, key=abs) if errs else None,
                     "frac_of_unshaped": rs[0].get("frac_of_unshaped"), "cpu_share": med(r.get("cpu_share") for r in rs),
                     "n": len(rs)})
    return rows


def sum_floors(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault(r.get("floor_bps"), []).append(r)
    rows = []
    for F, rs in sorted(by.items(), key=lambda kv: kv[0] or 0):
        def jr(j, d):
            return med((r.get("job_bps", {}).get(j) or r.get("job_bps", {}).get(str(j)) or {}).get(d) for r in rs)
        rows.append({"floor_bps": F, "R_bps": rs[0]["R_bps"], "job1_pull": jr(1, "pull"), "job2_pull": jr(2, "pull"),
                     "job3_pull": jr(3, "pull"), "job3_push": jr(3, "push"), "n": len(rs)})
    return rows


def sum_rerank(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault((r.get("app", "psgate"), r["variant"], r["rate"]), []).append(r)
    rows = []
    for (app, v, rate), rs in by.items():
        rows.append({"app": app, "variant": v, "rate": rate, "achieved_per_s": med((r.get("during") or {}).get("per_s") for r in rs),
                     "reply_ms_p99": med((r.get("during") or {}).get("reply_ms_p99") for r in rs),
                     "rx_mpps": med(r.get("rx_mpps") for r in rs), "rx_gbps": med(r.get("rx_gbps_mean") for r in rs),
                     "reordered": med(r.get("reordered") for r in rs), "lost": med(r.get("lost") for r in rs),
                     "tx_total": med(r.get("tx_total") for r in rs),
                     "tx_mpps": med(r.get("tx_mpps") for r in rs), "tx_gbps": med(r.get("tx_gbps_mean") for r in rs),
                     "tx_dropped": med(r.get("tx_dropped") for r in rs),
                     "migrations": med(r.get("rerank_migrations") for r in rs),
                     "drops": {k: med(r.get("psgate_drops", {}).get(k, 0) for r in rs)
                               for k in set().union(*[r.get("psgate_drops", {}).keys() for r in rs])},
                     "n": len(rs)})
    order = {"0": 0, "10": 1, "100": 2, "1000": 3, "max": 4}
    rows.sort(key=lambda x: (x["variant"], x["app"] != "testpmd", order.get(x["rate"], 9)))
    return rows


def sum_scaling(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault((r["path"], r["app"], r["lcores"]), []).append(r)
    rows = []
    for (path, app, k), rs in sorted(by.items()):
        row = {"path": path, "app": app, "lcores": k,
               "mpps": med((r.get("mpps") if path == "A" else r.get("rx_mpps")) for r in rs),
               "mpps_per_cpu": med(r.get("mpps_per_cpu") for r in rs) if path == "A" else None,
               "cpu_share": med(r.get("cpu_share") for r in rs) if path == "A" else None, "n": len(rs)}
        if path == "B":
            row.update(gen=gen_side(rs), all=[r.get("rx_mpps") for r in rs])
        rows.append(row)
    return rows


# ---------------------------------------------------------------- targets


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
        b = sum_throughput_b(sc["throughput"])
        for size, goal in ((64, 0.8), (1518, 0.95)):
            row = b.get(size, {})
            # A ratio of two generator-bound figures says nothing about psgate: say which side limited.
            lim = "; ".join(f"{app} runs: {row[app]['limit']}" for app in ("psgate", "testpmd")
                            if (row.get(app) or {}).get("limit"))
            t.append((f"{size} B, path B (memif + psgate-gen), psgate/testpmd median of reps"
                      + (f" [limit: {lim}]" if lim else ""), goal, row.get("ratio_median")))
    if "classify" in sc:
        c = sum_classify(sc["classify"])
        big = c.get("rules100000+flows1000000", {})
        t.append(("100,000 rules + 1,000,000 flows vs 1 rule / 1,000 flows, 64 B path A, per CPU-second", 0.7,
                  big.get("vs_rule1_cpu")))
        t.append(("100,000 rules + 1,000,000 flows vs 1 rule / 1,000 flows, 64 B path A, wall-clock", 0.7,
                  big.get("vs_rule1_wall")))
        t.append(("the same per CPU-second, less the replay's own extra cost for 1,000,000 flows (testpmd on the "
                  "same captures)", 0.7, big.get("vs_rule1_cpu_replay_adjusted")))
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


# ---------------------------------------------------------------- plots


def plot_throughput(res, out):
    sc = res["scenarios"].get("throughput")
    if not sc or plt is None:
        return None
    a, b = sum_throughput_a(sc), sum_throughput_b(sc)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    for ax, key, title in ((axes[0], "mpps", "path A: in-process replay, wall-clock Mpps"),
                           (axes[1], "mpps_per_cpu", "path A: Mpps per CPU-second of the data thread")):
        for app, style in (("psgate", "o-"), ("testpmd", "s--")):
            xs = [s for s in a if app in a[s]]
            ax.plot(xs, [a[s][app][key] for s in xs], style, label=f"{app} (median)")
            for s in xs:
                ax.plot([s] * len(a[s][app]["all_" + key]), a[s][app]["all_" + key], ".", color="grey", alpha=0.5)
        ax.set_xlabel("frame size (B, with FCS)")
        ax.set_ylabel("Mpps (both ports)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend()
    ax = axes[2]
    for app, style, color in (("psgate", "o-", "tab:blue"), ("testpmd", "s--", "tab:orange")):
        xs = [s for s in b if app in b[s]]
        ax.plot(xs, [b[s][app]["median"] for s in xs], style, color=color, label=f"{app}: RX at psgate-gen (median)")
        txs = [s for s in xs if b[s][app].get("tx_mpps") is not None]
        if txs:
            # Hollow markers: where TX = RX they ring the RX points instead of hiding under them.
            ax.plot(txs, [b[s][app]["tx_mpps"] for s in txs], "^:" if app == "psgate" else "v:", color=color,
                    markersize=10, markerfacecolor="none", label=f"psgate-gen TX in the {app} runs (median)")
        for s in xs:
            ax.plot([s] * len(b[s][app]["all"]), b[s][app]["all"], "x" if app == "psgate" else "+", color="grey")
    ax.set_xlabel("frame size (B, with FCS)")
    ax.set_ylabel("Mpps (both directions)")
    ax.set_title("path B: psgate-gen over memif, RX (every rep) and the generator's TX", fontsize=10)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "throughput.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


ISO_STYLE = {
    # case: (colour, line style, legend)
    "alone": ("tab:blue", "-", "psgate: top job alone"),
    "loaded": ("tab:red", "-", "psgate: top job + 2R lower-priority load"),
    "loaded-no-headroom": ("tab:gray", "-", "psgate: loaded, priority headroom off"),
    "testpmd-alone": ("tab:green", "--", "testpmd io (no scheduling): top job alone"),
    "testpmd-loaded": ("tab:olive", "--", "testpmd io (no scheduling): same load, nothing shaped"),
}


def merged_buckets(runs):
    """Sums the histogram buckets ([[upper_bound_ns, count], ...]) of several runs' top-job
    latency. Every psgate-gen uses the same log-linear bucket bounds, so equal bounds are the
    same bucket and the sum is the histogram of all the runs' packets together."""
    tot = {}
    for r in runs:
        for ub, n in r["top"]["latency"]["buckets"]:
            tot[ub] = tot.get(ub, 0) + n
    return sorted(tot.items())


def cdf_points(buckets):
    """(xs, ys): ys[i] = share of the samples <= xs[i] (a bucket's upper bound), for a step plot.
    The last step (1.0) is pulled to 1 - 1/(2N) so a logit axis can show it."""
    n = sum(c for _, c in buckets)
    if not n:
        return [], []
    xs, ys, cum = [], [], 0
    for ub, c in buckets:
        cum += c
        xs.append(ub)
        ys.append(min(cum / n, 1 - 0.5 / n))
    return xs, ys


def has_buckets(r):
    return bool(((r.get("top") or {}).get("latency") or {}).get("buckets"))


def plot_latency(res, out):
    """Top job's latency CDF per isolation case. From psgate-gen's histogram buckets when the
    run has them: one thick line per case (all repetitions' buckets summed) and a thin line per
    repetition. Older runs have only five quantiles per repetition: those are drawn as points,
    and the title says it is not a CDF. Returns (path, "buckets" | "points" | "mixed")."""
    sc = res["scenarios"].get("isolation")
    if not sc or plt is None:
        return None, None
    fig, ax = plt.subplots(figsize=(8.5, 5.2))
    kinds = set()
    for case, (color, ls, label) in ISO_STYLE.items():
        rs = [r for r in ok(sc.get("runs", [])) if r.get("case") == case and r.get("top")]
        with_b = [r for r in rs if has_buckets(r)]
        if with_b:
            kinds.add("buckets")
            xs, ys = cdf_points(merged_buckets(with_b))
            ax.plot([x / 1e3 for x in xs], ys, ls, color=color, lw=2, drawstyle="steps-post",
                    label=f"{label} ({len(with_b)} rep{'s' if len(with_b) > 1 else ''} merged)")
            if len(with_b) > 1:
                for r in with_b:
                    xs, ys = cdf_points(sorted(r["top"]["latency"]["buckets"]))
                    ax.plot([x / 1e3 for x in xs], ys, ls, color=color, lw=0.7, alpha=0.45, drawstyle="steps-post")
        first = True
        for r in (r for r in rs if not has_buckets(r)):
            kinds.add("points")
            L = r["top"]["latency"]
            n = max(L["count"], 10)
            xs = [L["min_ns"], L["p50_ns"], L["p99_ns"], L["p999_ns"], L["max_ns"]]
            ys = [1.0 / n, 0.5, 0.99, 0.999, 1 - 1.0 / n]
            ax.plot([x / 1e3 for x in xs], ys, "o" + ls, color=color, alpha=0.7, lw=0.8,
                    label=(label + " (5 quantiles per rep)") if first and not with_b else None)
            first = False
    if not kinds:
        plt.close(fig)
        return None, None
    kind = "mixed" if len(kinds) > 1 else kinds.pop()
    ax.set_xscale("log")
    ax.set_yscale("logit")
    ax.set_xlabel("latency TX→RX at psgate-gen (µs)")
    ax.set_ylabel("share of the top job's frames ≤ x (logit scale)")
    ax.set_title({"buckets": "top job latency CDF (psgate-gen's histogram; thin lines: single repetitions)",
                  "points": "top job latency: only min, p50, p99, p99.9, max per rep, not the CDF between them\n"
                            "(this run's psgate-gen reported no histogram buckets)",
                  "mixed": "top job latency: CDF where psgate-gen reported histogram buckets,\n"
                           "else min, p50, p99, p99.9, max per rep (points)"}[kind], fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path = os.path.join(out, "latency_cdf.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, kind


def plot_shaping(res, out):
    sc = res["scenarios"].get("shaping")
    if not sc or plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    by = {}
    for r in ok(sc.get("runs", [])):
        if r.get("burst", "100ms") == "100ms":
            by.setdefault(r["size"], []).append(r)
    for (size, rs), m in zip(sorted(by.items()), ("o", "s", "^")):
        xs, ys = [], []
        for r in rs:
            for e in r.get("errors_pct", []):
                xs.append(r["rate_bps"] / 1e6)
                ys.append(e)
        ax.plot(xs, ys, m, alpha=0.6, label=f"{size} B frames (each port, each rep)")
        rows = [x for x in sum_shaping(sc) if x["size"] == size and x["burst"] == "100ms"]
        ax.plot([x["rate_bps"] / 1e6 for x in rows], [x["err_pct_median"] for x in rows], "-", alpha=0.5)
    ax.axhspan(-0.5, 0.5, color="green", alpha=0.1, label="±0.5% target")
    ax.set_xscale("log")
    ax.set_xlabel("configured rate (Mbit/s, frame bytes without FCS)")
    ax.set_ylabel("achieved − configured (%)")
    ax.set_title("shaping error vs rate (path A, both ports shaped)", fontsize=10)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = os.path.join(out, "shaping_error.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- markdown


def machine_lines(res):
    m = res["meta"]
    mc = m["machine"]
    return [
        f"- Run: {m['started']} → {m.get('finished', '(unfinished)')}, {'--quick' if m['quick'] else 'full'}, "
        f"{m['reps']} repetition(s) per point (path B throughput: at least {m['params']['b_reps_min']}); "
        f"git {m['git']}, build type {m['buildtype']}.",
        f"- Machine: {mc.get('cpus')} vCPUs, {mc.get('cpu_model', '?')} (family {mc.get('cpu_family', '?')} model "
        f"{mc.get('model', '?')}), {mc.get('hypervisor', 'bare metal')} guest, "
        f"{(mc.get('mem_total_kb') or 0) // 1024} MiB RAM, kernel {mc.get('kernel')}, DPDK {mc.get('dpdk')}.",
        f"- Memory: **{m['memory']}** ({m['memory_note']}).",
        f"- Load average at start {m['loadavg_start']}, at end {m.get('loadavg_end')}; other busy processes seen: "
        + ", ".join(sorted({b.split('(')[0] for n in m.get('noise_samples', []) for b in n['busy']}) or ["none"]) + ".",
        "- CPUs: psgate's (or testpmd's) main lcore on CPU 0 (sleeps), its data lcore on CPU 1; psgate-gen's worker on "
        "CPU 0, its main lcore (sleeps) on CPU 1.",
    ]


def write(res, out):
    os.makedirs(out, exist_ok=True)
    lat_plot, lat_kind = plot_latency(res, out)
    plots = [plot_throughput(res, out), lat_plot, plot_shaping(res, out)]
    sc = res["scenarios"]
    L = ["# psgate benchmark results", "",
         "Generated by `perf/run-bench` (see `perf/README.md`); the run's full JSON is next to this file.", ""]
    L += machine_lines(res)
    L += ["", "**Noise.** The machine is shared with other engineers' builds and tests. Every path-A figure "
          "comes with `cpu` = the share of the window the data thread actually ran (from "
          "`/proc/<pid>/task/<tid>/schedstat`; 1.00 = a whole CPU). *Mpps/CPU-s* divides the packets by that "
          "run time: the per-packet CPU cost, the figure least disturbed by others' load. Wall-clock Mpps "
          "falls whenever the data thread is preempted.", ""]
    L += ["## Targets", "", "```", targets_text(res), "```", ""]

    if "throughput" in sc:
        a = sum_throughput_a(sc["throughput"])
        L += ["## 1. Throughput vs frame size", "",
              "Path A (in-process): both ports `net_pcap` replaying a capture (`infinite_rx=1`, TX discarded); "
              "psgate with one rule (`proto=udp`), 1,000 flows, no shaping; testpmd `--forward-mode=io` on the "
              "same two ports. Medians over the repetitions.", "",
              "| frame | psgate Mpps | testpmd Mpps | ratio | psgate Mpps/CPU-s | testpmd Mpps/CPU-s | ratio/CPU | "
              "psgate Gbit/s | testpmd Gbit/s | cpu psgate / testpmd |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for size, row in a.items():
            p, t = row.get("psgate", {}), row.get("testpmd", {})
            L.append(f"| {size} B | {f(p.get('mpps'))} | {f(t.get('mpps'))} | {f(row.get('ratio_wall'))} | "
                     f"{f(p.get('mpps_per_cpu'))} | {f(t.get('mpps_per_cpu'))} | {f(row.get('ratio_cpu'))} | "
                     f"{f(p.get('gbps'))} | {f(t.get('gbps'))} | {f(p.get('cpu_share'))} / {f(t.get('cpu_share'))} |")
        b = sum_throughput_b(sc["throughput"])
        L += ["", "Path B (psgate-gen over memif, rate max, 4 workers, 500 flows per direction, both directions): "
              "`RX` is what came back to the generator, `gen TX` what the generator sent, both the median of its "
              "per-second rates after a warm-up (Gbit/s: frame bytes without FCS); every repetition listed. "
              "At rate max the slower of the two sets the figure: `refused` counts frames a full memif TX ring "
              "refused (the forwarder did not empty it in time), `lost` frames sent but never back; "
              "`limit` says per repetition which side it was (`forwarder` when refused + lost > 0.1% of the "
              "offered frames, else `generator`: the forwarder took everything it was sent, so the figure is the "
              "generator's, not the forwarder's; `generator RX` when the frames were lost while psgate-gen's own "
              "RX fell behind or dropped, its `loss_may_be_own`). `cpu` = share of the window the forwarder's data thread and the "
              "generator's worker ran. `–`: not recorded by the suite that wrote this run's JSON.", "",
              "| frame | forwarder | RX Mpps per rep | gen TX Mpps per rep | RX Mpps | gen TX Mpps | RX Gbit/s | "
              "gen TX Gbit/s | lost | refused | limit | cpu fwd / gen |",
              "|---:|---|---|---|---:|---:|---:|---:|---:|---:|---|---:|"]
        for size, row in b.items():
            for app in ("psgate", "testpmd"):
                x = row.get(app)
                if not x:
                    continue
                L.append(f"| {size} B | {app} | {', '.join(f(v) for v in x['all'])} | "
                         f"{', '.join(f(v) for v in x['tx_all'])} | {f(x['median'])} | {f(x['tx_mpps'])} | "
                         f"{f(x['gbps'])} | {f(x['tx_gbps'])} | {lost_of(x['lost'], x['tx_packets'])} | "
                         f"{f(x['tx_dropped'], '{:.0f}')} | {x['limit'] or '–'} | "
                         f"{f(x['fwd_cpu'])} / {f(x['gen_cpu'])} |")
        L += ["", "psgate / testpmd, path B. The memif path has a fast and a slow mode (vCPU placement): the "
              "repetitions are split at the largest gap (≥ 1.6x) and like is compared with like. A ratio between "
              "two generator-limited runs compares the generator with itself.", "",
              "| frame | ratio of medians | ratio fast mode | ratio slow mode | ratio of best |",
              "|---:|---:|---:|---:|---:|"]
        for size, row in b.items():
            L.append(f"| {size} B | {f(row.get('ratio_median'))} | "
                     + ("one mode | one mode | " if row.get("one_mode") else
                        f"{f(row.get('ratio_fast'))} | {f(row.get('ratio_slow'))} | ") +
                     f"{f(row.get('ratio_max'))} |")
        L += ["", "![throughput](throughput.png)", ""]

    if "classify" in sc:
        c = sum_classify(sc["classify"])
        L += ["## 1b. Jobs, rules, flows (64 B, path A)", "",
              "Each job has two rules (its PS address and port, both directions); `rulesN` adds non-matching "
              "rules to reach N; `flowsN` is the number of distinct 5-tuples in the two captures together "
              "(1,000,000 flows: `dataplane.flow_cache = 2097152`). The replay itself touches a different mbuf "
              "per flow, so testpmd on the same captures is shown too.", "",
              "| variant | rules | jobs | flows | Mpps | Mpps/CPU-s | vs rule1 (wall) | vs rule1 (/CPU) | cpu | "
              "ready (s) |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for v, r in c.items():
            L.append(f"| {v} | {r.get('rules') or '–'} | {r.get('jobs') or '–'} | {r.get('flows')} | {f(r['mpps'])} | "
                     f"{f(r['mpps_per_cpu'])} | {f(r.get('vs_rule1_wall'))} | {f(r.get('vs_rule1_cpu'))} | "
                     f"{f(r['cpu_share'])} | {f(r.get('ready_s'), '{:.1f}')} |")
        L.append("")

    if "isolation" in sc:
        i = sum_isolation(sc["isolation"])
        R = sc["isolation"].get("R_bps", 0)
        L += ["## 2. Priority isolation (path B)", "",
              f"Wire egress shaped to R = {R / 1e9:g} Gbit/s (overhead 0 B); {sc['isolation'].get('size')} pull "
              f"frames. The top job (rank 0) offers 0.3R; in `loaded`, three lower jobs offer 2R in total; "
              f"`loaded-no-headroom` is the same with the shaper's priority headroom off (`headroom = \"0B\"`; "
              f"psgate's default step is 25% of the bucket; 3200 B in runs before 2026-11-22). "
              "Latency is psgate-gen's TX→RX time through the forwarder (medians over repetitions). The `testpmd-` "
              "rows carry the same two loads through `dpdk-testpmd --forward-mode=io` on the same memif path: "
              "nothing shaped or scheduled (so all of the 2.3R passes), i.e. the latency and loss of the path "
              "itself, the floor for the top job's latency through psgate.", "",
              "| case | top tx Mbit/s | top rx Mbit/s | top lost | p50 µs | p99 µs | p99.9 µs | max µs | all jobs gen tx "
              "Mbit/s | all jobs rx Mbit/s | psgate sojourn p50 / p99 µs | cpu fwd / gen |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for case in (c for c in ISO_CASES if c in i):
            x = i[case]
            L.append(f"| {case} | {f(x['tx_bps'] and x['tx_bps'] / 1e6, '{:.1f}')} | "
                     f"{f(x['rx_bps'] and x['rx_bps'] / 1e6, '{:.1f}')} | {lost_of(x['lost'], x['tx_packets'])} | "
                     f"{f(x['p50_ns'] and x['p50_ns'] / 1e3, '{:.1f}')} | {f(x['p99_ns'] and x['p99_ns'] / 1e3, '{:.1f}')} | "
                     f"{f(x['p999_ns'] and x['p999_ns'] / 1e3, '{:.1f}')} | {f(x['max_ns'] and x['max_ns'] / 1e3, '{:.0f}')} | "
                     f"{f(x['all_tx_bps'] and x['all_tx_bps'] / 1e6, '{:.1f}')} | "
                     f"{f(x['all_rx_bps'] and x['all_rx_bps'] / 1e6, '{:.1f}')} | "
                     f"{f(x['sojourn_p50_ns'] and x['sojourn_p50_ns'] / 1e3, '{:.1f}')} / "
                     f"{f(x['sojourn_p99_ns'] and x['sojourn_p99_ns'] / 1e3, '{:.1f}')} | "
                     f"{f(x['fwd_cpu'])} / {f(x['gen_cpu'])} |")
        L += ["", "`top tx` is what psgate-gen achieved of the configured 0.3R: when its thread is preempted its "
              "pacer catches up by at most 1 ms of credit. `psgate sojourn` is psgate's own RX→TX time of the top "
              "class (its per-class histogram): the part of the latency psgate is responsible for; the end-to-end "
              "figure also holds the generator's and psgate's waits for a CPU on this shared machine.", "",
              f"p99 loaded / alone: {f(i.get('p99_ratio'))} end to end, {f(i.get('sojourn_p99_ratio'))} inside psgate "
              f"({f(i.get('sojourn_p99_ratio_no_headroom'))} without headroom); "
              f"top-job throughput loaded / alone: "
              f"{f(i.get('thr_ratio'), '{:.4f}')}. p99 per repetition (ns): alone {(i.get('alone') or {}).get('p99_all')}, "
              f"loaded {(i.get('loaded') or {}).get('p99_all')}.", ""]
        if i.get("p99_vs_testpmd_alone") or i.get("p99_vs_testpmd_loaded"):
            L += [f"Top job p99 through psgate / through testpmd io with the same load: "
                  f"{f(i.get('p99_vs_testpmd_alone'))} alone, {f(i.get('p99_vs_testpmd_loaded'))} loaded "
                  "(what psgate's scheduling and shaping add over the bare path).", ""]
        L += [{"buckets": "The plot is the top job's latency CDF from psgate-gen's log-linear histogram (bucket "
                          "upper bounds, within 6.25%): per case the buckets of all repetitions summed (thick) and "
                          "each repetition (thin).",
               "points": "This run's psgate-gen reported no histogram buckets: the plot shows five quantiles per "
                         "repetition (min, p50, p99, p99.9, max); the lines joining them are not measured, so it is "
                         "not the CDF.",
               "mixed": "Cases with histogram buckets are drawn as CDFs, the others as five quantiles per "
                        "repetition.",
               None: "(No latency plot: matplotlib missing or no isolation run.)"}[lat_kind], "",
              "![latency CDF](latency_cdf.png)", ""]

    if "shaping" in sc:
        rows = sum_shaping(sc["shaping"])
        L += ["## 3. Shaping accuracy (path A)", "",
              "Both ports shaped to R with `overhead = \"0B\"` (so R counts frame bytes without FCS, as psgate's "
              "`tx_bytes` does); the replay offers far more than R. Achieved = Δtx_bytes / Δt over a "
              "steady window after a warm-up (not including start-up). Rates near the unshaped capacity measure "
              "the CPU as much as the shaper: the `of capacity` column says how close.", "",
              "The main series uses a bucket depth of 100 ms of the rate: a token bucket cannot carry more credit "
              "than its depth across a preemption of the data thread, and on this shared machine the thread is "
              "preempted for milliseconds at a time (`cpu` column). The `64KiB` rows show what a small bucket "
              "gives under the same noise: the other tenants, not the shaper's arithmetic.", "",
              "No testpmd row: `testpmd --forward-mode=io` has no shaper, so there is nothing of it to compare "
              "with; the reference here is the configured rate itself, and the unshaped capacity behind `of "
              "capacity` is psgate's own path-A throughput (section 1, or a short unshaped run).", "",
              "| frame | burst | configured | achieved (mean of ports) | error median % | error worst % | of capacity | cpu |",
              "|---:|---|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            L.append(f"| {r['size']} B | {r['burst']} | {r['rate_bps'] / 1e6:,.0f} Mbit/s | {f(r['achieved_bps'] / 1e6, '{:,.2f}')} Mbit/s | "
                     f"{f(r['err_pct_median'], '{:+.3f}')} | {f(r['err_pct_worst'], '{:+.3f}')} | "
                     f"{f(r['frac_of_unshaped'], '{:.0%}')} | {f(r['cpu_share'])} |")
        L += ["", "![shaping error](shaping_error.png)", ""]

    if "floors" in sc:
        rows = sum_floors(sc["floors"])
        L += ["## 4. Floors (path A)", "",
              "Both ports shaped to R = 1 Gbit/s (overhead 0 B; bucket depths 100 ms of their rates, see 3.); jobs 1, 2, 3 (classes 1, 2, 3) each offered far "
              "more than R by the replay (1518 B frames, equal shares); class 3 (lowest job class) gets floor F. "
              "No testpmd row: testpmd io has no classes, shaper or floors, so it has no figure to compare; the "
              "reference is F itself (`job 3 / F`).",
              "", "| floor F | job 1 (class 1) Mbit/s | job 2 (class 2) Mbit/s | job 3 (class 3) pull Mbit/s | "
              "job 3 push Mbit/s | job 3 / F |", "|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            F = r["floor_bps"]
            ratio = r["job3_pull"] / F if F and r["job3_pull"] is not None else None
            L.append(f"| {f(F and F / 1e6, '{:.0f} Mbit/s', 'none')} | {f(r['job1_pull'] and r['job1_pull'] / 1e6, '{:.1f}')} | "
                     f"{f(r['job2_pull'] and r['job2_pull'] / 1e6, '{:.1f}')} | "
                     f"{f(r['job3_pull'] is not None and r['job3_pull'] / 1e6, '{:.1f}')} | "
                     f"{f(r['job3_push'] is not None and r['job3_push'] / 1e6, '{:.1f}')} | {f(ratio, '{:.4f}')} |")
        L.append("")

    if "rerank" in sc:
        rows = sum_rerank(sc["rerank"])
        L += ["## 5. Re-ranking under load (path B)", "",
              "Four jobs; the job order is rotated through the control socket (`order`, one connection, JSON "
              "lines) at the given rate (`max`: next request when the reply arrives). `shaped`: wire egress 1 "
              "Gbit/s (bucket 100 ms), each job offers 300 Mbit/s of 1518 B pull frames (1.2x overload, so the lowest job at any "
              "moment loses); `unshaped`: 64 B both ways at the generator's maximum. The re-rank client and "
              "psgate's control thread share the 2 CPUs with the two busy-polling threads.", "",
              "`gen TX` is what psgate-gen sent (Gbit/s: mean over its TX time; Mpps: median of its per-second "
              "rates), `rx` what came back; `refused`: frames a full memif TX ring refused (never sent).", "",
              "The `testpmd` rows carry the same load through `dpdk-testpmd --forward-mode=io` on the same path "
              "with no re-ranks and, since testpmd cannot shape, nothing shaped (so `shaped` passes all 1.2 Gbit/s): "
              "the loss and reordering of the path itself.", "",
              "| variant | forwarder | requested /s | achieved /s | reply p99 ms | gen TX Gbit/s | rx Gbit/s | "
              "gen TX Mpps | rx Mpps | refused | reordered | lost | psgate drops | migrations |",
              "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
        for r in rows:
            drops = ", ".join(f"{k} {v:.0f}" for k, v in sorted(r["drops"].items()) if v) or "0"
            if r["app"] != "psgate":
                drops = "–"
            L.append(f"| {r['variant']} | {r['app']} | {r['rate']} | {f(r['achieved_per_s'], '{:.0f}')} | "
                     f"{f(r['reply_ms_p99'], '{:.2f}')} | {f(r['tx_gbps'], '{:.3f}')} | {f(r['rx_gbps'], '{:.3f}')} | "
                     f"{f(r['tx_mpps'], '{:.3f}')} | {f(r['rx_mpps'], '{:.3f}')} | {f(r['tx_dropped'], '{:.0f}')} | "
                     f"{f(r['reordered'], '{:.0f}')} | {lost_of(r['lost'], r['tx_total'])} | "
                     f"{drops} | {f(r['migrations'], '{:.0f}')} |")
        L.append("")

    if "scaling" in sc:
        rows = sum_scaling(sc["scaling"])
        L += ["## 6. Data-lcore scaling (64 B)", "",
              f"This machine has {sc['scaling'].get('cpus')} CPUs. Path A: psgate `data = [1]` (run-to-completion) "
              "and `[1, 2]` (RX lcore + scheduler lcore; lcore 2 shares CPU 0 with the sleeping main lcore) vs "
              "testpmd with 1 and 2 forwarding cores. Path B: psgate with 1 and 2 data lcores, and testpmd with 1 "
              "and 2 forwarding cores, while psgate-gen's worker also polls, i.e. 3 busy threads on 2 CPUs: the "
              "2-lcore figures show CPU sharing, not scaling.", "", "| path | app | data lcores | Mpps | Mpps/CPU-s | cpu |", "|---|---|---:|---:|---:|---:|"]
        for r in (r for r in rows if r["path"] == "A"):
            L.append(f"| {r['path']} | {r['app']} | {r['lcores']} | {f(r['mpps'])} | {f(r['mpps_per_cpu'])} | "
                     f"{f(r['cpu_share'])} |")
        rows_b = [r for r in rows if r["path"] == "B"]
        if rows_b:
            L += ["", "Path B: `RX` came back to psgate-gen, `gen TX` is what it sent (medians of its per-second "
                  "rates); `refused`, `lost` and `limit` as in 1.", "",
                  "| path | forwarder | data lcores | RX Mpps per rep | RX Mpps | gen TX Mpps | lost | refused | limit | "
                  "cpu fwd / gen |", "|---|---|---:|---|---:|---:|---:|---:|---|---:|"]
            for r in rows_b:
                g = r["gen"]
                L.append(f"| B | {r['app']} | {r['lcores']} | {', '.join(f(v) for v in r['all'])} | {f(r['mpps'])} | "
                         f"{f(g['tx_mpps'])} | {lost_of(g['lost'], g['tx_packets'])} | {f(g['tx_dropped'], '{:.0f}')} | "
                         f"{g['limit'] or '–'} | {f(g['fwd_cpu'])} / {f(g['gen_cpu'])} |")
        L.append("")

    if "profile" in sc:
        L += ["## Where the time goes (perf, cpu-clock samples of the data thread, path A)", "",
              "ns/packet = share of samples × (1e3 / Mpps per CPU-second of the profiled run). Debian's DPDK "
              "drivers are stripped, so their functions are summed per object (`librte_net_pcap` is the replay "
              "itself, the same work for testpmd and psgate).", "",
              "Each profile is **one run** (`--reps` does not apply: a profile shows where the time goes, not a "
              f"rate to take a median of), {'3' if res['meta'].get('quick') else '5'} s of samples after a 1-s "
              "warm-up; its Mpps/CPU-s is that run's and can differ from the medians of section 1.", ""]
        prof = sc["profile"]
        if prof.get("error"):
            L.append(prof["error"])
        for name, p in prof.items():
            if not isinstance(p, dict) or not isinstance(p.get("profile"), dict):
                continue
            mp = p.get("mpps_per_cpu")
            nspp = 1e3 / mp if mp else None
            objs = p["profile"].get("objects", {})
            L += [f"**{name}**: {f(mp)} Mpps/CPU-s = {f(nspp, '{:.1f}')} ns/packet. By object: " +
                  ", ".join(f"{k} {v:.1f}%" + (f" ({v / 100 * nspp:.1f} ns)" if nspp else "")
                            for k, v in list(objs.items())[:6]), "",
                  "| % | ns/packet | object | symbol |", "|---:|---:|---|---|"]
            for row in p["profile"].get("symbols", [])[:14]:
                L.append(f"| {row['pct']:.1f} | {f(nspp and row['pct'] / 100 * nspp, '{:.1f}')} | {row['dso']} | "
                         f"`{row['symbol']}` |")
            L.append("")
        if res.get("analysis"):
            L += [res["analysis"], ""]

    notes = list(res.get("notes") or [])
    crashes, memif_runs = 0, 0
    for name, scd in sc.items():
        if not isinstance(scd, dict):
            continue
        lists = [v for v in scd.values() if isinstance(v, list)]
        for r in (r for lst in lists for r in lst if isinstance(r, dict)):
            if "gen_progress" in r or "rx_mpps" in r:
                memif_runs += 1
            if r.get("psgate_died_at_generator_stop") is not None:
                crashes += 1
    if crashes:
        # Only runs made before psgate-gen commit 29b319d have this field: psgate-gen then
        # stopped its ports (a memif disconnect) before holding them. It now writes its JSON,
        # holds with the ports started, and stops them only after the suite has stopped the
        # forwarder, and run-bench treats a psgate death there as a failed run.
        notes.append(
            f"psgate died (SIGSEGV in the memif driver's rx_burst) in {crashes} of {memif_runs} memif runs, each time "
            "after psgate-gen's report: the psgate-gen of this run stopped its ports (rte_eth_dev_stop, a memif "
            "disconnect) before holding them, and DPDK 22.11's memif server can crash when its client disconnects "
            "while it polls. The generator's figures are complete; psgate's counters of those runs come from its "
            "last sample before the stop. (Since psgate-gen 29b319d the ports stay started until the forwarder has "
            "been stopped.)")
    if notes:
        L += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    with open(os.path.join(out, "results.md"), "w") as fh:
        fh.write("\n".join(L))
    return [p for p in plots if p]
