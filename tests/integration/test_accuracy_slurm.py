"""Time to accuracy inside Slurm jobs: every mode reaches its target in a job of the real Slurm test
cluster, and each run's MLPerf log times it as the store does (issue #53's acceptance; over SSH:
test_accuracy_testbed.py)."""

import uuid

import pytest
from accuracy_runs import EVERY_MODE, TO_TARGET, check_reached, digits, every_mode_runs  # noqa: F401
from playbook_harness import extra_vars, run_playbook, small_run
from slurm_testcluster import missing_prerequisites, slurm_env  # noqa: F401

from dtfbench.linux import procfs
from dtfbench.results import staging

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


@pytest.mark.skipif(bool(missing_prerequisites()), reason=missing_prerequisites() or "ok")
def test_every_mode_reaches_its_target_in_slurm_jobs(slurm_env, slurm_test_cluster, digits, tmp_path, live_processes):
    """PS synchronous and asynchronous, distributed_replicated both ways, and all-reduce, each in a
    batch job of the real Slurm test cluster (2 workers on 2 nodes, a PS beside them), from a copy
    each node stages first (data_staging=copy: a step of each job before the read test)."""
    sweep_id = f"pytest-slurm-tta-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    staged = tmp_path / "staged"
    done = run_playbook(
        "run-benchmark.yml",
        *extra_vars(system="slurm-test", gpus=2, num_ps=1, sync="true,false", sweep_id=sweep_id, results_db=db,
                    variable_update=EVERY_MODE,
                    data_dir=digits, cache="warm", data_staging="copy", stage_dir=staged, **TO_TARGET),
        *small_run(model=None, image_size=None, batch_size=None, steps=None),
        env=slurm_env,
        timeout=1200,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    runs = every_mode_runs(db)
    for run in runs:
        assert run["hosts"] == ["node1", "node2"] and {w["slurm_nodelist"] for w in run["worker_results"]} == {
            "node[1-2]"
        }
        check_reached(run, tmp_path)
        # Every node of the job read the data in a step before the tasks' (raw rate, file system, page cache).
        assert run["cache"] == "warm" and sorted(run["data_read"]) == ["node1", "node2"], run["data_read"]
        for node, measured in run["data_read"].items():
            assert measured["mb_per_s"] > 0 and measured["filesystem"]["fs_type"] == run["storage"], (node, measured)
            assert (measured["cache"]["setting"], measured["cache"]["resident"]) == ("warm", 1.0), (node, measured)
        assert run["storage"] == procfs.mount_of(str(digits))["fs_type"] and run["data_read_mb_per_s"] > 0
        assert run["worker_results"][0]["config"]["data_dir"] == str(staged)
    # Each job's nodes staged into one folder here (the test cluster's nodes share this file system):
    # in the first job the lock made one node wait for the other, which then found every file
    # staged; every later job found it all staged. The runs read the copy.
    stagings = staging.read(db, sweep_id)
    assert sorted(s["node"] for s in stagings) == sorted(["node1", "node2"] * len(runs))
    assert {s["run_id"] for s in stagings} == {r["run_id"] for r in runs}
    assert sorted((s["already_staged"], s["copied_files"]) for s in stagings) == [(False, 6)] + [(True, 0)] * (
        2 * len(runs) - 1
    ), stagings
    assert {s["target"] for s in stagings} == {str(staged)} and "staging: " in done.stdout
    assert sorted(p.name for p in staged.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in digits.iterdir()
    )
    assert live_processes(sweep_id) == []
