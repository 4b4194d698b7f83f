#!/usr/bin/env python3
"""Summarise one scripts/bench run: raw per-run JSON files -> <out>.json and <out>.md.

Usage: report.py RAW_DIR OUT_PREFIX
       report.py --docs > docs/performance.md
       report.py --readme-summary       (the performance lines of README.md)

The second form writes the user documentation's performance page from the summaries already in
bench/results (the files named in DOCS below): nothing in it is typed by hand, and every table
names the result file it comes from. After a new benchmark, point DOCS at its result file and
run it again (tests/integration/docs.rs checks that docs/performance.md is what it writes).

RAW_DIR holds meta.json and files named <measure>.<key>.<tag>.json, where <tag> is w<i> for a
warm-up run (ignored here) or r<i> for a measured run. Every figure is the median over the measured
runs with its min-max; ratios are ratios of medians.
"""

import glob
import json
import os
import statistics
import sys

MIB = 1048576


def load(path):
    with open(path) as f:
        return json.load(f)


def runs(raw, measure, key, failed=None):
    """Successful measured runs of measure/key, sorted by tag; failed ones go to `failed`."""
    out = []
    for p in sorted(glob.glob(os.path.join(raw, f"{measure}.{key}.r*.json"))):
        r = load(p)
        if "error" in r:
            if failed is not None:
                failed.append(f"{os.path.basename(p)[:-5]}: {r['error']}")
            continue
        r["_tag"] = os.path.basename(p)[: -len(".json")].rsplit(".", 1)[-1]
        out.append(r)
    return out


def stat(values):
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
        "runs": values,  # the measured runs, in tag order (the raw folders are not committed)
    }


def fmt(s, digits=1, scale=1.0):
    if s is None:
        return "–"
    m = s["median"] * scale
    if s["n"] == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ({s['min'] * scale:.{digits}f}–{s['max'] * scale:.{digits}f})"


def ratio(a, b):
    if a is None or b is None or not b["median"]:
        return None
    return a["median"] / b["median"]


