"""The study's program on the study's TF 1.1 module through Slurm: system=daint's defaults, for real.

The session's Slurm test cluster (tests/slurm/slurm_testcluster.py) gets Piz Daint's module
``TensorFlow/1.1.0-CrayGNU-17.08-cuda-8.0-python3`` (tests/slurm/tf1_module.py: the study's TF 1.1
virtualenv, Python 3.6). run-benchmark.yml runs with ``-e system=daint`` and neither a workload
nor a module: the profile's defaults (daint-gpu, the TF 1.1 module, workload=cscs2017) unchanged;
only the machine's own values (partition, CPU nodes, where the modules are, SLURM_CONF) are
the test cluster's, and $SCRATCH is a temporary directory. The study's script comes from this
machine's bundle of its repository; the job computes its layout with dtfbench's layout code on
the module's Python 3.6, without dtfbench.
"""

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from playbook_harness import extra_vars, run_playbook, small_run
from slurm_testcluster import missing_prerequisites
from tf1_module import TF1_MODULE, slurm_tf1_module  # noqa: F401

from dtfbench.results import store

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.tf,
    pytest.mark.ansible,
    pytest.mark.skipif(bool(missing_prerequisites()), reason=missing_prerequisites() or "ok"),
]

STUDY_COMMIT = "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741"
SMALL = small_run(image_size=None)


def daint_on_the_test_cluster(cluster) -> dict:
    """system=daint's machine values swapped for the test cluster's; its modules and workload kept."""
    return {
        "slurm_cluster_partition": "debug",
        "slurm_cluster_device_type": "cpu",
        "slurm_cluster_max_nodes": 4,
        "slurm_cluster_module_paths": [f"{cluster['dir']}/modulefiles"],
        "slurm_cluster_environment": {"SLURM_CONF": cluster["environment"]["SLURM_CONF"]},
        "slurm_cluster_poll_interval": 0.5,
        "slurm_cluster_wait_timeout": 600,
    }


@pytest.fixture
def daint(ansible_env, slurm_test_cluster, tmp_path):
    """A function: run-benchmark.yml -e system=daint on the test cluster, $SCRATCH in tmp_path."""
    env = dict(ansible_env)
    env.update(slurm_test_cluster["environment"])
    env["SCRATCH"] = str(tmp_path / "scratch")

    def play(*args, timeout=600):
        return run_playbook(
            "run-benchmark.yml",
            "-e",
            "system=daint",
            "-e",
            json.dumps(daint_on_the_test_cluster(slurm_test_cluster)),
            *extra_vars(results_db=tmp_path / "results.sqlite", tf_cnn_benchmarks_cache=tmp_path / "cache"),
            *SMALL,
            *args,
            env=env,
            timeout=timeout,
        )

    return play


def slurm(cluster, *argv):
    env = dict(cluster["environment"])
    env["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin"
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, check=True, timeout=30).stdout


def job_ids(cluster):
    return sorted(int(line) for line in slurm(cluster, "squeue", "--noheader", "--states=all", "--format=%i").split())


def output(done):
    return done.stdout[-6000:] + done.stderr[-3000:]


def test_daint_defaults_run_the_studys_program_on_its_tf_1_1_module(
    daint, slurm_test_cluster, slurm_tf1_module, tmp_path, mirror_bundle, live_processes, study_extraction
):
    bundle = mirror_bundle("distributed-tensorflow-benchmarks.bundle")
    sweep_id = f"study-slurm-{uuid.uuid4().hex[:6]}"
    done = daint(
        "-e", "gpus=2", "-e", "num_ps=1", "-e", f"sweep_id={sweep_id}", "-e", f"tf_cnn_benchmarks_repo={bundle}"
    )
    assert done.returncode == 0, output(done)
    assert f"workload cscs2017: commit {STUDY_COMMIT} of {bundle}" in " ".join(done.stdout.split())

    (run,) = store.runs(store.connect(tmp_path / "results.sqlite"))
    assert run["status"] == "ok", run["reason"]
    assert (run["system"], run["workload"], run["workload_ref"], run["workload_commit"]) == (
        "daint",
        "cscs2017",
        STUDY_COMMIT,
        STUDY_COMMIT,
    )
    assert run["tf_version"] == "1.1" and run["images_per_sec"] > 0
    # 1 PS + 2 workers over 2 nodes, the PS beside worker 0: the layout the job computed.
    assert run["hosts"] == ["node1", "node2"]
    assert run["cluster_spec"] == {"ps": ["node1:2230"], "worker": ["node1:2220", "node2:2220"]}
    scratch = tmp_path / "scratch" / "dtfbench"
    (job_id,) = {w["slurm_job_id"] for w in run["worker_results"]}
    job_dir = scratch / "runs" / run["run_id"] / f"job-{job_id}"
    assert json.loads((job_dir / "layout.json").read_text())["cluster_spec"] == run["cluster_spec"]
    for worker in run["worker_results"]:
        # The study's script from its repository, unpacked where the compute nodes see it.
        assert worker["workload"]["script"] == str(
            scratch / "tf_cnn_benchmarks" / STUDY_COMMIT / "google-benchmarks/tf_cnn_benchmarks/tf_cnn_benchmarks.py"
        )
        # The study's own extraction reads each worker's log as the job wrote it.
        log = job_dir / f"worker-{worker['task_index']}.log"
        assert study_extraction(log) == f"{worker['total_images_per_sec']:.2f}", log.read_text()[-1000:]
    # The job's environment: daint-gpu and the TF 1.1 module, no virtualenv and no dtfbench wheel;
    # the layout step is dtfbench's layout code run by the module's python3 (3.6).
    (stack,) = (scratch / "stacks").iterdir()  # one software stack: the TF 1.1 module's
    modules = (stack / "modules.sh").read_text()
    assert "dtfbench_module_load daint-gpu" in modules and f"dtfbench_module_load {TF1_MODULE}" in modules
    assert not (stack / "venv").exists() and not (scratch / "wheels").exists()
    script = (scratch / "runs" / run["run_id"] / "job.sbatch").read_text()
    assert f"LAYOUT=(python3 {scratch}/dtfbench_layout.py" in script
    assert (scratch / "dtfbench_layout.py").read_text() == (
        ROOT / "src" / "dtfbench" / "plan" / "layout.py"
    ).read_text()
    assert "-m dtfbench" not in (scratch / "runs" / run["run_id"] / "node.sh").read_text()

    assert live_processes(sweep_id) == []
    assert slurm(slurm_test_cluster, "squeue", "--noheader").strip() == ""


