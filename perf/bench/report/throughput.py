# SPDX-License-Identifier: BSD-3-Clause
"""Section 1: throughput vs frame size, paths A and B, and its plot."""
import math
import os

from .common import f, gen_side, lost_of, med, ok, plt


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


def markdown(sc):
    """Section 1 of results.md."""
    L = []
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
    return L
