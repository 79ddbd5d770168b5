"""The study's own program on the study's own TensorFlow 1.1, through run-benchmark.yml, for real.

workload=cscs2017 is the copy of tf_cnn_benchmarks in the study's repository
(e-bug/distributed-tensorflow-benchmarks, ``google-benchmarks/tf_cnn_benchmarks``) at its pinned
commit; tf_cnn_benchmarks@9a318c0 is the tensorflow/benchmarks commit that copy was taken from.
Both come from this machine's git bundles of the two repositories (the role mirrors a bundle in
its cache; nothing reaches GitHub) and run as real PS and worker processes on the TF 1.1
virtualenv (scripts/tf1-venv.sh) of the local inventory. The logs are read with the study's
own extraction and PerfKitBenchmarker's pattern.
"""

import re
import uuid

import pytest
from playbook_harness import extra_vars, run_tf_cnn_benchmarks

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

STUDY_COMMIT = "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741"
UPSTREAM_COMMIT = "9a318c001bdac484d53020a2b50f85710733a9cb"


def playbook(tmp_path, tf1_python, repo, *args, timeout=600):
    """The study's program from `repo`, run by the TF 1.1 virtualenv's python."""
    return run_tf_cnn_benchmarks(tmp_path, repo, *extra_vars(dtfbench_python=tf1_python), *args, timeout=timeout)


def worker_logs(tmp_path, run):
    return {
        int(re.search(r"-worker-(\d+)\.log$", path.name).group(1)): path
        for path in (tmp_path / "runs" / run["run_id"]).glob("*-worker-*.log")
    }


def test_the_studys_program_runs_on_tf_1_1_and_the_studys_tools_read_its_logs(
    tmp_path, tf1_python, mirror_bundle, live_processes, study_extraction, perfkit_total
):
    bundle = mirror_bundle("distributed-tensorflow-benchmarks.bundle")
    sweep_id = f"study-{uuid.uuid4().hex[:8]}"
    args = ["-e", "workload=cscs2017", "-e", "gpus=1,2", "-e", f"sweep_id={sweep_id}"]
    done = playbook(tmp_path, tf1_python, bundle, *args)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert f"workload cscs2017: commit {STUDY_COMMIT} of {bundle}" in " ".join(done.stdout.split())

    runs = store.runs(store.connect(tmp_path / "results.sqlite"))
    assert [(r["gpus"], r["status"]) for r in runs] == [(1, "ok"), (2, "ok")], [r["reason"] for r in runs]
    for run in runs:
        assert (run["workload"], run["workload_ref"], run["workload_commit"]) == (
            "cscs2017",
            STUDY_COMMIT,
            STUDY_COMMIT,
        )
        assert run["tf_version"] == "1.1" and run["images_per_sec"] > 0
        # The node's environment (#20), through the adapter, as TF 1.1 on Python 3.6 exposes it.
        environment = run["environment"]["localhost"]
        assert environment["tensorflow"]["version"] == "1.1.0" and environment["tensorflow"]["build"] == "unknown"
        assert environment["tensorflow"]["git_version"].startswith("v1.1.0")
        assert environment["tensorflow"]["cuda_build"] is False and environment["python"]["version"].startswith("3.6.")
        assert "; tf_version=1.1.0; tf_build=v1.1.0" in run["environment_key"]
        # The study's script, from its repository's directory, ran.
        for worker in run["worker_results"]:
            assert worker["workload"]["script"].endswith(
                f"{STUDY_COMMIT}/google-benchmarks/tf_cnn_benchmarks/tf_cnn_benchmarks.py"
            )
            assert worker["devices"] == [f"/job:worker/task:{worker['task_index']}/cpu:0"]
        # Each worker's log, as the project writes it, read by the study's own extraction and
        # by PerfKitBenchmarker: the figure that worker printed ('total images/sec').
        logs = worker_logs(tmp_path, run)
        assert sorted(logs) == list(range(run["num_workers"]))
        for index, log in logs.items():
            printed = run["worker_results"][index]["total_images_per_sec"]
            assert study_extraction(log) == f"{printed:.2f}", log.read_text()[-1000:]
            assert perfkit_total(log.read_text()) == f"{printed:.2f}"
    assert live_processes(sweep_id) == []
    # The report names it: one program per row, never averaged with another.
    assert "trivial (cscs2017@a0d3d61f4f89)" in done.stdout

    # Again: nothing to do, nothing changes (the bundle's mirror included).
    again = playbook(tmp_path, tf1_python, bundle, *args)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "0 of 2 runs to do of cscs2017" in " ".join(again.stdout.split())
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s", again.stdout), again.stdout[-2000:]


def test_tensorflow_benchmarks_at_the_studys_commit_fails_on_tf_1_1_as_the_study_found(
    tmp_path, tf1_python, mirror_bundle, live_processes
):
    """The study commented out one line of 9a318c0 because TF 1.1 lacks the option: the
    unpatched commit, fetched by its short sha from tensorflow/benchmarks, fails, and the run is
    recorded as failed with the script's own error."""
    bundle = mirror_bundle("tensorflow-benchmarks.bundle")
    sweep_id = f"upstream-{uuid.uuid4().hex[:8]}"
    done = playbook(
        tmp_path,
        tf1_python,
        bundle,
        "-e",
        "workload=tf_cnn_benchmarks@9a318c0",
        "-e",
        "gpus=1",
        "-e",
        f"sweep_id={sweep_id}",
    )
    # A sweep whose runs failed says how many and exits 2 (fail_on_failed_runs, #21).
    assert done.returncode == 2, done.stdout[-5000:] + done.stderr[-2000:]
    assert f"sweep {sweep_id}: 1 of 1 runs failed" in " ".join(done.stdout.split()), done.stdout[-3000:]
    (run,) = store.runs(store.connect(tmp_path / "results.sqlite"))
    assert (run["status"], run["workload"], run["workload_ref"], run["workload_commit"]) == (
        "failed",
        "tf_cnn_benchmarks",
        "9a318c0",
        UPSTREAM_COMMIT,
    )
    assert "AttributeError: 'GPUOptions' object has no attribute 'force_gpu_compatible'" in run["reason"]
    assert f"{UPSTREAM_COMMIT}/scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py" in run["reason"]
    assert live_processes(sweep_id) == []
