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


# The budget's columns: psgate with one job (one class: the cut-through leaves
# the burst as it came), psgate with issue 16's 8 jobs in 8 classes (every
# burst sorted by class), and testpmd io on the same captures.
BUDGET_COLUMNS = (("psgate", "psgate-{size}"), ("psgate 8 jobs", "psgate-{size}-jobs8"), ("testpmd", "testpmd-{size}"))


def budget_rows(prof, size):
    """The stage budget of one frame size: (column names, [(stage, [cycles per column])],
    [measured total per column], {column name: psgate's own work}), or None without a
    psgate profile."""
    cols = [(name, prof.get(key.format(size=size)) or {}) for name, key in BUDGET_COLUMNS]
    cols = [(name, p) for name, p in cols if p.get("cycles_per_packet")]
    if not cols or cols[0][0] != "psgate":
        return None
    per_col = [{st["stage"]: st["cycles"] for st in p["profile"]["stages"]} for _, p in cols]
    names = []
    for _, p in cols:
        names += [st["stage"] for st in p["profile"]["stages"] if st["stage"] not in names]
    rows = [(n, [c.get(n) for c in per_col]) for n in names]
    totals = [p["cycles_per_packet"] for _, p in cols]
    own = {name: stages.own_cycles(p["profile"]["stages"]) for name, p in cols if name != "testpmd"}
    return [name for name, _ in cols], rows, totals, own


def budget_text(prof, size=64):
    """The stage budget as a plain table (run-bench prints it)."""
    got = budget_rows(prof, size)
    if not got:
        return f"stage budget {size} B: no profile"
    names, rows, totals, own = got
    hz = prof.get("tsc_hz")
    out = [f"stage budget, {size} B, 1 data lcore, path A (cycles per packet at {hz / 1e9:.2f} GHz TSC; "
           "perf shares x measured total):",
           f"  {'stage':<52}" + "".join(f" {n:>14}" for n in names)]
    for name, vals in rows:
        out.append(f"  {name:<52}" + "".join(f" {f(v, '{:.1f}'):>14}" for v in vals))
    out.append(f"  {'total (measured: TSC Hz / packets per CPU-s)':<52}" + "".join(f" {t:>14.1f}" for t in totals))
    out.append(f"  {'psgate own work (all but driver, DPDK libs, kernel)':<52}" +
               "".join(f" {f(own.get(n), '{:.1f}'):>14}" for n in names if n in own))
    return "\n".join(out)


def budget_markdown(prof):
    """The stage budget section: psgate (1 job, and 8 jobs where profiled) next to testpmd,
    64 B and 1518 B."""
    L = []
    for size in (64, 1518):
        got = budget_rows(prof, size)
        if not got:
            continue
        names, rows, totals, own = got
        hz = prof.get("tsc_hz")
        L += [f"### Stage budget, {size} B", "",
              f"Cycles per packet ({hz / 1e9:.2f} GHz TSC): the run's measured total (TSC Hz / packets per "
              "CPU-second) split by the perf shares of the stages (`perf/bench/stages.py` maps every sampled "
              "symbol to one stage), so each column adds up to its total. `psgate`: one job (one class); "
              "`psgate 8 jobs`: 8 jobs in 8 classes, frames interleaved (issue 16's case).", "",
              "| stage | " + " | ".join(f"{n} cycles/packet" for n in names) + " |",
              "|---|" + "---:|" * len(names)]
        for name, vals in rows:
            L.append(f"| {name} | " + " | ".join(f(v, '{:.1f}') for v in vals) + " |")
        L.append("| **total (measured)** | " + " | ".join(f"**{t:.1f}**" for t in totals) + " |")
        L += ["| psgate's own work (all but the driver, DPDK's libraries and the kernel) | " +
              " | ".join(f(own.get(n), '{:.1f}') if n in own else "" for n in names) + " |", ""]
    return L
