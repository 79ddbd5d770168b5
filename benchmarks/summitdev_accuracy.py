"""The Summitdev study's accuracy experiments at small scale (issue #53, item 6), on the SSH test bed.

Four hosts of tests/testbed/testbed.py (network namespaces, real sshd, TF on the private
network), LeNet on scikit-learn's digits (dtfbench tfrecords --dataset digits), momentum 0.01,
16 images a worker, each sweep as a user runs it (ansible-playbook run-benchmark.yml):

- ``workers``: held-out top-1 after the same epochs with 1, 2 and 4 synchronous workers, the learning
  rate as given and scaled with the global batch (Fig. 8b; lr_scaling=none,linear);
- ``ps``: held-out top-1 after the same epochs with 1 to 4 PSs at 4 asynchronous workers (the
  study's Fig. 9b: "The accuracy reduces with the increase in the number of parameter servers");
- ``batch``: the same with batch sizes 16 to 256 at 4 synchronous workers (Fig. 13: "accuracy
  drops significantly");
- ``race``: 4 workers, synchronous and asynchronous, 1 and 2 PSs, each trained to a target
  top-1, 5 runs each: is the best configuration by images/sec also the best by time to accuracy?

Momentum at 0.005 for a device's batch: at 0.01, 4 asynchronous workers diverged at every PS
count (docs/accuracy.md). Every sweep is stored in results/benchmarks/summitdev_accuracy.sqlite (its report beside it,
plots included) and the figures in results/benchmarks/summitdev_accuracy.json. ~35 min on 2 cores.

    python benchmarks/summitdev_accuracy.py [--parts workers ps batch race]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testbed"))

import testbed as tb  # noqa: E402
from bench_env import RESULTS, held, playbook_sweep, write_json  # noqa: E402

from dtfbench.report import analysis, build, stats  # noqa: E402
from dtfbench.results import store  # noqa: E402

OUT = RESULTS / "summitdev_accuracy.json"
DB = RESULTS / "summitdev_accuracy.sqlite"
HOSTS = 4
EPOCHS = 5
# What every sweep shares: the digits at 32 pixels, LeNet, momentum, 16 images a device, 2 warm-up steps.
COMMON = dict(
    system="testbed", model="lenet", image_size=32, data="real", optimizer="momentum", learning_rate=0.005,
    warmup_steps=2, network_probe="false", batch_size=16, repetitions=3,
)  # fmt: skip
# Each part's sweep; an evaluation interval longer than the run evaluates once, after the last step.
ONCE = 100000
PARTS = {
    "workers": dict(gpus="1,2,4", num_ps=1, sync="true", lr_scaling="none,linear", max_epochs=EPOCHS,
                    eval_every_steps=ONCE),
    "ps": dict(gpus=HOSTS, num_ps="1,2,3,4", sync="false", max_epochs=EPOCHS, eval_every_steps=ONCE, repetitions=5),
    "batch": dict(gpus=HOSTS, num_ps=1, sync="true", batch_size="16,32,64,128,256", max_epochs=EPOCHS,
                  eval_every_steps=ONCE),
    # 5 runs a configuration: MLPerf's score drops the fastest and the slowest, and the CV needs them.
    "race": dict(gpus=HOSTS, num_ps="1,2", sync="true,false", target_accuracy=0.8, max_epochs=15, eval_every_steps=10,
                 repetitions=5),
}  # fmt: skip


def digits(folder: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "dtfbench", "tfrecords", "--dataset", "digits", "--output_dir", str(folder)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return folder


def sweep(inventory: Path, name: str, data_dir: Path) -> float:
    settings = dict(COMMON, **PARTS[name], data_dir=data_dir, sweep_id=f"summitdev-{name}", results_db=DB,
                    fail_on_failed_runs="false")  # fmt: skip
    return playbook_sweep(inventory, settings, name)


def figures(sweep_id: str) -> list[dict]:
    """Per configuration: what it varied, images/sec, held-out top-1 (mean, range), time to accuracy."""
    rows = [r for r in store.runs(store.connect(DB)) if r["sweep_id"] == sweep_id]
    out = []
    for s in stats.summarise(rows):
        out.append(
            {
                key: s.get(key)
                for key in (
                    "gpus",
                    "num_ps",
                    "sync",
                    "batch_size",
                    "lr_scaling",
                    "n_ok",
                    "failed",
                    "images_per_sec",
                    "ci_low",
                    "ci_high",
                    "eval_top1",
                    "eval_top1_min",
                    "eval_top1_max",
                    "time_to_accuracy",
                    "tta_ci_low",
                    "tta_ci_high",
                    "tta_converged",
                    "tta_runs",
                    "tta_cv",
                )
            }  # fmt: skip
        )
        out[-1]["failures"] = sorted({r["reason"] for r in rows if r["status"] != "ok" and r.get("reason")})[:3]
    return out


def summary(results: dict) -> str:
    lines = []
    for name, part in results["parts"].items():
        lines.append(f"{name} ({part['seconds']:.0f} s):")
        for c in part["configurations"]:
            setting = f"gpus={c['gpus']} ps={c['num_ps']} sync={c['sync']} bs={c['batch_size']} lr={c['lr_scaling']}"
            top1 = (
                "-"
                if c["eval_top1"] is None
                else f"{c['eval_top1']:.3f} ({c['eval_top1_min']:.3f}-{c['eval_top1_max']:.3f})"
            )
            tta = "-" if c["time_to_accuracy"] is None else f"{c['time_to_accuracy']:.1f} s"
            ips = "-" if c["images_per_sec"] is None else f"{c['images_per_sec']:.0f}"
            lines.append(
                f"  {setting:24} img/s {ips:>6}  top-1 {top1:24} to target {tta:>8}  ok {c['n_ok']}/{c['n_ok'] + c['failed']}"
            )
    race = results["parts"].get("race")
    if race:
        lines.append(race["verdict"])
    return "\n".join(lines)


def race_verdict(configurations: list[dict]) -> str:
    fastest = max((c for c in configurations if c["images_per_sec"]), key=lambda c: c["images_per_sec"], default=None)
    timed = [c for c in configurations if c["time_to_accuracy"] is not None]
    first = min(timed, key=lambda c: c["time_to_accuracy"], default=None)

    def name(c):
        return f"{c['num_ps']} PS, {'synchronous' if c['sync'] else 'asynchronous'}"

    if fastest is None or first is None:
        return "race: no configuration reached the target" if fastest else "race: nothing measured"
    same = (fastest["num_ps"], fastest["sync"]) == (first["num_ps"], first["sync"])
    return (
        f"race: most images/sec {name(fastest)} ({fastest['images_per_sec']:.0f}); first to the target "
        f"{name(first)} ({first['time_to_accuracy']:.1f} s): {'the same' if same else 'they differ'}"
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=list(PARTS))
    p.add_argument("--lock", default="", help="flock this file around each sweep (a machine others share)")
    args = p.parse_args()
    DB.parent.mkdir(parents=True, exist_ok=True)
    results = json.loads(OUT.read_text()) if OUT.exists() else {"parts": {}}
    with tempfile.TemporaryDirectory(prefix="dtfbench-summitdev-") as tmp:
        data_dir = digits(Path(tmp) / "digits")
        bed_dir = Path(tmp) / "testbed"
        tb.up(bed_dir, hosts=HOSTS)
        try:
            for name in args.parts:
                with held(args.lock):
                    seconds = sweep(bed_dir / "hosts.yml", name, data_dir)
                configurations = figures(f"summitdev-{name}")
                results["parts"][name] = {"settings": dict(COMMON, **PARTS[name]),
                                          "seconds": seconds, "configurations": configurations}  # fmt: skip
                if name == "race":
                    results["parts"][name]["verdict"] = race_verdict(configurations)
                results["measured_at"] = time.strftime("%Y-%m-%d", time.gmtime())
                write_json(OUT, results, sort_keys=True)
        finally:
            tb.down(bed_dir)
    build.build(analysis.load_rows(DB), DB.parent / "summitdev_accuracy_report", db=str(DB))
    print(summary(results))
    print(f"figures: {OUT}; report: {DB.parent / 'summitdev_accuracy_report' / 'index.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
