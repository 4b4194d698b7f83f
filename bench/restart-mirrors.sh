#!/bin/bash
# bench/restart-mirrors.sh BIN TAG [MIRRORS] — how long a restarting instance takes from
# "starting the mirror engine" to "joining the slot group" with MIRRORS (20) mirrors in its state
# topic: it starts `BIN serve` on the test rig (KMIRROR_TEST_DESTINATION_BOOTSTRAP /
# KMIRROR_TEST_SOURCE_BOOTSTRAP, `eval "$(scripts/kafka-rig env)"`), creates the mirrors, restarts
# it three times with SIGTERM and prints the four start-to-join times (the first is the start on
# an empty state topic). Its state topic __mirror_state-fexp-TAG is left for you to delete.
# Session 23 used it to compare the sequential and the concurrent earlier-layout fences.
set -euo pipefail
BIN=$1 TAG=$2 N=${3:-20}
DST=${KMIRROR_TEST_DESTINATION_BOOTSTRAP:-127.0.0.1:29092} SRC=${KMIRROR_TEST_SOURCE_BOOTSTRAP:-127.0.0.1:19092}
ST=__mirror_state-fexp-$TAG LOG=/tmp/fexp-$TAG.log PORT=${KMIRROR_FEXP_PORT:-18999} PID=
start() {
  RUST_LOG=info "$BIN" serve --destination-bootstrap "$DST" --state-topic "$ST" --state-partitions 16 \
    --cluster-name "fexp-$TAG" --instance-id f0 --membership group --listen "127.0.0.1:$PORT" --no-auth >>"$LOG" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null && return; sleep 0.1; done
  echo "not ready after 30 s (log: $LOG)" >&2; exit 1
}
rm -f "$LOG"
start
for m in $(seq 1 "$N"); do
  curl -sf -X POST -H 'content-type: application/json' "http://127.0.0.1:$PORT/api/v1/mirrors" \
    -d "{\"name\":\"fx$m\",\"source\":{\"bootstrap_servers\":\"$SRC\"},\"sync\":{\"acls\":false,\"topic_configs\":false,\"group_offsets\":false}}" >/dev/null
done
for _ in 1 2 3; do kill -TERM "$PID"; wait "$PID" || true; start; done
kill -TERM "$PID"; wait "$PID" || true
sed 's/\x1b\[[0-9;]*m//g' "$LOG" | grep -E "starting the mirror engine|joining the slot group" | awk '{print $1}' | paste - - |
  python3 -c "
import sys, datetime
t = lambda s: datetime.datetime.fromisoformat(s.replace('Z', '+00:00'))
print('$TAG', [round((t(b) - t(a)).total_seconds(), 2) for a, b in (l.split() for l in sys.stdin)])"
