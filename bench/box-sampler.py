#!/usr/bin/env python3
"""Samples the whole bench box every 0.25 s while `scripts/bench` runs beside it, one JSON line per
sample, to see where a slow run's CPU went (session 22, bench/README.md):

  km, km_sys, km_minflt     CPU-s (user+system), system CPU-s, minor page faults of kmirror
                            instance 0 (`kmirror ... serve ... bench-0`)
  src, dst (+ _sys, _minflt) the same for the bench's source and destination brokers
  dst_jit, dst_gc           CPU-s of the destination broker's JIT compiler and GC threads
  cpu                       /proc/stat's first line (user nice system idle iowait irq softirq steal)
  MemFree, Dirty, Writeback /proc/meminfo, MiB
  pgfault, pgscan_direct, allocstall_movable, ...  /proc/vmstat counters

Usage: bench/box-sampler.py OUT.jsonl &  scripts/bench ...;  kill %1
       bench/box-report.py OUT.jsonl BENCH.log   (per bench step and per kmirror run)
"""
import json
import os
import sys
import time

VMSTAT = ("allocstall_movable", "pgscan_direct", "pgsteal_direct", "pgscan_kswapd", "pgfault", "compact_stall")
TICK = os.sysconf("SC_CLK_TCK")


def classify(pid):
    try:
        c = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None
    if "kmirror" in c and " serve" in c and "bench-0" in c:
        return "km"
    if "java" in c and "kafka.Kafka" in c:
        if "/source/" in c:
            return "src"
        if "/destination/" in c:
            return "dst"
    return None


def stat_fields(path):
    s = open(path).read()
    return s[s.find("(") + 1 : s.rfind(")")], s.rsplit(")", 1)[1].split()


def main():
    out = open(sys.argv[1], "a")
    pids, last_scan = {}, 0.0
    while True:
        t = time.time()
        if t - last_scan > 1:
            pids = {k: p for p in os.listdir("/proc") if p.isdigit() for k in [classify(p)] if k}
            last_scan = t
        rec = {"t": t}
        for k, p in pids.items():
            try:
                _, f = stat_fields(f"/proc/{p}/stat")
                rec[k] = (int(f[11]) + int(f[12])) / TICK
                rec[k + "_sys"] = int(f[12]) / TICK
                rec[k + "_minflt"] = int(f[7])
                if k == "dst":
                    jit = gc = 0.0
                    for tid in os.listdir(f"/proc/{p}/task"):
                        try:
                            name, tf = stat_fields(f"/proc/{p}/task/{tid}/stat")
                        except OSError:
                            continue
                        v = (int(tf[11]) + int(tf[12])) / TICK
                        if "Compiler" in name:
                            jit += v
                        elif name.startswith(("G1", "GC")):
                            gc += v
                    rec["dst_jit"], rec["dst_gc"] = jit, gc
            except (OSError, IndexError, ValueError):
                pass  # the process just ended
        rec["cpu"] = [int(x) for x in open("/proc/stat").readline().split()[1:9]]
        for line in open("/proc/meminfo"):
            if line.startswith(("Dirty:", "Writeback:", "MemFree:")):
                rec[line.split(":")[0]] = int(line.split()[1]) // 1024
        for line in open("/proc/vmstat"):
            k, v = line.split()
            if k in VMSTAT:
                rec[k] = int(v)
        out.write(json.dumps(rec) + "\n")
        out.flush()
        time.sleep(max(0.0, 0.25 - (time.time() - t)))


if __name__ == "__main__":
    main()
