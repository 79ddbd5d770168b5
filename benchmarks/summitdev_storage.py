"""The Summitdev study's storage experiments at small scale (issue #55, D5), on the SSH test bed.

The study trains from a shared parallel file system and from node-local NVMe (Fig. 4a: NVMe faster
by 4.63% with LeNet, 1.75% with AlexNet, 0% with the ResNets) and compares the runs' variability,
since a shared file system "is heavily dependant on the overall I/O in the system" (Fig. 4b). Here:

- four hosts of tests/testbed/testbed.py; node01 serves its local disk's folder at /mnt/shared on
  the others (tests/testbed/shared_fs.py: sshfs over its private link, shaped to 20 Mbit/s: a
  server slower than the nodes' own disks);
- the same ImageNet-format JPEGs (``dtfbench tfrecords``, 224 px, ~26 KB each) on the shared server
  and on each node's local disk;
- node02 and node03 train (2 workers, 1 PS), each run from a cold page cache (cache=cold), from the
  shared copy and from the local one, without and with node04 reading the same location beside the
  run (background_io, bounded to half the server's link: another job's first epoch);
- a small model whose input pipeline bounds it (trivial) and a larger one whose compute does
  (resnet50 at 64 px, 8 images a step).

Every sweep is one ``ansible-playbook run-benchmark.yml`` as a user runs it, stored in
results/benchmarks/summitdev_storage.sqlite; the figures (images/sec, the local copy's gain over the
shared one, spread and coefficient of variation per configuration, and each run's wall time: a
pipeline that reads ahead while TF starts can hide the storage from images/sec) go to
results/benchmarks/summitdev_storage.json. ~20 min on 2 cores.

    python benchmarks/summitdev_storage.py [--repetitions 3] [--lock FILE] [--from-store]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "testbed"))

import shared_fs  # noqa: E402
import testbed as tb  # noqa: E402
from bench_env import RESULTS, held, playbook_sweep, write_json  # noqa: E402

from dtfbench.report import stats  # noqa: E402
from dtfbench.results import store  # noqa: E402

OUT = RESULTS / "summitdev_storage.json"
DB = RESULTS / "summitdev_storage.sqlite"
HOSTS = 4
# The shared server's link: 2.5 MB/s, below the ~3.4 MB/s the small model reads from a local copy
# (~130 images/sec of ~26 KB on this machine's two cores) and far above the larger model's ~0.5 MB/s.
SERVER_MBIT = 20
READER_MB_PER_S = SERVER_MBIT / 8 / 2  # background_io: half the server's link
# The model whose input bounds it, and one whose compute does (fewer, smaller steps: ~10 images/sec).
MODELS = {"trivial": {}, "resnet50": {"batch_size": 8, "steps": 15}}
COMMON = dict(
    system="testbed", gpus=2, num_ps=1, data="real", image_size=64, batch_size=16, warmup_steps=5, steps=30,
    cache="cold", network_probe="false", fail_on_failed_runs="false",
    data_dir="/mnt/shared/images,/mnt/local_ssd/images", background_io="none,node04",
    background_io_mb_per_s=READER_MB_PER_S,
)  # fmt: skip


def dataset(folder: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "dtfbench", "tfrecords", "--output_dir", str(folder), "--shards", "8",
         "--images_per_shard", "128", "--image_size", "224"],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    return folder


def sweep(inventory: Path, model: str, repetitions: int) -> float:
    settings = dict(COMMON, model=model, **MODELS[model], repetitions=repetitions,
                    sweep_id=f"summitdev-storage-{model}", results_db=DB)  # fmt: skip
    # node01 serves the shared copy (its own reads would be local): the runs and the reader use the others.
    return playbook_sweep(inventory, settings, model, "--limit", "node02,node03,node04")


def wall_seconds(run: dict) -> float:
    """A run's wall time, from the role's start to its record: start-up, the read test, the steps."""
    return (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()


def figures(model: str) -> dict:
    """Per (storage, background reader): images/sec, its spread and CV, the runs' wall time, the
    reader's MB/s; and the local copy's gain over the shared one, with and without the reader."""
    rows = [r for r in store.runs(store.connect(DB)) if r["sweep_id"] == f"summitdev-storage-{model}"]
    out = {"configurations": []}
    for s in stats.summarise(rows):
        mine = [r for r in rows if r["storage"] == s["storage"] and r["background_io"] == s["background_io"]]
        rates = [r["background_io_mb_per_s"] for r in mine if r["background_io_mb_per_s"] is not None]
        walls = [wall_seconds(r) for r in mine if r["status"] == "ok"]
        out["configurations"].append(
            {
                "storage": "shared" if str(s["storage"]).startswith("fuse.") else "local",
                "storage_record": s["storage"],
                "background_io": s["background_io"],
                "n_ok": s["n_ok"],
                "failed": s["failed"],
                "images_per_sec": s["images_per_sec"],
                "ci_low": s["ci_low"],
                "ci_high": s["ci_high"],
                "spread": s["spread"],
                "cv": s["cv"],
                "reader_mb_per_s": sum(rates) / len(rates) if rates else None,
                "wall_seconds": statistics.fmean(walls) if walls else None,
                "wall_spread": (max(walls) - min(walls)) / statistics.fmean(walls) if len(walls) > 1 else None,
            }
        )
    by = {(c["storage"], c["background_io"]): c for c in out["configurations"]}
    for label, reader in (("quiet", None), ("under_load", "node04")):
        shared, local = by.get(("shared", reader)), by.get(("local", reader))
        both = shared and local and shared["images_per_sec"] and local["images_per_sec"]
        out[f"local_gain_{label}"] = local["images_per_sec"] / shared["images_per_sec"] - 1 if both else None
        out[f"shared_wall_ratio_{label}"] = shared["wall_seconds"] / local["wall_seconds"] if both else None
    return out


def summary(results: dict) -> str:
    lines = [f"shared server's link {results['server_mbit']} Mbit/s; reader bounded to {READER_MB_PER_S:g} MB/s"]

    def fmt(value, spec):
        return "-" if value is None else format(value, spec)

    for model, part in results["models"].items():
        lines.append(f"{model} ({part['seconds']:.0f} s):")
        for c in part["configurations"]:
            load = "with reader" if c["background_io"] else "quiet"
            reader = "" if c["reader_mb_per_s"] is None else f"  reader {c['reader_mb_per_s']:.2f} MB/s"
            lines.append(
                f"  {c['storage']:6} {load:11} img/s {fmt(c['images_per_sec'], '.1f'):>7}  "
                f"spread {fmt(c['spread'], '.3f'):>6}  cv {fmt(c['cv'], '.3f'):>6}  "
                f"run {fmt(c['wall_seconds'], '.1f'):>6} s (spread {fmt(c['wall_spread'], '.3f'):>5})  "
                f"ok {c['n_ok']}/{c['n_ok'] + c['failed']}{reader}"
            )
        for label in ("quiet", "under_load"):
            gain, wall = part.get(f"local_gain_{label}"), part.get(f"shared_wall_ratio_{label}")
            lines.append(
                f"  {label.replace('_', ' ')}: local over shared {fmt(gain, '+.1%')} images/sec; "
                f"a run from the shared copy took {fmt(wall, '.2f')}x the wall time"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repetitions", type=int, default=3)
    p.add_argument("--lock", default="", help="flock this file around each sweep (a machine others share)")
    p.add_argument("--from-store", action="store_true", help="only compute the figures again from the store")
    args = p.parse_args()
    if args.from_store:
        results = json.loads(OUT.read_text())
        for model in results["models"]:
            results["models"][model].update(figures(model))
        write_json(OUT, results, sort_keys=True)
        print(summary(results))
        return 0
    DB.parent.mkdir(parents=True, exist_ok=True)
    DB.unlink(missing_ok=True)  # each measurement is its own: a resumed sweep would mix two
    results = {"server_mbit": SERVER_MBIT, "reader_mb_per_s": READER_MB_PER_S, "settings": COMMON, "models": {}}
    with tempfile.TemporaryDirectory(prefix="dtfbench-summitdev-storage-") as tmp:
        bed_dir = Path(tmp) / "testbed"
        state = tb.up(bed_dir, hosts=HOSTS)
        try:
            shared = shared_fs.share(state, "node01", link_mbit=SERVER_MBIT) and shared_fs.shared_dir(state)
            dataset(shared / "images")
            for node in ("node02", "node03", "node04"):
                local = Path(next(n["dir"] for n in state["nodes"] if n["name"] == node)) / "local_ssd" / "images"
                shutil.copytree(shared / "images", local)
            for model in MODELS:
                with held(args.lock):
                    seconds = sweep(bed_dir / "hosts.yml", model, args.repetitions)
                results["models"][model] = {"seconds": seconds, **figures(model)}
                results["measured_at"] = time.strftime("%Y-%m-%d", time.gmtime())
                write_json(OUT, results, sort_keys=True)
        finally:
            tb.down(bed_dir)
    print(summary(results))
    print(f"figures: {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
