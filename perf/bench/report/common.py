# SPDX-License-Identifier: BSD-3-Clause
"""What every section of the report uses: number formatting, medians, and
the summary of one path-B generator run."""
import statistics

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # the report is still written, without plots
    plt = None


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f(x, fmt="{:.2f}", none="–"):
    return none if x is None else fmt.format(x)


def ok(rs):
    return [r for r in rs if not r.get("error")]


def run_limit(r):
    """Which side set a path-B run's rate at rate max: "forwarder" when psgate-gen's frames
    were refused by a full memif TX ring (tx_dropped) or lost on the way (together more than
    0.1% of what was offered), "generator" when the forwarder took everything it was sent.
    Runs recorded before the suite kept tx_dropped can only show loss: None when they lost
    nothing (a refusing ring cannot be ruled out)."""
    sent = r.get("tx_packets")
    if sent is None:  # older JSON: the per-second TX rates over 1-s intervals add up to about what was sent
        sent = sum(p[1] for p in r.get("gen_progress") or [] if len(p) > 1)
    if not sent:
        return None
    offered = sent + (r.get("tx_dropped") or 0)
    refused, lost = r.get("tx_dropped") or 0, max(r.get("lost") or 0, 0)
    if refused + lost > 1e-3 * offered:
        # Newer psgate-gens say when their own RX fell behind or dropped while frames were lost:
        # then the loss may be theirs, and only the refusals speak against the forwarder.
        if (r.get("generator_side") or {}).get("loss_may_be_own") and refused <= 1e-3 * offered:
            return "generator RX"
        return "forwarder"
    return "generator" if r.get("tx_dropped") is not None else None


def tx_gbps_of(r):
    """The generator's TX Gbit/s of a run (median-rate based, like rx_gbps). Older JSONs lack it;
    every stream of a path-B run has one frame size, so it is then tx_mpps x the RX frame length."""
    if r.get("tx_gbps") is not None:
        return r["tx_gbps"]
    if r.get("tx_mpps") and r.get("rx_gbps") and r.get("rx_mpps"):
        return r["tx_mpps"] * r["rx_gbps"] / r["rx_mpps"]
    return None


def gen_side(rs):
    """psgate-gen's side of path-B runs: what it sent, next to what came back."""
    txp = [r.get("tx_packets") for r in rs]
    drops = [r.get("tx_dropped") for r in rs]
    limits = [run_limit(r) for r in rs]
    counts = {k: limits.count(k) for k in ("generator", "generator RX", "forwarder") if k in limits}
    if counts and None in limits:
        counts["unknown"] = limits.count(None)
    return {"tx_mpps": med(r.get("tx_mpps") for r in rs), "tx_all": [r.get("tx_mpps") for r in rs],
            "tx_gbps": med(tx_gbps_of(r) for r in rs), "tx_gbps_mean": med(r.get("tx_gbps_mean") for r in rs),
            "rx_gbps": med(r.get("rx_gbps") for r in rs),
            "lost": sum(r.get("lost") or 0 for r in rs),
            "tx_packets": sum(txp) if txp and None not in txp else None,
            "tx_dropped": sum(drops) if drops and None not in drops else None,
            "limit": ", ".join(f"{k} {v}/{len(rs)}" for k, v in counts.items()) if counts else None,
            "fwd_cpu": med((r.get("psgate_side") or r.get("testpmd_side") or {}).get("cpu_share") for r in rs),
            "gen_cpu": med(r.get("gen_cpu_share") for r in rs)}


def lost_of(lost, sent):
    """"lost of sent (share)" for a table cell; just the count when `sent` is unknown."""
    if lost is None:
        return "–"
    if not sent:
        return f"{lost:.0f}"
    share = f" ({lost / sent:.2%})" if lost else ""
    return f"{lost:.0f} of {sent:.0f}{share}"
