# SPDX-License-Identifier: BSD-3-Clause
"""Section 10: cluster mode (perf/cluster's own table and plot)."""
import importlib.machinery
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _perf_cluster():
    """perf/cluster as a module (a script without .py): its plot is the report's."""
    path = os.path.join(HERE, "..", "..", "cluster")
    loader = importlib.machinery.SourceFileLoader("perf_cluster", path)
    spec = importlib.util.spec_from_loader("perf_cluster", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def plot_cluster(res, out):
    """cluster_latency.png from the run's JSON, or None when not measured (or no matplotlib)."""
    runs = (((res.get("scenarios") or {}).get("cluster") or {}).get("result") or {}).get("runs")
    if not runs:
        return None
    return _perf_cluster().plot(runs, out, "cluster_latency.png")


def markdown(sc, plotted=False):
    """Section 10 of results.md."""
    res = (sc.get("cluster") or {}).get("result") or {}
    L = ["## 10. Cluster mode: an order written to etcd, applied on every gateway", ""]
    if not res:
        return L + [f"Not measured: {(sc.get('cluster') or {}).get('error', 'no result')}.", ""]
    p = res.get("params", {})
    L += [f"`perf/cluster`: 3 etcd members ({p.get('etcd', 'etcd')}) and N gateways (net_null, one data lcore "
          f"each, all on CPU 1) on this one machine, {p.get('jobs')} jobs; {p.get('orders')} orders written per N "
          f"through etcd's HTTP gateway, each polled on every gateway (`health`, every {p.get('poll_ms')} ms) until "
          f"applied; then a closed loop for {p.get('rate_seconds')} s"
          + (f"; then one etcd member (the one the gateways follow) "
             f"{'frozen (SIGSTOP)' if p.get('member_down') == 'stop' else 'SIGKILLed'} and the orders again"
             if p.get("member_down") else "") + ". Target: p99 <= 100 ms.", ""]
    L += [res.get("table", "(no table in this run)"), ""]
    if plotted:
        L += ["![cluster latency](cluster_latency.png)", ""]
    return L
