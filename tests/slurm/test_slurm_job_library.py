"""slurm_job's logic (dtfbench.launch.slurm_job) on the Slurm test cluster, without Ansible:
a job submitted once, waited for and collected; a second call returns the record; a cancel
ends a running job."""

import json
import signal

import pytest
import slurm_testcluster as tc

from dtfbench.launch import controller_watch
from dtfbench.launch import slurm_job as sj

pytestmark = pytest.mark.skipif(bool(tc.missing_prerequisites()), reason=tc.missing_prerequisites() or "ok")


@pytest.fixture
def on_the_cluster(slurm_test_cluster, monkeypatch):
    """The test cluster's client environment; the signal handlers a waiting call installs
    (ControllerWatch) are given back afterwards."""
    for name, value in slurm_test_cluster["environment"].items():
        monkeypatch.setenv(name, value)
    handlers = {signum: signal.getsignal(signum) for signum in controller_watch.INTERRUPT_SIGNALS}
    yield
    for signum, handler in handlers.items():
        signal.signal(signum, handler)


def params(run_dir, **overrides):
    given = {name: spec.get("default") for name, spec in sj.ARGUMENT_SPEC.items()}
    given.update(run_dir=str(run_dir), poll_interval=0.5, timeout=120, **overrides)
    return given


def write_script(run_dir, body):
    (run_dir / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --job-name=dtfbench-library-test\n"
        f"#SBATCH --output={run_dir}/job-%j.out\n" + body
    )


def test_a_job_is_submitted_once_waited_for_and_collected(on_the_cluster, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    layout = {"num_workers": 1, "num_ps": 0, "cluster_spec": {"worker": ["node1:2220"]}}
    write_script(
        run_dir,
        f'mkdir -p "{run_dir}/job-$SLURM_JOB_ID"\n'
        f"echo '{json.dumps(layout)}' > \"{run_dir}/job-$SLURM_JOB_ID/layout.json\"\n"
        f'echo \'{{"status": "ok", "task_index": 0}}\' > "{run_dir}/job-$SLURM_JOB_ID/worker-0.json"\n'
        "echo trained\n",
    )
    first = sj.slurm_job(params(run_dir))
    assert (first["changed"], first["submitted"], first["state"], first["failure"]) == (True, True, "COMPLETED", "")
    assert first["layout"] == layout and len(first["nodes"]) == 1
    assert [w["result"]["slurm_job_id"] for w in first["workers"]] == [first["job_id"]]
    assert json.loads((run_dir / sj.STATE_FILE).read_text())["state"] == "COMPLETED"

    again = sj.slurm_job(params(run_dir))
    assert (again["submitted"], again["job_id"], again["state"]) == (False, first["job_id"], "COMPLETED")


def test_a_running_job_is_cancelled(on_the_cluster, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_script(run_dir, "sleep 300\n")
    started = sj.slurm_job(params(run_dir, wait=False))
    assert started["submitted"] and started["job_id"]
    cancelled = sj.slurm_job(params(run_dir, state="cancelled"))
    assert (cancelled["changed"], cancelled["cancelled"], cancelled["state"]) == (True, True, "CANCELLED")
    assert json.loads((run_dir / sj.STATE_FILE).read_text())["state"] == "CANCELLED"
    # Ended: a second cancel finds nothing to do.
    assert sj.slurm_job(params(run_dir, state="cancelled"))["changed"] is False
