"""The Slurm test cluster itself: it runs a job across nodes, and it leaves nothing behind,
also when its up fails half-way or the session that owns it is killed."""

import subprocess
from pathlib import Path

import polling
import pytest
import slurm_testcluster as tc

pytestmark = pytest.mark.skipif(bool(tc.missing_prerequisites()), reason=tc.missing_prerequisites() or "ok")


def wait_for(check, timeout=120.0):
    return polling.wait_for(check, timeout, interval=0.2)


def test_a_job_spans_nodes_that_reach_each_other_by_name(tmp_path):
    state = tc.up(tmp_path / "cluster", nodes=2)
    try:
        env = tc.client_env(state)
        script = tmp_path / "job.sh"
        script.write_text(
            "#!/bin/bash -l\n#SBATCH --nodes=2\n#SBATCH --export=NONE\n"
            f"#SBATCH --output={tmp_path}/job.out\n#SBATCH --constraint=gpu\n"
            'module use "$1" && module load daint-gpu TensorFlow/venv-python3\n'
            "srun --export=ALL --ntasks-per-node=1 bash -c "
            '\'echo "$(hostname) $(getent hosts node2 | cut -d" " -f1) $(python3 -c "import sys; print(sys.version_info[0])")"\'\n'
        )
        job = subprocess.run(
            ["sbatch", "--parsable", str(script), str(Path(state["dir"]) / "modulefiles")],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert wait_for(
            lambda: (
                "COMPLETED"
                in subprocess.run(["scontrol", "show", "job", job], env=env, capture_output=True, text=True).stdout
            )
        )
        lines = sorted((tmp_path / "job.out").read_text().split("\n"))
        node2 = state["nodes"][1]["ip"]
        assert [line for line in lines if line] == [f"node1 {node2} 3", f"node2 {node2} 3"]
    finally:
        tc.down(tmp_path / "cluster")
    assert tc.leftovers(state) == []
    assert not tc.down(tmp_path / "cluster")  # idempotent: nothing left to do


def test_a_failed_up_undoes_what_it_made(tmp_path, monkeypatch):
    made = {}

    def broken_slurmd(state, node):
        made.update(state)
        raise tc.ClusterError("slurmd broke")

    monkeypatch.setattr(tc, "start_slurmd", broken_slurmd)
    with pytest.raises(tc.ClusterError, match="slurmd broke"):
        tc.up(tmp_path / "cluster", nodes=2)
    assert made and tc.leftovers(made) == []


def test_the_watchdog_takes_a_killed_sessions_cluster_down(tmp_path):
    session = subprocess.Popen(["sleep", "600"])
    try:
        state = tc.up(tmp_path / "cluster", nodes=1, watch_pid=session.pid)
        assert state["watchdog_pid"] and tc.alive(state["pids"]["slurmctld"])
        with pytest.raises(tc.ClusterError, match="already holds"):
            tc.up(tmp_path / "cluster", nodes=1)
    finally:
        session.kill()
        session.wait()
    assert wait_for(lambda: tc.leftovers(state) == [], timeout=30), tc.leftovers(state)
