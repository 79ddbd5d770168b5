#!/usr/bin/env python3
"""A stand-in for a TF task with the one property of TF's launch that matters to it: a start barrier.

    python barrier_task.py --job_name ps|worker --task_index N --ps_hosts h:p,... --worker_hosts h:p,...
                           [--barrier_timeout 60] [--run_seconds 0]

Every task listens on its endpoint (as a TF server does; readiness probes just connect).
A worker then waits until every worker's endpoint accepts a connection (the start barrier
of dtfbench.train's graph worker and of TF's synchronous training: no worker trains before
all are up), "trains" for --run_seconds and exits 0; after --barrier_timeout without all
of them it exits 1, naming the ones missing. A PS serves until SIGTERM. Standard library
only, imports nothing heavy: a launch of hundreds of them measures the launch, not TF.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import time


def serve(endpoint: str) -> None:
    host, port = endpoint.rsplit(":", 1)
    server = socket.create_server((host, int(port)), backlog=64)

    def accept_forever():
        while True:
            connection, _ = server.accept()
            connection.close()

    threading.Thread(target=accept_forever, daemon=True).start()


def up(endpoint: str) -> bool:
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job_name", choices=["ps", "worker"], required=True)
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--ps_hosts", default="")
    parser.add_argument("--worker_hosts", required=True)
    parser.add_argument("--barrier_timeout", type=float, default=60.0)
    parser.add_argument("--run_seconds", type=float, default=0.0)
    args, _ = parser.parse_known_args(argv)  # a TF program's other flags are ignored
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    endpoints = {"ps": [e for e in args.ps_hosts.split(",") if e], "worker": args.worker_hosts.split(",")}
    serve(endpoints[args.job_name][args.task_index])
    if args.job_name == "ps":
        signal.pause()
        return 0
    waiting = list(endpoints["worker"])
    deadline = time.monotonic() + args.barrier_timeout
    while waiting:
        waiting = [e for e in waiting if not up(e)]
        if waiting and time.monotonic() > deadline:
            print(f"worker {args.task_index}: start barrier: {len(waiting)} worker(s) not up after "
                  f"{args.barrier_timeout:g} s: {', '.join(waiting[:8])}", file=sys.stderr, flush=True)
            return 1
        if waiting:
            time.sleep(0.1)
    time.sleep(args.run_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
