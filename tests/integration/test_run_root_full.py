"""A run directory's disk that is full (issue #30, item 2), through run-benchmark.yml as a user
runs it: a small tmpfs that the test mounts is `dtfbench_run_root`; real TF processes.

A disk that fills up once the worker wrote its result never loses the finished run: the
controller has the result and records it, the marker that the full disk refuses is a warning
naming the path, the variable and what to free. A disk full from the start is one failure
with the same words, before any task starts. No temporary file is left in either case."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from playbook_harness import extra_vars, run_playbook, small_run, start_playbook
from store_harness import fill

from dtfbench.launch import direct_call
from dtfbench.launch.host_run_spec import ARGUMENT_SPEC
from dtfbench.results import store

pytestmark = [pytest.mark.ansible]

SMALL = small_run(warmup_steps=1, steps=3, repetitions=1, num_ps=1, gpus=1)


def sweep_args(db: Path, run_root: Path, sweep_id: str) -> list[str]:
    return ["run-benchmark.yml", *extra_vars(sweep_id=sweep_id, results_db=db, dtfbench_run_root=run_root), *SMALL]


def flat(text: str) -> str:
    return " ".join(text.split())


class KeptFull:
    """Fills the file system of `folder` and keeps it full until stopped, as another program
    writing there would: room that a write frees (the supervisors' reserved room, once their
    records are written) is taken again within 2 ms (a stop wakes as a process ends)."""

    def __init__(self, folder: Path):
        self.filler, self.done = folder / "filler", threading.Event()
        self.thread = threading.Thread(target=self.fill, daemon=True)

    def fill(self):
        with open(self.filler, "ab", buffering=0) as out:
            while not self.done.is_set():
                try:
                    while True:
                        out.write(b"\0" * 4096)
                except OSError:
                    pass
                self.done.wait(0.002)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()


def leftovers(folder: Path) -> list[str]:
    """Temporary files of the launch code's writes (NAME.tmp.PID) under `folder`."""
    return sorted(str(p) for p in folder.rglob("*.tmp.*"))


@pytest.mark.tf
def test_a_disk_that_fills_up_after_the_result_keeps_the_run(tmp_path, small_tmpfs, live_processes):
    disk = small_tmpfs("4m")  # room for the check before the run (1 MB)
    run_root = disk / "runs"
    db = tmp_path / "results.sqlite"
    sweep_id = f"rootfull-{uuid.uuid4().hex[:8]}"
    log = open(tmp_path / "playbook.log", "w+")
    sweep = start_playbook(
        *sweep_args(db, run_root, sweep_id), stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        # The worker wrote its result: now the disk fills up, and stays full, before the
        # supervisors' exit records, the workload's last log lines and the marker are written.
        deadline = time.monotonic() + 300
        while not list(run_root.glob("*/worker-0.json")):
            assert sweep.poll() is None and time.monotonic() < deadline, log.read()[-3000:]
            time.sleep(0.02)
        with KeptFull(disk):
            assert sweep.wait(timeout=300) == 0, open(log.name).read()[-4000:]
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, 9)
    out = open(log.name).read()
    (run,) = store.runs(store.connect(db))
    assert run["status"] == "ok" and run["images_per_sec"] > 0, run
    run_dir = run_root / run["run_id"]
    text = flat(out)
    assert f"run_dir {run_dir}: the disk is full: cannot write {run_dir}/complete (No space left on device" in text, (
        out[-4000:]
    )
    assert "set dtfbench_run_root to a folder on a disk with room" in text
    assert f"the folders of earlier runs under {run_root} can go" in text
    assert "Traceback" not in out
    assert leftovers(disk) == []
    assert not (run_dir / "complete").exists()
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []


def test_a_disk_full_from_the_start_fails_the_run_before_anything_starts(tmp_path, small_tmpfs, live_processes):
    disk = small_tmpfs("1m")
    run_root = disk / "runs"
    fill(disk)
    db = tmp_path / "results.sqlite"
    sweep_id = f"rootfull-{uuid.uuid4().hex[:8]}"
    done = run_playbook(*sweep_args(db, run_root, sweep_id), merge_output=True)
    assert done.returncode == 2, done.stdout[-4000:]  # a failed run: recorded, then exit 2
    (run,) = store.runs(store.connect(db))
    assert run["status"] == "failed", run
    run_dir = run_root / run["run_id"]
    assert run["reason"].startswith(f"localhost: run_dir {run_dir}: the disk is full: 0 KB free on its file system"), (
        run
    )
    assert "(a run needs at least 1024 KB for its logs and results)" in run["reason"]
    assert "set dtfbench_run_root to a folder on a disk with room" in run["reason"]
    assert f"sweep {sweep_id}: 1 of 1 runs failed" in flat(done.stdout)
    assert "Traceback" not in done.stdout
    assert not run_root.exists()  # nothing started, nothing written
    assert [p for p in live_processes(sweep_id) if "dtfbench" in p] == []


def test_a_full_temporary_folder_still_answers_the_check(small_tmpfs):
    """The run directories are in /tmp by default, where tf_host_run's direct call unpacks its
    code: a full /tmp must still give the check's answer (the disk is full), not a traceback."""
    disk = small_tmpfs("256k")
    fill(disk, leave=8192)  # room for tempfile's probe of TMPDIR (a full one it skips), not for the code
    params = {name: spec.get("default") for name, spec in ARGUMENT_SPEC.items()}
    params.update(state="checked", run_id="r1", run_dir=str(disk / "runs" / "r1"), tasks=[])
    done = subprocess.run(
        [sys.executable, "-", direct_call.process_tag("tf_host_run")],
        input=direct_call.script("tf_host_run", params, False, direct_call.path_options(ARGUMENT_SPEC)),
        capture_output=True,
        env=dict(os.environ, TMPDIR=str(disk)),
        timeout=60,
    )
    result = direct_call.parse(done.stdout.decode())
    assert result is not None, done.stderr.decode()[-2000:]
    assert result["room_problem"].startswith(f"run_dir {disk}/runs/r1: the disk is full: 8 KB free"), result
    assert sorted(p.name for p in disk.iterdir()) == ["filler"]  # no partial file of the call
