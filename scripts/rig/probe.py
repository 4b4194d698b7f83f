#!/usr/bin/env python3
"""Readiness probe for scripts/kafka-rig: one real Kafka Metadata request.

Usage: probe.py HOST:PORT EXPECTED_CLUSTER_ID NODE_ID [TIMEOUT_SECONDS]

Why not `kafka-cluster cluster-id` (ClusterTool)? It costs a JVM start (1-2 s on
this 2-core box) per poll, and it only proves the cluster ID. This probe sends a
Metadata v4 request (the oldest version Kafka 4.x still accepts after KIP-896;
v4 is also the simplest one, without tagged fields) and takes ~50 ms.

It checks more than the cluster ID: a KRaft broker starts serving requests while
it is still fenced, and a fenced broker is left out of the Metadata brokers list.
Until our node is listed, producers find no leaders and CreateTopics fails with
INVALID_REPLICATION_FACTOR, so "ready" means: the cluster ID matches AND NODE_ID
is in the brokers list.

Exit codes (kafka-rig depends on them):
  0  ready
  1  not ready yet (connection refused/reset, timeout, broker still fenced) - poll again
  3  something else answers on that port (different cluster ID) - do not wait for it
A one-line reason goes to stdout.
"""

import socket
import struct
import sys

API_METADATA = 3
METADATA_VERSION = 4
CORRELATION_ID = 0x6B6D  # "km"
CLIENT_ID = b"kmirror-rig-probe"


class Reader:
    def __init__(self, data):
        self.data = data
        self.pos = 0

    def take(self, fmt):
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def nullable_string(self):
        length = self.take(">h")
        if length < 0:
            return None
        value = self.data[self.pos : self.pos + length].decode("utf-8")
        self.pos += length
        return value


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("connection closed by broker")
        buf += chunk
    return bytes(buf)


def metadata(host, port, timeout):
    # Request header v1: api_key, api_version, correlation_id, client_id.
    header = struct.pack(">hhih", API_METADATA, METADATA_VERSION, CORRELATION_ID, len(CLIENT_ID)) + CLIENT_ID
    # Metadata v4 body: topics = empty array (we want brokers/cluster only, and an
    # empty list needs no topic ACLs), allow_auto_topic_creation = false.
    body = struct.pack(">ib", 0, 0)
    request = header + body
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        response = Reader(recv_exact(sock, size))
    if response.take(">i") != CORRELATION_ID:
        raise ValueError("unexpected correlation id")
    response.take(">i")  # throttle_time_ms
    brokers = []
    for _ in range(response.take(">i")):
        node_id = response.take(">i")
        response.nullable_string()  # host
        response.take(">i")  # port
        response.nullable_string()  # rack
        brokers.append(node_id)
    cluster_id = response.nullable_string()
    return cluster_id, brokers


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    host, _, port = argv[1].rpartition(":")
    expected_cluster, node_id = argv[2], int(argv[3])
    timeout = float(argv[4]) if len(argv) == 5 else 3.0
    try:
        cluster_id, brokers = metadata(host, int(port), timeout)
    except (OSError, ConnectionError) as err:
        print(f"not answering: {err}")
        return 1
    except (ValueError, struct.error, UnicodeDecodeError) as err:
        # Garbage back: not a Kafka broker we understand.
        print(f"unexpected reply on {argv[1]}: {err}")
        return 3
    if cluster_id != expected_cluster:
        print(f"cluster ID is {cluster_id!r}, expected {expected_cluster!r}")
        return 3
    if node_id not in brokers:
        print(f"cluster {cluster_id} answers but broker {node_id} is not registered/unfenced yet (brokers={brokers})")
        return 1
    print(f"ready: cluster {cluster_id}, brokers {brokers}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
