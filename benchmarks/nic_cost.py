"""Telemetry cost: training throughput with the NIC sampler on against off, in one interleaved run.

    PYTHONPATH=src python benchmarks/nic_cost.py [--slice 3 --num_batches 6000 --model small_cnn ...]

One training run of our workload, 1 PS + 1 worker on 127.0.0.1 (as the local system runs
them), with the NIC sampler beside it exactly as tf_host_run starts it on a host (its program,
``dtfbench/launch/nic_sampler.py``, on this Python, at the launcher's interval, on the
interface of the TF address: loopback here). The sampler is switched on and off in turns of
``--slice`` seconds (SIGCONT / SIGSTOP: off, it takes no CPU at all) for the whole of the
measured steps, and the worker's step lines, time-stamped as they come, give the steps done
in every slice. Throughput on = the images of the "on" slices over their seconds; off, the
same of the "off" slices; the ratio is on / off (goal: >= 0.98, issue 27). Slices of a few
seconds, taken in turns, meet the same load from the rest of the machine, which separate
runs a minute apart do not. The sampler's own CPU time per second of its "on" time is
reported beside it: the most the ratio can show.

Writes results/benchmarks/nic_cost.json. DTFBENCH_LOCK / --lock: flock that file around the run.
"""

from __future__ import annotations

import argparse
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time

from bench_env import RESULTS, ROOT, free_ports, held, write_json

from dtfbench.linux import procfs

SAMPLER = ROOT / "src" / "dtfbench" / "launch" / "nic_sampler.py"
GOAL = 0.98


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--slice", type=float, default=3.0, help="seconds the sampler stays on, then off, in turns")
    p.add_argument("--model", default="small_cnn")
    p.add_argument("--image_size", type=int, default=32)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--num_warmup_batches", type=int, default=20)
    p.add_argument("--num_batches", type=int, default=8000)
    p.add_argument("--interval", type=float, default=None, help="sampler interval (default: the launcher's)")
    p.add_argument("--lock", default=os.environ.get("DTFBENCH_LOCK"), help="flock this file around the run")
    p.add_argument("--output", default=str(RESULTS / "nic_cost.json"))
    return p.parse_args(argv)


def launcher_interval() -> float:
    """The interval tf_host_run samples at by default (one place: its option spec)."""
    sys.path.insert(0, str(ROOT / "src"))
    from dtfbench.launch.host_run_spec import ARGUMENT_SPEC

    return float(ARGUMENT_SPEC["nic_sample_interval"]["default"])


def steps_at(points: list[tuple[float, int]], moment: float) -> float | None:
    """The measured steps done at a moment, interpolated between two step lines."""
    for (t0, s0), (t1, s1) in zip(points, points[1:]):
        if t0 <= moment <= t1:
            return s0 + (s1 - s0) * ((moment - t0) / (t1 - t0) if t1 > t0 else 0.0)
    return None


def run(args, interval: float) -> dict:
    ps_port, worker_port = free_ports(2)
    base = [sys.executable, "-m", "dtfbench", "train", "--variable_update", "parameter_server"]
    base += ["--ps_hosts", f"127.0.0.1:{ps_port}", "--worker_hosts", f"127.0.0.1:{worker_port}"]
    base += ["--model", args.model, "--image_size", str(args.image_size), "--batch_size", str(args.batch_size)]
    base += ["--num_warmup_batches", str(args.num_warmup_batches), "--num_batches", str(args.num_batches)]
    base += ["--device", "cpu", "--display_every", "10"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), TF_CPP_MIN_LOG_LEVEL="2")
    points: list[tuple[float, int]] = []
    slices: list[tuple[float, float, bool]] = []
    with tempfile.TemporaryDirectory(prefix="dtfbench-nic-cost-") as folder:
        sampler = subprocess.Popen(
            [sys.executable, str(SAMPLER), "--address", "127.0.0.1", "--out", f"{folder}/nic.samples"]
            + ["--interval", str(interval)],
            start_new_session=True,
        )
        ps, worker = (
            subprocess.Popen(
                [*base, "--job_name", job, "--task_index", "0"],
                stdout=stdout,
                stderr=subprocess.DEVNULL,
                text=True,
                env=env,
                start_new_session=True,
            )
            for job, stdout in (("ps", subprocess.DEVNULL), ("worker", subprocess.PIPE))  # the worker's step lines
        )

        def read():
            for line in worker.stdout:
                first = line.split("\t", 1)[0]
                if first.isdigit() and "images/sec" in line:
                    points.append((time.time(), int(first)))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        on_cpu = 0.0
        try:
            while not points and worker.poll() is None:  # until the measured steps begin
                time.sleep(0.05)
            on = False
            while worker.poll() is None and (not points or points[-1][1] < args.num_batches):
                on = not on
                before = procfs.cpu_seconds(sampler.pid)
                sampler.send_signal(signal.SIGCONT if on else signal.SIGSTOP)
                start = time.time()
                time.sleep(args.slice)
                slices.append((start, time.time(), on))
                if on:
                    on_cpu += procfs.cpu_seconds(sampler.pid) - before
            worker.wait(timeout=600)
            reader.join(10)
            ps.wait(timeout=60)
        finally:
            for process in (worker, ps, sampler):
                if process.poll() is None:
                    process.send_signal(signal.SIGCONT)
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(timeout=10)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
    if worker.returncode:
        raise RuntimeError(f"the worker failed (exit {worker.returncode})")
    totals = {True: [0.0, 0.0], False: [0.0, 0.0]}  # steps, seconds
    for start, end, on in slices[1:]:  # the first slice begins with the first step line
        first, last = steps_at(points, start), steps_at(points, end)
        if first is None or last is None:
            continue  # the run ended inside it
        totals[on][0] += last - first
        totals[on][1] += end - start
    rates = {on: steps * args.batch_size / seconds for on, (steps, seconds) in totals.items() if seconds}
    if len(rates) < 2:
        raise RuntimeError("the run was too short for a slice of each kind: raise --num_batches")
    return {
        "images_per_sec_on": rates[True],
        "images_per_sec_off": rates[False],
        "seconds_on": totals[True][1],
        "seconds_off": totals[False][1],
        "slices": len(slices) - 1,
        "sampler_cpu_per_s": on_cpu / totals[True][1] if totals[True][1] else None,
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    interval = args.interval or launcher_interval()
    with held(args.lock):
        measured = run(args, interval)
    ratio = measured["images_per_sec_on"] / measured["images_per_sec_off"]
    report = {
        "benchmark": "nic_cost",
        "goal": f"on/off >= {GOAL}",
        "ratio_on_to_off": ratio,
        "met": ratio >= GOAL,
        "sampler_cpu_share_of_a_core": measured["sampler_cpu_per_s"],
        "interval_s": interval,
        **measured,
        "config": {k: v for k, v in vars(args).items() if k not in ("output", "lock")},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    out = write_json(args.output, report)
    print(
        f"NIC sampler on: {measured['images_per_sec_on']:.1f} img/s over {measured['seconds_on']:.0f} s, off: "
        f"{measured['images_per_sec_off']:.1f} img/s over {measured['seconds_off']:.0f} s, in {measured['slices']} "
        f"slices of {args.slice:g} s taken in turns; ratio {ratio:.3f} (goal >= {GOAL}: "
        f"{'met' if ratio >= GOAL else 'NOT met'}); the sampler used {measured['sampler_cpu_per_s'] * 100:.2f}% "
        f"of a core while on; {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
