#!/usr/bin/env python3
"""Reads bench/box-sampler.py's samples beside the `scripts/bench` log of the same run and prints,
for every step of the log (C, P, B, BT, M ...), the destination broker's user and system CPU-s,
the box's system CPU-s, free memory and dirty page cache; then, for every kmirror run (a `km`
process using more than 0.3 of a core), its CPU-s, system CPU-s and minor faults beside the
brokers'. Session 22 (bench/README.md) used it to find that slow kmirror runs are the ones in
which the destination broker's *system* time explodes (5-7 CPU-s instead of ~1 for 1 GiB).

Usage: bench/box-report.py SAMPLES.jsonl BENCH.log
"""
import datetime
import json
import re
import sys


def load(path):
    return [json.loads(line) for line in open(path)]


def time_of_day(t):
    d = datetime.datetime.fromtimestamp(t, datetime.timezone.utc)
    return d.hour * 3600 + d.minute * 60 + d.second + d.microsecond / 1e6


def steps(samples, log):
    marks = []
    for line in open(log):
        m = re.match(r"\[bench (\d\d):(\d\d):(\d\d)\] (.*)", line)
        if m:
            h, mi, se, text = m.groups()
            marks.append((int(h) * 3600 + int(mi) * 60 + int(se), text[:44]))
    for i, (t, text) in enumerate(marks):
        end = marks[i + 1][0] if i + 1 < len(marks) else t + 10
        w = [s for s in samples if t <= time_of_day(s["t"]) < end and "dst_sys" in s]
        if len(w) < 2:
            continue
        a, b = w[0], w[-1]
        box = [x - y for x, y in zip(b["cpu"], a["cpu"])]
        dst_user = (b["dst"] - b["dst_sys"]) - (a["dst"] - a["dst_sys"])
        print(
            f"{text:46s} {b['t'] - a['t']:5.1f} s  dst user {dst_user:5.2f} sys {b['dst_sys'] - a['dst_sys']:5.2f}"
            f"  | box sys {box[2] / 100:5.2f}  free {a.get('MemFree')}->{b.get('MemFree')} MiB"
            f"  dirty {a.get('Dirty')}->{b.get('Dirty')} MiB"
        )


def kmirror_runs(samples):
    runs, cur = [], []
    for s in samples:
        if "km" not in s or (cur and s["km"] < cur[-1]["km"]):
            if cur:
                runs.append(cur)
            cur = [s] if "km" in s else []
            continue
        cur.append(s)
    if cur:
        runs.append(cur)
    for r in runs:
        busy = [(a, b) for a, b in zip(r, r[1:]) if (b["km"] - a["km"]) / (b["t"] - a["t"]) > 0.3]
        if len(busy) < 8:
            continue
        a, b = busy[0][0], busy[-1][1]

        def d(k):
            return b.get(k, 0) - a.get(k, 0)

        box = [x - y for x, y in zip(b["cpu"], a["cpu"])]
        print(
            f"kmirror busy {b['t'] - a['t']:5.1f} s: km {d('km'):5.2f} CPU-s (sys {d('km_sys'):4.2f},"
            f" {d('km_minflt') // 1000}k minor faults)  dst {d('dst'):5.2f} (sys {d('dst_sys'):4.2f},"
            f" jit {d('dst_jit'):4.2f}, gc {d('dst_gc'):4.2f})  src {d('src'):4.2f}"
            f"  | box sys {box[2] / 100:5.2f} user {box[0] / 100:5.2f} steal {box[7] / 100:4.2f}"
        )


def main():
    samples = load(sys.argv[1])
    if len(sys.argv) > 2:
        steps(samples, sys.argv[2])
        print()
    kmirror_runs(samples)


if __name__ == "__main__":
    main()
