"""A parameter server's link under its workers' transfer pattern, with sockets only (no TF).

    PYTHONPATH=src python benchmarks/ps_pattern.py [--mbit 100] [--workers 1,2,3,4] [--seconds 12]

Why: past an asynchronous onset (N3, docs/network.md) the PS's link carried 70-85% of the
probe's rate, varying between sittings, while the planner's max(t1, transfer) assumes all of
it. This separates the pattern from TF: on a test bed of 1 + N hosts shaped to --mbit, the first
host plays the PS and each other host a worker, over the private addresses:

- ``async``: each worker loops "pull --megabytes from the PS, push as many to it, wait for its
  one-byte answer" on its own (an asynchronous worker), optionally with --compute seconds
  between steps; the PS serves each on a thread. Counted: the PS's bytes each way in the
  middle of the run (a quarter to nine tenths), and the workers' steps.
- ``push``: the PS starts every worker's push of the same bytes at once and waits for all of
  them, again and again (synchronous pushes, an incast in step).
- ``push+pull``: the same with the PS sending each worker as much at the same time.

Each ``async`` case runs twice: the turns the workers fall into change from one run to the
next. Beside each: a plain stream's rate (the yardstick), and the share a closed queueing
network with random turns gives (mean value analysis, two processor-sharing stations: the
link in and out; N/(N+1) with no compute). Writes results/benchmarks/ps_pattern.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testbed"))

import testbed as tb  # noqa: E402
from bench_env import RESULTS, ROOT, held, write_json  # noqa: E402

from dtfbench.forecast import scaling_model  # noqa: E402

OUT = RESULTS / "ps_pattern.json"
PORT = 5301

# The PS: argv mode address port workers bytes seconds; prints one JSON line.
_PS = r"""
import json, socket, sys, threading, time
mode, address, port, workers, size, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
def exact(conn, n, buf):
    while n:
        got = conn.recv_into(buf, min(len(buf), n))
        if not got:
            raise EOFError
        n -= got
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind((address, port))
listener.listen(64)
print("listening", flush=True)
conns = [listener.accept()[0] for _ in range(workers)]
data, log, lock = b"\1" * size, [], threading.Lock()
start = time.monotonic()
stop = start + seconds
def serve(conn):
    buf = bytearray(1 << 20)
    try:
        while time.monotonic() < stop:
            ask = conn.recv(1)
            if ask == b"p":
                conn.sendall(data)
                with lock: log.append((time.monotonic(), "out"))
            elif ask == b"u":
                exact(conn, size, buf)
                conn.sendall(b"k")
                with lock: log.append((time.monotonic(), "in"))
            else:
                return
    except (EOFError, OSError):
        pass
    conn.close()
def in_step(conn, pull):
    buf = bytearray(1 << 20)
    sender = threading.Thread(target=conn.sendall, args=(data,)) if pull else None
    if sender: sender.start()
    exact(conn, size, buf)
    if sender: sender.join()
if mode == "async":
    threads = [threading.Thread(target=serve, args=(c,)) for c in conns]
else:
    threads = []
    while time.monotonic() < stop:
        t0 = time.monotonic()
        for c in conns: c.sendall(b"g" if mode == "push" else b"b")
        step = [threading.Thread(target=in_step, args=(c, mode == "push+pull")) for c in conns]
        for t in step: t.start()
        for t in step: t.join()
        log.append((t0, time.monotonic()))
    for c in conns: c.sendall(b"e")
for t in threads: t.start()
for t in threads: t.join()
if mode == "async":
    a, b = start + 0.25 * seconds, start + 0.9 * seconds
    count = lambda kind: sum(1 for t, k in log if k == kind and a <= t < b)
    print(json.dumps({"in_bytes_s": count("in") * size / (b - a), "out_bytes_s": count("out") * size / (b - a),
                      "worker_steps_s": count("in") / (b - a)}))
else:
    steps = log[1:] or log
    took = sum(b - a for a, b in steps)
    print(json.dumps({"in_bytes_s": workers * size * len(steps) / took, "steps": len(log)}))
"""

# A worker: argv mode address port bytes compute.
_WORKER = r"""
import socket, sys, threading, time
mode, address, port, size, compute = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
conn = socket.create_connection((address, port))
data, buf = b"\0" * size, bytearray(1 << 20)
def exact(n):
    while n:
        got = conn.recv_into(buf, min(len(buf), n))
        if not got:
            raise EOFError
        n -= got
