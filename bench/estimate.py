#!/usr/bin/env python3
"""How long a `scripts/bench` run takes, for `scripts/bench --dry-run`.

A cost model per step: a fixed part (process start-up, topic clean-up, waits) plus the step's
volume at a typical rate. The figures come from the phase timings that every run records
(results.json: "phases") and from earlier full runs on the same kind of box (2 cores, quiet);
bench/README.md shows how the --full defaults add up. A busy box is slower: the smoke run on a
machine shared with compilers took about 1.5x its estimate.
"""

import argparse

# Per throughput run: (fixed seconds, MiB/s of the drain), fitted to the phase timings of the
# complete full runs on this kind of box (throughput phase 18-21 min; MM2's JVM start-up ~10 s,
# kmirror 220-380 MiB/s, MM2 80-150, MM2-EOS 60-85, B and BT 190-360), on the slow side.
RUN = {
    "C": (4, 900),
    "P": (6, 250),
    "B": (3, 300),
    "BT": (3, 250),
    "kmirror": (3, 300),
    "mm2": (10, 110),
    "mm2eos": (10, 70),
}
# A content check reads the destination (and, once per scenario, the source) at ~600 MiB/s.
CHECK_FIXED, CHECK_MIB_S = 3, 600
# Per latency run, before the load: clean-up, start, the probe through the mirror (13-24 s per run
# on top of its load in the full runs, MM2's JVM start-up most of it).
LATENCY_FIXED = {"kmirror": 6, "mm2": 16, "mm2eos": 18}
LATENCY_LOAD_MIB_S = 30  # 50 % of the slower MM2's drain rate, roughly


def start_s(partitions):
    """topics:start of N idle partitions on one instance until all are MIRRORING (~150 s at 10k)."""
    return 3 + partitions * 0.015


def estimate(a):
    size = a.size_mib
    t = {}
    cont = [c for c in a.contenders.split(",") if c]
    per_round = 0.0
    for c in cont:
        fixed, rate = RUN[c]
        per_round += fixed + size / rate
        if c in ("kmirror", "mm2", "mm2eos"):
            per_round += CHECK_FIXED + size / CHECK_MIB_S
    # preload at ~200 MiB/s, the source read once per scenario for the checks
    t["throughput"] = a.scenarios * (10 + size / 200 + size / CHECK_MIB_S + a.rounds * per_round)
    mirrors = [m for m in a.lat_mirrors.split(",") if m]
    per_lat = sum(
        LATENCY_FIXED[m] + a.lat_warmup + a.lat_secs + 2 + CHECK_FIXED
        + 2 * (a.lat_warmup + a.lat_secs) * LATENCY_LOAD_MIB_S / CHECK_MIB_S
        for m in mirrors
    )
    t["latency"] = a.lat_scenarios * a.lat_runs * per_lat
    steps = [int(x) for x in a.idle_steps.split(",") if x]
    top = max(steps or [0])
    if steps:
        # per step: the settle time, then 15 samples 2 s apart
        t["idle"] = 15 + top / 2000 + start_s(top) + len(steps) * (a.idle_settle + 32)
        if a.idle_busy:
            # partitions beside busy ones: a sample with every data path open right after the
            # catch-up, ~70 s until the quiet ones show idle, ~30 s to copy the backlog, another
            # sample; the all-idle sample then waits ~60 s more
            t["idle"] += 32 + 70 + 30 + (a.idle_settle + 32) + 60
        if a.mm2_idle:
            for p in steps:
                # a step MM2 cannot take is found in its log within a minute
                t["idle"] += 60 if p >= 5000 else 30 + a.idle_settle + 12 + p / 500
    rates = [r for r in a.failover_rates.split(",") if r]
    fp = a.failover_partitions
    if fp and rates:
        # start, catch up on 20 records per partition, 10 s of load, the failover, the check
        run = 20 + start_s(fp) + fp * 0.004 + 12 + 3 + 5 + fp * 0.004
        n = len(rates) * a.failover_runs
        t["failover"] = n * run
        if top == fp and "0" in rates:  # the idle step's mirror is failed over: no start
            t["failover"] -= start_s(fp) + 20
    if a.takeover_runs:
        t["takeover"] = 30 + a.takeover_runs * 12 + 10
    if a.failback_runs:
        # both clusters restarted, preload, forward copy, 1 %, failback (a full copy for resync), check
        t["failback"] = a.failback_runs * (2 * (20 + size / 200 + size / 180 + CHECK_FIXED + 2 * size / CHECK_MIB_S) + size / 150)
    t["brokers"] = 40
    if a.build:
        t["build"] = 60  # incremental; a first release build takes ~10 min more
    return t


def main():
    p = argparse.ArgumentParser()
    for name in ("size-mib", "idle-settle", "lat-secs", "lat-warmup"):
        p.add_argument("--" + name, type=float, default=0)
    for name in ("rounds", "scenarios", "lat-scenarios", "lat-runs", "mm2-idle", "idle-busy", "failover-partitions",
                 "failover-runs", "takeover-runs", "failback-runs", "build"):
        p.add_argument("--" + name, type=int, default=0)
    for name in ("contenders", "lat-mirrors", "idle-steps", "failover-rates"):
        p.add_argument("--" + name, default="")
    t = estimate(p.parse_args())
    total = sum(t.values()) / 60
    print(f"estimate on a quiet 2-core box: {total:.0f} min ("
          + ", ".join(f"{k} {v / 60:.1f}" for k, v in t.items() if v) + ")")


if __name__ == "__main__":
    main()
