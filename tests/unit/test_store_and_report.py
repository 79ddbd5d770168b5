"""The results store (append-only, transactional) and the report computed from it."""

import json
import os
import sqlite3
import subprocess
import sys

import pytest
from store_harness import measured_row

from dtfbench.contract.outcomes import PEER_LOST
from dtfbench.report import analysis, tables
from dtfbench.results import record, store


def row(**overrides):
    return measured_row(**{"images_per_sec_per_worker": [100.0], **overrides})


def test_add_and_read_back(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    store.add_run(conn, row(hosts=["localhost"]))
    (got,) = store.runs(conn)
    assert got["images_per_sec"] == 100.0
    assert got["hosts"] == ["localhost"]
    assert got["images_per_sec_per_worker"] == [100.0]


def test_store_is_append_only(tmp_path):
    conn = store.connect(tmp_path / "r.sqlite")
    store.add_run(conn, row())
    with pytest.raises(sqlite3.IntegrityError):
        store.add_run(conn, row())  # the same run cannot succeed twice
    store.add_run(conn, row(run_id="s-2", status="failed", reason="a"))
    store.add_run(conn, row(run_id="s-2", status="failed", reason="b"))  # failed attempts are history
    with pytest.raises(sqlite3.DatabaseError, match="append-only"):
        with conn:
            conn.execute("UPDATE runs SET images_per_sec = 1")
    assert store.runs(conn)[0]["images_per_sec"] == 100.0
    assert len(store.runs(conn)) == 3


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"status": "meh"}, "status must be"),
        ({"gpus": None}, "lacks gpus"),
        ({"colour": "red"}, "unknown fields colour"),
    ],
)
def test_bad_records_are_refused_whole(tmp_path, bad, message):
    conn = store.connect(tmp_path / "r.sqlite")
    with pytest.raises(store.StoreError, match=message):
        store.add_run(conn, row(**bad))
    assert store.runs(conn) == []


