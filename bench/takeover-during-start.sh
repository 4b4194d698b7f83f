#!/bin/bash
# bench/takeover-during-start.sh BIN TAG [join] — a takeover while the surviving instance applies a large
# start. On the test rig (`eval "$(scripts/kafka-rig env)"`): 100 source topics of 10 partitions
# with 100,000 lz4 records, two `BIN serve` instances a and b (16 slots, session timeout 6 s,
# ports 18701/18702), a mirror created on a; then `topics:start` of all 100 topics sent to a, b
# killed with SIGKILL 3 s later, and a's GET /api/v1/instances polled every 0.1 s. Prints how long
# the start took, when a showed all 16 slots as its own (after the kill) and when the start ended
# (after the kill), then a's takeover log lines; cleans its topics up. Session 24 used it to
# compare the engine before and after slot changes and the state tail were served between two
# topics of a long call (before: the takeover waited for the start's end).
# With `join`: b is not there at first; it starts AFTER seconds (env, default 3) after the start
# was sent to a, and the script times until b owns 8 slots (a must answer the revoke of those
# slots first). The start's first seconds are its source survey, off the engine's loop: join
# later than that to meet the part on the loop.
set -uo pipefail
BIN=$1 TAG=$2 MODE=${3:-kill}
K=${KBENCH:-target-bench/release/examples/kbench}
SRC=${KMIRROR_TEST_SOURCE_BOOTSTRAP:-127.0.0.1:19092} DST=${KMIRROR_TEST_DESTINATION_BOOTSTRAP:-127.0.0.1:29092}
D=/tmp/tds-$TAG C=tds-$TAG ST=__mirror_state-tds-$TAG
rm -rf "$D" && mkdir -p "$D"
names=$(for i in $(seq -w 0 99); do printf 'tds-%s-%s,' "$TAG" "$i"; done)
names=${names%,}
"$K" topics create --bootstrap "$SRC" --names "$names" --partitions 10 >/dev/null
"$K" produce --bootstrap "$SRC" --topics "$names" --partitions 10 --records 100000 --size 1024 --codec lz4 >/dev/null 2>&1
node() { # id port
  RUST_LOG=info,rdkafka=warn "$BIN" serve --destination-bootstrap "$DST" --state-topic "$ST" --state-partitions 16 \
    --cluster-name "$C" --instance-id "$1" --session-timeout-ms 6000 --listen "127.0.0.1:$2" \
    --advertised-url "http://127.0.0.1:$2" --no-auth >"$D/$1.log" 2>&1 &
  echo $!
}
slots() { curl -s "http://127.0.0.1:$1/api/v1/instances" | jq -r '[.instances[] | select(.this) | .slots | length] | .[0] // 0'; }
PA=$(node a 18701) PB=
[ "$MODE" = join ] || PB=$(node b 18702)
a=0 b=0
for _ in $(seq 1 300); do
  a=$(slots 18701) b=0
  [ -n "$PB" ] && b=$(slots 18702)
  if [ -z "$PB" ]; then ((a == 16)) && break; else ((a > 0 && b > 0 && a + b == 16)) && break; fi
  sleep 0.2
done
echo "slots before: a=$a b=$b"
curl -s -X POST http://127.0.0.1:18701/api/v1/mirrors -H 'content-type: application/json' \
  -d "{\"name\":\"m\",\"source\":{\"bootstrap_servers\":\"$SRC\"}}" >/dev/null
topics=$(echo "$names" | jq -R 'split(",")')
t0=$(date +%s.%N)
(
  curl -s -X POST http://127.0.0.1:18701/api/v1/mirrors/m/topics:start -H 'content-type: application/json' \
    -d "{\"topics\":$topics}" >"$D/start.json"
  date +%s.%N >"$D/start.end"
) &
# Polls until the instance at port $1 lists $2 slots as its own (its time in `town`) and the
# start has answered; `tk` is when the event (a join or a kill) happened.
until_owned() {
  tk=$(date +%s.%N) town=
  for _ in $(seq 1 1500); do
    [ -z "$town" ] && [ "$(slots "$1")" = "$2" ] && town=$(date +%s.%N)
    [ -n "$town" ] && [ -f "$D/start.end" ] && break
    sleep 0.1
  done
}
sleep "${AFTER:-3}"
if [ "$MODE" = join ]; then
  PB=$(node b 18702)
  until_owned 18702 8
  what="b owned 8 slots" event="b's start"
else
  kill -9 "$PB"
  until_owned 18701 16
  what="a showed all 16 slots" event="the kill"
fi
wait %1 2>/dev/null
te=$(cat "$D/start.end")
ok=$(jq '[.results[] | select(.ok)] | length' "$D/start.json")
echo "$TAG: start took $(echo "$te - $t0" | bc) s ($ok topics ok); $event at +$(echo "$tk - $t0" | bc) s;" \
  "$what $(echo "${town:-$te} - $tk" | bc) s after $event; the start ended $(echo "$te - $tk" | bc) s after $event"
sed 's/\x1b\[[0-9;]*m//g' "$D/a.log" | grep -E "slots assigned: taking|slots revoked: ending|slots taken over|slow coordinator" | cut -c1-160
kill "$PA" $PB 2>/dev/null
wait "$PA" $PB 2>/dev/null
"$K" topics delete --bootstrap "$SRC" --regex "tds-$TAG-.*" >/dev/null
"$K" topics delete --bootstrap "$DST" --regex "tds-$TAG-.*|$ST" >/dev/null
