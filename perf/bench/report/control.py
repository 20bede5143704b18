# SPDX-License-Identifier: BSD-3-Clause
"""Section 9: the control plane at scale (perf/control-scale's own table)."""


def markdown(sc):
    """Section 9 of results.md."""
    res = (sc.get("control") or {}).get("result") or {}
    L = ["## 9. The control plane at scale", ""]
    if not res:
        return L + [f"Not measured: {(sc.get('control') or {}).get('error', 'no result')}.", ""]
    p = res.get("params", {})
    L += [f"`perf/control-scale` through the real socket: {p.get('jobs')} jobs x {p.get('rules')} rules loaded with "
          f"`{'psgatectl jobs load' if p.get('load', 'batch') == 'batch' else 'jobs.add'}`, one change at a time at "
          f"that scale, `health` while rules rebuild, {p.get('clients')} clients for {p.get('seconds')} s; state file "
          f"{'on ' + p['state_dir'] if p.get('state_dir') else 'on disk'}.", ""]
    L += [res.get("table", "(no table in this run)"), ""]
    return L
