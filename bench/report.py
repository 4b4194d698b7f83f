#!/usr/bin/env python3
"""Summarise one scripts/bench run, and generate the performance docs from the latest full run.

Usage: report.py RAW_DIR OUT_DIR       OUT_DIR/results.json and OUT_DIR/report.md from RAW_DIR
       report.py --docs                docs/performance.md (stdout)
       report.py --readme-summary      the performance lines of README.md (stdout)
       report.py --update-docs         writes both in place

RAW_DIR holds meta.json and files named <measure>.<key>.<tag>.json, where <tag> is w<i> for a
warm-up round (ignored here) or r<i> for a measured one. Every figure is the median over the
measured runs with its min-max; a ratio between two contenders is the median (min-max) of the
ratios within each round.

The docs come from the newest bench/results/*/results.json of a publishable run: `--full`, every
measurement, a clean commit, complete (tests/integration/docs.rs checks that docs/performance.md
and the README's lines are what this script writes).
"""

import glob
import json
import os
import statistics
import sys

MIB = 1048576
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

CONTENDERS = ["C", "P", "B", "BT", "kmirror", "mm2", "mm2eos"]
NAMES = {"C": "C", "P": "P", "B": "B", "BT": "BT", "kmirror": "kmirror", "mm2": "MM2", "mm2eos": "MM2-EOS"}
MIRRORS = ["kmirror", "mm2", "mm2eos"]
SCENARIO_NAMES = {"none-8": "none, 8 partitions", "none-64": "none, 64 partitions", "lz4-8": "lz4, 8 partitions",
                  "lz4-64": "lz4, 64 partitions"}

# The targets every report states, met or missed, never left out.
T_BT, T_ALO, T_EOS, T_CPU = 0.95, 2.0, 3.0, 0.3
T_P99_EOS, T_P99_ALO = 0.25, 1.5
T_IDLE_CPU, T_IDLE_KIB, T_IDLE_PARTS = 15.0, 16.0, 10000
T_FAILOVER_S, T_FAILOVER_PARTS = 3.0, 10000
T_TAKEOVER_EXTRA_S = 3.0
T_FAILBACK = 10.0


def load(path):
    with open(path) as f:
        return json.load(f)


def stat(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values),
            "runs": values}


