"""run-benchmark.yml through Slurm (-e system=slurm-test), end to end on a real Slurm.

The session's test cluster (tests/slurm/slurm_testcluster.py: Debian's slurmctld here, 4
slurmd in network namespaces, munge, Tcl modules standing in for Piz Daint's) runs every
job; this machine is the login node. Each run is one batch job whose script computes the
layout with dtfbench's layout code on $SLURM_JOB_NODELIST, and whose workers' JSON results end up
in the results store, as with the SSH launcher.
"""

import json
import subprocess
import textwrap
import uuid
from pathlib import Path

import pytest
from playbook_harness import extra_vars, run_playbook, small_run
from slurm_testcluster import missing_prerequisites, slurm_env  # noqa: F401

from dtfbench.results import store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.tf,
    pytest.mark.ansible,
    pytest.mark.skipif(bool(missing_prerequisites()), reason=missing_prerequisites() or "ok"),
]

SMALL = small_run()
# The parameter servers on nodes of their own (JSON: a boolean, where name=value gives a string).
PS_OWN_NODES = ("-e", '{"benchmark_ps_on_worker_nodes": false}')


def slurm(env, *argv):
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, check=True, timeout=30).stdout


def job_ids(env):
    """Every job the controller knows (finished ones stay for MinJobAge)."""
    out = slurm(env, "squeue", "--noheader", "--states=all", "--format=%i")
    return sorted(int(line) for line in out.split())


def run_dir(cluster, run_id):
    return Path(cluster["dir"]) / "work" / "runs" / run_id


def run_benchmark(slurm_env, db, *args, **kwargs):
    """run-benchmark.yml on the test cluster with the smallest run, `args` first, into the store `db`."""
    return run_playbook(
        "run-benchmark.yml",
        *extra_vars(system="slurm-test"),
        *args,
        *extra_vars(results_db=db),
        *SMALL,
        env=slurm_env,
        **kwargs,
    )


def output(done):
    return done.stdout[-6000:] + done.stderr[-3000:]


def run_one(slurm_env, db, *args):
    """run_benchmark (`args`) to a play that succeeds and stores one run: (the play, the run)."""
    done = run_benchmark(slurm_env, db, *args)
    assert done.returncode == 0, output(done)
    (run,) = store.runs(store.connect(db))
    return done, run


def test_sweep_runs_as_slurm_jobs_into_the_store(slurm_env, slurm_test_cluster, tmp_path, live_processes):
    """1 PS + 3 workers over 3 nodes (the PS on a worker node), recorded like an SSH run."""
    sweep_id = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    done, run = run_one(slurm_env, db, *extra_vars(gpus=3, num_ps=1, sweep_id=sweep_id))
    assert run["status"] == "ok", run["reason"]
    assert run["system"] == "slurm-test" and run["num_workers"] == 3 and run["num_ps"] == 1
    assert run["hosts"] == ["node1", "node2", "node3"]
    assert run["cluster_spec"] == {"ps": ["node1:2230"], "worker": ["node1:2220", "node2:2220", "node3:2220"]}
    assert len(run["images_per_sec_per_worker"]) == 3 and min(run["images_per_sec_per_worker"]) > 0
    assert run["images_per_sec"] == pytest.approx(sum(run["images_per_sec_per_worker"]))
    # The job id and node list travel with every worker's result.
    ids = {w["slurm_job_id"] for w in run["worker_results"]}
    assert len(ids) == 1 and {w["slurm_nodelist"] for w in run["worker_results"]} == {"node[1-3]"}
    (job_id,) = ids
    directory = run_dir(slurm_test_cluster, run["run_id"])
    record = json.loads((directory / "job.json").read_text())
    assert record["job_id"] == job_id and record["state"] == "COMPLETED"
    # The layout came from dtfbench's layout code inside the job, on the allocation.
    layout = json.loads((directory / f"job-{job_id}" / "layout.json").read_text())
    assert layout["cluster_spec"] == run["cluster_spec"]
    text = (directory / f"job-{job_id}.out").read_text()
    assert "node1: ps 0, CUDA_VISIBLE_DEVICES=''" in text and f"job {job_id} done" in text
    assert f"Slurm job {job_id} COMPLETED on node[1-3]" in done.stdout
    # Every node's NIC bytes over the workers' measured window (its sampler ran in the job
    # step; the login node cut its samples): node1 holds the PS that the others' workers use.
    assert sorted(run["nic"]) == run["hosts"], run["nic"]
    for node, figures in run["nic"].items():
        assert figures["status"] == "ok" and figures["rx_bytes"] > 0 and figures["tx_bytes"] > 0, (node, figures)
        assert (directory / f"job-{job_id}" / f"nic-{node}.samples").is_file()
    assert run["nic_busiest_host"] == "node1" and run["nic_tx_gb_per_s"] > 0

    assert live_processes(sweep_id) == []
    assert slurm(slurm_env, "squeue", "--noheader").strip() == ""
    # (Running the role again with the same run id submits nothing: molecule's idempotence.)


