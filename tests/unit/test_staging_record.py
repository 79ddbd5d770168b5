"""data_staging=copy: the plan's checks and its runs' data_dir, and each node's staging in the store."""

import re
import sqlite3

import pytest

from dtfbench.node.stage_data import stage
from dtfbench.plan.sweep import PlanError
from dtfbench.results import staging
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
BASE = {"gpus": 1, "num_ps": 1, "model": "trivial", "data": "real", "data_dir": "/scratch/imagenet",
        "sweep_id": "s", "repetitions": 1}  # fmt: skip


def test_a_staged_sweeps_runs_read_the_node_local_copy():
    result = plan_sweep({**BASE, "data": "both", "data_staging": "copy", "stage_dir": "/dev/shm/imagenet/"}, HOSTS)
    assert result["staging"] == {"source": "/scratch/imagenet", "target": "/dev/shm/imagenet"}
    # The dataset check looks at the shared copy before the staging; the real-data run reads the local one.
    assert result["data_dirs"] == ["/scratch/imagenet"]
    synthetic, real = result["runs"]
    assert "data_dir" not in synthetic and real["data_dir"] == "/dev/shm/imagenet"
    args = real["launch"]["args"]
    assert args[args.index("--data_dir") + 1] == "/dev/shm/imagenet"
    assert result["sweep_config"]["data_staging"] == "copy"
    assert result["sweep_config"]["stage_dir"] == "/dev/shm/imagenet"
    # Without staging, nothing changes: no staging, no data_dir on the run.
    plain = plan_sweep(BASE, HOSTS)
    assert plain["staging"] is None and "data_dir" not in plain["runs"][0]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"data_staging": "copy", "stage_dir": "/tmp/x", "data": "synthetic"},
         "data_staging=copy copies data_dir's dataset to each node, and synthetic data reads none"),
        ({"data_staging": "copy"}, "data_staging=copy needs stage_dir, an absolute node-local folder"),
        ({"data_staging": "copy", "stage_dir": "local/imagenet"}, "; got 'local/imagenet'"),
        ({"data_staging": "copy", "stage_dir": "/scratch/imagenet/copy"},
         "stage_dir=/scratch/imagenet/copy and data_dir=/scratch/imagenet overlap"),
        ({"data_staging": "copy", "stage_dir": "/local", "data_dir": "/scratch/imagenet,/nfs/imagenet"},
         "data_staging=copy stages one data_dir, and data_dir=/scratch/imagenet,/nfs/imagenet names 2"),
    ],
)  # fmt: skip
def test_a_staging_that_cannot_be_done_is_refused_before_anything_starts(request_, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_sweep({**BASE, **request_}, HOSTS)


def test_each_nodes_staging_is_stored_and_the_sweeps_time_is_the_slowest_nodes(tmp_path):
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "train-00000-of-00001").write_bytes(b"x" * 3000)
    first = dict(stage(tmp_path / "shared", tmp_path / "a"), node="node01", changed=True, invocation={"x": 1})
    second = dict(stage(tmp_path / "shared", tmp_path / "a"), node="node02", changed=False)
    db = tmp_path / "r.sqlite"
    answer = staging.record_stagings({"results_db": str(db), "sweep_id": "s1", "stagings": [first, second]})
    assert answer["summary"] == {
        "nodes": 2,
        "seconds": max(first["seconds"], second["seconds"]),
        "node_seconds": round(first["seconds"] + second["seconds"], 6),
        "copied_bytes": 3000,
        "already_staged": False,
    }
    assert answer["lines"][0].startswith("staging: 3e-06 GB to 2 node(s) in ")
    assert answer["lines"][1].startswith(f"node01: {tmp_path / 'shared'} -> {tmp_path / 'a'} (")
    assert ": 1 files, 3e-06 GB in " in answer["lines"][1]
    assert answer["lines"][2].startswith("node02: ") and ": staged already (3e-06 GB, checked in " in answer["lines"][2]
    stored = staging.read(db, "s1")
    assert [(s["node"], s["status"], s["already_staged"]) for s in stored] == [
        ("node01", "ok", False),
        ("node02", "ok", True),
    ]
    assert "invocation" not in stored[0] and "changed" not in stored[0]
    rows = sqlite3.connect(db).execute("SELECT node, copied_bytes, already_staged FROM stagings").fetchall()
    assert rows == [("node01", 3000, 0), ("node02", 0, 1)]
    with pytest.raises(ValueError, match="a staging report without seconds"):
        staging.record(db, "s1", [{k: v for k, v in first.items() if k != "seconds"}])


def test_the_report_sets_the_staging_time_against_the_time_the_runs_saved(tmp_path):
    """Summitdev's "might not be worth it", as a number: a staged sweep (tmpfs copy, 200 img/s)
    against the same configuration read from the shared copy (nfs4, 100 img/s)."""
    from store_harness import study_row

    from dtfbench.report import analysis, build, stats
    from dtfbench.results import store

    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    for sweep, storage, ips in (("shared", "nfs4", 100.0), ("staged", "tmpfs", 200.0)):
        row = study_row(f"{sweep}-1", sweep, "testbed", 1, 1, "parameter_server", "real", 1, ips,
                        model="lenet", batch_size=32, storage=storage)  # fmt: skip
        store.add_run(conn, row)
    conn.close()
    report = {"source": "/nfs/digits", "target": "/dev/shm/digits", "seconds": 40.0, "copied_bytes": 2_000_000_000,
              "bytes": 2_000_000_000, "already_staged": False, "copied_files": 6,
              "source_filesystem": {"fs_type": "nfs4"}, "target_filesystem": {"fs_type": "tmpfs"}}  # fmt: skip
    staging.record(db, "staged", [dict(report, node="node01"), dict(report, node="node02", seconds=30.0)])
    rows = analysis.load_rows(db)
    from dtfbench.report import staging as report_staging

    said = report_staging.lines(rows, stats.summarise(rows), str(db))
    # 100 steps x 32 images: 32 s from nfs4, 16 s from the copy; 16 s saved a run against 40 s of staging.
    assert said == [
        "staging of sweep staged: 4 GB from /nfs/digits (nfs4) to /dev/shm/digits (tmpfs) on 2 node(s), 40.0 s "
        "before the runs (1 staging(s), each its slowest node's time)",
        "  lenet bs 32 1 GPU(s) parameter_server: 200.0 img/s from the copy, 100.0 from the shared copy: +16.00 s a "
        "run of 100 steps; the staging pays for itself after 3 run(s) of this length",
    ]
    build.build(rows, tmp_path / "report", formats=(), db=str(db))
    index = (tmp_path / "report" / "index.md").read_text()
    assert "- staging of sweep staged: 4 GB from /nfs/digits" in index and "  - lenet bs 32 1 GPU(s)" in index
