#!/usr/bin/env python3
"""A stand-in for a TF task with the one property of TF's launch that matters to it: a start barrier.

    python barrier_task.py --job_name ps|worker --task_index N --ps_hosts h:p,... --worker_hosts h:p,...
                           [--barrier_timeout 60] [--run_seconds 0]

Every task listens on its endpoint (as a TF server does; readiness probes just connect).
A worker then waits at a start barrier for every worker, as dtfbench train's graph worker
and TF's synchronous training do (no worker trains before all are up): it tells the first
PS that it is up, and asks it every 0.2 s how many are, until all are (the count lives on
the PS, as TF's barrier does, so that polling costs O(workers), not O(workers^2)). Then it
"trains" for --run_seconds and exits 0; after --barrier_timeout without all of them it
exits 1 with the count. A PS serves until SIGTERM. Standard library only, imports nothing
heavy: a launch of hundreds of them measures the launch, not TF.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import time

READY: set[int] = set()  # on the first PS: the workers that said they are up


def serve(endpoint: str, counts: bool) -> None:
    """Accept connections on `endpoint`; with `counts`, answer "up N" and "count" lines with the count."""
    host, port = endpoint.rsplit(":", 1)
    server = socket.create_server((host, int(port)), backlog=128)

    def answer(connection: socket.socket) -> None:
        with connection:
            try:
                connection.settimeout(2)
                line = connection.makefile("r").readline().split()
                if line[:1] == ["up"] and len(line) == 2:
                    READY.add(int(line[1]))
                if line:
                    connection.sendall(b"%d\n" % len(READY))
            except (OSError, ValueError):
                pass  # a readiness probe connects and goes

    def accept_forever() -> None:
        while True:
            connection, _ = server.accept()
            if counts:
                threading.Thread(target=answer, args=(connection,), daemon=True).start()
            else:
                connection.close()

    threading.Thread(target=accept_forever, daemon=True).start()


def ask(endpoint: str, line: str) -> int | None:
    """Send `line` to the first PS; the count it answers, or None when it does not answer."""
    host, port = endpoint.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2) as connection:
            connection.settimeout(2)
            connection.sendall(line.encode() + b"\n")
            return int(connection.makefile("r").readline())
    except (OSError, ValueError):
        return None


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
    serve(endpoints[args.job_name][args.task_index], counts=args.job_name == "ps" and args.task_index == 0)
    if args.job_name == "ps":
        signal.pause()
        return 0
    if endpoints["ps"]:
        workers, chief_ps = len(endpoints["worker"]), endpoints["ps"][0]
        deadline = time.monotonic() + args.barrier_timeout
        count = ask(chief_ps, f"up {args.task_index}")
        while count is None or count < workers:
            if time.monotonic() > deadline:
                print(
                    f"worker {args.task_index}: start barrier: {count or 0} of {workers} workers up after "
                    f"{args.barrier_timeout:g} s",
                    file=sys.stderr,
                    flush=True,
                )
                return 1
            time.sleep(0.2)
            count = ask(chief_ps, f"up {args.task_index}" if count is None else "count")
    time.sleep(args.run_seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
