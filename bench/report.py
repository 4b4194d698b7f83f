#!/usr/bin/env python3
"""Summarise one scripts/bench run: raw per-run JSON files -> <out>.json and <out>.md.

Usage: report.py RAW_DIR OUT_PREFIX

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


def main():
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
