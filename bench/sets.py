#!/usr/bin/env python3
"""kmirror / B, BT / B and kmirror / BT over many benchmark sets of one scenario.

    bench/sets.py [--scenario lz4-64] [--since 20261202T120000Z] [--instances 1] [--quiet]

Reads every bench/results/*.json (the summaries scripts/bench writes) that has B, BT and M for
the scenario, and prints one line per set and the medians over the sets. BT is the baseline with a
transactional producer committing every kmirror commit interval: no client-side exactly-once copy
does less work at the destination, so how often BT / B itself falls below a kmirror / B target
says how much of that target this box leaves to the mirror.
"""
import argparse
import glob
import json
import os
import statistics

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", default="lz4-64")
    ap.add_argument("--since", default="", help="first set to include (its UTC start, as in the file names)")
    ap.add_argument("--instances", type=int, default=1, help="kmirror instances of the M runs")
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--quiet", action="store_true", help="only the summary")
    a = ap.parse_args()
    rows = []
    for p in sorted(glob.glob(os.path.join(HERE, "results", "*.json"))):
        name = os.path.basename(p)[: -len(".json")]
        if name < a.since:
            continue
        with open(p) as f:
            d = json.load(f)
        km = ((d.get("meta") or {}).get("settings") or {}).get("kmirror") or {}
        if km.get("instances", 1) != a.instances:
            continue
        t = (d.get("throughput") or {}).get(a.scenario) or {}
        b, bt, m = (t.get(k) for k in ("B_mib_s", "BT_mib_s", "M_mib_s"))
        if not (b and bt and m):
            continue
        rows.append((name, bt["median"] / b["median"], m["median"] / bt["median"], m["median"] / b["median"]))
    if not rows:
        raise SystemExit(f"no set of {a.scenario} with B, BT and M (instances {a.instances}) since {a.since!r}")
    if not a.quiet:
        for name, btb, mbt, mb in rows:
            print(f"{name:58} BT/B {btb:.2f}  M/BT {mbt:.2f}  M/B {mb:.2f}")
    col = lambda i: [r[i] for r in rows]  # noqa: E731
    below = lambda i: sum(x < a.target for x in col(i))  # noqa: E731
    print(
        f"{a.scenario}, {len(rows)} sets: median BT/B {statistics.median(col(1)):.2f} "
        f"(below {a.target} in {below(1)}), M/BT {statistics.median(col(2)):.2f}, "
        f"M/B {statistics.median(col(3)):.2f} (below {a.target} in {below(3)})"
    )


if __name__ == "__main__":
    main()