def test_parameter_servers_on_nodes_of_their_own(slurm_env, slurm_test_cluster, tmp_path, live_processes):
    sweep_id = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    _, run = run_one(slurm_env, db, *extra_vars(gpus=2, num_ps=1), *PS_OWN_NODES, *extra_vars(sweep_id=sweep_id))
    assert run["status"] == "ok", run["reason"]
    assert run["ps_on_worker_nodes"] in (0, False)
    # The allocation grew by the PS's node: 2 worker nodes + 1.
    assert run["hosts"] == ["node1", "node2", "node3"]
    assert run["cluster_spec"] == {"ps": ["node3:2230"], "worker": ["node1:2220", "node2:2220"]}
    assert {w["slurm_nodelist"] for w in run["worker_results"]} == {"node[1-3]"}
    # The PS's node has no measured steps of its own: its bytes are taken over the workers'
    # window, and it is the busiest (both workers' variables and gradients cross its NIC).
    assert run["nic"]["node3"]["status"] == "ok", run["nic"]
    assert run["nic_busiest_host"] == "node3", run["nic"]
    assert live_processes(sweep_id) == []


def test_all_reduce_runs_as_a_job_of_workers_only(slurm_env, slurm_test_cluster, tmp_path, live_processes):
    """collective_all_reduce through Slurm: the layout gives it workers only (no PS, no
    --ps_hosts), recorded like the PS modes' runs, each node's NIC both ways (a ring)."""
    sweep_id = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    _, run = run_one(
        slurm_env, db, *extra_vars(gpus=2, variable_update="collective_all_reduce", num_ps=0, sweep_id=sweep_id)
    )
    assert run["status"] == "ok", run["reason"]
    assert run["variable_update"] == "collective_all_reduce" and run["num_ps"] == 0 and run["num_workers"] == 2
    assert run["hosts"] == ["node1", "node2"]
    assert run["cluster_spec"]["worker"] == ["node1:2220", "node2:2220"] and not run["cluster_spec"].get("ps")
    assert len(run["images_per_sec_per_worker"]) == 2 and min(run["images_per_sec_per_worker"]) > 0
    for result in run["worker_results"]:
        assert result["config"]["variable_update"] == "collective_all_reduce"
        assert not result["config"].get("ps_hosts"), result["config"]
    (job_id,) = {w["slurm_job_id"] for w in run["worker_results"]}
    directory = run_dir(slurm_test_cluster, run["run_id"])
    layout = json.loads((directory / f"job-{job_id}" / "layout.json").read_text())
    assert layout["cluster_spec"] == run["cluster_spec"]
    assert "ps 0" not in (directory / f"job-{job_id}.out").read_text()
    # A ring: every node sends and receives its neighbour's share.
    for node, figures in run["nic"].items():
        assert figures["status"] == "ok" and figures["rx_bytes"] > 0 and figures["tx_bytes"] > 0, (node, figures)
    assert live_processes(sweep_id) == []
    assert slurm(slurm_env, "squeue", "--noheader").strip() == ""


