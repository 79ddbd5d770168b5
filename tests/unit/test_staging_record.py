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
