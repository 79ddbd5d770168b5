"""P4: our workload against tf_cnn_benchmarks, on the same CPU, model, batch and threads, in one run.

    PYTHONPATH=src python benchmarks/workload_vs_tf_cnn.py [--models resnet50 inception3 vgg16 alexnet]
        [--setups single ps1w2 ar2] [--legs ours tf_cnn tf_cnn_study] [--lock /tmp/dtfbench-heavy.lock]

Legs (programs), each in fresh processes:

- ours: ``python -m dtfbench train`` on the .venv's TensorFlow 2.x;
- tf_cnn: tf_cnn_benchmarks master (tensorflow/benchmarks at --tf_cnn_commit) on the same
  TensorFlow, with tf_keras (scripts/tf-keras-path.sh) and TF_USE_LEGACY_KERAS=1;
- tf_cnn_study: the study's own copy, google-benchmarks/tf_cnn_benchmarks of
  e-bug/distributed-tensorflow-benchmarks at --study_commit, on TF 1.1 (scripts/tf1-venv.sh).

Setups: ``single`` (one process: ours --variable_update independent, tf_cnn_benchmarks' local
parameter_server), ``ps1w2`` (1 PS + 2 workers on 127.0.0.1, parameter_server, synchronous) and
``ar2`` (2 workers on 127.0.0.1, collective_all_reduce: ours through MultiWorkerMirroredStrategy,
tf_cnn_benchmarks' graph-mode collective ops with --all_reduce_spec=collective). The study's
program (TF 1.1) has no all-reduce mode: its leg runs the other two setups only.
All: --device cpu, NHWC, batch --batch_size per worker, the model's default image size, synthetic
data, SGD, --num_intra_threads/--num_inter_threads passed to all (0: TF chooses; the study's
program defaults to 1 intra-op thread, so it is always passed).

The figure of a leg is the sum over its workers of the worker's mean images/sec over the
measured steps, read from the worker's last step line: all three programs print it with the
same formula (batch / step time, averaged; tf_cnn_benchmarks' get_perf_timing_str), while their
'total images/sec' lines count distributed runs differently. Every (model, setup) runs its legs
back to back, their order rotated each round, each under --lock when given (the machine's heavy
lock, held per leg, not for the whole run); the load average is recorded with each result.
The JSON is rewritten after every leg ("complete": false until the last one).

Sources come from git: --tf_cnn_repo / --study_repo (default: the bundles in
$DTFBENCH_MIRRORS or ../shared/mirrors, else GitHub), cloned once per commit into the cache.
"""

import argparse
import os
import platform
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench_env import RESULTS, ROOT, free_ports, held, write_json

# The tests' lookup of the mirrors' bundles (tests/harness/mirror_bundles.py), one for both.
sys.path.insert(0, str(ROOT / "tests" / "harness"))
from mirror_bundles import find_bundle, mirror_places  # noqa: E402

SRC = ROOT / "src"
TF_CNN_COMMIT = "8fb79079265933ad39bea628b777af662f5bf15d"  # tensorflow/benchmarks master, 2024-01
STUDY_COMMIT = "a0d3d61"  # e-bug/distributed-tensorflow-benchmarks, the study's repository
BUNDLES = {
    "tf_cnn": ("tensorflow-benchmarks.bundle", "https://github.com/tensorflow/benchmarks"),
    "tf_cnn_study": (
        "distributed-tensorflow-benchmarks.bundle",
        "https://github.com/e-bug/distributed-tensorflow-benchmarks",
    ),
}
SCRIPT_DIRS = {"tf_cnn": "scripts/tf_cnn_benchmarks", "tf_cnn_study": "google-benchmarks/tf_cnn_benchmarks"}
LEGS = ("ours", "tf_cnn", "tf_cnn_study")
SETUPS = ("single", "ps1w2", "ar2")
# The setups each leg can run: TF 1.1's tf_cnn_benchmarks predates collective_all_reduce.
LEG_SETUPS = {"ours": SETUPS, "tf_cnn": SETUPS, "tf_cnn_study": ("single", "ps1w2")}
STEP_LINE = re.compile(r"^\s*(\d+)\s+images/sec: ([\d.]+)")
GOAL = 1.0


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "inception3", "vgg16", "alexnet"])
    p.add_argument("--setups", nargs="+", default=["single", "ps1w2"], choices=SETUPS)
    p.add_argument("--legs", nargs="+", default=list(LEGS), choices=LEGS)
    p.add_argument(
        "--study_models",
        nargs="+",
        default=["resnet50", "inception3"],
        help="the models the study's program (TF 1.1, ~3x slower here) runs",
    )
    p.add_argument("--batch_size", type=int, default=16)
    p.add_argument("--num_warmup_batches", type=int, default=3)
    p.add_argument("--num_batches", type=int, default=10)
    p.add_argument("--num_intra_threads", type=int, default=0)
    p.add_argument("--num_inter_threads", type=int, default=0)
    p.add_argument("--repeats", type=int, default=1, help="rounds; each leg's best round counts")
    p.add_argument("--lock", help="flock this file around each leg (the machine's heavy lock)")
    p.add_argument("--tf_cnn_repo", help="git URL or bundle of tensorflow/benchmarks")
    p.add_argument("--tf_cnn_commit", default=TF_CNN_COMMIT)
    p.add_argument("--study_repo", help="git URL or bundle of e-bug/distributed-tensorflow-benchmarks")
    p.add_argument("--study_commit", default=STUDY_COMMIT)
    p.add_argument("--timeout", type=int, default=1200, help="seconds per leg")
    p.add_argument("--output", default=str(RESULTS / "workload_vs_tf_cnn.json"))
    return p.parse_args(argv)


