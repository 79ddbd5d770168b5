"""Time to accuracy across hosts: every mode reaches its target over SSH on the test bed and inside a
real Slurm job, and each run's MLPerf log times it as the store does (issue #53's acceptance).

LeNet on the digits (dtfbench tfrecords --dataset digits, on the shared file system every host and
Slurm node sees), 2 workers on 2 hosts.
"""

import json
import uuid

import pytest
from digits_dataset import make_digits
from playbook_harness import extra_vars, run_playbook, small_run, strict_inventory_env
from slurm_testcluster import missing_prerequisites, slurm_env  # noqa: F401
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.linux import procfs
from dtfbench.results import staging, store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# The question is whether every mode stops at its target, not how reliably each learns: at momentum
# and a learning rate of 0.01, asynchronous distributed_replicated across the test bed's hosts once
# reached top-1 0.33 and fell to chance for 20 epochs, and once diverged at step 40 (what stale
# updates can do, docs/accuracy.md). Half that rate, and top-1 0.3 (three times chance) as the
# target; the cap leaves room for a slow machine.
# The test bed's profile's own flags (playbooks/vars/systems/testbed.yml), which benchmark_extra_args replaces.
TESTBED_FLAGS = ["--num_intra_threads", "1", "--num_inter_threads", "1"]
TO_TARGET = dict(
    model="lenet", image_size=32, batch_size=16, optimizer="momentum", learning_rate=0.005, eval_every_steps=20,
    target_accuracy=0.3, max_epochs=20, data="real", network_probe="false",
)  # fmt: skip


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    return make_digits(tmp_path_factory.mktemp("digits"))


def check_reached(run, tmp_path):
    """The run converged, every worker stopped, and mlperf-logging times its log as the store."""
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    from mlperf_logging.result_summarizer.result_summarizer import _query_mlperf_strong_scaling_score

    what = (run["variable_update"], run["sync"], run["reason"])
    assert run["status"] == "ok" and run["tta_status"] == "converged", what
    assert run["eval_top1"] >= TO_TARGET["target_accuracy"] and 0 < run["epochs_to_accuracy"] < 20, what
    chief = run["worker_results"][0]
    assert all(w["status"] == "ok" and w["measured_steps"] < 2000 for w in run["worker_results"]), what
    log = tmp_path / f"{run['run_id']}.log"
    log.write_text("\n".join(chief["mlperf_log"]) + "\n")
    lines, failed = parse_file(str(log), ruleset="6.1.0")
    assert not failed and [line.value["metadata"]["status"] for line in lines if line.key == "run_stop"] == ["success"]
    assert _query_mlperf_strong_scaling_score(lines) * 60 == pytest.approx(run["time_to_accuracy"], abs=1e-3)


