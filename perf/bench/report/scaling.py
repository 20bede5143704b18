# SPDX-License-Identifier: BSD-3-Clause
"""Section 6: data-lcore scaling."""
from .common import f, gen_side, lost_of, med, ok


def sum_scaling(sc):
    by = {}
    for r in ok(sc.get("runs", [])):
        by.setdefault((r["path"], r["app"], r["lcores"], r.get("mode") or ""), []).append(r)
    rows = []
    for (path, app, k, _), rs in sorted(by.items()):
        row = {"path": path, "app": app, "lcores": k, "mode": rs[0].get("mode") or ("io" if app == "testpmd" else "–"),
               "cpus": rs[0].get("cpus"),
               "mpps": med((r.get("mpps") if path == "A" else r.get("rx_mpps")) for r in rs),
               "mpps_per_cpu": med(r.get("mpps_per_cpu") for r in rs) if path == "A" else None,
               "cpu_share": med(r.get("cpu_share") for r in rs) if path == "A" else None, "n": len(rs)}
        if path == "B":
            row.update(gen=gen_side(rs), all=[r.get("rx_mpps") for r in rs])
        rows.append(row)
    return rows


def markdown(sc):
    """Section 6 of results.md."""
    L = []
    rows = sum_scaling(sc["scaling"])
    sc6 = sc["scaling"]
    L += ["## 6. Data-lcore scaling (64 B)", "",
          f"This machine lets the benchmark use {sc6.get('cpus')} CPUs"
          + (f" ({', '.join(str(c) for c in sc6['cpu_ids'])})" if sc6.get("cpu_ids") else "") + ". "
          "Path A: psgate with k data lcores (1: run-to-completion; 2: a direction each; k >= 3: "
          "k - 2 RX lcores, each replaying its own copy of the capture on its own net_pcap queue, + 2 schedulers, "
          "one per egress port; hybrid, where the mode column says so: 2 lcores a direction each on RX queue 0 "
          "that also take the rings of k - 2 RX lcores on queues 1..k-2) vs testpmd io with k forwarding cores. When k equals the CPU count, the sleeping "
          "main lcore shares the first data lcore's CPU. Path B: psgate and testpmd with k data lcores while "
          "psgate-gen's worker also polls, for the counts where psgate needs one RX queue per port: on a 2-CPU "
          "machine 3 busy threads share 2 CPUs, so its 2-lcore figures show CPU sharing, not scaling.", ""]
    for s in sc6.get("skipped", []):
        L.append(f"- {s['lcores']} data lcores: not run ({s['why']}).")
    if sc6.get("skipped"):
        L.append("")
    L += ["| path | app | data lcores | mode | CPUs | Mpps | Mpps/CPU-s | cpu |", "|---|---|---:|---|---|---:|---:|---:|"]
    for r in (r for r in rows if r["path"] == "A"):
        cpus = ",".join(str(c) for c in r["cpus"]) if r.get("cpus") else "–"
        L.append(f"| {r['path']} | {r['app']} | {r['lcores']} | {r['mode']} | {cpus} | {f(r['mpps'])} | "
                 f"{f(r['mpps_per_cpu'])} | {f(r['cpu_share'])} |")
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
    return L
