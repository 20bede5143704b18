# SPDX-License-Identifier: BSD-3-Clause
"""Section 6: data-lcore scaling."""
from .common import f, gen_side, lost_of, med, ok


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


def markdown(sc):
    """Section 6 of results.md."""
    L = []
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
    return L