def fr(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def verdict(x, must, goal, lower_is_better=False):
    if x is None:
        return "–"
    if lower_is_better:
        return "goal" if x <= goal else ("pass" if x <= must else "MISS")
    return "goal" if x >= goal else ("pass" if x >= must else "MISS")


CODEC_ORDER = ["none", "lz4", "zstd", "snappy", "gzip"]


def order(k):
    """none-8, none-64, lz4-8, lz4-64, ..."""
    codec, _, parts = k.partition("-")
    return (CODEC_ORDER.index(codec) if codec in CODEC_ORDER else 99, int(parts) if parts.isdigit() else 0)


def scenarios(raw, prefix):
    keys = set()
    for p in glob.glob(os.path.join(raw, f"{prefix}.*.r*.json")):
        name = os.path.basename(p)[len(prefix) + 1:]
        keys.add(name.rsplit(".", 2)[0])
    return sorted(keys, key=order)


def concurrent_rates(consumer_runs, producer_runs):
    """MiB/s of C and P run at once (B, BT): the smaller volume over the makespan; also by tag."""
    rates, by_tag = [], {}
    for x, y in zip(consumer_runs, producer_runs):
        span = (max(x["end_ms"], y["end_ms"]) - min(x["first_ms"], y["first_ms"])) / 1000.0
        rates.append(min(x["bytes"], y["bytes"]) / span / MIB if span > 0 else None)
        by_tag[x["_tag"]] = rates[-1]
    return rates, by_tag


def per_run_ratios(m_runs, baseline_by_tag):
    """Each kmirror run's MiB/s over the baseline run of the same tag (where there is one)."""
    return [r["mib_s"] / baseline_by_tag[r["_tag"]] for r in m_runs if baseline_by_tag.get(r["_tag"])]


def brokers_cpu(cpu_runs, producer_runs, which=None):
    """Brokers' CPU-s per GiB over B/BT runs (source + destination, or one of them)."""
    out = []
    for r, x in zip(cpu_runs, producer_runs):
        if r.get("brokers_cpu_s"):
            cpu = sum(r["brokers_cpu_s"]) if which is None else r["brokers_cpu_s"][which]
            out.append(cpu / (x["bytes"] / 2**30))
    return stat(out)


def throughput(raw):
    out = {}
    keys = set(scenarios(raw, "m")) | set(scenarios(raw, "mm2")) | set(scenarios(raw, "c"))
    for k in sorted(keys, key=order):
        c = runs(raw, "c", k)
        p = runs(raw, "p", k)
        bc = runs(raw, "bc", k)
        bp = runs(raw, "bp", k)
        failed = []
        m = runs(raw, "m", k, failed)
        mm = runs(raw, "mm2", k, failed)
        b_rates, b_by_tag = concurrent_rates(bc, bp)
        btc, btp = runs(raw, "btc", k), runs(raw, "btp", k)
        bt_rates, bt_by_tag = concurrent_rates(btc, btp)
        bb, btb = runs(raw, "bb", k), runs(raw, "btb", k)
        # Per-run M/B: meaningful when B and M ran one after the other (--interleave).
        paired, paired_t = per_run_ratios(m, b_by_tag), per_run_ratios(m, bt_by_tag)
        row = {
            "C_mib_s": stat([r["mib_s"] for r in c]),
            "P_mib_s": stat([r["mib_s"] for r in p]),
            "B_mib_s": stat(b_rates),
            "B_consumer_mib_s": stat([r["mib_s"] for r in bc]),
            "B_producer_mib_s": stat([r["mib_s"] for r in bp]),
            "M_mib_s": stat([r["mib_s"] for r in m]),
            "M_records_s": stat([r["records_s"] for r in m]),
            "M_mib_s_incl_startup": stat([r["mib_s_incl_startup"] for r in m]),
            "M_startup_s": stat([r["startup_s"] for r in m]),
            "M_cpu_s_per_gib": stat([r["cpu_s_per_gib"] for r in m]),
            "M_cpu_cores": stat([r["cpu_cores_avg"] for r in m]),
            "M_peak_rss_mib": stat([r["vm_hwm_kib"] / 1024 for r in m]),
            "M_brokers_cpu_s_per_gib": stat(
                [sum(r["others_cpu_s_drain"]) / (r["bytes"] / 2**30) for r in m if r.get("others_cpu_s_drain")]
            ),
            "BT_mib_s": stat(bt_rates),
            "B_brokers_cpu_s_per_gib": brokers_cpu(bb, bp),
            "B_dst_broker_cpu_s_per_gib": brokers_cpu(bb, bp, 1),
            "BT_brokers_cpu_s_per_gib": brokers_cpu(btb, btp),
            "BT_dst_broker_cpu_s_per_gib": brokers_cpu(btb, btp, 1),
            "M_dst_broker_cpu_s_per_gib": stat(
                [r["others_cpu_s_drain"][1] / (r["bytes"] / 2**30) for r in m if len(r.get("others_cpu_s_drain") or []) > 1]
            ),
            "MM2_mib_s": stat([r["mib_s"] for r in mm]),
            "MM2_records_s": stat([r["records_s"] for r in mm]),
            "MM2_mib_s_incl_startup": stat([r["mib_s_incl_startup"] for r in mm]),
            "MM2_startup_s": stat([r["startup_s"] for r in mm]),
            "MM2_cpu_s_per_gib": stat([r["cpu_s_per_gib"] for r in mm]),
            "MM2_cpu_cores": stat([r["cpu_cores_avg"] for r in mm]),
            "MM2_peak_rss_mib": stat([r["vm_hwm_kib"] / 1024 for r in mm]),
            "MM2_brokers_cpu_s_per_gib": stat(
                [sum(r["others_cpu_s_drain"]) / (r["bytes"] / 2**30) for r in mm if r.get("others_cpu_s_drain")]
            ),
            "gib": (m or mm or c or [{"bytes": 0}])[0]["bytes"] / 2**30,
        }
        # What each writer left in the destination's log (bench/log-batches.py, since session 23).
        for who, pre in (("P", "pd"), ("B", "bd"), ("BT", "btd"), ("M", "md")):
            d = runs(raw, pre, k)
            row[f"{who}_dst_log_mib"] = stat([r["bytes"] / MIB for r in d])
            row[f"{who}_dst_batch_kib"] = stat([r["avg_batch_bytes"] / 1024 for r in d if r.get("avg_batch_bytes")])
            row[f"{who}_dst_control_batches"] = stat([r["control_batches"] for r in d])
        row["failed_runs"] = failed
        row["ratio_M_B"] = ratio(row["M_mib_s"], row["B_mib_s"])
        row["ratio_M_B_paired"] = stat(paired)
        row["ratio_M_BT"] = ratio(row["M_mib_s"], row["BT_mib_s"])
        row["ratio_M_BT_paired"] = stat(paired_t)
        row["ratio_M_MM2"] = ratio(row["M_mib_s"], row["MM2_mib_s"])
        row["ratio_cpu_per_gib_M_MM2"] = ratio(row["M_cpu_s_per_gib"], row["MM2_cpu_s_per_gib"])
        for who in ("kmirror", "mm2"):
            vp = os.path.join(raw, f"verify-{who}.{k}.json")
            row[f"verify_{who}"] = load(vp) if os.path.exists(vp) else None
        out[k] = row
    return out


def p50_p99(r, who, basis):
    """A latency row's "p50 / p99" cell for one mirror and one basis."""
    return f"{fmt(r.get(f'{who}_{basis}_p50_ms'))} / {fmt(r.get(f'{who}_{basis}_p99_ms'))}"


def latency(raw):
    out = {}
    keys = set(scenarios(raw, "lat-kmirror")) | set(scenarios(raw, "lat-mm2")) | set(scenarios(raw, "lat-mm2eos"))
    for k in sorted(keys, key=order):
        row = {}
        for who in ("kmirror", "mm2", "mm2eos"):
            rs = runs(raw, f"lat-{who}", k)
            if not rs:
                continue
            row["offered_records_s"] = rs[0]["offered_rate"]
            for basis in ("source_ack_to_visible", "intended_send_to_visible"):
                for q in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
                    row[f"{who}_{basis}_{q}"] = stat([r[basis][q] for r in rs if r[basis]])
            row[f"{who}_missing"] = sum(r["missing"] for r in rs)
            row[f"{who}_duplicates"] = sum(r["duplicates"] for r in rs)
            row[f"{who}_achieved_records_s"] = stat([r["achieved_rate"] for r in rs])
        row["ratio_p99_kmirror_mm2"] = ratio(
            row.get("kmirror_source_ack_to_visible_p99_ms"), row.get("mm2_source_ack_to_visible_p99_ms")
        )
        row["ratio_p99_kmirror_mm2eos"] = ratio(
            row.get("kmirror_source_ack_to_visible_p99_ms"), row.get("mm2eos_source_ack_to_visible_p99_ms")
        )
        out[k] = row
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
        lo, hi = min(steps), max(steps)
        slope = None
        if hi > lo:
            slope = (steps[hi]["rss_kib"] - steps[lo]["rss_kib"]) / (hi - lo)
        heap_slope = None
        if hi > lo and steps[hi].get("heap_used_kib") and steps[lo].get("heap_used_kib"):
            heap_slope = (steps[hi]["heap_used_kib"] - steps[lo]["heap_used_kib"]) / (hi - lo)
        out[who] = {
            "steps": [steps[s] for s in sorted(steps)],
            "rss_slope_kib_per_partition": slope,
            "heap_slope_kib_per_partition": heap_slope,
        }
    return out


def failover(raw):
    out = {}
    keys = set()
    for p in glob.glob(os.path.join(raw, "failover.*.r*.json")):
        keys.add(os.path.basename(p).split(".")[1])
    def fo_order(k):
        parts, _, rate = k.partition("-")
        return (int(parts), int(rate or 0))

    for k in sorted(keys, key=fo_order):
        failed = []
        rs = runs(raw, "failover", k, failed)
        failed_detail = [
            {key: r.get(key) for key in ("error", "stop_call_s", "states_after", "ok_topics", "failed_topics", "start_errors")}
            for r in map(load, sorted(glob.glob(os.path.join(raw, f"failover.{k}.r*.json"))))
            if "error" in r
        ]
        if not rs:
            out[k] = {"failed_runs": failed, "failed_detail": failed_detail, "topics": None}
            continue
        out[k] = {
            "failed_runs": failed,
            "failed_detail": failed_detail,
            "stop_call_s": stat([r["stop_call_s"] for r in rs]),
            "all_stopped_s": stat([r["all_stopped_s"] for r in rs]),
            "lag_before_records": stat([r["lag_before_records"] for r in rs]),
            "topics": rs[0]["topics"],
            "load_records_s": rs[0]["load_records_s"],
            "ok_topics": min(r["ok_topics"] for r in rs),
            "states_after": rs[-1].get("states_after"),
        }
    return out


def keyed_runs(raw, measure):
    """(key, successful runs, all runs, failed ones) of `measure`, one key per topic partition count."""
    keys = {os.path.basename(p).split(".")[1] for p in glob.glob(os.path.join(raw, f"{measure}.*.r*.json"))}
    for k in sorted(keys, key=int):
        failed = []
        rs = runs(raw, measure, k, failed)
        yield k, rs, [load(p) for p in sorted(glob.glob(os.path.join(raw, f"{measure}.{k}.r*.json")))], failed


def takeover(raw):
    """kill -9 takeover runs (issue 17): one key per topic partition count."""
    out = {}
    for k, rs, allr, failed in keyed_runs(raw, "takeover"):
        first = (rs or allr)[0]
        out[k] = {
            "failed_runs": failed,
            "instances": first["instances"],
            "session_timeout_ms": first["session_timeout_ms"],
            "load_records_s": first["load_records_s"],
            "slots_covered_s": stat([r["slots_covered_s"] for r in rs]),
            "partitions_advancing_s": stat([r["partitions_advancing_s"] for r in rs]),
            "runs": [
                {key: r.get(key) for key in ("run", "killed", "killed_slots", "killed_partitions", "slots_covered_s",
                                             "partitions_advancing_s", "error")}
                for r in allr
            ],
        }
    return out


def rolling(raw):
    """Rolling restarts (issue 17): SIGTERM and back with the same id, one instance at a time."""
    out = {}
    for k, rs, allr, failed in keyed_runs(raw, "rolling"):
        vp = os.path.join(raw, f"verify-rolling.{k}.json")
        out[k] = {
            "failed_runs": failed,
            "load_records_s": allr[0]["load_records_s"],
            "restarts": len(allr),
            "exited_s": stat([r["exited_s"] for r in rs]),
            "same_slots_again_s": stat([r["same_slots_again_s"] for r in rs]),
            "partitions_advancing_s": stat([r["partitions_advancing_s"] for r in rs]),
            "restarts_moving_other_slots": sum(1 for r in allr if r.get("other_slots_moved")),
            "verify": load(vp) if os.path.exists(vp) else None,
            "runs": allr,
        }
    return out


def failback(raw):
    """Failback B -> A after 1% new writes on B (issue 18): one key per partitions-mode."""
    out = {}
    keys = {os.path.basename(p).split(".")[1] for p in glob.glob(os.path.join(raw, "failback.*.r*.json"))}
    for k in sorted(keys):
        failed = []
        rs = runs(raw, "failback", k, failed)
        allr = [load(p) for p in sorted(glob.glob(os.path.join(raw, f"failback.{k}.r*.json")))]
        first = (rs or allr)[0]
        out[k] = {
            "failed_runs": failed,
            "mode": first["mode"],
            "partitions": first["partitions"],
            "topic_records": first["topic_records"],
            "new_records_on_b": first["new_records_on_b"],
            "value_bytes": first.get("value_bytes", 1024),
            "failback_s": stat([r["failback_s"] for r in rs]),
            "start_call_s": stat([r["start_call_s"] for r in rs]),
            "records_copied": stat([r["records_copied"] for r in rs]),
            "verified": [(r.get("verify") or {}).get("ok") for r in rs if r.get("verify") is not None],
        }
    return out


def failback_md(fb):
    L = ["## Failback (B -> A after 1% new writes on B)", ""]
    first = next(iter(fb.values()))
    gib = first["topic_records"] * first["value_bytes"] / 2**30
    L.append(
        f"A {first['topic_records']:,}-record topic ({gib:.2f} GiB of values, {first['partitions']} partitions) "
        f"mirrored A -> B by kmirror attached to B, failed over, {first['new_records_on_b']:,} new records (1%) "
        "written on B; then kmirror attached to A starts the failback mirror (source B) on fresh clusters per "
        "mode: *incremental* (the lineage in B's `__mirror_state`: only what B received since the failover) or "
        "*resync* (`truncation: resync`: A's records are deleted and the whole topic copied). Time: from the "
        "`topics:start` call until every partition's `mirrored_source_offset` reaches B's end offset."
    )
    L.append("")
    L.append("| mode | failback s | start call s | records copied | A = B verified |")
    L.append("|---|---|---|---|---|")
    for r in fb.values():
        copied = r["records_copied"]
        L.append(
            f"| {r['mode']} | {fmt(r['failback_s'], 2)} | {fmt(r['start_call_s'], 2)} | "
            f"{'–' if copied is None else format(int(copied['median']), ',')} | "
            f"{'–' if not r['verified'] else ('yes' if all(r['verified']) else 'NO')} |"
        )
        for f in r["failed_runs"]:
            L.append(f"| {r['mode']} | **failed**: {f} | | | |")
    inc = next((r for r in fb.values() if r["mode"] == "incremental"), None)
    res = next((r for r in fb.values() if r["mode"] == "resync"), None)
    if inc and res:
        t, c = ratio(res["failback_s"], inc["failback_s"]), ratio(res["records_copied"], inc["records_copied"])
        L.append("")
        L.append(f"resync / incremental: time {fr(t, 1)}x, records copied {fr(c, 1)}x.")
    L.append("")
    return L


def per_scenario(L, tp, key, title, line):
    """A titled list with one line per scenario that has `key` (none at all: nothing)."""
    rows = [(k, r) for k, r in tp.items() if r.get(key)]
    if not rows:
        return
    L += ["", title, ""]
    L += [line(k, r) for k, r in rows]


def markdown(meta, tp, lat, idl, fo, complete, tk=None, fb=None, rl=None):
    s = meta["settings"]
    smoke = meta["mode"] != "full"
    L = []
    title = "SMOKE RUN — NOT REPRESENTATIVE" if smoke else "Full run"
    L.append(f"# kmirror vs MirrorMaker 2 — {title} ({meta['started_utc']}, label `{meta['label']}`)")
    L.append("")
    n_inst = s.get("kmirror", {}).get("instances", 1)
    if n_inst > 1:
        L.append(
            f"> **{n_inst} kmirror instances** (`--kmirror-instances {n_inst}`: one cluster name, "
            f"{s['kmirror'].get('slots', 16)} slots shared through the consumer group): M, its CPU and RSS "
            "are for all of them together (sums over the processes)."
        )
        L.append("")
    if not complete:
        L.append("> **INCOMPLETE**: the run stopped early; only the measurements below were taken.")
        L.append("")
    if smoke:
        L.append(
            "> **Smoke run**: small data, one run, no warm-up, on a machine shared with compilers and "
            "test suites. It only proves that every measurement works end to end; do not quote these "
            "figures. The real numbers come from `scripts/bench --full` on a quiet machine."
        )
        L.append("")
    mc = meta["machine"]
    v = meta["versions"]
    L.append(
        f"Machine: {mc['cpu']}, {mc['nproc']} cores, {mc['memory']}, Linux {mc['kernel']} "
        f"(load average at start {mc['loadavg_at_start']}). Kafka {v['kafka']} (two single-node KRaft "
        f"clusters on loopback), {v['java']}, {v['rustc']}, rdkafka {v['rdkafka']} "
        f"(librdkafka {v['rdkafka_sys'].split('+')[-1]}), kmirror {v['kmirror_git']}."
    )
    L.append("")
    L.append(
        f"Data: {s['records']:,} records per scenario ({s['value_bytes']} B values, {s['key_bytes']} B keys, "
        f"semi-compressible text), {s['warmup_runs']} warm-up run(s) discarded, {s['runs']} measured run(s): "
        "median (min–max). MiB/s counts key + value bytes."
    )
    L.append("")
    if tp:
        L.append("## Throughput (drain of a preloaded topic)")
        L.append("")
        mk = "M (kmirror)" if n_inst == 1 else f"M (kmirror ×{n_inst})"
        L.append(f"| scenario | C MiB/s | P MiB/s | B MiB/s | {mk} MiB/s | MM2 MiB/s | M/B | M/MM2 |")
        L.append("|---|---|---|---|---|---|---|---|")
        for k, r in tp.items():
            L.append(
                f"| {k} | {fmt(r['C_mib_s'])} | {fmt(r['P_mib_s'])} | {fmt(r['B_mib_s'])} | {fmt(r['M_mib_s'])} | "
                f"{fmt(r['MM2_mib_s'])} | {fr(r['ratio_M_B'])} {verdict(r['ratio_M_B'], 0.70, 0.85)} | "
                f"{fr(r['ratio_M_MM2'])} {verdict(r['ratio_M_MM2'], 1.3, 2.0)} |"
            )
        if s.get("interleave"):
            L.append("")
            L.append(
                f"B and M ran alternately ({s.get('interleave_order') or 'C P B BT M'} per run), so each run's M/B compares neighbours in time "
                "(median (min–max) of the per-run ratios; each run's B, M in order):"
            )
            L.append("")
            for k, r in tp.items():
                pr = r.get("ratio_M_B_paired")
                if pr:
                    pairs = ", ".join(
                        f"{b:.0f}/{m:.0f}" for b, m in zip((r["B_mib_s"] or {}).get("runs", []), (r["M_mib_s"] or {}).get("runs", []))
                    )
                    line = f"- {k}: per-run M/B {fmt(pr, 2)} (B/M MiB/s: {pairs})"
                    if r.get("ratio_M_BT_paired"):
                        line += f"; per-run M/BT {fmt(r['ratio_M_BT_paired'], 2)}"
                    L.append(line)
        def cpu_line(k, r):
            bt = ""
            if r.get("BT_brokers_cpu_s_per_gib"):
                bt = f"BT {fmt(r['BT_brokers_cpu_s_per_gib'], 2)}; {fmt(r['BT_dst_broker_cpu_s_per_gib'], 2)} — "
            return (
                f"- {k}: B {fmt(r['B_brokers_cpu_s_per_gib'], 2)}; {fmt(r['B_dst_broker_cpu_s_per_gib'], 2)} — {bt}"
                f"kmirror {fmt(r['M_brokers_cpu_s_per_gib'], 2)}; {fmt(r['M_dst_broker_cpu_s_per_gib'], 2)}"
            )

        per_scenario(
            L,
            tp,
            "B_brokers_cpu_s_per_gib",
            "Brokers' CPU-s per GiB (source + destination; destination alone) while B ran "
            "(C and P at once), while BT ran and while kmirror drained:",
            cpu_line,
        )
        def dlog_line(k, r):
            cells = [
                f"{who} {fmt(r[f'{who}_dst_log_mib'], 0)} MiB, {fmt(r[f'{who}_dst_batch_kib'], 0)} KiB, "
                f"{fmt(r[f'{who}_dst_control_batches'], 0)}"
                for who in ("P", "B", "BT", "M")
                if r.get(f"{who}_dst_log_mib")
            ]
            return f"- {k}: " + " — ".join(cells)

        per_scenario(
            L,
            tp,
            "M_dst_log_mib",
            "Destination log per run (bytes on disk, average record batch, control batches = "
            "transaction markers; `bench/log-batches.py`):",
            dlog_line,
        )
        per_scenario(
            L,
            tp,
            "BT_mib_s",
            "**BT** is B with a transactional producer (a commit every kmirror commit interval): the "
            "bound for an exactly-once copy on this box. M/BT:",
            lambda k, r: f"- {k}: BT {fmt(r['BT_mib_s'])} MiB/s, M/BT {fr(r['ratio_M_BT'])}",
        )
        L.append("")
        L.append("| scenario | kmirror CPU-s/GiB | MM2 CPU-s/GiB | CPU ratio | kmirror cores | MM2 cores | kmirror peak RSS MiB | MM2 peak RSS MiB | brokers CPU-s/GiB (kmirror / MM2) | start-up s (kmirror / MM2) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        for k, r in tp.items():
            L.append(
                f"| {k} | {fmt(r['M_cpu_s_per_gib'], 2)} | {fmt(r['MM2_cpu_s_per_gib'], 2)} | "
                f"{fr(r['ratio_cpu_per_gib_M_MM2'])} {verdict(r['ratio_cpu_per_gib_M_MM2'], 0.5, 0.25, True)} | "
                f"{fmt(r['M_cpu_cores'], 2)} | {fmt(r['MM2_cpu_cores'], 2)} | {fmt(r['M_peak_rss_mib'], 0)} | "
                f"{fmt(r['MM2_peak_rss_mib'], 0)} | {fmt(r['M_brokers_cpu_s_per_gib'], 1)} / "
                f"{fmt(r['MM2_brokers_cpu_s_per_gib'], 1)} | {fmt(r['M_startup_s'], 1)} / {fmt(r['MM2_startup_s'], 1)} |"
            )
        L.append("")
        checks = []
        for k, r in tp.items():
            for who in ("kmirror", "mm2"):
                vr = r.get(f"verify_{who}")
                if vr is not None:
                    checks.append(
                        f"{k}/{who}: {'ok' if vr['ok'] else 'MISMATCH'} "
                        f"({vr['destination_records']:,}/{vr['source_records']:,} records)"
                    )
        fails = [f for r in tp.values() for f in r["failed_runs"]]
        if fails:
            L.append("**Failed runs** (not in the figures): " + "; ".join(fails) + ".")
            L.append("")
        if checks:
            L.append("Content check (per-partition count and ordered hash, last run): " + "; ".join(checks) + ".")
            L.append("")
    if lat:
        L.append("## End-to-end latency at 50% of MM2's drain rate")
        L.append("")
        L.append(
            "Open-loop generator on the source, checker on the destination (read_committed). "
            "*ack→visible*: destination poll time minus the source producer's ack time (≈ source append); "
            "*send→visible*: minus the scheduled send time (adds the generator's linger.ms=5 and queueing)."
        )
        L.append("")
        L.append("| scenario | records/s | kmirror p50 ms | kmirror p99 ms | MM2 p50 ms | MM2 p99 ms | p99 ratio | kmirror send→visible p50/p99 | MM2 send→visible p50/p99 | missing (k/MM2) |")
        L.append("|---|---|---|---|---|---|---|---|---|---|")
        b = "source_ack_to_visible"
        i = "intended_send_to_visible"
        for k, r in lat.items():
            L.append(
                f"| {k} | {r.get('offered_records_s', 0):,.0f} | {fmt(r.get(f'kmirror_{b}_p50_ms'))} | "
                f"{fmt(r.get(f'kmirror_{b}_p99_ms'))} | {fmt(r.get(f'mm2_{b}_p50_ms'))} | {fmt(r.get(f'mm2_{b}_p99_ms'))} | "
                f"{fr(r.get('ratio_p99_kmirror_mm2'))} {verdict(r.get('ratio_p99_kmirror_mm2'), 1.0, 0.5, True)} | "
                f"{p50_p99(r, 'kmirror', i)} | {p50_p99(r, 'mm2', i)} | "
                f"{r.get('kmirror_missing', '–')} / {r.get('mm2_missing', '–')} |"
            )
        L.append("")
        eos = {k: r for k, r in lat.items() if r.get("mm2eos_source_ack_to_visible_p99_ms")}
        if eos:
            L.append(
                "At the same guarantee: MM2 with exactly-once delivery (`exactly.once.source.support = enabled`, "
                "transactional producer, a transaction every 250 ms per task, like kmirror), same rate and checker."
            )
            L.append("")
            L.append("| scenario | kmirror p50 / p99 ms | MM2 exactly-once p50 / p99 ms | p99 ratio | MM2 exactly-once send→visible p50/p99 | missing / duplicates (MM2 EOS) |")
            L.append("|---|---|---|---|---|---|")
            for k, r in eos.items():
                L.append(
                    f"| {k} | {p50_p99(r, 'kmirror', b)} | {p50_p99(r, 'mm2eos', b)} | "
                    f"{fr(r.get('ratio_p99_kmirror_mm2eos'))} {verdict(r.get('ratio_p99_kmirror_mm2eos'), 1.0, 0.5, True)} | "
                    f"{p50_p99(r, 'mm2eos', i)} | "
                    f"{r.get('mm2eos_missing', '–')} / {r.get('mm2eos_duplicates', '–')} |"
                )
            L.append("")
    if idl:
        L.append("## Memory per idle partition")
        L.append("")
        L.append("| mirror | partitions | RSS MiB | CPU % of a core | JVM heap used after GC MiB |")
        L.append("|---|---|---|---|---|")
        for who, d in idl.items():
            for st in d["steps"]:
                heap = st.get("heap_used_kib")
                L.append(
                    f"| {who} | {st['partitions']:,} | {st['rss_kib'] / 1024:.1f} | {st['cpu_pct']:.1f} | "
                    f"{'–' if heap is None else f'{heap / 1024:.1f}'} |"
                )
        L.append("")
        for who, d in idl.items():
            sl = d["rss_slope_kib_per_partition"]
            hs = d["heap_slope_kib_per_partition"]
            if who == "kmirror":
                L.append(f"- kmirror: RSS slope {fr(sl, 1)} KiB per idle partition {verdict(sl, 64, 16, True)}")
            else:
                L.append(
                    f"- MM2: live-heap slope {fr(hs, 1)} KiB per idle partition (heap after a full GC; "
                    f"JVM RSS follows heap sizing, not partitions: RSS slope {fr(sl, 1)} KiB)"
                )
        L.append("")
    if fo:
        L.append("## Failover (kmirror `topics:stop`)")
        L.append("")
        if s.get("failover_after") == "started":
            L.append("Failed over as soon as every partition was MIRRORING, during the catch-up of the start.")
        else:
            L.append("Failed over once every partition had mirrored its history (caught up).")
        L.append("")
        L.append("| partitions | topics | stop call s | all STOPPED s | lag before (records) | background load records/s |")
        L.append("|---|---|---|---|---|---|")
        for k, r in fo.items():
            parts, _, rate = k.partition("-")
            if r.get("topics") is None:
                L.append(f"| {int(parts):,} | – | FAILED | FAILED | – | {int(rate or 0):,} |")
                continue
            L.append(
                f"| {int(parts):,} | {r['topics']} | {fmt(r['stop_call_s'], 2)} | {fmt(r['all_stopped_s'], 2)} | "
                f"{fmt(r['lag_before_records'], 0)} | {r['load_records_s']:,} |"
            )
        L.append("")
        for k, r in fo.items():
            for f, d in zip(r.get("failed_runs", []), r.get("failed_detail", [])):
                errs = sorted({t["error"]["detail"] for t in (d.get("failed_topics") or []) if t.get("error")})
                errs += [f"{e['error']} ({len(e['topics'])} topics, at topics:start)" for e in (d.get("start_errors") or [])]
                L.append(
                    f"- **Failed**: {f} (stop call returned after {d.get('stop_call_s')} s; partition states "
                    f"afterwards {json.dumps(d.get('states_after'))}; topic errors: {'; '.join(errs) or 'none'})"
                )
        L.append("")
        L.append("MM2 has no failover operation (stop MM2, move the clients): no MM2 column.")
        L.append("")
    if tk:
        L.append("## Takeover after `kill -9` (several instances)")
        L.append("")
        for k, r in tk.items():
            st = r["session_timeout_ms"] / 1000
            L.append(
                f"{r['instances']} instances, a {int(k)}-partition topic under {r['load_records_s']:,} records/s, "
                f"session timeout {st:g} s; one instance killed per run (SIGKILL) and restarted with the same id "
                f"afterwards. *slots covered*: until the survivors' own slots (`GET /api/v1/instances`) cover "
                f"every slot; *advancing*: until every partition of the killed instance's slots has advanced its "
                f"`mirrored_source_offset`. Target: ≤ session timeout + 5 s = {st + 5:g} s."
            )
            L.append("")
            L.append("| | median s | min–max s | target |")
            L.append("|---|---|---|---|")
            for name, key in (("slots covered", "slots_covered_s"), ("partitions advancing", "partitions_advancing_s")):
                x = r[key]
                ok = "–" if x is None else ("met" if x["median"] <= st + 5 else "MISS")
                mm = "–" if x is None else f"{x['min']:.2f}–{x['max']:.2f}"
                L.append(f"| {name} | {'–' if x is None else format(x['median'], '.2f')} | {mm} | ≤ {st + 5:g} s: {ok} |")
            L.append("")
            L.append("| run | killed | its slots | its partitions | slots covered s | advancing s |")
            L.append("|---|---|---|---|---|---|")
            for x in r["runs"]:
                L.append(
                    f"| {x['run']} | {x['killed']} | {len(x['killed_slots'] or [])} | {x['killed_partitions']} | "
                    f"{fr(x['slots_covered_s'])} | {fr(x['partitions_advancing_s'])}"
                    + (f" (**{x['error']}**)" if x.get("error") else "")
                    + " |"
                )
            L.append("")
    if rl:
        L.append("## Rolling restart (several instances)")
        L.append("")
        for k, r in rl.items():
            v = r["verify"] or {}
            L.append(
                f"3 instances (default session timeout), a {int(k)}-partition topic under {r['load_records_s']:,} "
                f"records/s; each instance in turn gets SIGTERM and is started again with the same id "
                f"({r['restarts']} restarts). *exited*: SIGTERM until the process ended; *same slots*: until it "
                f"owned its slots again; *advancing*: until every partition of its slots advanced beyond where the "
                f"stopped process left it (read 0.5 s after it exited). Restarts during which another instance's slots changed: "
                f"**{r['restarts_moving_other_slots']}**. Content afterwards: "
                + (f"**{'ok' if v.get('ok') else 'MISMATCH'}** ({v.get('source_records')} source / "
                   f"{v.get('destination_records')} destination records)" if v else "not checked")
                + "."
            )
            L.append("")
            L.append("| | median s | min–max s |")
            L.append("|---|---|---|")
            for name, key in (("exited", "exited_s"), ("same slots again", "same_slots_again_s"),
                              ("partitions advancing", "partitions_advancing_s")):
                x = r[key]
                L.append(f"| {name} | – | – |" if x is None else f"| {name} | {x['median']:.2f} | {x['min']:.2f}–{x['max']:.2f} |")
            L.append("")
            L.append("| restart | instance | slots | partitions | exited s | same slots s | advancing s | others moved | survivors' rebalances |")
            L.append("|---|---|---|---|---|---|---|---|---|")
            for x in r["runs"]:
                L.append(
                    f"| {x['restart']} | {x['restarted']} | {len(x['slots'] or [])} | {x['partitions']} | "
                    f"{fr(x['exited_s'])} | {fr(x['same_slots_again_s'])} | {fr(x['partitions_advancing_s'])} | "
                    f"{x['other_slots_moved']} | {x['survivors_rebalances_before']} → {x['survivors_rebalances_after']}"
                    + (f" (**{x['error']}**)" if x.get("error") else "")
                    + " |"
                )
            L.append("")
    if fb:
        L.extend(failback_md(fb))
    L.append("## Settings")
    L.append("")
    L.append(f"- kmirror: {json.dumps(s['kmirror'])}")
    L.append(f"- MM2 JVM: `{s['mm2']['jvm']}`; producer codec: {s['mm2']['codec']}; properties:")
    L.append("")
    L.append("```properties")
    L.append(s["mm2"]["properties"])
    L.append("```")
    if s["mm2"].get("eos_extra_properties") and any(r.get("mm2eos_source_ack_to_visible_p99_ms") for r in (lat or {}).values()):
        L.append("- MM2 exactly-once (latency only): the properties above plus")
        L.append("")
        L.append("```properties")
        L.append(s["mm2"]["eos_extra_properties"])
        L.append("```")
    # Absent (runs before 2026-12-02): restarted, like --restart-dest.
    restart = s["brokers"].get("mirror_runs_restart_destination")
    if restart is False:
        dest = "; mirror runs on the same warm destination broker as B and BT (its topics deleted before each run)"
    else:
        flag = " (--restart-dest)" if restart else ""
        dest = f"; each mirror run on a freshly restarted (cold) destination broker{flag}, B and BT on a warm one"
    L.append(f"- Brokers: {s['brokers']['config']}; JVM `{s['brokers']['jvm']}`{dest}")
    L.append(f"- Baselines: consumer: {s['baselines']['consumer']}; producer: {s['baselines']['producer']}")
    L.append(
        f"- Latency: {s['latency_warmup_secs']} s discarded + {s['latency_secs']} s measured per run; "
        f"idle steps {s['idle_steps']}; failover {s['failover_partitions']:,} partitions under "
        f"{s['failover_load_records_s']} records/s of background load, timeout {s.get('failover_timeout_s', '–')} s."
    )
    L.append("")
    L.append(
        "Targets (issue 8): M/B ≥ 0.70 (goal 0.85); M/MM2 ≥ 1.3 (goal 2.0); kmirror CPU per GiB ≤ 0.5× MM2's "
        "(goal 0.25×); p99 ≤ MM2's (goal 0.5×); idle RSS ≤ 64 KiB/partition (goal 16). "
        "`pass`/`goal`/`MISS` mark each ratio."
    )
    L.append("")
    L.append("Reproduce: `scripts/bench --full` (see the header of `scripts/bench`).")
    return "\n".join(L) + "\n"


# ----- docs/performance.md ---------------------------------------------------------------------

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# Which result file feeds which section of docs/performance.md (newest measurement of each kind).
DOCS = {
    # The latest run of all four scenarios with MirrorMaker 2, latency included.
    "vs_mm2": "20261202T084100Z-s16-1inst",
    # The latest sets of all four scenarios against the baselines, with today's defaults.
    "sets": ["20261202T121042Z-s17-1inst-a", "20261202T122203Z-s17-1inst-b", "20261202T123331Z-s17-1inst-c"],
    # lz4 with 64 partitions, one instance: the scenario closest to its bound, repeated.
    "lz4_64": [
        "20261204T023731Z-s28-lz464-c1000-1", "20261204T025108Z-s28-lz464-c1000-2",
        "20261204T025722Z-s28-lz464-c1000-3",
    ],
    "two_instances": "20261202T060633Z-s15-2inst",
    "one_path": "20261203T085312Z-s23-onepath",
    "three_vs_one": ["20261203T090513Z-s23-1inst", "20261203T085823Z-s23-3inst"],
    "failover": ["20261201T203959Z-s12-failover10k-final", "20261201T210531Z-s12-failover10k-load5000",
                 "20261203T153435Z-s25-failover10k-main"],
    "takeover": ["20261203T181548Z-s26-takeover", "20261201T121106Z-i17-takeover-3inst-s10"],
    "rolling": "20261203T084658Z-s23-rolling",
    "failback": "20261201T145157Z-failback-2GiB-3runs",
    "idle": ["20261203T042858Z-s21-idle10k-plain"],
    "ui": "20261201T152337Z-ui10k",
    "chaos": ["20261201T023047Z-chaos", "20261201T025459Z-chaos"],
}

SCENARIO_NAMES = {"none-8": "none, 8 partitions", "none-64": "none, 64 partitions", "lz4-8": "lz4, 8 partitions",
                  "lz4-64": "lz4, 64 partitions", "none-1": "none, 1 partition", "lz4-1": "lz4, 1 partition"}


def result(name):
    return load(os.path.join(RESULTS, name + ".json"))


def link(name, ext=".md"):
    """A link from docs/ to a result file."""
    return f"[`{name}{ext}`](../bench/results/{name}{ext})"


def med(s, digits=1, scale=1.0):
    return "–" if not s else f"{s['median'] * scale:.{digits}f}"


def rng(s, digits=2):
    """`0.90 (0.83–1.59)`: median and the range of the runs."""
    if not s:
        return "–"
    if s["n"] == 1:
        return f"{s['median']:.{digits}f}"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def run_facts(d):
    """One line on how a result file was measured."""
    m, st = d["meta"], d["meta"]["settings"]
    km = st.get("kmirror", {})
    gib = st["records"] * st["value_bytes"] / 2**30
    parts = [f"{m['started_utc'][:8][:4]}-{m['started_utc'][4:6]}-{m['started_utc'][6:8]}",
             f"kmirror {m['versions']['kmirror_git'].split()[0]}"]
    if d.get("throughput") and st.get("warmup_runs") is not None:
        parts.append(f"{gib:g} GiB per scenario, {st['warmup_runs']} warm-up + {st['runs']} runs")
    if km.get("instances"):
        parts.append(f"{km['instances']} instance{'s' if km['instances'] > 1 else ''}, {km.get('slots', 16)} slots")
    if km.get("commit_interval_ms"):
        parts.append(f"commit interval {km['commit_interval_ms']} ms")
    mach = m.get("machine", {})
    if mach:
        parts.append(f"{mach.get('nproc')} cores, {mach.get('memory')}")
    return ", ".join(parts)


def verified(d):
    oks = []
    for r in d["throughput"].values():
        for who in ("kmirror", "mm2"):
            v = r.get(f"verify_{who}")
            if v is not None:
                oks.append(v["ok"])
    if not oks:
        return ""
    return "Every copy was checked record by record against the source: " + ("equal." if all(oks) else "**MISMATCH**.")


def docs_vs_mm2(L):
    name = DOCS["vs_mm2"]
    d = result(name)
    tp, lat = d["throughput"], d.get("latency") or {}
    L += ["## kmirror and MirrorMaker 2", "",
          f"The latest run of the four scenarios with both mirrors ({run_facts(d)}; {link(name)}). "
          "MiB/s are medians of the runs with their range; *kmirror / B* and *kmirror / BT* are the medians of every "
          "kmirror run's ratio to the baseline run just before it (see [Method](#method)).", "",
          "| scenario | kmirror MiB/s | MM2 MiB/s | kmirror / MM2 | kmirror / B | kmirror / BT | CPU-s per GiB (kmirror / MM2) | peak RSS MiB (kmirror / MM2) |",
          "|---|---|---|---|---|---|---|---|"]
    for k, r in tp.items():
        L.append(
            f"| {SCENARIO_NAMES.get(k, k)} | {fmt(r['M_mib_s'])} | {fmt(r['MM2_mib_s'])} | {fr(r['ratio_M_MM2'])} | "
            f"{rng(r['ratio_M_B_paired'])} | {rng(r['ratio_M_BT_paired'])} | {med(r['M_cpu_s_per_gib'], 2)} / "
            f"{med(r['MM2_cpu_s_per_gib'], 2)} | {med(r['M_peak_rss_mib'], 0)} / {med(r['MM2_peak_rss_mib'], 0)} |")
    L += ["", verified(d) + " kmirror copies exactly once (transactions); MirrorMaker 2 at least once.", ""]
    if lat:
        b = "source_ack_to_visible"
        L += ["End-to-end latency in the same run (source append → readable on the destination with "
              f"`read_committed`), open-loop load at 50 % of MirrorMaker 2's drain rate, {d['meta']['settings']['runs']} × "
              f"{d['meta']['settings']['latency_secs']} s:", "",
              "| scenario | records/s | kmirror p50 / p99 ms | MM2 p50 / p99 ms | p99 kmirror / MM2 |", "|---|---|---|---|---|"]
        for k, r in lat.items():
            L.append(f"| {SCENARIO_NAMES.get(k, k)} | {r['offered_records_s']:,.0f} | {med(r.get(f'kmirror_{b}_p50_ms'), 0)} / "
                     f"{med(r.get(f'kmirror_{b}_p99_ms'), 0)} | {med(r.get(f'mm2_{b}_p50_ms'), 0)} / "
                     f"{med(r.get(f'mm2_{b}_p99_ms'), 0)} | {fr(r.get('ratio_p99_kmirror_mm2'))} |")
        L.append("")


def docs_sets(L):
    names = DOCS["sets"]
    ds = [result(n) for n in names]
    L += ["## Throughput against the baselines", "",
          f"Three sets back to back with the current defaults ({run_facts(ds[0])}), B / BT / kmirror interleaved run "
          "by run. Each cell: the median of every kmirror run's ratio to the baseline run just before it, with the "
          "range. Sets: " + ", ".join(f"{chr(97 + i)} {link(n)}" for i, n in enumerate(names)) + ".", "",
          "| scenario | " + " | ".join(f"kmirror / B, set {chr(97 + i)}" for i in range(len(ds)))
          + " | kmirror / BT (" + " / ".join(chr(97 + i) for i in range(len(ds))) + ") | kmirror cores | peak RSS MiB |",
          "|---|" + "---|" * (len(ds) + 3)]
    for k in ds[0]["throughput"]:
        rows = [d["throughput"][k] for d in ds]
        cores = [r["M_cpu_cores"]["median"] for r in rows]
        rss = [r["M_peak_rss_mib"]["median"] for r in rows]
        L.append(f"| {SCENARIO_NAMES.get(k, k)} | " + " | ".join(rng(r["ratio_M_B_paired"]) for r in rows)
                 + " | " + " / ".join(med(r["ratio_M_BT_paired"], 2) for r in rows)
                 + f" | {min(cores):.2f}–{max(cores):.2f} | {min(rss):.0f}–{max(rss):.0f} |")
    L += ["", " ".join(verified(d) for d in ds[:1]), ""]
    names = DOCS["lz4_64"]
    ds = [result(n) for n in names]
    L += [f"lz4 with 64 partitions is the scenario where kmirror is held by its own CPU on two cores (it also runs "
          f"both brokers and the baselines). Repeated sets ({run_facts(ds[0])}):", "",
          "| set | kmirror MiB/s | kmirror / B | kmirror / BT | BT / B | CPU-s per GiB | result file |", "|---|---|---|---|---|---|---|"]
    for i, (n, d) in enumerate(zip(names, ds)):
        r = d["throughput"]["lz4-64"]
        L.append(f"| {i + 1} | {fmt(r['M_mib_s'])} | {rng(r['ratio_M_B_paired'])} | {rng(r['ratio_M_BT_paired'])} | "
                 f"{fr(ratio(r['BT_mib_s'], r['B_mib_s']))} | {med(r['M_cpu_s_per_gib'], 2)} | {link(n)} |")
    L.append("")


def docs_instances(L):
    name = DOCS["two_instances"]
    d = result(name)
    L += ["## Several instances", "",
          f"Two instances sharing the 16 slots ({run_facts(d)}; {link(name)}):", "",
          "| scenario | kmirror MiB/s | kmirror / B | kmirror / BT | CPU-s per GiB (both processes) | peak RSS MiB (sum) |",
          "|---|---|---|---|---|---|"]
    for k, r in d["throughput"].items():
        L.append(f"| {SCENARIO_NAMES.get(k, k)} | {fmt(r['M_mib_s'])} | {rng(r['ratio_M_B_paired'])} | "
                 f"{rng(r['ratio_M_BT_paired'])} | {med(r['M_cpu_s_per_gib'], 2)} | {med(r['M_peak_rss_mib'], 0)} |")
    L.append("")
    one, three = (result(n) for n in DOCS["three_vs_one"])
    L += [f"Three instances against one on the same two cores, minutes apart ({run_facts(three)}; "
          f"{link(DOCS['three_vs_one'][1])}, {link(DOCS['three_vs_one'][0])}): on one small machine extra instances "
          "only add clients and processes; they pay off with cores to run on.", "",
          "| scenario | 1 instance MiB/s | 3 instances MiB/s | CPU-s per GiB (1 / 3) | peak RSS MiB (1 / 3) |",
          "|---|---|---|---|---|"]
    for k, r1 in one["throughput"].items():
        r3 = three["throughput"][k]
        L.append(f"| {SCENARIO_NAMES.get(k, k)} | {fmt(r1['M_mib_s'])} | {fmt(r3['M_mib_s'])} | "
                 f"{med(r1['M_cpu_s_per_gib'], 1)} / {med(r3['M_cpu_s_per_gib'], 1)} | "
                 f"{med(r1['M_peak_rss_mib'], 0)} / {med(r3['M_peak_rss_mib'], 0)} |")
    L.append("")
    name = DOCS["one_path"]
    d = result(name)
    L += [f"Sizing: one busy slot data path (a one-partition topic; {run_facts(d)}; {link(name)}):", "",
          "| scenario | MiB/s | cores | CPU-s per GiB | MiB/s per core | peak RSS MiB |", "|---|---|---|---|---|---|"]
    for k, r in d["throughput"].items():
        per_core = r["M_mib_s"]["median"] / r["M_cpu_cores"]["median"]
        L.append(f"| {SCENARIO_NAMES.get(k, k)} | {fmt(r['M_mib_s'])} | {med(r['M_cpu_cores'], 2)} | "
                 f"{med(r['M_cpu_s_per_gib'], 1)} | {per_core:.0f} | {med(r['M_peak_rss_mib'], 0)} |")
    L.append("")


def docs_operations(L):
    L += ["## Failover, takeover, rolling restart, failback", "",
          "Failover of 10,000 partitions (100 topics of 100) in one `topics:stop` after the mirror caught up, one "
          "instance with 16 slots: from the call until the API shows every partition STOPPED.", "",
          "| load records/s | stop call s | all STOPPED s | runs | kmirror | result file |", "|---|---|---|---|---|---|"]
    for n in DOCS["failover"]:
        d = result(n)
        for k, r in d["failover"].items():
            L.append(f"| {r['load_records_s']:,} | {rng(r['stop_call_s'])} | {rng(r['all_stopped_s'])} | "
                     f"{r['all_stopped_s']['n']} | {d['meta']['versions']['kmirror_git'].split()[0]} | {link(n)} |")
    L += ["", "Takeover after `kill -9` of one of three instances (a 64-partition topic under load; 5 runs, each instance "
          "killed in turn): until the survivors own every slot, and until every partition of the killed instance "
          "advances again.", "",
          "| session timeout | slots covered s | partitions advancing s | kmirror | result file |", "|---|---|---|---|---|"]
    for n in DOCS["takeover"]:
        d = result(n)
        for k, r in d["takeover"].items():
            L.append(f"| {r['session_timeout_ms'] / 1000:g} s | {rng(r['slots_covered_s'])} | "
                     f"{rng(r['partitions_advancing_s'])} | {d['meta']['versions']['kmirror_git'].split()[0]} | {link(n)} |")
    name = DOCS["rolling"]
    d = result(name)
    r = next(iter(d["rolling"].values()))
    v = r["verify"] or {}
    L += ["", f"Rolling restart ({link(name)}): 3 instances with the default session timeout, a 64-partition topic "
          f"under {r['load_records_s']:,} records/s; each instance in turn gets SIGTERM and is started again with the "
          f"same `--instance-id` ({r['restarts']} restarts). Restarts during which another instance's slots moved: "
          f"**{r['restarts_moving_other_slots']}**; destination equal to the source afterwards: "
          f"{'yes' if v.get('ok') else 'NO'} ({v.get('source_records', 0):,} records).", "",
          "| | median s | min–max s |", "|---|---|---|"]
    for label, key in (("SIGTERM until the process exited", "exited_s"),
                       ("until it owned the same slots again", "same_slots_again_s"),
                       ("until its partitions advanced again", "partitions_advancing_s")):
        x = r[key]
        L.append(f"| {label} | {x['median']:.2f} | {x['min']:.2f}–{x['max']:.2f} |")
    name = DOCS["failback"]
    d = result(name)
    fb = d["failback"]
    first = next(iter(fb.values()))
    gib = first["topic_records"] * first["value_bytes"] / 2**30
    L += ["", f"Failback of a {gib:.0f} GiB topic ({first['topic_records']:,} records of 1 KiB, {first['partitions']} "
          f"partitions) after {first['new_records_on_b']:,} new records (1 %) on the new primary ({link(name)}): from "
          "`topics:start` until every partition reached the other side's end.", "",
          "| mode | failback s | records copied | equal afterwards |", "|---|---|---|---|"]
    for r in fb.values():
        mode = "incremental (the lineage)" if r["mode"] == "incremental" else "`truncation: resync` (full copy)"
        L.append(f"| {mode} | {rng(r['failback_s'])} | {int(r['records_copied']['median']):,} | "
                 f"{'yes' if r['verified'] and all(r['verified']) else '–'} |")
    L.append("")


def docs_idle_ui(L):
    L += ["## Idle cost and the dashboard at 10,000 partitions", ""]
    for n in DOCS["idle"]:
        d = result(n)
        steps = d["idle_memory"]["kmirror"]["steps"]
        L += [f"Idle mirrored partitions, one instance with 16 slots ({run_facts(d)}; {link(n)}):", "",
              "| partitions | RSS MiB | CPU % of a core |", "|---|---|---|"]
        for st in steps:
            L.append(f"| {st['partitions']:,} | {st['rss_kib'] / 1024:.0f} | {st['cpu_pct']:.1f} |")
        L.append("")
    name = DOCS["ui"]
    u = result(name)
    st = u["meta"]["settings"]
    L += [f"The dashboard and API with one mirror of {st['topics']} topics × {st['partitions'] // st['topics']} "
          f"partitions, all MIRRORING, and {len(st['tabs'])} headless Chromium tabs refreshing their live regions "
          f"every 2 s; {st['samples']} sequential requests per page after {st['warmup']} discarded ({link(name)}). "
          "Server-side p99: the `kmirror_http_request_duration_seconds` bucket that holds 99 % of the requests.", "",
          "| page / read | path | p50 / p99 ms | server-side p99 ms |", "|---|---|---|---|"]
    for e in u["latency"]["endpoints"]:
        srv = e.get("server") or {}
        L.append(f"| {e['name']} | `{e['path']}` | {e['p50_ms']} / {e['p99_ms']} | ≤ {srv.get('p99_ms_at_most', '–')} |")
    cpu = u["cpu"]
    per = cpu["per_refresh"]
    L += ["", f"The tabs' live refreshes cost the server {per['tokio_cpu_ms_per_request']} ms of CPU each, "
          f"**{cpu['tabs_estimate_pct']} % of a core** for the {len(st['tabs'])} tabs.", ""]


def chaos_table(name):
    """The check | result table of a scripts/chaos report (Markdown only)."""
    rows = {}
    with open(os.path.join(RESULTS, name + ".md")) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|") and len(cells) == 2 and cells[0] not in ("check", "---"):
                rows[cells[0]] = cells[1]
    return rows


def docs_chaos(L):
    names = DOCS["chaos"]
    tables = [chaos_table(n) for n in names]
    keys = [k for k in tables[0] if k != "mode"]
    L += ["## Exactly once under faults", "",
          "`scripts/chaos` (full run, debug build) mirrors a 4-partition topic under transactional load with aborts on "
          "purpose while it kills kmirror, restarts and freezes brokers, then compares both clusters record for record "
          "(see [architecture.md](architecture.md#exactly-once-under-faults)).", "",
          "| check | " + " | ".join(link(n) for n in names) + " |", "|---|" + "---|" * len(names)]
    for k in keys:
        L.append(f"| {k} | " + " | ".join(t.get(k, "–") for t in tables) + " |")
    L.append("")


def summary_lines():
    """The few lines the README and the top of docs/performance.md share (links from the repo root)."""
    name = DOCS["vs_mm2"]
    d = result(name)
    tp, lat = d["throughput"], d.get("latency") or {}
    span = lambda xs, digits=2: f"{min(xs):.{digits}f}–{max(xs):.{digits}f}"
    thr = [r["ratio_M_MM2"] for r in tp.values()]
    cpu = [r["ratio_cpu_per_gib_M_MM2"] for r in tp.values()]
    rss = [r["M_peak_rss_mib"]["median"] / r["MM2_peak_rss_mib"]["median"] for r in tp.values()]
    vs_b = [r["ratio_M_B_paired"]["median"] for r in tp.values()]
    b = "source_ack_to_visible"
    lat_cells = [f"{SCENARIO_NAMES.get(k, k)}: kmirror {med(r.get(f'kmirror_{b}_p50_ms'), 0)} / "
                 f"{med(r.get(f'kmirror_{b}_p99_ms'), 0)} ms, MM2 {med(r.get(f'mm2_{b}_p50_ms'), 0)} / "
                 f"{med(r.get(f'mm2_{b}_p99_ms'), 0)} ms" for k, r in lat.items()]
    fo = result(DOCS["failover"][0])["failover"]
    fo_load = result(DOCS["failover"][1])["failover"]
    tk = next(iter(result(DOCS["takeover"][0])["takeover"].values()))
    m = d["meta"]
    lines = [
        f"- **Throughput** (1 KiB records, none/lz4, 8/64 partitions, one instance on {m['machine']['nproc']} cores): "
        f"kmirror copies **{span(thr, 1)}×** MirrorMaker 2's MiB/s at **{span(cpu)}×** its CPU per GiB and "
        f"{span(rss, 1)}× its peak memory, exactly once (MirrorMaker 2: at least once), at {span(vs_b)}× "
        "the rate of a plain consumer and producer running side by side.",
        "- **Latency** (append on the source → readable on the destination, p50 / p99, at half MirrorMaker 2's "
        "drain rate): " + "; ".join(lat_cells) + ". Transactions make each record wait for a commit.",
        f"- **Failover** of 10,000 partitions in one call: {med(next(iter(fo.values()))['all_stopped_s'], 2)} s "
        f"({med(next(iter(fo_load.values()))['all_stopped_s'], 2)} s under load); **takeover** after `kill -9` of "
        f"one of three instances: {med(tk['partitions_advancing_s'], 1)} s with a "
        f"{tk['session_timeout_ms'] / 1000:g} s session timeout.",
    ]
    return lines


DOCS_INTRO = """# Performance

<!-- Generated by `python3 bench/report.py --docs > docs/performance.md` from the result files in
bench/results (the DOCS table in bench/report.py names them). Do not edit by hand: change the
generator or point it at newer results, and run it again. -->

This page is generated by `python3 bench/report.py --docs` from the benchmark's result files in
[`bench/results`](../bench/results); every table names the file its figures come from. How to run
the benchmarks and what each run does in detail: [`bench/README.md`](../bench/README.md).

- [Summary](#summary)
- [Method](#method)
- [kmirror and MirrorMaker 2](#kmirror-and-mirrormaker-2)
- [Throughput against the baselines](#throughput-against-the-baselines)
- [Why kmirror's latency stays above MirrorMaker 2's](#why-kmirrors-latency-stays-above-mirrormaker-2s)
- [Several instances](#several-instances)
- [Failover, takeover, rolling restart, failback](#failover-takeover-rolling-restart-failback)
- [Idle cost and the dashboard at 10,000 partitions](#idle-cost-and-the-dashboard-at-10000-partitions)
- [Exactly once under faults](#exactly-once-under-faults)
- [Reproduce](#reproduce)
"""

DOCS_METHOD = """## Method

`scripts/bench` runs its own two single-node Kafka 4.1.1 clusters on one machine (2 cores,
24 GiB) and measures, per scenario (1 KiB records, codec none or lz4, 8 or 64 partitions):

| figure | what it is |
|---|---|
| **C** | a plain rdkafka consumer draining the source topic (kmirror's consumer settings) |
| **P** | a plain idempotent rdkafka producer writing the same records to the destination |
| **B** | C and P at the same time: the bound for any client-side mirror on this box |
| **BT** | B with a transactional producer committing once per kmirror commit interval: the bound for an exactly-once copy |
| **kmirror** | a fresh `kmirror serve` per run draining the preloaded topic, started through the REST API |
| **MM2** | Apache Kafka's MirrorMaker 2 (dedicated mode, identity replication policy, 4 tasks, idempotent `acks=all` producer; settings in `bench/README.md`) |

Runs of B, BT and kmirror alternate (`--interleave`), because the box's speed moves by up to 2×
within minutes: compare ratios within one run, not MiB/s across runs. After the last run of each
mirror, both clusters are compared record by record (count and ordered hash per partition).
Throughput is MiB/s of key and value bytes; CPU is the mirror process's user + system time per
GiB; peak RSS is `VmHWM`.
"""

DOCS_LATENCY = """## Why kmirror's latency stays above MirrorMaker 2's

A `read_committed` consumer of the destination sees a record only once kmirror's transaction
commits: that is what makes the copy exactly once. While a mirror keeps up with its source,
transactions end at most every `early_commit_interval_ms` (50 ms), then flush and commit.
MirrorMaker 2's producer is at least once: a record is readable one produce after it was read.
With exactly-once delivery turned on, MirrorMaker 2 could not keep up with the same rate
(`bench/README.md` has those runs). A smaller `early_commit_interval_ms` lowers the median at the
cost of more transactions and a larger offset map
([configuration.md](configuration.md#engine)).
"""

DOCS_REPRODUCE = """## Reproduce

```sh
scripts/bench --full                           # everything (a few hours; nothing else running)
scripts/bench --full --only baseline,kmirror,mm2   # throughput only
scripts/bench --help                           # every option
scripts/bench-ui                               # the dashboard at 10,000 partitions (~10 min)
scripts/chaos                                  # exactly once under faults (~5 min)
```

Each run writes `bench/results/<time>-<label>.md` and `.json`; to publish a new run here, name
its file in `DOCS` in `bench/report.py` and run `python3 bench/report.py --docs > docs/performance.md`.
"""


def docs():
    L = [DOCS_INTRO, "## Summary", "", f"From {link(DOCS['vs_mm2'])} and the sections below:", ""]
    L += summary_lines() + ["", DOCS_METHOD]
    docs_vs_mm2(L)
    docs_sets(L)
    L.append(DOCS_LATENCY)
    docs_instances(L)
    docs_operations(L)
    docs_idle_ui(L)
    docs_chaos(L)
    L.append(DOCS_REPRODUCE)
    return "\n".join(L).rstrip("\n") + "\n"


def main():
    if sys.argv[1:] == ["--docs"]:
        sys.stdout.write(docs())
        return
    if sys.argv[1:] == ["--readme-summary"]:
        sys.stdout.write("\n".join(summary_lines()) + "\n")
        return
    raw, out = sys.argv[1], sys.argv[2]
    meta = load(os.path.join(raw, "meta.json"))
    tp = throughput(raw)
    lat = latency(raw)
    idl = idle(raw)
    fo = failover(raw)
    tk = takeover(raw)
    fb = failback(raw)
    rl = rolling(raw)
    summary = {"meta": meta, "throughput": tp, "latency": lat, "idle_memory": idl, "failover": fo, "takeover": tk,
               "failback": fb, "rolling": rl,
               "raw_dir": os.path.basename(raw)}
    complete = os.path.exists(os.path.join(raw, "complete"))
    summary["complete"] = complete
    with open(out + ".json", "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")
    with open(out + ".md", "w") as f:
        f.write(markdown(meta, tp, lat, idl, fo, complete, tk, fb, rl))


if __name__ == "__main__":
    main()
