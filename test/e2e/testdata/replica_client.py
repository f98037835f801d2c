#!/usr/bin/python3
"""List, then watch, the ConfigMaps of a namespace with the Python
`kubernetes` client, and print what it sees as JSON lines on stdout.

The replica's end-to-end test (test/e2e/replica_python_test.go) runs it
against the replica, with Debian's python3-kubernetes: a client of the
Kubernetes API that the project did not write. Lines, each flushed:

  {"kind": "client", "version": "22.6.0"}
  {"kind": "object", "name", "namespace", "uid", "apiResourceVersion", "data"}
      one per ConfigMap the list returned, in the list's order
  {"kind": "listed", "resourceVersion", "count"}
  {"kind": "event", "type", "name", "uid", "apiResourceVersion", "data"}
      one per watch event, from the list's resourceVersion on
  {"kind": "bookmark", "resourceVersion"}
  {"kind": "end", "reason": "timeout" | "stopped"}

apiResourceVersion is the object's kubebus.io/resource-version annotation:
its resourceVersion in its cluster's API server. The watch is started again
from the last resourceVersion seen whenever the server ends it, until the
timeout or SIGTERM / SIGINT. An error is one line on stderr and exit
status 1.
"""

import argparse
import json
import signal
import sys
import time

import kubernetes
from kubernetes import client, config, watch

ANNOTATION = "kubebus.io/resource-version"


def emit(**line):
    sys.stdout.write(json.dumps(line, sort_keys=True) + "\n")
    sys.stdout.flush()


def describe(cm):
    """The fields of a ConfigMap (a V1ConfigMap, as the client decoded it)
    that a line shows."""
    meta = cm.metadata
    return {
        "name": meta.name,
        "namespace": meta.namespace,
        "uid": meta.uid,
        "apiResourceVersion": (meta.annotations or {}).get(ANNOTATION),
        "data": cm.data or {},
    }


class Stop(Exception):
    """SIGTERM or SIGINT arrived."""


def on_signal(signum, frame):
    raise Stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--context", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--timeout", type=float, default=60,
                    help="seconds to watch for, in all")
    ap.add_argument("--request-timeout", type=float, default=30,
                    help="seconds the list may take")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    deadline = time.monotonic() + args.timeout

    api_client = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    v1 = client.CoreV1Api(api_client)
    emit(kind="client", version=kubernetes.__version__)

    # The client's own models, as a program would use them: the replica's
    # answers must decode into them.
    listed = v1.list_namespaced_config_map(args.namespace, _request_timeout=args.request_timeout)
    for cm in listed.items:
        emit(kind="object", **describe(cm))
    rv = listed.metadata.resource_version
    emit(kind="listed", resourceVersion=rv, count=len(listed.items))

    w = watch.Watch()
    try:
        while True:
            left = int(deadline - time.monotonic())
            if left <= 0:
                emit(kind="end", reason="timeout")
                return 0
            for ev in w.stream(v1.list_namespaced_config_map, args.namespace,
                               resource_version=rv, timeout_seconds=left,
                               allow_watch_bookmarks=True):
                # A BOOKMARK comes undecoded: its raw object's metadata.
                meta = ev["raw_object"].get("metadata") or {}
                rv = meta.get("resourceVersion") or rv
                if ev["type"] == "BOOKMARK":
                    emit(kind="bookmark", resourceVersion=rv)
                    continue
                emit(kind="event", type=ev["type"], **describe(ev["object"]))
    except Stop:
        w.stop()
        emit(kind="end", reason="stopped")
        return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Stop:
        emit(kind="end", reason="stopped")
        sys.exit(0)
    except Exception as e:  # one line that says what failed, then exit 1
        sys.stderr.write("replica_client.py: %s: %s\n" % (type(e).__name__, e))
        sys.exit(1)
