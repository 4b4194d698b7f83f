#!/usr/bin/env python3
"""What a topic's log looks like on a broker's disk: bytes, record batches, records, control batches.

    bench/log-batches.py LOG_DIR TOPIC  ->  one JSON object on stdout

Reads only the batch headers of every `<TOPIC>-<partition>/*.log` segment under LOG_DIR (record
batch format v2: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8,
crc int32, attributes int16, lastOffsetDelta int32, ... records count int32 at byte 57), so a GiB
takes well under a second. Used by scripts/bench to compare what kmirror and the baseline
producer leave on the destination for the same records: the batch size decides the compression
ratio and the broker's work per byte.
"""
import json
import os
import re
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: log-batches.py LOG_DIR TOPIC")
    log_dir, topic = sys.argv[1], sys.argv[2]
    part_re = re.compile(re.escape(topic) + r"-(\d+)$")
    out = {"topic": topic, "partitions": 0, "bytes": 0, "batches": 0, "control_batches": 0, "records": 0}
    for name in sorted(os.listdir(log_dir)):
        if not part_re.match(name):
            continue  # another topic, or a deleted partition (`<topic>-<n>.<id>-delete`)
        out["partitions"] += 1
        pdir = os.path.join(log_dir, name)
        for seg in sorted(f for f in os.listdir(pdir) if f.endswith(".log")):
            with open(os.path.join(pdir, seg), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                out["bytes"] += size
                pos = 0
                while pos + 61 <= size:
                    f.seek(pos)
                    head = f.read(61)
                    if len(head) < 61:
                        break
                    batch_len = struct.unpack_from(">i", head, 8)[0]
                    if batch_len <= 0:
                        break  # a torn tail: nothing after it is readable
                    attributes = struct.unpack_from(">h", head, 21)[0]
                    if attributes & 0x20:
                        out["control_batches"] += 1
                    else:
                        out["batches"] += 1
                        out["records"] += struct.unpack_from(">i", head, 57)[0]
                    pos += 12 + batch_len
    b = out["batches"]
    out["avg_batch_bytes"] = round(out["bytes"] / b) if b else None
    out["avg_batch_records"] = round(out["records"] / b, 1) if b else None
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
