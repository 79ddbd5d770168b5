"""The results store and the sweep, through run-benchmark.yml as a user runs it (issue #21):
a store that cannot take the results is refused before anything starts; a disk that fills up
mid-sweep keeps the finished run and stops the sweep; repeated values, a resume of another
configuration and failed runs are not silent. Real TF processes, real tmpfs mounts."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from playbook_harness import ROOT, extra_vars, run_playbook, small_run, start_playbook
from store_harness import fill, run_row

from dtfbench.results import store

pytestmark = [pytest.mark.ansible]

SMALL = small_run(warmup_steps=1, steps=3, repetitions=None, num_ps=1)


def sweep_args(db: Path, run_root: Path, sweep_id: str, *args: str) -> list[str]:
    return [
        "run-benchmark.yml",
        *extra_vars(sweep_id=sweep_id, results_db=db, dtfbench_run_root=run_root),
        *SMALL,
        *args,
    ]


def flat(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())


def truncated_store(path: Path) -> None:
    conn = store.connect(path)
    for n in range(100):
        store.add_run(
            conn,
            run_row(f"t-{n}", "t", worker_results=[{"pad": "x" * 500}]),
        )
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    path.write_bytes(path.read_bytes()[:20000])


@pytest.mark.parametrize("case", ["unwritable", "full disk", "not sqlite", "truncated"])
def test_a_store_that_cannot_take_the_results_is_refused_before_anything_starts(
    tmp_path, small_tmpfs, live_processes, case
):
    if case == "unwritable":
        db, message = Path("/proc/x/r.sqlite"), "results_db=/proc/x/r.sqlite: cannot create its folder /proc/x"
    elif case == "full disk":
        db = small_tmpfs("64k") / "r.sqlite"
        message = f"results_db={db}: the disk is full:"
    elif case == "not sqlite":
        db = tmp_path / "r.sqlite"
        db.write_text("gpus,images_per_sec\n1,40.5\n" * 200)
        message = f"results_db={db}: not an SQLite database (file is not a database)"
    else:
        db = tmp_path / "r.sqlite"
        truncated_store(db)
        message = f"results_db={db}: the database is damaged"
    before = db.read_bytes() if db.is_file() else None
    sweep_id = f"store-{uuid.uuid4().hex[:8]}"
    run_root = tmp_path / "runs"
    done = run_playbook(*sweep_args(db, run_root, sweep_id, "-e", "gpus=1"))
    assert done.returncode == 2, done.stdout[-3000:]
    assert message in flat(done), done.stdout[-3000:]
    assert "Validate the sweep" in re.findall(r"TASK \[(.*?)\]", done.stdout.split("fatal:")[0])[-1]  # the plan
    assert "Traceback" not in done.stdout + done.stderr
    assert not run_root.exists()  # nothing started
    assert (db.read_bytes() if db.is_file() else None) == before
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []


@pytest.mark.tf
def test_a_disk_that_fills_up_mid_sweep_keeps_the_run_and_stops_the_sweep(tmp_path, small_tmpfs, live_processes):
    disk = small_tmpfs("2m")
    db = disk / "results.sqlite"
    run_root = tmp_path / "runs"
    sweep_id = f"full-{uuid.uuid4().hex[:8]}"
    log = open(tmp_path / "playbook.log", "w+")
    sweep = start_playbook(
        *sweep_args(db, run_root, sweep_id, "-e", "gpus=1", "-e", "repetitions=2"),
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        # The plan found room; the disk fills up once the first run has started.
        deadline = time.monotonic() + 240
        while not (run_root.is_dir() and any(run_root.glob(f"{sweep_id}-*"))):
            assert sweep.poll() is None and time.monotonic() < deadline, log.read()
            time.sleep(0.2)
        fill(disk, leave=32 * 1024)  # room for the run's JSON, not for SQLite's WAL files (32 KB and more)
        assert sweep.wait(timeout=300) == 2
    finally:
        if sweep.poll() is None:
            os.killpg(sweep.pid, 9)
    log.seek(0)
    out = log.read()
    text = " ".join(out.split())
    assert "Traceback" not in out
    # The second run never started (the sweep's marker and port claim folders are no runs).
    (first_run,) = [p.name for p in run_root.iterdir() if p.name not in ("_sweeps", "_ports")]
    assert f"run {first_run} finished but was not recorded: results_db={db}: the disk is full" in text, out[-3000:]
    assert f"the sweep stops here (resume it with -e sweep_id={sweep_id})" in text
    kept = disk / f"results.sqlite.unrecorded-{first_run}.json"  # beside the store
    assert f"its result is kept in {kept} " in text, out[-3000:]
    record = json.loads(kept.read_text())
    assert record["run_id"] == first_run and record["status"] == "ok" and record["images_per_sec"] > 0
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []


@pytest.mark.tf
def test_a_sweep_means_what_it_says(tmp_path, live_processes):
    db = tmp_path / "results.sqlite"
    run_root = tmp_path / "runs"
    sweep_id = f"means-{uuid.uuid4().hex[:8]}"

    # A repeated value runs once, with a note.
    first = run_playbook(
        *sweep_args(db, run_root, sweep_id, "-e", "gpus=1", "-e", "model=trivial,trivial", "-e", "repetitions=1"),
    )
    assert first.returncode == 0, first.stdout[-3000:]
    assert "1 of 1 runs to do" in flat(first)
    assert "Note: model=trivial,trivial repeats trivial: each configuration runs once per repetition" in flat(first)
    assert [(r["model"], r["repetition"], r["status"]) for r in store.runs(store.connect(db))] == [("trivial", 1, "ok")]
    # Every run carries the project's revision, as git describes it.
    revision = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert [r["git_revision"] for r in store.runs(store.connect(db))] == [revision]

    # The same sweep_id with another configuration: refused before anything starts, both shown.
    other = run_playbook(
        *sweep_args(db, run_root, sweep_id, "-e", "gpus=1", "-e", "repetitions=1", "-e", "batch_size=16"),
    )
    assert other.returncode == 2, other.stdout[-3000:]
    text = flat(other)
    assert (
        f"sweep_id={sweep_id} is a sweep of another configuration (it differs in batch_size): recorded: batch_size=8 "
        in text
    )
    assert "asked now: batch_size=16 " in text and "-e sweep_extend=true" in text
    assert len(store.runs(store.connect(db))) == 1

    # With sweep_extend=true the new configuration joins the sweep.
    extended = run_playbook(
        *sweep_args(
            db,
            run_root,
            sweep_id,
            "-e",
            "gpus=1",
            "-e",
            "repetitions=1",
            "-e",
            "batch_size=16",
            "-e",
            "sweep_extend=true",
        ),
    )
    assert extended.returncode == 0, extended.stdout[-3000:]
    assert [(r["batch_size"], r["status"]) for r in store.runs(store.connect(db))] == [(8, "ok"), (16, "ok")]
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []
