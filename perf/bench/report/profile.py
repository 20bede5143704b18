# SPDX-License-Identifier: BSD-3-Clause
"""Where the time goes: the perf profiles of the data thread."""
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
    if res.get("analysis"):
        L += [res["analysis"], ""]
    return L
