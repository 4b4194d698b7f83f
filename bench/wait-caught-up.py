#!/usr/bin/env python3
"""Waits until kmirror's API shows every partition of a topic at or past given source end offsets,
polling every few milliseconds over one kept-alive HTTP connection.

Usage: bench/wait-caught-up.py API MIRROR TOPIC ENDS_JSON TIMEOUT_S

ENDS_JSON is {"<partition>": end_offset}. Prints the wall-clock time (ms since the epoch, as
`date +%s%3N`) of the first answer that showed every partition caught up, and exits 0; exits 1
after TIMEOUT_S seconds without one (printing nothing), 2 on a bad answer.

Why not curl and jq in a shell loop: each round costs two process starts (~20-30 ms on a loaded
2-core box) on top of the loop's sleep, so the loop saw the end up to ~80 ms late. An incremental
failback takes ~0.3 s, so that delay alone was a tenth of it, and it was added to both failback
modes alike, which pulls their ratio towards 1.
"""
import http.client
import json
import sys
import time
import urllib.parse

POLL_S = 0.005


def main():
    api, mirror, topic, ends_json, timeout_s = sys.argv[1:6]
    ends = {int(p): int(o) for p, o in json.loads(ends_json).items()}
    url = urllib.parse.urlsplit(api)
    path = (
        f"/api/v1/mirrors/{urllib.parse.quote(mirror)}/partitions?"
        + urllib.parse.urlencode({"topic": topic, "page_size": 1000})
    )
    deadline = time.monotonic() + float(timeout_s)
    conn = None
    while time.monotonic() < deadline:
        try:
            if conn is None:
                conn = http.client.HTTPConnection(url.hostname, url.port or 80, timeout=10)
            conn.request("GET", path)
            resp = conn.getresponse()
            body = resp.read()
        except (OSError, http.client.HTTPException):
            conn = None  # reconnect on the next round
            time.sleep(POLL_S)
            continue
        seen = time.time()
        if resp.status != 200:
            print(f"HTTP {resp.status}: {body[:200]!r}", file=sys.stderr)
            sys.exit(2)
        items = json.loads(body).get("items", [])
        offsets = {i["partition"]: i.get("mirrored_source_offset") for i in items}
        if all((offsets.get(p) if offsets.get(p) is not None else -1) >= end for p, end in ends.items()):
            print(int(seen * 1000))
            return
        time.sleep(POLL_S)
    sys.exit(1)


if __name__ == "__main__":
    main()