def test_export_csv_and_json(tmp_path):
    db = tmp_path / "r.sqlite"
    store.add_run(store.connect(db), row())
    out = subprocess.run(
        [sys.executable, "-m", "dtfbench", "store", "export", "--db", str(db), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert json.loads(out)[0]["run_id"] == "s-1"
    csv_file = tmp_path / "r.csv"
    subprocess.run(
        [sys.executable, "-m", "dtfbench", "store", "export", "--db", str(db), "--output", str(csv_file)], check=True
    )
    header, first = csv_file.read_text().splitlines()[:2]
    assert header.startswith("id,run_id,sweep_id")
    assert ",s-1,s," in first


def test_report_mean_speedup_efficiency_and_failures():
    rows = [
        row(run_id="a", gpus=1, repetition=1, images_per_sec=100.0),
        row(run_id="b", gpus=1, repetition=2, images_per_sec=110.0),
        row(
            run_id="c",
            gpus=2,
            num_workers=2,
            repetition=1,
            images_per_sec=180.0,
            images_per_sec_per_worker=[90.0, 90.0],
        ),
        row(
            run_id="d",
            gpus=2,
            num_workers=2,
            repetition=2,
            status="failed",
            images_per_sec=None,
            reason="worker 1: peer died",
        ),
    ]
    one, two = analysis.summarise(rows)
    assert one["images_per_sec"] == pytest.approx(105.0)
    assert (one["images_per_sec_min"], one["images_per_sec_max"]) == (100.0, 110.0)
    assert one["speedup"] == pytest.approx(1.0)
    assert two["runs"] == 2 and two["failed"] == 1
    assert two["images_per_sec"] == pytest.approx(180.0)
    assert two["images_per_sec_per_worker"] == pytest.approx(90.0)
    assert two["speedup"] == pytest.approx(180.0 / 105.0)
    assert two["efficiency"] == pytest.approx(180.0 / 105.0 / 2)
    table = tables.format_table([one, two])
    assert "1/2" in table and "worker 1: peer died" in table


def test_report_without_a_one_gpu_baseline_leaves_speedup_blank():
    (only,) = analysis.summarise([row(gpus=2, num_workers=2, images_per_sec=150.0)])
    assert only["speedup"] is None and only["efficiency"] is None
    assert " - " in tables.format_table([only])


LAYOUT = {
    "num_workers": 2,
    "num_ps": 1,
    "hosts_used": ["localhost"],
    "cluster_spec": {"ps": ["127.0.0.1:2230"], "worker": ["127.0.0.1:2220", "127.0.0.1:2221"]},
}
RUN = {
    "run_id": "s-1",
    "gpus": 2,
    "num_ps": 1,
    "variable_update": "parameter_server",
    "data": "synthetic",
    "repetition": 1,
    "model": "small_cnn",
    "batch_size": 32,
    "devices_per_worker": 1,
    "warmup_steps": 10,
    "steps": 100,
    "ps_on_worker_nodes": True,
}


def worker(index, rate=50.0, status="ok", **extra):
    result = {
        "task_index": index,
        "status": status,
        "images_per_sec": rate,
        "tf_version": "2.21.0",
        "step_time": {"mean": 0.5, "p50": 0.5, "p95": 0.6, "stddev": 0.01},
        "config": {"image_size": 32, "cross_replica_sync": True},
    }
    result.update(extra)
    return {"result": result, "rc": 0 if status == "ok" else 1}


def payload(hosts):
    return {"run": RUN, "sweep_id": "s", "system": "local", "layout": LAYOUT, "hosts": hosts}


def test_record_of_a_good_run_sums_the_workers():
    rec = record.build_record(payload({"localhost": {"failure": "", "workers": [worker(1, 40.0), worker(0, 50.0)]}}))
    assert rec["status"] == "ok" and rec["reason"] is None
    assert rec["images_per_sec"] == pytest.approx(90.0)
    assert rec["images_per_sec_per_worker"] == [50.0, 40.0]  # by task index
    assert rec["step_time_p95"] == pytest.approx(0.6)
    assert rec["image_size"] == 32 and rec["tf_version"] == "2.21.0"


@pytest.mark.parametrize(
    "hosts, reason",
    [
        ({"localhost": {"failure": "worker 1 exited 1", "workers": [worker(0)]}}, "localhost: worker 1 exited 1"),
        (
            {"localhost": {"failure": "", "workers": [worker(0), worker(1, status="failed", reason="peer ps:0 died")]}},
            "worker 1: peer ps:0 died",
        ),
        ({"localhost": {"failure": "", "workers": [worker(0)]}}, "no result from worker(s) 1"),
        # The earliest failure is the cause (with its log tail); a peer's later one follows, first line only.
        (
            {
                "node01": {
                    "failure": "worker 0 exited with rc 1: step 3 failed with ps 0\nlog tail",
                    "failed_at": 200.0,
                    "workers": [],
                },
                "node02": {"failure": "worker 1 was killed by SIGKILL\nlog tail", "failed_at": 150.5, "workers": []},
            },
            "node02: worker 1 was killed by SIGKILL\nlog tail\nthen: node01: worker 0 exited with rc 1: step 3 failed with ps 0",
        ),
        # A worker that lost its peer is a consequence: a PS killed up to PEER_LOST_SLACK s later
        # (two supervisors on a loaded machine saw two near-simultaneous ends) is still the cause.
        (
            {
                "node02": {
                    "failure": f"worker 1 exited with rc 1: step 4 failed with ps 0 {PEER_LOST}",
                    "failed_at": 100.0,
                },
                "node01": {"failure": "task ps-0 was killed by SIGKILL\nlog tail", "failed_at": 100.4},
            },
            f"node01: task ps-0 was killed by SIGKILL\nlog tail\nthen: node02: worker 1 exited with rc 1: step 4 failed with ps 0 {PEER_LOST}",
        ),
        # ... but a lost peer well before any other failure is the first thing that went wrong.
        (
            {
                "node02": {
                    "failure": f"worker 1 exited with rc 1: step 4 failed with ps 0 {PEER_LOST}",
                    "failed_at": 100.0,
                },
                "node01": {"failure": "worker 0 timed out", "failed_at": 130.0},
            },
            f"node02: worker 1 exited with rc 1: step 4 failed with ps 0 {PEER_LOST}\nthen: node01: worker 0 timed out",
        ),
        # A host that left the play (unreachable) has no time: it is the cause of its peers' failures.
        (
            {
                "node01": {"failure": "worker 0 timed out", "failed_at": "1700000000.5", "workers": []},
                "node02": {"failure": "host left the play (unreachable or failed)", "workers": []},
            },
            "node02: host left the play (unreachable or failed)\nthen: node01: worker 0 timed out",
        ),
        (
            {"localhost": {"failure": "", "workers": [worker(0), worker(1, rate=None)]}},
            "worker 1: its result has no images_per_sec",
        ),
    ],
)
def test_record_of_a_failed_run_keeps_the_reason(hosts, reason):
    rec = record.build_record(payload(hosts))
    assert rec["status"] == "failed"
    assert rec["reason"] == reason
    assert rec["images_per_sec"] is None


def test_record_keeps_each_nodes_read_rate_and_the_slowest():
    measured = {
        "node01": {"mb_per_s": 812.5, "bytes": 4 << 20, "direct": True},
        "node02": {"mb_per_s": 640.0, "bytes": 4 << 20, "direct": True},
    }
    rec = record.build_record(
        dict(payload({"node01": {"failure": "", "workers": [worker(0), worker(1)]}}), data_read=measured)
    )
    assert rec["data_read_mb_per_s"] == 640.0 and rec["data_read"] == measured
    # Synthetic runs (no measurement) and a node whose measurement failed.
    assert record.build_record(payload({"n": {"failure": "", "workers": [worker(0), worker(1)]}}))["data_read"] is None
    rec = record.build_record(
        dict(
            payload({"n": {"failure": "", "workers": [worker(0), worker(1)]}}),
            data_read={"n": {"error": "no train-* files in /data"}},
        )
    )
    assert rec["data_read_mb_per_s"] is None and rec["data_read"] == {"n": {"error": "no train-* files in /data"}}


def resumed_store(path):
    """A sweep of one configuration, 3 repetitions; the second failed, and a resume ran it again."""
    conn = store.connect(path)
    for run_id, repetition, status in [("s-1", 1, "ok"), ("s-2", 2, "failed"), ("s-3", 3, "ok"), ("s-2", 2, "ok")]:
        failed = status == "failed"
        store.add_run(
            conn,
            row(
                run_id=run_id,
                repetition=repetition,
                status=status,
                images_per_sec=None if failed else 100.0,
                images_per_sec_per_worker=None if failed else [100.0],
                reason="interrupted: Ctrl-C" if failed else None,
            ),
        )
    conn.close()


def test_a_resumed_sweep_whose_runs_all_succeeded_shows_all_of_them_ok(tmp_path):
    db = tmp_path / "r.sqlite"
    resumed_store(db)
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "report", "table", "--db", str(db)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("local ")]
    assert " 3/3 " in line and "interrupted" not in done.stdout, done.stdout
    (summary,) = analysis.summarise(store.runs(store.connect(db)))
    assert (summary["runs"], summary["n_ok"], summary["failed"], summary["failures"]) == (3, 3, 0, [])


def test_report_table_into_a_closed_pipe_ends_quietly(tmp_path):
    """`report table | head`: the reader goes away before the table is written."""
    db = tmp_path / "r.sqlite"
    resumed_store(db)
    read, write = os.pipe()
    os.close(read)
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "report", "table", "--db", str(db)],
        stdout=write,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
    )
    os.close(write)
    assert "BrokenPipeError" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1