def fmt(s, digits=1, scale=1.0):
    if s is None:
        return "–"
    m = s["median"] * scale
    if s["n"] == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def fr(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def tag_of(path):
    return os.path.basename(path)[: -len(".json")].rsplit(".", 1)[-1]


def runs(raw, measure, key, failed=None, tags="r"):
    """Successful runs of measure/key (measured ones: tags "r"), by tag; failed ones go to `failed`."""
    out = {}
    for p in sorted(glob.glob(os.path.join(raw, f"{measure}.{key}.{tags}*.json"))):
        r = load(p)
        t = tag_of(p)
        if "error" in r:
            if failed is not None:
                failed.append(f"{measure} {key} {t}: {r['error']}")
            continue
        r["_tag"] = t
        out[t] = r
    return out


def keys_of(raw, prefix):
    keys = set()
    for p in glob.glob(os.path.join(raw, f"{prefix}.*.*.json")):
        name = os.path.basename(p)[len(prefix) + 1: -len(".json")]
        keys.add(name.rsplit(".", 1)[0])
    return sorted(keys, key=order)


CODEC_ORDER = ["none", "lz4", "zstd", "snappy", "gzip"]


def order(k):
    codec, _, parts = k.partition("-")
    return (CODEC_ORDER.index(codec) if codec in CODEC_ORDER else 99, int(parts) if parts.isdigit() else 0, k)


def tag_key(t):
    return (t[0] != "w", int(t[1:]) if t[1:].isdigit() else 0)


# ----- one run -----------------------------------------------------------------------------------


def concurrent(raw, pre, k, failed, tags="r"):
    """B or BT per tag: MiB/s of the consumer and the producer run at once (the smaller volume over
    the makespan), with the brokers' CPU-s per GiB."""
    cs, ps = runs(raw, f"{pre}c", k, tags=tags), runs(raw, f"{pre}p", k, tags=tags)
    bs = runs(raw, f"{pre}b", k, tags=tags)
    out = {}
    for t, x in cs.items():
        y = ps.get(t)
        if not y:
            continue
        span = (max(x["end_ms"], y["end_ms"]) - min(x["first_ms"], y["first_ms"])) / 1000.0
        gib = y["bytes"] / 2**30
        cpu = (bs.get(t) or {}).get("brokers_cpu_s")
        out[t] = {"mib_s": min(x["bytes"], y["bytes"]) / span / MIB if span > 0 else None,
                  "consumer_mib_s": x["mib_s"], "producer_mib_s": y["mib_s"],
                  "brokers_cpu_s_per_gib": sum(cpu) / gib if cpu else None,
                  "dst_broker_cpu_s_per_gib": cpu[1] / gib if cpu else None}
    return out


def mirror_runs(raw, who, k, failed, tags="r"):
    out = {}
    for t, r in runs(raw, {"kmirror": "m"}.get(who, who), k, failed, tags=tags).items():
        gib = r["bytes"] / 2**30
        others = r.get("others_cpu_s_drain") or []
        out[t] = {"mib_s": r["mib_s"], "records_s": r["records_s"], "cpu_s_per_gib": r["cpu_s_per_gib"],
                  "cores": r["cpu_cores_avg"], "peak_rss_mib": r["vm_hwm_kib"] / 1024, "startup_s": r["startup_s"],
                  "brokers_cpu_s_per_gib": sum(others) / gib if others else None,
                  "dst_broker_cpu_s_per_gib": others[1] / gib if len(others) > 1 else None}
    return out


def per_round(a, b, field="mib_s"):
    """Ratios a/b within each round (same tag), as a stat."""
    return stat([a[t][field] / b[t][field] for t in sorted(a, key=tag_key)
                 if t in b and a[t].get(field) and b[t].get(field)])


def throughput(raw):
    out = {}
    keys = set(keys_of(raw, "m")) | set(keys_of(raw, "mm2")) | set(keys_of(raw, "mm2eos")) | set(keys_of(raw, "bc"))
    keys |= set(keys_of(raw, "c"))
    for k in sorted(keys, key=order):
        failed = []
        per = {
            "C": {t: {"mib_s": r["mib_s"]} for t, r in runs(raw, "c", k, failed).items()},
            "P": {t: {"mib_s": r["mib_s"]} for t, r in runs(raw, "p", k, failed).items()},
            "B": concurrent(raw, "b", k, failed),
            "BT": concurrent(raw, "bt", k, failed),
        }
        for who in MIRRORS:
            per[who] = mirror_runs(raw, who, k, failed)
        # Warm-up runs are left out of every figure but shown in the list of rounds.
        warm = {"B": concurrent(raw, "b", k, None, tags="w"), "BT": concurrent(raw, "bt", k, None, tags="w")}
        for who in MIRRORS:
            warm[who] = mirror_runs(raw, who, k, None, tags="w")
        rounds = []
        for p in sorted(glob.glob(os.path.join(raw, f"round.{k}.*.json")), key=lambda p: tag_key(tag_of(p))):
            r = load(p)
            src = warm if r["tag"].startswith("w") else per
            rounds.append({"tag": r["tag"], "order": r["order"],
                           "mib_s": {c: (src.get(c, {}).get(r["tag"]) or {}).get("mib_s") for c in r["order"]}})
        row = {"contenders": {}, "rounds": rounds, "failed_runs": failed}
        for c in CONTENDERS:
            if not per[c]:
                continue
            fields = sorted({f for r in per[c].values() for f in r})
            row["contenders"][c] = {f: stat([r.get(f) for r in per[c].values()]) for f in fields}
        km = per["kmirror"]
        row["ratios"] = {
            "kmirror/BT": per_round(km, per["BT"]),
            "kmirror/B": per_round(km, per["B"]),
            "BT/B": per_round(per["BT"], per["B"]),
            "kmirror/MM2": per_round(km, per["mm2"]),
            "kmirror/MM2-EOS": per_round(km, per["mm2eos"]),
            "CPU kmirror/MM2": per_round(km, per["mm2"], "cpu_s_per_gib"),
            "CPU kmirror/MM2-EOS": per_round(km, per["mm2eos"], "cpu_s_per_gib"),
        }
        for who, pre in (("P", "pd"), ("B", "bd"), ("BT", "btd"), ("kmirror", "md")):
            d = runs(raw, pre, k)
            if d:
                row.setdefault("destination_log", {})[who] = {
                    "mib": stat([r["bytes"] / MIB for r in d.values()]),
                    "batch_kib": stat([r["avg_batch_bytes"] / 1024 for r in d.values() if r.get("avg_batch_bytes")]),
                    "control_batches": stat([r["control_batches"] for r in d.values()]),
                }
        out[k] = row
    return out


def latency(raw):
    out = {}
    keys = set()
    for who in MIRRORS:
        keys |= set(keys_of(raw, f"lat-{who}"))
    for k in sorted(keys, key=order):
        failed = []
        row = {"mirrors": {}, "failed_runs": failed}
        per = {}
        for who in MIRRORS:
            rs = runs(raw, f"lat-{who}", k, failed)
            if not rs:
                continue
            per[who] = rs
            first = next(iter(rs.values()))
            row["offered_records_s"] = first["offered_rate"]
            m = {}
            for basis in ("source_ack_to_visible", "intended_send_to_visible"):
                for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
                    m[f"{basis}.{q}"] = stat([(r[basis] or {}).get(q) for r in rs.values()])
            m["missing"] = sum(r["missing"] for r in rs.values())
            m["duplicates"] = sum(r["duplicates"] for r in rs.values())
            m["achieved_records_s"] = stat([r["achieved_rate"] for r in rs.values()])
            row["mirrors"][who] = m

        def p99(who):
            return {t: {"p99": (r["source_ack_to_visible"] or {}).get("p99_ms")} for t, r in per.get(who, {}).items()}

        row["ratios"] = {"p99 kmirror/MM2": per_round(p99("kmirror"), p99("mm2"), "p99"),
                         "p99 kmirror/MM2-EOS": per_round(p99("kmirror"), p99("mm2eos"), "p99")}
        out[k] = row
    for p in glob.glob(os.path.join(raw, "lat-skipped.*.json")):
        r = load(p)
        out.setdefault(r["scenario"], {"mirrors": {}, "failed_runs": [], "ratios": {}})["skipped"] = r["error"]
    return out


def idle(raw):
    out = {}
    for who in ("kmirror", "mm2"):
        steps = {}
        for p in glob.glob(os.path.join(raw, f"idle-{who}.*.json")):
            r = load(p)
            steps[r["partitions"]] = r
        if not steps:
            continue
        ok = {p: r for p, r in steps.items() if not r.get("cannot")}
        d = {"steps": [steps[s] for s in sorted(steps)], "rss_kib_per_partition": None, "heap_kib_per_partition": None}
        if len(ok) > 1:
            lo, hi = min(ok), max(ok)
            d["rss_kib_per_partition"] = (ok[hi]["rss_kib"] - ok[lo]["rss_kib"]) / (hi - lo)
            d["at_partitions"] = hi
            if ok[hi].get("heap_used_kib") and ok[lo].get("heap_used_kib"):
                d["heap_kib_per_partition"] = (ok[hi]["heap_used_kib"] - ok[lo]["heap_used_kib"]) / (hi - lo)
        out[who] = d
    beside = [load(p) for p in sorted(glob.glob(os.path.join(raw, "idle-beside-busy.*.json")))]
    if beside and "kmirror" in out:
        out["kmirror"]["beside_busy"] = beside
    return out


def failover(raw):
    out = {}
    keys = {os.path.basename(p).split(".")[1] for p in glob.glob(os.path.join(raw, "failover.*.r*.json"))}

    def fo_order(k):
        parts, _, rate = k.partition("-")
        return (int(parts), int(rate or 0))

    for k in sorted(keys, key=fo_order):
        failed = []
        rs = list(runs(raw, "failover", k, failed).values())
        allr = [load(p) for p in sorted(glob.glob(os.path.join(raw, f"failover.{k}.r*.json")))]
        parts, _, rate = k.partition("-")
        out[k] = {
            "partitions": int(parts), "load_records_s": int(rate or 0), "failed_runs": failed,
            "mirror": [r.get("mirror") for r in allr],
            "failed_detail": [{key: r.get(key) for key in ("error", "stop_call_s", "states_after", "failed_topics",
                                                           "start_errors")} for r in allr if "error" in r],
            "stop_call_s": stat([r["stop_call_s"] for r in rs]),
            "all_stopped_s": stat([r["all_stopped_s"] for r in rs]),
            "lag_before_records": stat([r["lag_before_records"] for r in rs]),
        }
    return out


def keyed_runs(raw, measure):
    keys = {os.path.basename(p).split(".")[1] for p in glob.glob(os.path.join(raw, f"{measure}.*.r*.json"))}
    for k in sorted(keys, key=int):
        failed = []
        rs = list(runs(raw, measure, k, failed).values())
        yield k, rs, [load(p) for p in sorted(glob.glob(os.path.join(raw, f"{measure}.{k}.r*.json")))], failed


def takeover(raw):
    out = {}
    for k, rs, allr, failed in keyed_runs(raw, "takeover"):
        first = (rs or allr)[0]
        out[k] = {
            "failed_runs": failed, "instances": first["instances"], "session_timeout_ms": first["session_timeout_ms"],
            "load_records_s": first["load_records_s"],
            "slots_covered_s": stat([r["slots_covered_s"] for r in rs]),
            "partitions_advancing_s": stat([r["partitions_advancing_s"] for r in rs]),
            "runs": [{key: r.get(key) for key in ("run", "killed", "killed_slots", "killed_partitions", "slots_covered_s",
                                                  "partitions_advancing_s", "error")} for r in allr],
        }
    return out


def rolling(raw):
    out = {}
    for k, rs, allr, failed in keyed_runs(raw, "rolling"):
        out[k] = {
            "failed_runs": failed, "load_records_s": allr[0]["load_records_s"], "restarts": len(allr),
            "exited_s": stat([r["exited_s"] for r in rs]),
            "same_slots_again_s": stat([r["same_slots_again_s"] for r in rs]),
            "partitions_advancing_s": stat([r["partitions_advancing_s"] for r in rs]),
            "restarts_moving_other_slots": sum(1 for r in allr if r.get("other_slots_moved")),
            "runs": allr,
        }
    return out


def failback(raw):
    out = {}
    keys = {os.path.basename(p).split(".")[1] for p in glob.glob(os.path.join(raw, "failback.*.r*.json"))}
    per_mode = {}
    for k in sorted(keys):
        failed = []
        rs = runs(raw, "failback", k, failed)
        allr = [load(p) for p in sorted(glob.glob(os.path.join(raw, f"failback.{k}.r*.json")))]
        first = (list(rs.values()) or allr)[0]
        per_mode[first["mode"]] = {t: {"s": r["failback_s"]} for t, r in rs.items()}
        out[k] = {
            "failed_runs": failed, "mode": first["mode"], "partitions": first["partitions"],
            "topic_records": first["topic_records"], "new_records_on_b": first["new_records_on_b"],
            "value_bytes": first.get("value_bytes", 1024),
            "failback_s": stat([r["failback_s"] for r in rs.values()]),
            "start_call_s": stat([r["start_call_s"] for r in rs.values()]),
            "records_copied": stat([r["records_copied"] for r in rs.values()]),
        }
    if "incremental" in per_mode and "resync" in per_mode:
        out["_ratio"] = per_round(per_mode["resync"], per_mode["incremental"], "s")
    return out


def content(raw, meta):
    checks = []
    for p in sorted(glob.glob(os.path.join(raw, "verify.*.json"))):
        r = load(p)
        checks.append({key: r.get(key) for key in ("what", "run", "mode", "ok", "error", "source_records",
                                                    "destination_records", "duplicates", "partitions",
                                                    "mismatched_partitions", "elapsed_s")})
        if not r.get("ok"):
            checks[-1]["first_mismatch"] = (r.get("mismatched") or [None])[0]
    return {"enabled": meta["settings"].get("content_checks", True), "checks": checks,
            "mismatches": [c["what"] for c in checks if not c["ok"]]}


def box(raw):
    """The box over the run: load before it, steal and busy time per phase and overall."""
    snaps = {os.path.basename(p)[4:-5]: load(p) for p in glob.glob(os.path.join(raw, "box.*.json"))}

    def between(*stretches):
        """Wall time, steal and busy share over one or more (start, end) snapshot pairs."""
        # An end before its start: a run from before name~N, whose re-entered phase overwrote
        # its first snapshots; that stretch cannot be told, so it is left out.
        stretches = [(a, b) for a, b in stretches if a in snaps and b in snaps and snaps[b]["t"] >= snaps[a]["t"]]
        if not stretches:
            return None
        d, wall, returned = [0] * 8, 0.0, 0
        for a, b in stretches:
            d = [s + (j - i) for s, i, j in zip(d, snaps[a]["cpu"], snaps[b]["cpu"])]
            wall += snaps[b]["t"] - snaps[a]["t"]
            r0, r1 = snaps[a].get("returned_to_host_kib"), snaps[b].get("returned_to_host_kib")
            returned = None if returned is None or r0 is None or r1 is None else returned + r1 - r0
        total = sum(d) or 1
        busy = total - d[3] - d[4]  # minus idle and iowait
        return {"wall_s": wall, "steal_pct": 100.0 * d[7] / total,
                "busy_pct": 100.0 * busy / total, "loadavg_start": snaps[stretches[0][0]]["loadavg"],
                "returned_to_host_gib": None if returned is None else returned / 2**20}

    # A phase entered again has snapshots name~2, name~3, ... (scripts/bench `phase`): one row.
    entries = {}
    for k in sorted((k for k in snaps if k.startswith("phase-start-")), key=lambda k: snaps[k]["t"]):
        entry = k[len("phase-start-"):]
        entries.setdefault(entry.split("~")[0], []).append(entry)
    phases = []
    for name, names in entries.items():
        ph = between(*(("phase-start-" + e, "phase-end-" + e) for e in names))
        if ph:
            phases.append({"name": name, **ph})
    out = {"phases": phases, "run": between(("start", "end"))}
    if "start" in snaps:
        out["loadavg_before"] = snaps["start"]["loadavg"]
    return out


# ----- targets -----------------------------------------------------------------------------------


def verdict(ok):
    return "met" if ok else "MISSED"


def targets(tp, lat, idl, fo, tk, fb):
    """Every target, with its figure and met / MISSED / not measured."""
    T = []

    def add(name, target, figure, ok, note=""):
        T.append({"target": name, "bound": target, "figure": figure,
                  "verdict": "not measured" if ok is None else verdict(ok), "note": note})

    for label, key, bound in (("kmirror / BT throughput", "kmirror/BT", T_BT),
                              ("kmirror / MM2 at least once, throughput", "kmirror/MM2", T_ALO),
                              ("kmirror / MM2 exactly once, throughput", "kmirror/MM2-EOS", T_EOS)):
        if not tp:
            add(label, f"≥ {bound:g}", "–", None, "no throughput rounds in this run")
        for k, r in tp.items():
            x = r["ratios"].get(key)
            add(f"{label}, {k}", f"≥ {bound:g}", fmt(x, 2), None if x is None else x["median"] >= bound)
    for label, key in (("CPU-s per GiB, kmirror / MM2 at least once", "CPU kmirror/MM2"),
                       ("CPU-s per GiB, kmirror / MM2 exactly once", "CPU kmirror/MM2-EOS")):
        if not tp:
            add(label, f"≤ {T_CPU:g}", "–", None, "no throughput rounds in this run")
        for k, r in tp.items():
            x = r["ratios"].get(key)
            add(f"{label}, {k}", f"≤ {T_CPU:g}", fmt(x, 2), None if x is None else x["median"] <= T_CPU)
    for label, key, bound in (("p99 latency, kmirror / MM2 exactly once", "p99 kmirror/MM2-EOS", T_P99_EOS),
                              ("p99 latency, kmirror / MM2 at least once", "p99 kmirror/MM2", T_P99_ALO)):
        if not lat:
            add(label, f"≤ {bound:g}", "–", None, "no latency runs in this run")
        for k, r in lat.items():
            x = r["ratios"].get(key)
            add(f"{label}, {k}", f"≤ {bound:g}", fmt(x, 2), None if x is None else x["median"] <= bound,
                r.get("skipped", ""))
    km = (idl or {}).get("kmirror")
    steps = {s["partitions"]: s for s in (km or {}).get("steps", [])}
    at = steps.get(T_IDLE_PARTS)
    note = "" if at else (f"largest step {max(steps):,} partitions" if steps else "no idle measurement in this run")
    add(f"idle {T_IDLE_PARTS:,} partitions, one instance: CPU", f"≤ {T_IDLE_CPU:g} % of a core",
        f"{at['cpu_pct']:.1f} %" if at else "–", None if not at else at["cpu_pct"] <= T_IDLE_CPU, note)
    sl = km.get("rss_kib_per_partition") if km and at and km.get("at_partitions") == T_IDLE_PARTS else None
    add(f"idle {T_IDLE_PARTS:,} partitions, one instance: RSS per partition", f"≤ {T_IDLE_KIB:g} KiB",
        f"{sl:.1f} KiB" if sl is not None else "–", None if sl is None else sl <= T_IDLE_KIB, note)
    rows = [r for r in (fo or {}).values() if r["partitions"] == T_FAILOVER_PARTS]
    if not rows:
        add(f"failover of {T_FAILOVER_PARTS:,} partitions", f"≤ {T_FAILOVER_S:g} s", "–", None,
            "largest failover: " + (f"{max(r['partitions'] for r in fo.values()):,} partitions" if fo else "none in this run"))
    for r in rows:
        x = r["all_stopped_s"]
        load_ = "without load" if not r["load_records_s"] else f"under {r['load_records_s']:,} records/s"
        add(f"failover of {T_FAILOVER_PARTS:,} partitions, {load_}", f"≤ {T_FAILOVER_S:g} s", fmt(x, 2) + " s" if x else "failed",
            False if x is None else x["median"] <= T_FAILOVER_S)
    if not tk:
        add("takeover after kill -9", f"≤ session timeout + {T_TAKEOVER_EXTRA_S:g} s", "–", None, "no takeover in this run")
    for r in (tk or {}).values():
        bound = r["session_timeout_ms"] / 1000 + T_TAKEOVER_EXTRA_S
        x = r["partitions_advancing_s"]
        add("takeover after kill -9 (every partition advancing)", f"≤ {bound:g} s",
            fmt(x, 2) + " s" if x else "failed", False if x is None else x["median"] <= bound)
    x = (fb or {}).get("_ratio")
    add("failback at 1 % new data: resync time / incremental time", f"≥ {T_FAILBACK:g}", fmt(x, 1),
        None if x is None else x["median"] >= T_FAILBACK, "" if fb else "no failback in this run")
    return T


# ----- report.md ---------------------------------------------------------------------------------


def settings_line(meta):
    s = meta["settings"]
    km = s["kmirror"]
    return (f"{s['records']:,} records per scenario ({s['value_bytes']} B values + {s['key_bytes']} B keys, "
            f"semi-compressible text); {s['warmup_runs']} warm-up round(s) discarded, {s['runs']} measured; "
            f"kmirror: {km['instances']} instance(s), {km['slots']} slots, commit interval {km['commit_interval_ms']} ms"
            + (f", engine settings {km['engine']}" if km.get("engine", "defaults") != "defaults" else ""))


def box_lines(meta, bx):
    mc = meta["machine"]
    run = bx.get("run")
    L = [f"- Box: {mc['cpu']}, {mc['nproc']} cores, {mc['memory']}, Linux {mc['kernel']}; load average before the "
         f"run {bx.get('loadavg_before', mc.get('loadavg_at_start'))}"
         + (f"; over the run: steal {run['steal_pct']:.1f} % of the CPU time, the box busy {run['busy_pct']:.0f} %, "
            f"{run['wall_s'] / 60:.1f} min" if run else "")
         + (f"; memory the VM handed back to its host (free page reporting) {run['returned_to_host_gib']:.1f} GiB: "
            "a page touched afresh after that costs a fault in the host, counted as system CPU time of the "
            "process that touches it" if run and run.get("returned_to_host_gib") is not None else "")]
    return L


def phases_table(bx):
    if not bx.get("phases"):
        return []
    returned = any(p.get("returned_to_host_gib") is not None for p in bx["phases"])
    L = ["| phase | minutes | steal % | box busy % | load average at its start |"
         + (" handed back to the host GiB |" if returned else ""),
         "|---|---|---|---|---|" + ("---|" if returned else "")]
    for p in bx["phases"]:
        g = p.get("returned_to_host_gib")
        L.append(f"| {p['name']} | {p['wall_s'] / 60:.1f} | {p['steal_pct']:.1f} | {p['busy_pct']:.0f} | {p['loadavg_start']} |"
                 + ((" – |" if g is None else f" {g:.1f} |") if returned else ""))
    return L


def targets_table(T):
    L = ["| target | bound | figure: median (min–max) | verdict |", "|---|---|---|---|"]
    for t in T:
        v = t["verdict"]
        v = f"**{v}**" if v == "MISSED" else v
        note = f" ({t['note']})" if t.get("note") else ""
        L.append(f"| {t['target']} | {t['bound']} | {t['figure']} | {v}{note} |")
    return L


def throughput_md(tp):
    L = ["## Throughput", "",
         "Drain of a preloaded topic. Each round runs every contender once, in an order that rotates by one "
         "every round; MiB/s (key + value bytes) are medians over the measured rounds with their range, and the "
         "ratios are medians of the ratios within each round. **B**: a plain consumer and producer at the same "
         "time; **BT**: the same with a transactional producer (the bound for an exactly-once copy); **MM2**: "
         "MirrorMaker 2 at least once; **MM2-EOS**: MirrorMaker 2 with exactly-once delivery.", ""]
    cols = [c for c in CONTENDERS if any(c in r["contenders"] for r in tp.values())]
    L.append("| scenario | " + " | ".join(f"{NAMES[c]} MiB/s" for c in cols) + " |")
    L.append("|---|" + "---|" * len(cols))
    for k, r in tp.items():
        L.append(f"| {k} | " + " | ".join(fmt(r["contenders"].get(c, {}).get("mib_s")) for c in cols) + " |")
    L += ["", "| scenario | kmirror / BT | kmirror / B | BT / B | kmirror / MM2 | kmirror / MM2-EOS | CPU kmirror / MM2 | CPU kmirror / MM2-EOS |",
          "|---|---|---|---|---|---|---|---|"]
    for k, r in tp.items():
        q = r["ratios"]
        L.append(f"| {k} | " + " | ".join(fmt(q.get(x), 2) for x in ("kmirror/BT", "kmirror/B", "BT/B", "kmirror/MM2",
                                                                      "kmirror/MM2-EOS", "CPU kmirror/MM2",
                                                                      "CPU kmirror/MM2-EOS")) + " |")
    mir = [c for c in MIRRORS if c in cols]
    if mir:
        L += ["", "| scenario | mirror | CPU-s per GiB | cores | peak RSS MiB | start-up s | brokers CPU-s per GiB |",
              "|---|---|---|---|---|---|---|"]
        for k, r in tp.items():
            for c in mir:
                m = r["contenders"].get(c)
                if m:
                    L.append(f"| {k} | {NAMES[c]} | {fmt(m.get('cpu_s_per_gib'), 2)} | {fmt(m.get('cores'), 2)} | "
                             f"{fmt(m.get('peak_rss_mib'), 0)} | {fmt(m.get('startup_s'), 1)} | "
                             f"{fmt(m.get('brokers_cpu_s_per_gib'), 1)} |")
    L += ["", "Rounds (MiB/s in the order run; w = warm-up, discarded):", ""]
    for k, r in tp.items():
        for rd in r["rounds"]:
            L.append(f"- {k} {rd['tag']}: " + ", ".join(
                f"{NAMES[c]} {'failed' if rd['mib_s'].get(c) is None else format(rd['mib_s'][c], '.0f')}"
                for c in rd["order"]))
    fails = [f for r in tp.values() for f in r["failed_runs"]]
    if fails:
        L += ["", "**Failed runs** (not in the figures): " + "; ".join(fails) + "."]
    dl = [(k, r["destination_log"]) for k, r in tp.items() if r.get("destination_log")]
    if dl:
        L += ["", "Destination log per run (MiB on disk, average record batch KiB, control batches = transaction markers):", ""]
        for k, d in dl:
            L.append(f"- {k}: " + " — ".join(f"{NAMES[w]} {fmt(x['mib'], 0)} MiB, {fmt(x['batch_kib'], 0)} KiB, "
                                              f"{fmt(x['control_batches'], 0)}" for w, x in d.items()))
    L.append("")
    return L


def latency_md(lat, meta):
    s = meta["settings"]
    L = ["## End-to-end latency", "",
         f"Open-loop load at 50 % of the slower MirrorMaker 2's median drain rate in this run into a fresh topic, "
         f"a checker on the destination ({s.get('latency_isolation', 'read_committed')}); {s.get('latency_runs', 1)} "
         f"round(s) per scenario of the mirrors in rotating order, {s['latency_warmup_secs']} s discarded + "
         f"{s['latency_secs']} s measured per run. *ack→visible*: destination poll time minus the source "
         "producer's ack; p99 ratios are medians of the ratios within each round.", "",
         "| scenario | records/s | mirror | p50 ms | p99 ms | p99.9 ms | max ms | send→visible p50 / p99 ms | missing | repeated |",
         "|---|---|---|---|---|---|---|---|---|---|"]
    b, i = "source_ack_to_visible", "intended_send_to_visible"
    for k, r in lat.items():
        if r.get("skipped"):
            L.append(f"| {k} | – | – | not measured: {r['skipped']} | | | | | | |")
        for who, m in r["mirrors"].items():
            L.append(f"| {k} | {r.get('offered_records_s', 0):,.0f} | {NAMES[who]} | {fmt(m[f'{b}.p50_ms'])} | "
                     f"{fmt(m[f'{b}.p99_ms'])} | {fmt(m[f'{b}.p999_ms'])} | {fmt(m[f'{b}.max_ms'])} | "
                     f"{fmt(m[f'{i}.p50_ms'])} / {fmt(m[f'{i}.p99_ms'])} | {m['missing']} | {m['duplicates']} |")
    L += ["", "| scenario | p99 kmirror / MM2 | p99 kmirror / MM2-EOS |", "|---|---|---|"]
    for k, r in lat.items():
        L.append(f"| {k} | {fmt(r['ratios'].get('p99 kmirror/MM2'), 2)} | {fmt(r['ratios'].get('p99 kmirror/MM2-EOS'), 2)} |")
    fails = [f for r in lat.values() for f in r["failed_runs"]]
    if fails:
        L += ["", "**Failed runs** (not in the figures): " + "; ".join(fails) + "."]
    L.append("")
    return L


def idle_md(idl):
    L = ["## Idle partitions", "",
         "Mirrored partitions without traffic (topics of 100 partitions): RSS (median of 15 samples) and CPU over "
         "30 s after a settle time; kmirror one instance with the default slots, sampled once it shows its "
         "partitions `idle` (a slot's data path is closed after 60 s with nothing to copy, "
         "`engine.close_idle_data_paths_after_ms`), MM2 a fresh JVM per step (live heap after a full GC).", "",
         "| mirror | partitions | shown idle | RSS MiB | CPU % of a core | JVM heap after GC MiB |",
         "|---|---|---|---|---|---|"]
    for who, d in idl.items():
        for st in d["steps"]:
            shown = st.get("idle_partitions")
            shown = "–" if shown is None else f"{shown:,}"
            if st.get("cannot"):
                L.append(f"| {NAMES[who]} | {st['partitions']:,} | {shown} | **{st['error']}** | | |")
                continue
            heap = st.get("heap_used_kib")
            L.append(f"| {NAMES[who]} | {st['partitions']:,} | {shown} | {st['rss_kib'] / 1024:.1f} | "
                     f"{st['cpu_pct']:.1f} | {'–' if heap is None else f'{heap / 1024:.1f}'} |")
    L.append("")
    beside = idl.get("kmirror", {}).get("beside_busy") or []

    def idle_before(st, idl):
        """Partitions idle before the beside-busy step started: recorded, or for runs that did not
        record it the previous kmirror step's less the busy ones (those runs loaded the first
        topics, which belonged to earlier steps and were woken by the load)."""
        if st.get("idle_before") is not None:
            return st["idle_before"]
        steps = [x["partitions"] for x in idl.get("kmirror", {}).get("steps", []) if x["partitions"] < st["partitions"]]
        return max(max(steps, default=0) - st["busy_partitions"], 0)

    if beside:
        # Runs that recorded `idle_before` started the load before the step's start call; earlier
        # ones right after its catch-up, on topics of earlier steps.
        since = ("the last of the largest step's topics under load from before its start" if
                 all(st.get("idle_before") is not None for st in beside) else
                 "the first few topics under load from right after the largest step's catch-up")
        L += [f"Idle partitions beside busy ones: {since}, so every slot's data path holds quiet partitions "
              "beside busy ones. Sampled twice "
              "under the same load, with the same settle time and samples: while the data paths still hold every "
              "partition (within 60 s of the quiet ones' catch-up; on a slow start some are rebuilt earlier, "
              "and the row says so), and once kmirror has rebuilt them with their active partitions "
              "only (when that lets go of 100 or more partitions, more than it keeps: its quiet ones, or all "
              "the partitions of its quiet topics), the quiet ones "
              "show `idle` and what the first minute left behind is copied. A busy partition that got no record for 60 s counts as quiet (it is woken at the next "
              "lag refresh that finds records). *copied*: records/s kmirror committed during the samples; below the "
              "load's rate, the mirror was falling behind. The load then stops and the all-idle sample above follows.", "",
              "| partitions | under load | load records/s | data paths | shown idle | copied records/s | RSS MiB | CPU % of a core |",
              "|---|---|---|---|---|---|---|---|"]
        for st in beside:
            for key, what in (("open", "holding every partition"), ("rebuilt", "rebuilt with the busy ones")):
                x = st[key]
                if key == "open":
                    # Partitions idle beyond those of the earlier steps (idle before this one, whose
                    # data paths had closed): some data paths were rebuilt before the sample ended.
                    early = x["idle_partitions"] - idle_before(st, idl)
                    if early > 0:
                        what = f"first minute ({early:,} of the step's partitions already idle)"
                copied = x.get("copied_records_s")
                L.append(f"| {st['partitions']:,} | {st['busy_partitions']:,} | {st['busy_records_s']:,} | {what} | "
                         f"{x['idle_partitions']:,} | {'–' if copied is None else f'{copied:,}'} | "
                         f"{x['rss_kib'] / 1024:.1f} | {x['cpu_pct']:.1f} |")
        L.append("")
    for who, d in idl.items():
        if d.get("rss_kib_per_partition") is not None:
            extra = (f"; live heap {d['heap_kib_per_partition']:.1f} KiB" if d.get("heap_kib_per_partition") is not None else "")
            L.append(f"- {NAMES[who]}: RSS {d['rss_kib_per_partition']:.1f} KiB per idle partition up to "
                     f"{d['at_partitions']:,}{extra}")
    L.append("")
    return L


def failover_md(fo):
    L = ["## Failover (`topics:stop` of every partition in one call)", "",
         "Once every partition has copied its history (20 records each), optionally under a background load, one "
         "`POST topics:stop` for all topics; timed until the API shows every partition STOPPED. Afterwards the "
         "destination must hold exactly the source (without load) or exactly the first records of every source "
         "partition (under load). MirrorMaker 2 has no "
         "failover operation.", "",
         "| partitions | load records/s | mirror | stop call s | all STOPPED s | lag before (records) |", "|---|---|---|---|---|---|"]
    for r in fo.values():
        origin = ", ".join(sorted({("the idle measurement's" if m == "idle" else "fresh") for m in r["mirror"] if m})) or "–"
        L.append(f"| {r['partitions']:,} | {r['load_records_s']:,} | {origin} | {fmt(r['stop_call_s'], 2)} | "
                 f"{fmt(r['all_stopped_s'], 2)} | {fmt(r['lag_before_records'], 0)} |")
    for r in fo.values():
        for d in r["failed_detail"]:
            L.append(f"\n- **Failed** ({r['partitions']:,} partitions, load {r['load_records_s']:,}): {d.get('error')}; "
                     f"partition states afterwards {json.dumps(d.get('states_after'))}")
    L.append("")
    return L


def takeover_md(tk):
    L = ["## Takeover after `kill -9`", ""]
    for k, r in tk.items():
        st = r["session_timeout_ms"] / 1000
        L += [f"{r['instances']} instances, a {int(k)}-partition topic under {r['load_records_s']:,} records/s, session "
              f"timeout {st:g} s; per run one instance killed with SIGKILL (each in turn) and restarted with the same id "
              "afterwards. *slots covered*: until the survivors own every slot; *advancing*: until every partition "
              "of the killed instance's slots has advanced its `mirrored_source_offset`. The copy is checked after "
              "the last run.", "",
              "| run | killed | its partitions | slots covered s | advancing s |", "|---|---|---|---|---|"]
        for x in r["runs"]:
            L.append(f"| {x['run']} | {x['killed']} | {x['killed_partitions']} | {fr(x['slots_covered_s'])} | "
                     f"{fr(x['partitions_advancing_s'])}" + (f" (**{x['error']}**)" if x.get("error") else "") + " |")
        L += ["", f"Median (min–max): slots covered {fmt(r['slots_covered_s'], 2)} s, every partition advancing "
              f"{fmt(r['partitions_advancing_s'], 2)} s.", ""]
    return L


def rolling_md(rl):
    L = ["## Rolling restart", ""]
    for k, r in rl.items():
        L += [f"3 instances, a {int(k)}-partition topic under {r['load_records_s']:,} records/s, each SIGTERM'd and "
              f"started again with the same id ({r['restarts']} restarts); restarts that moved another instance's "
              f"slots: {r['restarts_moving_other_slots']}. Exited {fmt(r['exited_s'], 2)} s, same slots again "
              f"{fmt(r['same_slots_again_s'], 2)} s, partitions advancing {fmt(r['partitions_advancing_s'], 2)} s.", ""]
    return L


def failback_md(fb):
    modes = {k: r for k, r in fb.items() if not k.startswith("_")}
    first = next(iter(modes.values()))
    gib = first["topic_records"] * first["value_bytes"] / 2**30
    L = ["## Failback", "",
         f"A {first['topic_records']:,}-record topic ({gib:.2f} GiB of values, {first['partitions']} partitions) mirrored "
         f"A -> B by kmirror, failed over, {first['new_records_on_b']:,} new records (1 %) written on B; then kmirror "
         "attached to A fails back (source B) on fresh clusters per run: *incremental* (the lineage: only what B "
         "received since the failover) or *resync* (`truncation: resync`: the whole topic copied again). Timed from "
         "`topics:start` until every partition reached B's end; A is then checked against B.", "",
         "| mode | failback s | start call s | records copied |", "|---|---|---|---|"]
    for r in modes.values():
        c = r["records_copied"]
        L.append(f"| {r['mode']} | {fmt(r['failback_s'], 2)} | {fmt(r['start_call_s'], 2)} | "
                 f"{'–' if c is None else format(int(c['median']), ',')} |")
        for f in r["failed_runs"]:
            L.append(f"| {r['mode']} | **failed**: {f} | | |")
    L += ["", f"resync / incremental time, per run: {fmt(fb.get('_ratio'), 1)}.", ""]
    return L


def content_md(ct):
    if not ct["enabled"]:
        return ["## Content checks", "", "**Not checked** (`--no-verify`).", ""]
    checks = ct["checks"]
    n_bad = len(ct["mismatches"])
    L = ["## Content checks", "",
         f"{len(checks)} copies checked against their source, per partition: record count and ordered hash of key + "
         "value (read_committed). *exact*: equal; *dedupe* (MM2 at least once): equal once records repeating an "
         "earlier one of their partition are left out, the repeats counted; *prefix* (after a failover, the source "
         "still written): the destination holds the first records of every source partition. "
         + (f"**{n_bad} MISMATCH(ES)**: those runs are failed and left out of the figures." if n_bad else "All equal."),
         "", "| copy | mode | result | source records | destination records | repeated | partitions |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        res = "ok" if c["ok"] else "**MISMATCH**" + (f": {c['error']}" if c.get("error") else "")
        if not c["ok"] and c.get("first_mismatch"):
            fm = c["first_mismatch"]
            res += f" ({c.get('mismatched_partitions')} partitions, e.g. {fm.get('topic')}-{fm.get('partition')}: " \
                   f"{fm.get('source_records')} vs {fm.get('destination_records')})"
        L.append(f"| {c['what']} | {c.get('mode') or '–'} | {res} | {c.get('source_records') or 0:,} | "
                 f"{c.get('destination_records') or 0:,} | {c.get('duplicates') or 0:,} | {c.get('partitions') or 0:,} |")
    L.append("")
    return L


def header_lines(meta, complete, ct, stopped=None):
    L = []
    smoke = meta["mode"] != "full"
    if not complete:
        why = f" ({stopped})" if stopped else ""
        L += [f"> **INCOMPLETE**: the run stopped early{why}; only the measurements below were taken.", ""]
    if ct["mismatches"]:
        L += ["> **CONTENT MISMATCH**: " + "; ".join(ct["mismatches"]) + ". Those runs are failed (see Content checks).", ""]
    if not ct["enabled"]:
        L += ["> **Copies not checked** (`--no-verify`).", ""]
    c = meta.get("commit") or {}
    if c.get("dirty"):
        L += ["> **Uncommitted changes** (`--dirty`): the code run is the commit below plus: "
              + ", ".join(f"`{u.strip()}`" for u in c.get("uncommitted", [])) + ".", ""]
    if meta["versions"].get("kmirror_binary", "built from the commit") != "built from the commit":
        L += [f"> **kmirror binary given** (`--kmirror-bin {meta['versions']['kmirror_binary']}`, sha256 "
              f"{meta['versions']['kmirror_binary_sha256'][:16]}…), not built from the commit below.", ""]
    if smoke:
        L += ["> **Smoke run**: small data, one round, no warm-up. It proves that every measurement works end to "
              "end; its figures are not representative. The figures to quote come from `scripts/bench --full` on a "
              "quiet machine.", ""]
    return L


def markdown(summary):
    meta, complete = summary["meta"], summary["complete"]
    ct, bx = summary["content"], summary["box"]
    smoke = meta["mode"] != "full"
    title = "smoke run, not representative" if smoke else "full run"
    L = [f"# kmirror vs MirrorMaker 2: {title} ({meta['started_utc']})", ""]
    L += header_lines(meta, complete, ct, summary.get("stopped"))
    c = meta.get("commit") or {}
    v = meta["versions"]
    L += [f"- Command: `{meta.get('command', 'scripts/bench')}`",
          f"- Commit: {c.get('full', v['kmirror_git'])}" + (" **with uncommitted changes**" if c.get("dirty") else ""),
          *box_lines(meta, bx),
          f"- Kafka {v['kafka']} (two single-node KRaft clusters on loopback), {v['java']}, {v['rustc']}, rdkafka "
          f"{v['rdkafka']} (librdkafka {v['rdkafka_sys'].split('+')[-1]})",
          f"- Data: {settings_line(meta)}", ""]
    L += phases_table(bx) + [""]
    L += ["## Targets", "", "Every target, met or missed, with the figure of this run.", ""]
    L += targets_table(summary["targets"]) + [""]
    if summary["throughput"]:
        L += throughput_md(summary["throughput"])
    if summary["latency"]:
        L += latency_md(summary["latency"], meta)
    if summary["idle"]:
        L += idle_md(summary["idle"])
    if summary["failover"]:
        L += failover_md(summary["failover"])
    if summary["takeover"]:
        L += takeover_md(summary["takeover"])
    if summary["rolling"]:
        L += rolling_md(summary["rolling"])
    if summary["failback"]:
        L += failback_md(summary["failback"])
    L += content_md(ct)
    s = meta["settings"]
    L += ["## Settings", "", f"- kmirror: `{json.dumps(s['kmirror'])}`",
          f"- MM2 JVM `{s['mm2']['jvm']}`; producer codec {s['mm2']['codec']}; properties:", "", "```properties",
          s["mm2"]["properties"], "```", "", "- MM2-EOS: the same plus", "", "```properties",
          s["mm2"]["eos_extra_properties"], "```", "",
          f"- Brokers: {s['brokers']['config']}; JVM `{s['brokers']['jvm']}`"
          + ("; the destination restarted before each mirror run" if s["brokers"].get("mirror_runs_restart_destination")
             else "; the destination's topics deleted before each mirror run, the broker kept running"),
          f"- Baselines: consumer {s['baselines']['consumer']}; producer {s['baselines']['producer']}", "",
          f"Reproduce: `{meta.get('command', 'scripts/bench')}` on commit {c.get('short', v['kmirror_git'])}."]
    return "\n".join(L) + "\n"


def summarize(raw):
    meta = load(os.path.join(raw, "meta.json"))
    s = {"meta": meta, "complete": os.path.exists(os.path.join(raw, "complete"))}
    # Why a run stopped early (the script's error, written by its `die`), for the report's banner.
    stopped = os.path.join(raw, "stopped.txt")
    s["stopped"] = open(stopped).read().strip() if os.path.exists(stopped) else None
    s["throughput"] = throughput(raw)
    s["latency"] = latency(raw)
    s["idle"] = idle(raw)
    s["failover"] = failover(raw)
    s["takeover"] = takeover(raw)
    s["rolling"] = rolling(raw)
    s["failback"] = failback(raw)
    s["content"] = content(raw, meta)
    s["box"] = box(raw)
    s["targets"] = targets(s["throughput"], s["latency"], s["idle"], s["failover"], s["takeover"], s["failback"])
    return s


# ----- docs/performance.md and the README --------------------------------------------------------


def mismatch_phrase(mismatches):
    """How the README names a run's content mismatches: whose copies they were (kmirror's or a
    peer's: MirrorMaker 2 runs are named "mm2" / "mm2eos"), so a peer's short copy is not read as
    kmirror's."""
    peers = [m for m in mismatches if any(w.startswith("mm2") for w in m.split())]
    own = [m for m in mismatches if m not in peers]
    parts = []
    if own:
        parts.append("**kmirror content mismatches**: " + "; ".join(own))
    else:
        parts.append("every kmirror copy equal to its source")
    if peers:
        parts.append("MirrorMaker 2 copies not equal to their source (left out of the figures): " + "; ".join(peers))
    return ", ".join(parts) + "."


def latest_full():
    """(folder name, results) of the newest publishable run, or (None, None)."""
    best = None
    for p in glob.glob(os.path.join(RESULTS, "*", "results.json")):
        d = load(p)
        if d.get("meta", {}).get("publishable") and d.get("complete"):
            name = os.path.basename(os.path.dirname(p))
            if best is None or name > best[0]:
                best = (name, d)
    return best or (None, None)


def latest_other():
    """(folder name, results) of the newest run that is not publishable (a smoke or partial run), or
    (None, None): the docs link it while no full run exists, and quote none of its figures."""
    best = None
    for p in glob.glob(os.path.join(RESULTS, "*", "results.json")):
        d = load(p)
        if not d.get("meta", {}).get("publishable"):
            name = os.path.basename(os.path.dirname(p))
            if best is None or name > best[0]:
                best = (name, d)
    return best or (None, None)


def link(name, what="report.md"):
    return f"[`{name}/{what}`](../bench/results/{name}/{what})"


def span(xs, digits=2):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "–"
    lo, hi = min(xs), max(xs)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}–{hi:.{digits}f}"


def summary_lines(root=""):
    """The README's performance lines (links relative to `root`: "" from the repository root)."""
    name, d = latest_full()
    if d is None:
        where = "this page" if root else "[docs/performance.md](docs/performance.md)"
        lines = ["- No complete `scripts/bench --full` run is recorded yet: run it on a quiet machine (about 75 "
                 f"minutes); its report then fills these lines and {where}."]
        other, o = latest_other()
        if o is not None:
            m = o["meta"]
            kind = "smoke run" if m.get("mode") == "smoke" else f"{m.get('mode', 'partial')} run"
            state = "every measurement ran" if o.get("complete") else "it did not complete"
            state += ("; every copy checked equal to its source" if not (o.get("content") or {}).get("mismatches")
                      else "; **content mismatches**, see its report")
            lines.append(f"- The newest run recorded is a {kind}, not a full benchmark: "
                         f"[`{other}`]({root}bench/results/{other}/report.md) (commit {m['commit']['short']}; "
                         f"{state}). " + ("Its small data and single round show that the pipeline works end to end; "
                                            "its figures" if m.get("mode") == "smoke" else "Its figures")
                         + " are not representative and are not quoted here.")
        return lines
    tp, lat, idl, fo, tk = d["throughput"], d["latency"], d["idle"], d["failover"], d["takeover"]
    med = lambda r, key: (r["ratios"].get(key) or {}).get("median")
    met = sum(1 for t in d["targets"] if t["verdict"] == "met")
    lines = [f"- From the full run [`{name}`]({root}bench/results/{name}/report.md) (commit {d['meta']['commit']['short']}, "
             f"{d['meta']['machine']['nproc']} cores): {met} of {len(d['targets'])} targets met; every copy checked"
             + (" equal to its source." if not d["content"]["mismatches"] else ": " + mismatch_phrase(d["content"]["mismatches"]))]
    if tp:
        lines.append(
            f"- **Throughput** (1 KiB records, none/lz4, 8/64 partitions, one instance): kmirror / MirrorMaker 2 "
            f"{span([med(r, 'kmirror/MM2') for r in tp.values()], 1)}× at least once and "
            f"{span([med(r, 'kmirror/MM2-EOS') for r in tp.values()], 1)}× exactly once, at "
            f"{span([med(r, 'CPU kmirror/MM2') for r in tp.values()])}× its CPU per GiB; "
            f"{span([med(r, 'kmirror/BT') for r in tp.values()])}× a plain consumer and transactional producer "
            "side by side.")
    if lat:
        b = "source_ack_to_visible"
        cells = []
        for k, r in lat.items():
            m = r["mirrors"]
            cells.append(f"{SCENARIO_NAMES.get(k, k)}: " + ", ".join(
                f"{NAMES[w]} {m[w][f'{b}.p99_ms']['median']:.0f} ms" for w in MIRRORS
                if w in m and m[w].get(f"{b}.p99_ms")))
        lines.append("- **p99 latency** (append on the source → readable on the destination, at half the slower "
                     "MirrorMaker 2's drain rate): " + "; ".join(cells) + ".")
    ops = []
    km = (idl or {}).get("kmirror")
    if km:
        top = km["steps"][-1]
        ops.append(f"**idle** {top['partitions']:,} partitions: {top['cpu_pct']:.0f} % of a core"
                   + (f", {km['rss_kib_per_partition']:.0f} KiB per partition" if km.get("rss_kib_per_partition") else ""))
    for r in (fo or {}).values():
        if r["all_stopped_s"]:
            ops.append(f"**failover** of {r['partitions']:,} partitions "
                       + ("without load" if not r["load_records_s"] else f"under {r['load_records_s']:,} records/s")
                       + f": {r['all_stopped_s']['median']:.2f} s")
    for r in (tk or {}).values():
        if r["partitions_advancing_s"]:
            ops.append(f"**takeover** after `kill -9`: {r['partitions_advancing_s']['median']:.1f} s "
                       f"(session timeout {r['session_timeout_ms'] / 1000:g} s)")
    x = (d["failback"] or {}).get("_ratio")
    if x:
        ops.append(f"**failback** at 1 % new data {x['median']:.1f}× faster than a full resync")
    if ops:
        lines.append("- " + "; ".join(ops) + ".")
    return lines


DOCS_INTRO = """# Performance

<!-- Generated by `python3 bench/report.py --docs > docs/performance.md` from the newest full run in
bench/results. Do not edit by hand: change the generator, or run the benchmark again. -->

This page is generated by `python3 bench/report.py --docs` from the report of the newest complete
`scripts/bench --full` run of a committed version in [`bench/results`](../bench/results). How the
benchmark works: [`bench/README.md`](../bench/README.md).
"""

DOCS_METHOD = """## Method

`scripts/bench` runs its own two single-node Kafka clusters on one machine and measures, per
scenario (1 KiB records, codec none or lz4, 8 or 64 partitions), rounds of:

| contender | what it is |
|---|---|
| **B** | a plain rdkafka consumer and producer at the same time: the bound for any client-side mirror on the box |
| **BT** | B with a transactional producer committing once per kmirror commit interval: the bound for an exactly-once copy |
| **kmirror** | a fresh `kmirror serve` draining the preloaded topic, started through the REST API |
| **MM2** | Apache Kafka's MirrorMaker 2 in dedicated mode, at least once (idempotent `acks=all` producer) |
| **MM2-EOS** | MirrorMaker 2 with exactly-once delivery (`exactly.once.source.support`, transactions) |

The order of the contenders rotates every round and the ratios are medians of the ratios within
each round: the box's speed moves within minutes, so only neighbours in time are compared. Every
kmirror and MirrorMaker 2 copy (throughput, latency, failover, takeover, failback) is checked
against its source afterwards: per partition, the record count and an ordered hash of key and
value.
"""

DOCS_REPRODUCE = """## Reproduce

```sh
scripts/bench --full          # everything, about 75 minutes on 2 cores; nothing else running
scripts/bench --full --dry-run   # what it would do, with a time estimate
scripts/bench-ui              # the dashboard at 10,000 partitions (~10 min)
scripts/chaos                 # exactly once under faults (~5 min)
```

A complete `--full` run of a committed version writes `bench/results/<time>-full/` and regenerates
this page and the README's performance lines from it.
"""

# Results of the other tools, each reproducible by its own script.
UI_RESULT = "20261201T152337Z-ui10k"
CHAOS_RESULTS = ["20261201T023047Z-chaos", "20261201T025459Z-chaos"]


def flat_link(name, ext=".md"):
    return f"[`{name}{ext}`](../bench/results/{name}{ext})"


def docs_ui(L):
    u = load(os.path.join(RESULTS, UI_RESULT + ".json"))
    st = u["meta"]["settings"]
    L += ["## The dashboard at 10,000 partitions", "",
          f"`scripts/bench-ui`: the dashboard and API with one mirror of {st['topics']} topics × "
          f"{st['partitions'] // st['topics']} partitions, all MIRRORING, and {len(st['tabs'])} headless Chromium tabs "
          f"refreshing their live regions every 2 s; {st['samples']} sequential requests per page after "
          f"{st['warmup']} discarded ({flat_link(UI_RESULT)}). Server-side p99: the "
          "`kmirror_http_request_duration_seconds` bucket that holds 99 % of the requests.", "",
          "| page / read | path | p50 / p99 ms | server-side p99 ms |", "|---|---|---|---|"]
    for e in u["latency"]["endpoints"]:
        srv = e.get("server") or {}
        L.append(f"| {e['name']} | `{e['path']}` | {e['p50_ms']} / {e['p99_ms']} | ≤ {srv.get('p99_ms_at_most', '–')} |")
    cpu = u["cpu"]
    per = cpu["per_refresh"]
    L += ["", f"The tabs' live refreshes cost the server {per['tokio_cpu_ms_per_request']} ms of CPU each, "
          f"**{cpu['tabs_estimate_pct']} % of a core** for the {len(st['tabs'])} tabs.", ""]


def chaos_table(name):
    rows = {}
    with open(os.path.join(RESULTS, name + ".md")) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|") and len(cells) == 2 and cells[0] not in ("check", "---"):
                rows[cells[0]] = cells[1]
    return rows


def docs_chaos(L):
    tables = [chaos_table(n) for n in CHAOS_RESULTS]
    keys = [k for k in tables[0] if k != "mode"]
    L += ["## Exactly once under faults", "",
          "`scripts/chaos` (full run, debug build) mirrors a 4-partition topic under transactional load with aborts on "
          "purpose while it kills kmirror, restarts and freezes brokers, then compares both clusters record for record "
          "(see [architecture.md](architecture.md#exactly-once-under-faults)).", "",
          "| check | " + " | ".join(flat_link(n) for n in CHAOS_RESULTS) + " |", "|---|" + "---|" * len(CHAOS_RESULTS)]
    for k in keys:
        L.append(f"| {k} | " + " | ".join(t.get(k, "–") for t in tables) + " |")
    L.append("")


def docs():
    name, d = latest_full()
    L = [DOCS_INTRO, "## Summary", ""]
    L += summary_lines("../") + ["", DOCS_METHOD]
    if d is not None:
        meta = d["meta"]
        c = meta["commit"]
        L += [f"## The run", "",
              f"{link(name)} and [`results.json`](../bench/results/{name}/results.json): commit {c['short']}, "
              f"`{meta['command']}`.", ""]
        L += box_lines(meta, d["box"]) + [f"- Data: {settings_line(meta)}", ""]
        L += ["## Targets", ""] + targets_table(d["targets"]) + [""]
        for section, fn in (("throughput", throughput_md), ("latency", lambda x: latency_md(x, meta)),
                            ("idle", idle_md), ("failover", failover_md), ("takeover", takeover_md),
                            ("failback", failback_md)):
            if d.get(section):
                L += fn(d[section])
        ct = d["content"]
        L += ["## Every copy checked", "",
              f"{len(ct['checks'])} copies were compared with their source after the run: "
              + ("all equal." if not ct["mismatches"] else "**mismatches**: " + "; ".join(ct["mismatches"]) + "."),
              "The list is in the report.", ""]
    docs_ui(L)
    docs_chaos(L)
    L.append(DOCS_REPRODUCE)
    return "\n".join(L).rstrip("\n") + "\n"


README_START = "<!-- performance-summary"
README_END = "<!-- /performance-summary -->"


def update_docs():
    with open(os.path.join(ROOT, "docs", "performance.md"), "w") as f:
        f.write(docs())
    path = os.path.join(ROOT, "README.md")
    text = open(path).read()
    a = text.index(README_START)
    a = text.index("-->", a) + 4
    b = text.index(README_END)
    with open(path, "w") as f:
        f.write(text[:a] + "\n".join(summary_lines()) + "\n" + text[b:])


def main():
    if sys.argv[1:] == ["--docs"]:
        sys.stdout.write(docs())
        return
    if sys.argv[1:] == ["--readme-summary"]:
        sys.stdout.write("\n".join(summary_lines()) + "\n")
        return
    if sys.argv[1:] == ["--update-docs"]:
        update_docs()
        return
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    raw, out = sys.argv[1], sys.argv[2]
    summary = summarize(raw)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(markdown(summary))


if __name__ == "__main__":
    main()
