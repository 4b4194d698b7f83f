#!/bin/bash
# bench/trickle.sh BIN TAG [engine-line...] — kmirror's CPU under a light steady load, every slot's
# data path busy. On the test rig (`eval "$(scripts/kafka-rig env)"`): TOPICS (5) source topics
# of NP (100) partitions, one `BIN serve` (SP state partitions = slots, default 16, port 18555, its
# own state topic), a mirror of them started at once and an open-loop load of RATE (1000)
# records/s of 1 KiB over all their partitions from then on. After 60 s: kmirror's CPU and RSS over
# 30 s, then per thread name (digits folded) its CPU and context switches over 10 s, then with
# PERF=1 a 15 s `perf record -g`. SOURCE_PROPS: the mirror's source properties as a JSON object. Extra arguments are lines of kmirror's [engine] section; a
# line `[destination.properties]` starts that section for the lines after it. Writes to
# /tmp/kmirror-trickle/TAG, prints the figures, deletes its topics and state topic.
set -uo pipefail
BIN=$1 TAG=$2
shift 2
K=${KBENCH:-target-bench/release/examples/kbench}
SRC=${KMIRROR_TEST_SOURCE_BOOTSTRAP:-127.0.0.1:19092} DST=${KMIRROR_TEST_DESTINATION_BOOTSTRAP:-127.0.0.1:29092}
RATE=${RATE:-1000} NP=${NP:-100} SP=${SP:-16} TOPICS=${TOPICS:-5} PORT=${PORT:-18555}
D=/tmp/kmirror-trickle/$TAG M=trickle-$TAG
rm -rf "$D" && mkdir -p "$D"
names=$(for i in $(seq 1 "$TOPICS"); do printf '%s-%s,' "$M" "$i"; done)
names=${names%,}
"$K" topics create --bootstrap "$SRC" --names "$names" --partitions "$NP" >/dev/null || exit 1
{
  printf '[destination]\nbootstrap_servers = "%s"\n[auth]\nno_auth = true\n[engine]\n' "$DST"
  for l in "$@"; do printf '%s\n' "$l"; done
} >"$D/kmirror.toml"
RUST_LOG=info,rdkafka=warn "$BIN" serve --config "$D/kmirror.toml" --listen "127.0.0.1:$PORT" \
  --instance-id "$M" --state-partitions "$SP" --state-topic "__mirror_state-$M" >"$D/kmirror.log" 2>&1 &
KP=$!
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.2; done
api() { curl -sf -XPOST "http://127.0.0.1:$PORT/api/v1/mirrors$1" -H 'content-type: application/json' -d "$2" >/dev/null; }
api "" "$(jq -cn --arg m "$M" --arg b "$SRC" --argjson p "${SOURCE_PROPS:-{\}}" \
  '{name: $m, source: {bootstrap_servers: $b, properties: $p}, sync: {acls: false}}')" || echo "creating the mirror failed" >&2
api "/$M/topics:start" "$(jq -cn --arg t "$names" '{topics: ($t | split(","))}')" || echo "starting the topics failed" >&2
"$K" produce --bootstrap "$SRC" --topics "$names" --partitions "$NP" --rate "$RATE" --secs 3600 >/dev/null 2>"$D/load.log" &
LP=$!
threads() { # one pass over kmirror's threads as JSON: the time and, per tid, name, switches, CPU ticks
  python3 - "$KP" <<'PYEOF2'
import json, os, re, sys, time
pid, out = sys.argv[1], {}
for tid in os.listdir(f"/proc/{pid}/task"):
    try:
        name = re.sub(r"[0-9]", "", open(f"/proc/{pid}/task/{tid}/comm").read().strip())
        status = open(f"/proc/{pid}/task/{tid}/status").read()
        stat = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        continue  # ended meanwhile
    switches = sum(int(v) for k, v in re.findall(r"^(\w*voluntary_ctxt_switches):\s+(\d+)", status, re.M))
    out[tid] = [name, switches, int(stat[11]) + int(stat[12])]
print(json.dumps({"t": time.monotonic(), "threads": out}))
PYEOF2
}
sleep 60
"$K" proc "$KP" >"$D/proc0.json"
sleep 30
"$K" proc "$KP" >"$D/proc1.json"
threads >"$D/threads0.json"
sleep 10
threads >"$D/threads1.json"
if [[ ${PERF:-0} == 1 ]]; then perf record -F 499 -g -p "$KP" -o "$D/perf.data" -- sleep 15 >/dev/null 2>&1; fi
curl -sf "http://127.0.0.1:$PORT/metrics" >"$D/metrics.txt"
kill "$LP" "$KP"
wait "$KP" 2>/dev/null
"$K" topics delete --bootstrap "$SRC" --regex "$M-.*" >/dev/null
"$K" topics delete --bootstrap "$DST" --regex "$M-.*|__mirror_state-$M" >/dev/null
python3 - "$D" "$TAG" "$RATE" "$TOPICS" "$NP" "$SP" <<'PYEOF'
import collections, json, sys
d, tag, rate, topics, np_, sp = sys.argv[1:]
a, b = (list(json.load(open(f"{d}/proc{i}.json")).values())[0] for i in (0, 1))
print(f"{tag}: {rate} records/s over {topics} x {np_} partitions, {sp} slots: "
      f"CPU {100 * (b['cpu_s'] - a['cpu_s']) / 30:.1f} % of a core, RSS {b['rss_kib'] / 1024:.0f} MiB")
t0, t1 = (json.load(open(f"{d}/threads{i}.json")) for i in (0, 1))
secs = t1["t"] - t0["t"]
by = collections.defaultdict(lambda: [0, 0, 0.0])
for tid, (n, s1, c1) in t1["threads"].items():
    _, s0, c0 = t0["threads"].get(tid, (n, 0, 0))  # a thread started in between: from 0
    g = by[n]
    g[0] += 1
    g[1] += (s1 - s0) / secs
    g[2] += (c1 - c0) / secs  # ticks of 10 ms per second: % of a core
print(f"  per thread name over {secs:.1f} s:")
for n, (k, s, c) in sorted(by.items(), key=lambda x: -x[1][2])[:8]:
    print(f"  {n:<20} {k:3d} threads  {s:7.0f} switches/s  {c:5.1f} % of a core")
PYEOF
