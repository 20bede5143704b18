# SPDX-License-Identifier: BSD-3-Clause
"""Where the time goes: the perf profiles of the data thread."""
import stages

from .common import f


def markdown(res, sc):
    """The profile section of results.md."""
    L = ["## Where the time goes (perf, cpu-clock samples of the data thread, path A)", "",
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
    L += budget_markdown(prof)
    if res.get("analysis"):
        L += [res["analysis"], ""]
    return L


def budget_rows(prof, size):
    """[(stage, psgate cycles, testpmd cycles)] for one frame size, the two totals, and
    psgate's own work."""
    ps = prof.get(f"psgate-{size}") or {}
    tp = prof.get(f"testpmd-{size}") or {}
    if not ps.get("cycles_per_packet"):
        return None
    tp_cycles = {st["stage"]: st["cycles"] for st in (tp.get("profile") or {}).get("stages", [])}
    names = [st["stage"] for st in ps["profile"]["stages"]] + [k for k in tp_cycles
                                                              if k not in {st["stage"] for st in ps["profile"]["stages"]}]
    ps_cycles = {st["stage"]: st["cycles"] for st in ps["profile"]["stages"]}
    rows = [(n, ps_cycles.get(n), tp_cycles.get(n)) for n in names]
    return rows, ps["cycles_per_packet"], tp.get("cycles_per_packet"), stages.own_cycles(ps["profile"]["stages"])


def budget_text(prof, size=64):
    """The stage budget as a plain table (run-bench prints it)."""
    got = budget_rows(prof, size)
    if not got:
        return f"stage budget {size} B: no profile"
    rows, ps_total, tp_total, own = got
    hz = prof.get("tsc_hz")
    out = [f"stage budget, {size} B, 1 data lcore, path A (cycles per packet at {hz / 1e9:.2f} GHz TSC; "
           "perf shares x measured total):",
           f"  {'stage':<52} {'psgate':>8} {'testpmd':>8}"]
    for name, a, b in rows:
        out.append(f"  {name:<52} {f(a, '{:.1f}'):>8} {f(b, '{:.1f}'):>8}")
    out.append(f"  {'total (measured: TSC Hz / packets per CPU-s)':<52} {ps_total:>8.1f} {f(tp_total, '{:.1f}'):>8}")
    out.append(f"  {'psgate own work (all but driver, DPDK libs, kernel)':<52} {own:>8.1f}")
    return "\n".join(out)


def budget_markdown(prof):
    """The stage budget section: psgate next to testpmd, 64 B and 1518 B."""
    L = []
    for size in (64, 1518):
        got = budget_rows(prof, size)
        if not got:
            continue
        rows, ps_total, tp_total, own = got
        hz = prof.get("tsc_hz")
        L += [f"### Stage budget, {size} B", "",
              f"Cycles per packet ({hz / 1e9:.2f} GHz TSC): the run's measured total (TSC Hz / packets per "
              "CPU-second) split by the perf shares of the stages (`perf/bench/stages.py` maps every sampled "
              "symbol to one stage), so each column adds up to its total.", "",
              "| stage | psgate cycles/packet | testpmd io cycles/packet |", "|---|---:|---:|"]
        for name, a, b in rows:
            L.append(f"| {name} | {f(a, '{:.1f}')} | {f(b, '{:.1f}')} |")
        L.append(f"| **total (measured)** | **{ps_total:.1f}** | **{f(tp_total, '{:.1f}')}** |")
        L += [f"| psgate's own work (all but the driver, DPDK's libraries and the kernel) | {own:.1f} | |", ""]
    return L
