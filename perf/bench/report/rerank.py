# SPDX-License-Identifier: BSD-3-Clause
"""Section 5: re-ranking under load."""
from .common import f, lost_of, med, ok


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


def markdown(sc):
    """Section 5 of results.md."""
    L = []
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
    return L