@pytest.mark.parametrize(
    "args, names",
    [
        (
            ["-e", "workload=ours"],
            [
                "workload=ours (python -m dtfbench train, TensorFlow 2 code) cannot run on the module "
                f"{TF1_MODULE} (TensorFlow 1.1): use workload=cscs2017",
                "load a TensorFlow 2 module (-e tf_module=",
            ],
        ),
        (
            ["-e", "workload=cscs2017", "-e", "tf_module=TensorFlow/2.4.0-CrayGNU-21.09"],
            [
                "workload=cscs2017 (the study's tf_cnn_benchmarks of 2017, TensorFlow 1.x code) cannot run on the "
                "module TensorFlow/2.4.0-CrayGNU-21.09 (TensorFlow 2.4): use workload=ours with this module",
                "leave tf_module out for the study's TensorFlow/1.1.0 module",
            ],
        ),
    ],
    ids=["ours-on-tf1", "study-on-tf2"],
)
def test_a_workload_on_the_wrong_tensorflow_module_is_refused_before_anything_is_submitted(
    daint, slurm_test_cluster, tmp_path, args, names
):
    before = job_ids(slurm_test_cluster)
    done = daint("-e", "gpus=2", *args, timeout=180)
    assert done.returncode != 0
    text = " ".join((done.stdout + done.stderr).split())
    for name in names:
        assert name in text, output(done)
    # Refused in the plan: nothing submitted, nothing prepared, nothing recorded.
    assert job_ids(slurm_test_cluster) == before
    assert not (tmp_path / "scratch").exists() and not (tmp_path / "results.sqlite").exists()


def test_a_tf_2_module_runs_ours_by_default(daint, tmp_path, mirror_bundle):
    """-e tf_module=<a TF 2 module> alone switches system=daint to our workload (scripts only)."""
    sweep_id = f"ours-daint-{uuid.uuid4().hex[:6]}"
    done = daint(
        "-e",
        "tf_module=TensorFlow/2.4.0-CrayGNU-21.09",
        "-e",
        "gpus=2",
        "-e",
        "submit=false",
        "-e",
        f"sweep_id={sweep_id}",
        timeout=300,
    )
    assert done.returncode == 0, output(done)
    scratch = tmp_path / "scratch" / "dtfbench"
    (run_dir,) = (scratch / "runs").glob(f"{sweep_id}-*")
    (stack,) = (scratch / "stacks").iterdir()
    assert "dtfbench_module_load TensorFlow/2.4.0-CrayGNU-21.09" in (stack / "modules.sh").read_text()
    assert "python -m dtfbench train" in (run_dir / "node.sh").read_text().replace("'", "")
    assert f"{stack}/venv/bin/activate" in (stack / "env.sh").read_text() and list((scratch / "wheels").glob("*.whl"))

    # The study's stack (the default TF 1.1 module, no virtualenv) in the same root: a stack of
    # its own, and each run's job loads its own stack's environment; neither is overwritten.
    study_sweep = f"study-daint-{uuid.uuid4().hex[:6]}"
    bundle = mirror_bundle("distributed-tensorflow-benchmarks.bundle")
    done = daint(
        "-e",
        "gpus=2",
        "-e",
        "submit=false",
        "-e",
        f"sweep_id={study_sweep}",
        "-e",
        f"tf_cnn_benchmarks_repo={bundle}",
        timeout=300,
    )
    assert done.returncode == 0, output(done)
    (study_run_dir,) = (scratch / "runs").glob(f"{study_sweep}-*")
    stacks = sorted((scratch / "stacks").iterdir())
    assert len(stacks) == 2 and stack in stacks, stacks
    (study_stack,) = [s for s in stacks if s != stack]
    assert f"dtfbench_module_load {TF1_MODULE}" in (study_stack / "modules.sh").read_text()
    assert "TensorFlow/2.4.0" not in (study_stack / "modules.sh").read_text()
    assert "TensorFlow/2.4.0-CrayGNU-21.09" in (stack / "modules.sh").read_text()  # untouched
    assert f". {study_stack}/env.sh" in (study_run_dir / "job.sbatch").read_text()
    assert f". {stack}/env.sh" in (run_dir / "job.sbatch").read_text()
