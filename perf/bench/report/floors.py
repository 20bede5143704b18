# SPDX-License-Identifier: BSD-3-Clause
"""Section 4: floors."""
from .common import f, med, ok


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


def markdown(sc):
    """Section 4 of results.md."""
    L = []
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
    return L