try:
    if mode == "async":
        while True:
            conn.sendall(b"p"); exact(size)
            conn.sendall(b"u"); conn.sendall(data); exact(1)
            if compute: time.sleep(compute)
    else:
        while True:
            go = conn.recv(1)
            if go not in (b"g", b"b"):
                break
            puller = threading.Thread(target=exact, args=(size,)) if go == b"b" else None
            if puller: puller.start()
            conn.sendall(data)
            if puller: puller.join()
except (EOFError, OSError):
    pass
"""


def random_turns_share(workers: int, transfer_s: float, compute_s: float) -> float:
    """The PS's link's busy share, one direction, with random turns: the planner's own closed
    network (``scaling_model.random_turns_step``, exact mean value analysis)."""
    return workers * transfer_s / scaling_model.random_turns_step(workers, transfer_s, compute_s)


def run_case(state: dict, mode: str, workers: int, size: int, seconds: float, compute: float = 0.0) -> dict:
    ps, others = state["nodes"][0], state["nodes"][1 : 1 + workers]
    server = subprocess.Popen(
        ["ip", "netns", "exec", ps["netns"], sys.executable, "-c", _PS, mode, ps["private_ip"], str(PORT)]
        + [str(workers), str(size), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    clients = []
    try:
        assert server.stdout.readline().strip() == "listening"
        for node in others:
            argv = [sys.executable, "-c", _WORKER, mode, ps["private_ip"], str(PORT), str(size), str(compute)]
            clients.append(subprocess.Popen(["ip", "netns", "exec", node["netns"], *argv]))
        result = json.loads(server.communicate(timeout=seconds + 60)[0])
    finally:
        for proc in [server, *clients]:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return {"mode": mode, "workers": workers, "bytes": size, "compute_s": compute, "seconds": seconds, **result}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mbit", type=float, default=100)
    p.add_argument("--workers", default="1,2,3,4")
    p.add_argument("--megabytes", type=float, default=3.07, help="a pull's and a push's size (N3's variables)")
    p.add_argument("--seconds", type=float, default=12)
    p.add_argument("--compute", type=float, default=0.26, help="a second set of async runs with this pause")
    p.add_argument("--lock", help="flock this file around the test bed (the machine's heavy lock)")
    args = p.parse_args(argv)
    counts = [int(n) for n in args.workers.split(",")]
    size = int(args.megabytes * 1e6)
    cases = []
    with held(args.lock), tempfile.TemporaryDirectory(prefix="dtfbench-pspattern-") as work:
        bed = Path(work) / "bed"
        state = tb.up(bed, hosts=1 + max(counts), link_mbit=args.mbit)
        try:
            stream = tb.timed_transfer(state["nodes"][1], state["nodes"][0], 3.0)
            transfer_s = size / stream
            print(
                f"a plain stream: {stream * 8e-6:.1f} Mbit/s; a {args.megabytes:g} MB transfer alone {transfer_s:.3f} s"
            )
            runs = [("async", n, 0.0) for n in counts for _ in range(2)]
            runs += [("async", n, args.compute) for n in counts if n > 1 and args.compute]
            runs += [(mode, max(counts), 0.0) for mode in ("push", "push+pull")]
            for mode, n, compute in runs:
                case = run_case(state, mode, n, size, args.seconds, compute)
                case["share_in"] = case["in_bytes_s"] / stream
                if mode == "async":
                    case["share_out"] = case["out_bytes_s"] / stream
                    case["random_turns_share"] = random_turns_share(n, transfer_s, compute)
                cases.append(case)
                print(
                    f"{mode:9} {n} worker(s), compute {compute:g} s: in {case['in_bytes_s'] * 8e-6:.1f} Mbit/s "
                    f"({case['share_in']:.0%} of the stream)"
                    + (
                        f", out {case['out_bytes_s'] * 8e-6:.1f} ({case['share_out']:.0%}), a worker's step "
                        f"{n / case['worker_steps_s']:.3f} s; random turns {case['random_turns_share']:.0%}"
                        if mode == "async"
                        else ""
                    ),
                    flush=True,
                )
        finally:
            tb.down(bed)
    write_json(OUT, {"mbit": args.mbit, "stream_bytes_s": stream, "bytes": size, "cases": cases})
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
