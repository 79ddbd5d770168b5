"""The playbook SIGKILLed in the middle of a sweep loses no finished run and corrupts nothing (#8).

run-benchmark.yml runs a 3-run sweep on the local inventory; as soon as the store holds
the first run, the whole ansible-playbook process group is SIGKILLed (no handler, no
`always:` runs). Then: the database passes SQLite's integrity check and holds the finished
run, intact (and the next one as interrupted, when it had started); the killed run's tasks,
which live in sessions of their own, are stopped by the controller's watchdog; and running the same command again with the same sweep_id does only the runs
that are left.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
import uuid

import pytest
from playbook_harness import extra_vars, run_playbook, small_run, start_playbook

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def test_killed_sweep_keeps_finished_runs_and_resumes(tmp_path, live_processes):
    sweep_id = f"killed-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    command = [
        "run-benchmark.yml",
        *extra_vars(gpus=1, num_ps=1),
        *small_run(steps=20, repetitions=3),
        *extra_vars(sweep_id=sweep_id, results_db=db, dtfbench_run_root=tmp_path / "runs"),
    ]
    log = open(tmp_path / "first.log", "w")
    first = start_playbook(*command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        if db.exists() and store.runs(store.connect(db), "sweep_id = ?", (sweep_id,)):
            break
        time.sleep(0.2)
    assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()

    # The interrupted run's tasks were in their own sessions; the controller's watchdog
    # (plugins/callback/dtfbench_interrupt.py) stops them and records the run as interrupted
    # (when the kill came after it started): tests/integration/test_interrupt.py.
    deadline = time.monotonic() + 120
    while [p for p in live_processes(sweep_id) if "dtfbench train" in p] and time.monotonic() < deadline:
        time.sleep(1)
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []
    time.sleep(2)  # the watchdog records after it stopped them
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    recorded = store.runs(store.connect(db), "sweep_id = ?", (sweep_id,))
    (kept,) = [r for r in recorded if r["status"] == "ok"]
    assert kept["images_per_sec"] > 0 and kept["repetition"] == 1
    assert all(r["reason"].startswith("interrupted: ") for r in recorded if r["status"] != "ok"), recorded

    again = run_playbook(*command)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "2 of" in again.stdout and "3 runs to do" in " ".join(again.stdout.split()), again.stdout[-3000:]
    runs = [r for r in store.runs(store.connect(db), "sweep_id = ?", (sweep_id,)) if r["status"] == "ok"]
    assert sorted(r["repetition"] for r in runs) == [1, 2, 3]
    assert runs[0]["run_id"] == kept["run_id"] and runs[0]["id"] == kept["id"]  # untouched
