"""The study's stack end to end on a 2-host test bed over real SSH: configure, benchmark, report.

configure-nodes.yml -e node_profile=cscs2017 gives each host a virtualenv of a Python 3.6 the
role finds, with TF 1.1.0 (nvidia_stack_install=never: the hosts have no GPU, so no CUDA 8.0 and
no Ubuntu 16.04 are needed). The hosts have no internet, like nodes in a private subnet: the
wheels for Python 3.6 are downloaded here once (.cache/wheelhouse-cp36-tf1.1, kept between
runs) and the hosts install from them. Then run-benchmark.yml runs the study's program
(workload=cscs2017, from the git bundle of its repository) with its PS and workers spread over
the two hosts, on their TF 1.1; and ours (TF 2.x, the test bed's shared virtualenv) with the
same model, batch and GPU counts into the same store. report.yml shows both, each with its
TensorFlow, never averaged together.
"""

import csv
import json
import re
import uuid

import pytest
from playbook_harness import extra_vars, run_playbook, small_run, strict_inventory_env
from testbed_fixtures import testbed_factory, wheelhouse  # noqa: F401

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

TF1_VENV = "/mnt/local_ssd/dtfbench/tf1-venv"
STUDY_LABEL = "cscs2017@a0d3d61f4f89"
SMALL = [*small_run(image_size=None), *extra_vars(gpus="1,2", system="testbed")]


def tf1_wheelhouse(project_root, tf1_python):
    """The wheels of requirements/tf1.1-cpu.txt, pip 21 and boto3 for Python 3.6, downloaded here once."""
    return wheelhouse(
        tf1_python,
        project_root / ".cache" / "wheelhouse-cp36-tf1.1",
        *("-r", str(project_root / "requirements" / "tf1.1-cpu.txt")),
        "pip>=21,<22",
        "boto3",
    )


def test_the_studys_stack_on_two_hosts_beside_ours(
    testbed_factory, project_root, tmp_path, tf1_python, mirror_bundle, live_processes
):
    bundle = mirror_bundle("distributed-tensorflow-benchmarks.bundle")
    wheelhouse = tf1_wheelhouse(project_root, tf1_python)
    bed = testbed_factory(hosts=2)

    # 1. The nodes: TF 1.1.0 in a virtualenv of an old Python on each host's own disk.
    configure = [
        "-i",
        bed.inventory,
        *extra_vars(node_profile="cscs2017", nvidia_stack_install="never", tf_virtualenv_path=TF1_VENV),
        "-e",
        # --no-compile: byte-compiling all of TF 1.1 at install costs more than the imports'.
        json.dumps({"tf_virtualenv_pip_extra_args": f"--no-index --find-links {wheelhouse} --no-compile"}),
    ]
    first = run_playbook("configure-nodes.yml", *configure, env=strict_inventory_env(), timeout=900)
    assert first.returncode == 0, first.stdout[-6000:] + first.stderr[-2000:]
    said = " ".join(first.stdout.split())
    for node in ("node01", "node02"):
        assert f"{node}: dtfbench_python={TF1_VENV}/bin/python (TensorFlow 1.1.0)" in said
        assert (bed.local_ssd(node) / "dtfbench" / "tf1-venv" / "bin" / "python").exists()
        version = (bed.local_ssd(node) / "dtfbench" / "tf1-venv" / "pyvenv.cfg").read_text()
        assert re.search(r"(?m)^version\s*=\s*3\.6\.", version), version
    again = run_playbook("configure-nodes.yml", *configure, env=strict_inventory_env(), timeout=900)
    assert again.returncode == 0, again.stdout[-4000:]
    assert re.findall(r"node0[12]\s*:\s*ok=\d+\s+changed=(\d+)", again.stdout) == ["0", "0"], again.stdout[-3000:]

    # 2. The study's program on the hosts' TF 1.1, then ours on TF 2.x, into one store.
    db = tmp_path / "results.sqlite"
    sweep = f"study-bed-{uuid.uuid4().hex[:6]}"

    def benchmark(sweep_id, *args):
        """run-benchmark.yml's small run on the test bed, into the one store."""
        done = bed.play("run-benchmark.yml", *SMALL, *args, *extra_vars(results_db=db, sweep_id=sweep_id), timeout=900)
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]

    benchmark(
        f"{sweep}-a",
        *extra_vars(
            workload="cscs2017",
            tf_cnn_benchmarks_repo=bundle,
            tf_cnn_benchmarks_cache=tmp_path / "cache",
            dtfbench_python=f"{TF1_VENV}/bin/python",
        ),
    )
    # Ours without the link probe: the study's sweep above had it (on the TF port its run then
    # takes), as test_testbed_benchmark's first round has it before ours; it adds seconds a sweep.
    benchmark(f"{sweep}-b", *extra_vars(network_probe="false"))

    runs = store.runs(store.connect(db))
    assert [(r["workload"], r["gpus"], r["status"]) for r in runs] == [
        ("cscs2017", 1, "ok"),
        ("cscs2017", 2, "ok"),
        ("ours", 1, "ok"),
        ("ours", 2, "ok"),
    ], [r["reason"] for r in runs]
    private = {n["name"]: n["private_ip"] for n in bed.nodes}
    for run in runs:
        theirs = run["workload"] == "cscs2017"
        assert run["tf_version"] == "1.1" if theirs else run["tf_version"].startswith("2.")
        assert run["workload_commit"] == ("a0d3d61f4f8994d96b40e1a65e78e5a92ef09741" if theirs else None)
    # Two workers: one on each host, over the private addresses, the PS beside the first.
    two = runs[1]
    assert two["hosts"] == ["node01", "node02"]
    assert two["cluster_spec"]["worker"] == [f"{private['node01']}:2220", f"{private['node02']}:2220"]
    assert two["cluster_spec"]["ps"] == [f"{private['node01']}:2230"]
    assert [
        w["workload"]["script"].startswith("/mnt/local_ssd/dtfbench/runs/_tf_cnn_benchmarks/")
        for w in two["worker_results"]
    ] == [True, True]

    # 3. The report: both programs, each with its TensorFlow, never averaged together.
    out = tmp_path / "report"
    report = run_playbook(
        "report.yml",
        *extra_vars(results_db=db, report_dir=out, report_formats="svg"),
        timeout=300,
        env=strict_inventory_env(),
    )
    assert report.returncode == 0, report.stdout[-4000:] + report.stderr[-2000:]
    with open(out / "best_configurations.csv", newline="") as handle:
        best = [(r["workload"], r["tf_version"], r["gpus"]) for r in csv.DictReader(handle)]
    ours_tf = runs[2]["tf_version"]
    assert best == [
        ("ours", ours_tf, "1"),
        ("ours", ours_tf, "2"),
        (STUDY_LABEL, "1.1", "1"),
        (STUDY_LABEL, "1.1", "2"),
    ]
    md = (out / "best_configurations.md").read_text()
    assert "## testbed: trivial, batch 8 per GPU\n" in md
    assert f"## testbed: trivial, batch 8 per GPU, measured with {STUDY_LABEL}\n" in md

    assert live_processes(sweep) == []
    bed.down()
    assert bed.leftovers() == []