def test_too_few_nodes_is_an_error_before_anything_is_submitted(slurm_env, tmp_path):
    before = job_ids(slurm_env)
    db = tmp_path / "results.sqlite"
    # 4 workers and a PS of its own need 5 nodes; the partition has 4.
    done = run_benchmark(slurm_env, db, *extra_vars(gpus=4, num_ps=1), *PS_OWN_NODES, timeout=180)
    assert done.returncode != 0
    text = done.stdout + done.stderr
    assert "not enough" in text and "4 hosts offer 4 devices" in text, output(done)
    assert job_ids(slurm_env) == before and not db.exists()


def test_the_role_checks_the_partition_before_submitting(slurm_env, slurm_test_cluster, tmp_path):
    """The role on its own (no sweep plan before it): its own check, naming the partition."""
    before = job_ids(slurm_env)
    play = tmp_path / "too-big.yml"
    play.write_text(
        textwrap.dedent(f"""\
        - name: A job bigger than the partition
          hosts: localhost
          gather_facts: false
          vars_files: [{ROOT}/playbooks/vars/systems/slurm-test.yml]
          tasks:
            - name: Run 5 workers on a partition of 4 nodes
              ansible.builtin.include_role:
                name: slurm_cluster
              vars:
                slurm_cluster_run_id: pytest-too-big-{uuid.uuid4().hex[:6]}
                slurm_cluster_gpus: 5
        """)
    )
    done = run_playbook(play, env=slurm_env, timeout=180)
    assert done.returncode != 0
    text = " ".join((done.stdout + done.stderr).split())
    assert "not enough for 5 workers" in text and "4 usable node(s) in partition debug" in text, output(done)
    assert job_ids(slurm_env) == before


def test_a_failed_job_is_recorded_as_failed_with_the_reason(slurm_env, slurm_test_cluster, tmp_path, live_processes):
    sweep_id = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    # Every task refuses the flag: the workers exit 2, the job fails. A failed run is recorded
    # and the sweep goes on; fail_on_failed_runs=false: the play ends with success all the same
    # (the default fails it at the end: tests/integration/test_bad_input.py).
    _, run = run_one(
        slurm_env,
        db,
        *extra_vars(gpus=2, sweep_id=sweep_id),
        "-e",
        '{"benchmark_extra_args": ["--no_such_flag", "1"]}',
        *extra_vars(fail_on_failed_runs="false"),
    )
    assert run["status"] == "failed" and run["images_per_sec"] is None
    reason = run["reason"]
    assert "Slurm job" in reason and "FAILED" in reason and "on node[1-2]" in reason, reason
    assert "unrecognized arguments: --no_such_flag" in reason, reason
    assert live_processes(sweep_id) == []
    assert slurm(slurm_env, "squeue", "--noheader").strip() == ""


def test_submit_false_only_writes_the_scripts(slurm_env, slurm_test_cluster, tmp_path):
    before = job_ids(slurm_env)
    sweep_id = f"pytest-slurm-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    done = run_benchmark(
        slurm_env,
        db,
        *extra_vars(gpus=2, submit="false", sweep_id=sweep_id),
        timeout=300,
    )
    assert done.returncode == 0, output(done)
    # The run id is the sweep id, the run's index and a digest of its configuration.
    (directory,) = (Path(slurm_test_cluster["dir"]) / "work" / "runs").glob(f"{sweep_id}-1-*")
    script = (directory / "job.sbatch").read_text()
    assert "#SBATCH --nodes=2" in script and "#SBATCH --partition=debug" in script
    assert "#SBATCH --no-requeue" in script  # a failed node ends the job; the sweep records it and goes on
    assert '--nodelist "$SLURM_JOB_NODELIST"' in script and "--account" not in script
    assert (directory / "node.sh").exists() and not (directory / "job.json").exists()
    root = Path(slurm_test_cluster["dir"]) / "work"
    assert list(root.glob("stacks/*/setup.sh")) and list((root / "wheels").glob("dtfbench-*.whl"))
    assert f"{directory}/job.sbatch" in " ".join(done.stdout.split())
    assert job_ids(slurm_env) == before and not db.exists()
