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


def test_a_node_set_down_ends_the_job_and_is_named(on_the_cluster, tmp_path):
    """Issue #56, case 5: a node set DOWN mid-run. The job (--no-requeue, as the role writes it) ends
    at once instead of being requeued, and the failure names the node and Slurm's reason."""
    import os
    import subprocess
    import time

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "job.sbatch").write_text(
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --no-requeue\n#SBATCH --job-name=dtfbench-library-down\n"
        f"#SBATCH --output={run_dir}/job-%j.out\nsrun sleep 300\n"
    )
    started = sj.slurm_job(params(run_dir, wait=False))
    job_id = started["job_id"]
    scontrol = [sj.shutil.which("scontrol")]
    deadline = time.monotonic() + 60
    while "JobState=RUNNING" not in subprocess.run([*scontrol, "show", "job", job_id], capture_output=True,
                                                   text=True, env=os.environ).stdout:  # fmt: skip
        assert time.monotonic() < deadline, "the job never started"
        time.sleep(0.5)
    node = sj.parse_show_job(subprocess.run([*scontrol, "--oneliner", "show", "job", job_id], capture_output=True,
                                            text=True).stdout)["NodeList"]  # fmt: skip
    second = subprocess.run(
        [sj.shutil.which("scontrol"), "show", "hostnames", node], capture_output=True, text=True
    ).stdout.split()[-1]
    subprocess.run([*scontrol, "update", f"nodename={second}", "state=down", "reason=pulled for the test"], check=True)
    try:
        began = time.monotonic()
        ended = sj.slurm_job(params(run_dir))
        took = time.monotonic() - began
    finally:
        subprocess.run([*scontrol, "update", f"nodename={second}", "state=resume"], check=False)
    assert ended["state"] in ("NODE_FAIL", "FAILED", "CANCELLED"), ended
    # Named: by Slurm's state and reason while it is still down, else by srun's "Node failure on" line
    # (the test cluster's slurmd answers again at once, and Slurm takes it back).
    assert f"failed node: {second} " in ended["failure"], ended["failure"]
    assert took < 60  # not requeued: no second run of the job


def test_a_failed_staging_leads_the_jobs_failure_and_each_nodes_report_is_returned(on_the_cluster, tmp_path):
    """The job's staging step (data_staging=copy) wrote each node's report; one that failed names
    its node and its cause before the job's state, which only says that the job failed."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    layout = {"num_workers": 1, "num_ps": 0, "hosts_used": ["node1"], "cluster_spec": {"worker": ["node1:2220"]}}
    error = "the staging target /dev/shm/x has 0.00 GB free; the dataset needs 1.00 GB more there"
    write_script(
        run_dir,
        f'mkdir -p "{run_dir}/job-$SLURM_JOB_ID"\n'
        f"echo '{json.dumps(layout)}' > \"{run_dir}/job-$SLURM_JOB_ID/layout.json\"\n"
        f"echo '{json.dumps({'node': 'node1', 'source': '/s', 'target': '/dev/shm/x', 'error': error})}'"
        f' > "{run_dir}/job-$SLURM_JOB_ID/staging-node1.json"\n'
        "exit 1\n",
    )
    done = sj.slurm_job(params(run_dir))
    assert done["state"] == "FAILED" and done["staging"]["node1"]["error"] == error
    assert done["failure"].startswith(
        f"the staging of the dataset failed on node1: {error}; Slurm job {done['job_id']} FAILED"
    )
