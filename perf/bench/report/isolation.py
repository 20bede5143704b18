# SPDX-License-Identifier: BSD-3-Clause
"""Section 2: priority isolation, and the top job's latency plot."""
import os

from .common import f, lost_of, med, ok, plt

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


def markdown(sc, lat_kind):
    """Section 2 of results.md; lat_kind: what plot_latency drew."""
    L = []
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
    return L
