# SPDX-License-Identifier: BSD-3-Clause
"""Section 3: shaping accuracy, and its plot."""
import os

from .common import f, med, ok, plt


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


def markdown(sc):
    """Section 3 of results.md."""
    L = []
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
    return L
