#!/usr/bin/env python3
"""A stand-in for a TF task with the one property of TF's launch that matters to it: a start barrier.

    python barrier_task.py --job_name ps|worker --task_index N --ps_hosts h:p,... --worker_hosts h:p,...
                           [--barrier_timeout 60] [--run_seconds 0]

Every task listens on its endpoint (as a TF server does; readiness probes just connect).
A worker then waits at a start barrier for every worker, as dtfbench.train's graph worker
and TF's synchronous training do (no worker trains before all are up): first until every
worker's endpoint accepts a connection, then until every worker says it got that far (its
endpoint answers "1"; one seen up before that no longer listens got that far and left),
so that none leaves while another still waits to see it. Then it "trains" for
--run_seconds and exits 0; after --barrier_timeout without all of them it exits 1, naming
the ones missing. A PS serves until SIGTERM. Standard library only, imports nothing heavy:
a launch of hundreds of them measures the launch, not TF.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import time


PASSED = threading.Event()  # this worker saw every worker up


def serve(endpoint: str) -> None:
    """Accept connections on `endpoint`; each gets "1" once this task passed the barrier's first half, else "0"."""
    host, port = endpoint.rsplit(":", 1)
    server = socket.create_server((host, int(port)), backlog=64)

    def accept_forever():
        while True:
            connection, _ = server.accept()
            try:
                connection.sendall(b"1" if PASSED.is_set() else b"0")
            except OSError:
                pass
            connection.close()

    threading.Thread(target=accept_forever, daemon=True).start()


def ask(endpoint: str) -> str | None:
    """What the task at `endpoint` says ("0" or "1"); None when it does not accept."""
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=1) as connection:
            connection.settimeout(1)
            return connection.recv(1).decode() or "0"
    except OSError:
        return None


def wait_for(endpoints: list[str], done, deadline: float, what: str, index: int, timeout: float) -> bool:
    waiting = list(endpoints)
    while True:
        waiting = [e for e in waiting if not done(e)]
        if not waiting:
            return True
        if time.monotonic() > deadline:
            print(f"worker {index}: start barrier: {len(waiting)} worker(s) {what} after {timeout:g} s: "
                  f"{', '.join(waiting[:8])}", file=sys.stderr, flush=True)
            return False
        time.sleep(0.1)


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
    workers = endpoints["worker"]
    deadline = time.monotonic() + args.barrier_timeout
    if not wait_for(workers, lambda e: ask(e) is not None, deadline, "not up", args.task_index, args.barrier_timeout):
        return 1
    PASSED.set()
    # Seen up already: one that no longer answers passed and left.
    if not wait_for(workers, lambda e: ask(e) in ("1", None), deadline, "not through", args.task_index,
                    args.barrier_timeout):
        return 1
    time.sleep(args.run_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