def test_every_mode_reaches_its_target_across_test_bed_hosts(testbed_factory, digits, tmp_path, live_processes):
    """PS synchronous and asynchronous, distributed_replicated both ways, and all-reduce, over SSH
    on 2 hosts: TF traffic on the private network, the chief's stop reaching the other host."""
    bed = testbed_factory(hosts=2)
    sweep_id = f"pytest-tta-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    done = run_playbook(
        "run-benchmark.yml",
        "-i",
        bed.dir / "hosts.yml",
        *extra_vars(
            system="testbed", gpus=2, num_ps=1, sync="true,false", sweep_id=sweep_id, results_db=db, data_dir=digits,
            variable_update="parameter_server,distributed_replicated,collective_all_reduce", cache="cold", **TO_TARGET,
        ),
        *small_run(model=None, image_size=None, batch_size=None, steps=None),
        # Whole digits (--augmentation none): the random crop's noise once left asynchronous
        # distributed_replicated at chance for 20 epochs on a loaded machine; the test's question is
        # whether every mode stops at its target, not how a crop of a digit is learnt.
        "-e", json.dumps({"benchmark_extra_args": [*TESTBED_FLAGS, "--augmentation", "none"]}),
        env=strict_inventory_env(),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    runs = store.runs(store.connect(db))
    assert sorted((r["variable_update"], r["sync"]) for r in runs) == [
        ("collective_all_reduce", None),
        ("distributed_replicated", 0),
        ("distributed_replicated", 1),
        ("parameter_server", 0),
        ("parameter_server", 1),
    ]
    for run in runs:
        assert run["hosts"] == ["node01", "node02"]
        check_reached(run, tmp_path)
        # Where the nodes read the digits from (the file system every host shares here), a configuration key.
        assert run["storage"] == procfs.mount_of(str(digits))["fs_type"]
        assert {h: d["filesystem"]["fs_type"] for h, d in run["data_read"].items()} == dict.fromkeys(
            run["hosts"], run["storage"]
        )
        # Each run started with the digits' pages dropped on every host (the digits are 5 files), as it asked.
        assert run["cache"] == "cold"
        assert {
            h: (d["cache"]["setting"], d["cache"]["files"], d["cache"]["resident"]) for h, d in run["data_read"].items()
        } == (dict.fromkeys(run["hosts"], ("cold", 5, 0.0)))
    assert "to target s" in done.stdout
    assert live_processes(sweep_id) == []


@pytest.mark.skipif(bool(missing_prerequisites()), reason=missing_prerequisites() or "ok")
def test_a_slurm_job_reaches_its_target(slurm_env, slurm_test_cluster, digits, tmp_path, live_processes):
    """The same inside one batch job of the real Slurm test cluster (1 PS beside 2 workers on 2 nodes),
    from a copy each node stages first (data_staging=copy: a step of the job before the read test)."""
    sweep_id = f"pytest-slurm-tta-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    staged = tmp_path / "staged"
    done = run_playbook(
        "run-benchmark.yml",
        *extra_vars(system="slurm-test", gpus=2, num_ps=1, sweep_id=sweep_id, results_db=db, data_dir=digits,
                    cache="warm", data_staging="copy", stage_dir=staged, **TO_TARGET),
        *small_run(model=None, image_size=None, batch_size=None, steps=None),
        env=slurm_env,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    (run,) = store.runs(store.connect(db))
    assert run["hosts"] == ["node1", "node2"] and {w["slurm_nodelist"] for w in run["worker_results"]} == {"node[1-2]"}
    check_reached(run, tmp_path)
    # Every node of the job read the data in a step before the tasks' (raw rate, file system, page cache).
    assert run["cache"] == "warm" and sorted(run["data_read"]) == ["node1", "node2"], run["data_read"]
    for node, measured in run["data_read"].items():
        assert measured["mb_per_s"] > 0 and measured["filesystem"]["fs_type"] == run["storage"], (node, measured)
        assert (measured["cache"]["setting"], measured["cache"]["resident"]) == ("warm", 1.0), (node, measured)
    assert run["storage"] == procfs.mount_of(str(digits))["fs_type"] and run["data_read_mb_per_s"] > 0
    # Both nodes staged into one folder here (the test cluster's nodes share this file system): the lock
    # made one wait for the other, which then found every file staged. The runs read the copy.
    stagings = staging.read(db, sweep_id)
    assert sorted(s["node"] for s in stagings) == ["node1", "node2"] and {s["run_id"] for s in stagings} == {
        run["run_id"]
    }
    assert sorted((s["already_staged"], s["copied_files"]) for s in stagings) == [(False, 6), (True, 0)], stagings
    assert {s["target"] for s in stagings} == {str(staged)} and "staging: " in done.stdout
    assert run["worker_results"][0]["config"]["data_dir"] == str(staged)
    assert sorted(p.name for p in staged.iterdir() if not p.name.startswith(".")) == sorted(
        p.name for p in digits.iterdir()
    )
    assert live_processes(sweep_id) == []
