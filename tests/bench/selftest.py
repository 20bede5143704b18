#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""Self-test of the report (no benchmark is run): builds results.md and the plots from
  - perf/bench/fixtures/isolation-buckets.json: top-job latencies with psgate-gen's histogram buckets
    (synthetic, written by fixtures/mkfixture.py): the latency plot must be a CDF;
  - the same without the buckets, as older psgate-gens wrote it: the points-only fallback;
  - every committed run JSON in perf/results/bench/: old field sets must not break the report.

  tests/bench/selftest.py       (Debian's /usr/bin/python3; plots need matplotlib)
"""
import copy
import glob
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "perf", "bench")  # the report under test, and its fixtures
sys.path.insert(0, BENCH)
import report  # noqa: E402


def main():
    passed, failed = 0, 0

    def check(name, cond, detail=""):
        nonlocal passed, failed
        if cond:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {name} {detail}")

    with open(os.path.join(BENCH, "fixtures", "isolation-buckets.json")) as f:
        fixture = json.load(f)
    no_buckets = copy.deepcopy(fixture)
    for r in no_buckets["scenarios"]["isolation"]["runs"]:
        r["top"]["latency"].pop("buckets", None)
    with tempfile.TemporaryDirectory() as tmp:
        for name, res, kind in (("buckets", fixture, "buckets"), ("no-buckets", no_buckets, "points")):
            out = os.path.join(tmp, name)
            report.write(copy.deepcopy(res), out)
            md = open(os.path.join(out, "results.md")).read()
            if report.plt is not None:
                _, got = report.plot_latency(res, out)
                check(f"{name}: latency plot kind", got == kind, f"(got {got})")
                check(f"{name}: plot written", os.path.exists(os.path.join(out, "latency_cdf.png")))
            check(f"{name}: isolation table", "| alone |" in md and "| testpmd-loaded |" in md)
        # The merged CDF: summing buckets keeps every packet, and the CDF ends at 1.
        runs = [r for r in fixture["scenarios"]["isolation"]["runs"] if r["case"] == "alone"]
        merged = report.merged_buckets(runs)
        check("merged bucket count", sum(c for _, c in merged) == sum(r["top"]["latency"]["count"] for r in runs))
        xs, ys = report.cdf_points(merged)
        check("cdf monotonic", all(a <= b for a, b in zip(ys, ys[1:])) and all(a < b for a, b in zip(xs, xs[1:])))
        check("cdf p50 matches", any(x >= runs[0]["top"]["latency"]["p50_ns"] * 0.9 and y >= 0.5
                                     for x, y in zip(xs, ys)))
        for path in sorted(glob.glob(os.path.join(ROOT, "perf", "results", "bench",
                                                  "run-*.json"))):
            out = os.path.join(tmp, os.path.basename(path))
            try:
                with open(path) as f:
                    report.write(json.load(f), out)
                report.targets_text(json.load(open(path)))
                check(os.path.basename(path), os.path.exists(os.path.join(out, "results.md")))
            except Exception as e:  # noqa: BLE001 - any exception is a failed check
                check(os.path.basename(path), False, repr(e))
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