# --- sources and environments -----------------------------------------------------------


def cache_dir():
    return Path(os.environ.get("DTFBENCH_CACHE_DIR") or Path.home() / ".cache" / "dtfbench")


def default_repo(leg):
    bundle, url = BUNDLES[leg]
    found = find_bundle(bundle, mirror_places(ROOT))
    return str(found) if found is not None else url


def checkout(leg, repo, commit):
    """The script folder of ``repo`` at ``commit``, cloned once into the cache."""
    target = cache_dir() / "bench-sources" / f"{leg}-{commit}"
    if not (target / ".complete").is_file():
        subprocess.run(["rm", "-rf", str(target)], check=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "clone", "-q", "--no-checkout", repo, str(target)], check=True)
        subprocess.run(["git", "-C", str(target), "checkout", "-q", commit], check=True)
        (target / ".complete").write_text(commit + "\n")
    return target / SCRIPT_DIRS[leg]


def script_output(command):
    done = subprocess.run([str(ROOT / "scripts" / command)], capture_output=True, text=True, timeout=1800)
    if done.returncode:
        raise SystemExit(f"scripts/{command} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    return done.stdout.strip()


class Programs:
    """How to start each leg: interpreter, program, environment, flags."""

    def __init__(self, args):
        self.args = args
        self.base_env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
        self.base_env.pop("TF_CONFIG", None)
        self.legs = {}
        if "ours" in args.legs:
            env = dict(self.base_env, PYTHONPATH=str(SRC))
            self.legs["ours"] = ([sys.executable, "-m", "dtfbench", "train"], env, None)
        if "tf_cnn" in args.legs:
            folder = checkout("tf_cnn", args.tf_cnn_repo or default_repo("tf_cnn"), args.tf_cnn_commit)
            env = dict(self.base_env, PYTHONPATH=script_output("tf-keras-path.sh"), TF_USE_LEGACY_KERAS="1")
            self.legs["tf_cnn"] = ([sys.executable, "tf_cnn_benchmarks.py"], env, folder)
        if "tf_cnn_study" in args.legs:
            folder = checkout("tf_cnn_study", args.study_repo or default_repo("tf_cnn_study"), args.study_commit)
            python = str(Path(script_output("tf1-venv.sh")) / "bin" / "python")
            env = dict(self.base_env)
            env.pop("PYTHONPATH", None)
            self.legs["tf_cnn_study"] = ([python, "tf_cnn_benchmarks.py"], env, folder)

    def flags(self, leg, model):
        a = self.args
        common = {
            "model": model,
            "batch_size": a.batch_size,
            "num_batches": a.num_batches,
            "num_warmup_batches": a.num_warmup_batches,
            "device": "cpu",
            "data_format": "NHWC",
            "num_intra_threads": a.num_intra_threads,
            "num_inter_threads": a.num_inter_threads,
            "display_every": a.num_batches,
        }
        if leg == "ours":
            common.update(optimizer="sgd", step_timeout=a.timeout)
        else:
            common.update(local_parameter_device="cpu", num_gpus=1, optimizer="sgd")
        return [f"--{k}={v}" for k, v in common.items()]

    def command(self, leg, model, setup, job=None, index=0, ps_hosts="", worker_hosts=""):
        program, env, cwd = self.legs[leg]
        argv = [*program, *self.flags(leg, model)]
        if setup == "single":
            argv.append("--variable_update=independent" if leg == "ours" else "--variable_update=parameter_server")
        elif setup == "ar2":
            argv += [
                "--variable_update=collective_all_reduce",
                f"--job_name={job}",
                f"--task_index={index}",
                f"--worker_hosts={worker_hosts}",
            ]
            if leg != "ours":  # tf_cnn_benchmarks' collective mode takes one single-range spec
                argv.append("--all_reduce_spec=collective")
        else:
            argv += [
                "--variable_update=parameter_server",
                "--cross_replica_sync=true",
                f"--job_name={job}",
                f"--task_index={index}",
                f"--ps_hosts={ps_hosts}",
                f"--worker_hosts={worker_hosts}",
            ]
        return argv, env, cwd


# --- running a leg ----------------------------------------------------------------------


def worker_rate(output, what):
    """The worker's mean images/sec over the measured steps (its last step line)."""
    rates = [float(m.group(2)) for m in map(STEP_LINE.match, output.splitlines()) if m]
    if not rates:
        raise RuntimeError(f"{what}: no step line in its output:\n{output[-3000:]}")
    return rates[-1]


def kill_group(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def run_leg(programs, leg, model, setup, timeout):
    if setup == "single":
        argv, env, cwd = programs.command(leg, model, setup)
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"{leg} {model} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}")
        return [worker_rate(done.stdout + done.stderr, f"{leg} {model}")]
    num_ps = 0 if setup == "ar2" else 1
    ports = free_ports(num_ps + 2)
    ps_hosts = ",".join(f"127.0.0.1:{port}" for port in ports[:num_ps])
    worker_hosts = ",".join(f"127.0.0.1:{port}" for port in ports[num_ps:])
    tasks = [("ps", i) for i in range(num_ps)] + [("worker", i) for i in range(2)]
    processes = []
    try:
        for job, index in tasks:
            argv, env, cwd = programs.command(leg, model, setup, job, index, ps_hosts, worker_hosts)
            processes.append(
                subprocess.Popen(
                    argv,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=env,
                    cwd=cwd,
                    start_new_session=True,
                )
            )
        rates = []
        deadline = time.monotonic() + timeout
        for (_job, index), process in list(zip(tasks, processes))[num_ps:]:
            output, _ = process.communicate(timeout=max(1, deadline - time.monotonic()))
            if process.returncode:
                raise RuntimeError(
                    f"{leg} {model} worker {index} failed (exit {process.returncode}):\n{output[-3000:]}"
                )
            rates.append(worker_rate(output, f"{leg} {model} worker {index}"))
        return rates
    finally:
        for process in processes:  # the PSs never exit by themselves (tf_cnn_benchmarks')
            kill_group(process)


def summarize(args, legs, samples):
    """(best images/sec per model/setup/leg, ratios ours / peer)."""
    best = {key: max(s["images_per_sec"] for s in values) for key, values in samples.items()}
    ratios = {}
    for model in args.models:
        for setup in args.setups:
            ours = best.get(f"{model}/{setup}/ours")
            for leg in legs:
                if leg != "ours" and ours and f"{model}/{setup}/{leg}" in best:
                    ratios[f"{model}/{setup}/ours_vs_{leg}"] = ours / best[f"{model}/{setup}/{leg}"]
    return best, ratios


def write_report(args, legs, samples, started, complete):
    """The JSON after every leg (complete: false until the last), replaced atomically."""
    best, ratios = summarize(args, legs, samples)
    report = {
        "config": {k: v for k, v in vars(args).items() if k != "output"},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "unit": "images/sec (sum over workers of each worker's mean over the measured steps)",
        "images_per_sec": best,
        "samples": samples,
        "ratios": ratios,
        "goal": GOAL,
        "meets_goal": {k: v >= GOAL for k, v in ratios.items()},
        "complete": complete,
        "seconds": time.monotonic() - started,
    }
    return write_json(args.output, report, sort_keys=True)


# --- main ---------------------------------------------------------------------------------


def main(argv=None):
    args = parse_args(argv)
    started = time.monotonic()
    programs = Programs(args)
    legs = [leg for leg in LEGS if leg in args.legs]
    samples = {}  # "model/setup/leg" -> [{"images_per_sec", "workers", "load"}]
    for round_number in range(args.repeats):
        for model in args.models:
            for setup in args.setups:
                shift = round_number % len(legs)
                for leg in legs[shift:] + legs[:shift]:
                    if setup not in LEG_SETUPS[leg] or (leg == "tf_cnn_study" and model not in args.study_models):
                        continue
                    with held(args.lock):
                        load = os.getloadavg()
                        rates = run_leg(programs, leg, model, setup, args.timeout)
                        key = f"{model}/{setup}/{leg}"
                        samples.setdefault(key, []).append(
                            {
                                "images_per_sec": sum(rates),
                                "workers": rates,
                                "load_before": load,
                                "load_after": os.getloadavg(),
                            }
                        )
                        print(
                            f"round {round_number + 1}: {model:10s} {setup:6s} {leg:13s} {sum(rates):8.2f} images/sec"
                            f" (workers {', '.join(f'{r:.1f}' for r in rates)}; load {load[0]:.2f})",
                            flush=True,
                        )
                    write_report(args, legs, samples, started, complete=False)
    output = write_report(args, legs, samples, started, complete=True)
    best, ratios = summarize(args, legs, samples)
    print(f"\n{'model':10s} {'setup':6s} " + " ".join(f"{leg:>13s}" for leg in legs) + "  ratios (ours / peer)")
    for model in args.models:
        for setup in args.setups:
            cells = " ".join(f"{best.get(f'{model}/{setup}/{leg}', float('nan')):13.2f}" for leg in legs)
            rs = ", ".join(
                f"{leg} {ratios[f'{model}/{setup}/ours_vs_{leg}']:.2f}x"
                for leg in legs
                if f"{model}/{setup}/ours_vs_{leg}" in ratios
            )
            print(f"{model:10s} {setup:6s} {cells}  {rs}")
    print(f"written to {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
