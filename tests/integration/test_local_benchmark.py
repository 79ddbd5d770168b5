"""run-benchmark.yml end to end on the local inventory: real PS and worker processes."""

import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from digits_dataset import make_digits
from playbook_harness import ROOT, extra_vars, run_playbook, small_run

from dtfbench.linux import procfs
from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


@pytest.fixture
def shm_copy():
    """A copy of a folder in /dev/shm (tmpfs: another storage than the disk), removed after the test."""
    made = []

    def copy(folder):
        made.append(Path(tempfile.mkdtemp(prefix="dtfbench-test-", dir="/dev/shm")))
        return Path(shutil.copytree(folder, made[-1] / folder.name))

    yield copy
    for folder in made:
        shutil.rmtree(folder, ignore_errors=True)


def test_local_benchmark_measures_records_and_cleans_up(tmp_path, live_processes, study_extraction, perfkit_total):
    sweep_id = f"pytest-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    sweep = extra_vars(gpus="1,2", sweep_id=sweep_id, results_db=db, dtfbench_run_root=tmp_path / "runs")
    done = run_playbook("run-benchmark.yml", *sweep, *small_run())
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]

    runs = store.runs(store.connect(db))
    assert [(r["gpus"], r["status"]) for r in runs] == [(1, "ok"), (2, "ok")], [r["reason"] for r in runs]
    one, two = runs
    assert len(two["images_per_sec_per_worker"]) == 2
    assert all(rate > 0 for r in runs for rate in r["images_per_sec_per_worker"])
    assert two["images_per_sec"] == pytest.approx(sum(two["images_per_sec_per_worker"]))
    assert two["cluster_spec"]["ps"] == ["127.0.0.1:2230"]
    assert two["cluster_spec"]["worker"] == ["127.0.0.1:2220", "127.0.0.1:2221"]
    assert two["hosts"] == ["localhost"] and two["sweep_id"] == sweep_id and two["tf_version"]
    # Each worker's log as the launcher wrote it, read by the study's own extraction (tail -2 |
    # head -n 1 | cut -d' ' -f3) and PerfKitBenchmarker's pattern: the total that worker printed.
    for run in runs:
        logs = sorted((tmp_path / "runs" / run["run_id"]).glob("*-worker-*.log"))
        assert len(logs) == run["num_workers"]
        for log in logs:
            index = int(log.stem.rsplit("-", 1)[1])
            printed = f"{run['worker_results'][index]['total_images_per_sec']:.2f}"
            assert study_extraction(log) == printed, log.read_text()[-1500:]
            assert perfkit_total(log.read_text()) == printed

    # The table the user sees: both configurations, speedup and efficiency against 1 worker.
    assert "img/s total" in done.stdout and "efficiency" in done.stdout
    assert "1.00" in done.stdout  # the 1-worker row's speedup

    assert live_processes(sweep_id) == []

    # Re-running the same sweep resumes it: nothing left to do, nothing changes.
    again = run_playbook("run-benchmark.yml", *sweep, *small_run())
    assert again.returncode == 0, again.stdout[-3000:]
    assert "0 of 2 runs to do" in again.stdout.replace("\n", " ")
    assert len(store.runs(store.connect(db))) == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (["-e", "gpus=64"], "not enough"),
        (["-e", "system=mars"], "system=mars is unknown"),
        (["-e", "gpus=2", "-e", "model=googlenet9"], "model='googlenet9' is unknown"),
        (["-e", "gpus=1", "-e", "data=real"], "data=real needs a dataset"),
    ],
)
def test_bad_input_fails_before_anything_starts(tmp_path, args, message):
    db = tmp_path / "results.sqlite"
    result = run_playbook("run-benchmark.yml", "-e", f"results_db={db}", *args, timeout=120)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr
    assert not db.exists()


def test_a_sweep_with_evaluation_records_held_out_accuracy(tmp_path, live_processes, shm_copy):
    """eval_every_steps end to end: the digits made by dtfbench tfrecords, 2-worker runs (the chief
    evaluates) from two locations, top-1/top-5 in the store and in the table the user sees."""
    digits = make_digits(tmp_path / "digits")
    sweep_id = f"pytest-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    # Two locations of the same digits, on disk and in memory (tmpfs): a sweep axis, told apart by storage.
    in_memory = shm_copy(digits)
    sweep = extra_vars(
        gpus="2", sweep_id=sweep_id, results_db=db, dtfbench_run_root=tmp_path / "runs",
        data="real", data_dir=f"{digits},{in_memory}", eval_every_steps=20,
    )  # fmt: skip
    done = run_playbook("run-benchmark.yml", *sweep, *small_run(model="lenet", steps=40))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    runs = store.runs(store.connect(db))
    assert [(r["gpus"], r["status"], r["eval_every_steps"]) for r in runs] == [(2, "ok", 20), (2, "ok", 20)]
    assert [(r["worker_results"][0]["config"]["data_dir"], r["storage"]) for r in runs] == [
        (str(digits), procfs.mount_of(str(digits))["fs_type"]),
        (str(in_memory), "tmpfs"),
    ]
    for run in runs:
        assert 0.0 <= run["eval_top1"] <= run["eval_top5"] <= 1.0 and run["eval_seconds"] > 0
        curve = run["worker_results"][0]["accuracy"]["curve"]
        assert [p["step"] for p in curve] == [20, 40] and curve[-1]["examples"] == 364
    assert "top-1" in done.stdout and "top-5" in done.stdout
    assert live_processes(sweep_id) == []
    # Time to accuracy: the same runs until top-1 0.5, 6 epochs at most; every run stops at the target.
    # No data_dir: the local system makes the digits once under results/datasets/ and trains LeNet on them.
    # The learning rate scaled with the global batch, reached over one epoch.
    tta_db = tmp_path / "tta.sqlite"
    timed = run_playbook(
        "run-benchmark.yml",
        *extra_vars(
            gpus="1,2", sweep_id=f"{sweep_id}-tta", results_db=tta_db, dtfbench_run_root=tmp_path / "runs",
            eval_every_steps=20, target_accuracy=0.5, max_epochs=6, optimizer="momentum", learning_rate=0.01,
            lr_scaling="linear", warmup_epochs=1,
        ),
        *small_run(model=None, image_size=None, steps=40),
    )  # fmt: skip
    assert timed.returncode == 0, timed.stdout[-4000:] + timed.stderr[-2000:]
    made = ROOT / "results" / "datasets" / "digits"
    assert f"No data_dir: training on digits ({made}" in timed.stdout and "model=lenet image_size=32" in timed.stdout
    runs = store.runs(store.connect(tta_db))
    assert {(r["data"], r["model"], r["lr_scaling"], r["warmup_epochs"]) for r in runs} == {
        ("real", "lenet", "linear", 1.0)
    }
    assert runs[0]["worker_results"][0]["config"]["data_dir"] == str(made)
    # Each run's MLPerf log, as the report writes it, read by mlperf-logging: the stored time to accuracy (A4).
    from mlperf_logging.compliance_checker.mlp_parser import parse_file
    from mlperf_logging.result_summarizer.result_summarizer import _query_mlperf_strong_scaling_score

    from dtfbench.report import analysis, build

    build.build(analysis.load_rows(tta_db), tmp_path / "report", formats=(), db=str(tta_db))
    for run in runs:
        lines, failed = parse_file(str(tmp_path / "report" / "mlperf" / f"{run['run_id']}.log"), ruleset="6.1.0")
        assert not failed and _query_mlperf_strong_scaling_score(lines) * 60 == pytest.approx(
            run["time_to_accuracy"], abs=1e-3
        )
        rate = {line.key: line.value["value"] for line in lines}["opt_base_learning_rate"]
        assert rate == pytest.approx(0.01 * run["gpus"])  # 2 synchronous workers: twice the one-device rate
    assert [(r["gpus"], r["tta_status"], r["target_accuracy"], r["max_epochs"]) for r in runs] == [
        (1, "converged", 0.5, 6.0),
        (2, "converged", 0.5, 6.0),
    ], [r["reason"] or r["worker_results"][0].get("accuracy", {}).get("curve") for r in runs]
    assert all(r["time_to_accuracy"] > 0 and 0 < r["epochs_to_accuracy"] <= 6 for r in runs)
    assert "to target s" in timed.stdout
    assert live_processes(f"{sweep_id}-tta") == []
    # Evaluation without a held-out split (synthetic data, asked for) is refused before anything starts.
    refused = run_playbook(
        "run-benchmark.yml",
        *extra_vars(results_db=tmp_path / "other.sqlite", eval_every_steps=20, data="synthetic"),
        timeout=120,
    )
    assert refused.returncode != 0 and "eval_every_steps=20 needs data=real" in refused.output


def test_check_mode_plans_the_sweep_and_writes_nothing(tmp_path):
    """--check (issue #56, case 7): the planned runs are shown, nothing starts, no store is made."""
    db = tmp_path / "store" / "results.sqlite"
    done = run_playbook(
        "run-benchmark.yml", "--check", *extra_vars(gpus="1,2", results_db=db, sweep_id="checked"), *small_run(),
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.output[-3000:]
    assert "check mode: sweep checked would run 2 of 2 runs on localhost" in done.stdout
    assert "checked-1-" in done.stdout and "Nothing was started or written" in done.stdout
    assert not db.parent.exists()
    # A bad setting is still refused by name, as without --check.
    refused = run_playbook("run-benchmark.yml", "--check", *extra_vars(gpus=0, results_db=db), timeout=120)
    assert refused.returncode != 0 and "gpus=0" in refused.output and not db.parent.exists()


def test_two_sweeps_on_one_machine_take_turns_for_its_ports(tmp_path, live_processes):
    """Issue 56, case 3: two clones' `make run` at once, on the same ports and run root. Each run's
    start claims its ports before TF listens (dtfbench.launch.port_claim), so the other sweep's
    check waits for that run instead of losing its own to "Could not start gRPC server"."""
    from playbook_harness import own_ports, start_playbook

    sweeps = {}
    for name in ("first", "second"):
        sweep_id = f"pytest-{name}-{uuid.uuid4().hex[:6]}"
        args = [
            *extra_vars(gpus=1, sweep_id=sweep_id, results_db=tmp_path / f"{name}.sqlite",
                        dtfbench_run_root=tmp_path / "runs"),
            *small_run(repetitions=2), *own_ports(tmp_path),
        ]  # fmt: skip
        log = (tmp_path / f"{name}.log").open("w")
        sweeps[name] = (sweep_id, log, start_playbook("run-benchmark.yml", *args, stdout=log, stderr=subprocess.STDOUT))
    for name, (sweep_id, log, process) in sweeps.items():
        assert process.wait(timeout=600) == 0, (tmp_path / f"{name}.log").read_text()[-5000:]
        log.close()
        runs = store.runs(store.connect(tmp_path / f"{name}.sqlite"))
        assert [(r["status"], r["reason"]) for r in runs] == [("ok", None), ("ok", None)]
        assert live_processes(sweep_id) == []
    # Nothing is left claimed: the supervisors that held the ports are gone.
    from dtfbench.launch import port_claim

    claims = list((tmp_path / "runs" / port_claim.CLAIM_DIR).iterdir())
    assert claims and all(port_claim.holder(str(tmp_path / "runs"), *c.name.rsplit("_", 1)) is None for c in claims), (
        claims
    )


def test_a_staged_sweep_copies_the_dataset_once_and_its_runs_read_the_copy(tmp_path, live_processes, shm_copy):
    """data_staging=copy end to end (issue 55, item 2): the digits on disk staged to /dev/shm (another
    file system), the run reads the copy, each node's staging is stored; a second sweep finds the
    copy staged already and copies nothing."""
    from playbook_harness import own_ports

    from dtfbench.results import staging

    digits = make_digits(tmp_path / "digits")
    assert (digits / "SHA256SUMS").read_text().count("\n") == 5  # 4 training shards, 1 validation
    (tmp_path / "nothing").mkdir()
    local = shm_copy(tmp_path / "nothing") / "digits"  # a folder of its own in /dev/shm, removed after the test
    db = tmp_path / "results.sqlite"
    for attempt in ("first", "second"):
        sweep_id = f"pytest-{attempt}-{uuid.uuid4().hex[:6]}"
        done = run_playbook(
            "run-benchmark.yml",
            *extra_vars(gpus="1", sweep_id=sweep_id, results_db=db, dtfbench_run_root=tmp_path / "runs",
                        data="real", data_dir=digits, data_staging="copy", stage_dir=local),
            *small_run(model="lenet", image_size=32, steps=20, repetitions=1),
            *own_ports(tmp_path),
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        stored = staging.read(db, sweep_id)
        assert [(s["node"], s["source"], s["target"], s["status"]) for s in stored] == [
            (stored[0]["node"], str(digits), str(local), "ok")
        ]
        assert stored[0]["target_filesystem"]["fs_type"] == "tmpfs"
        if attempt == "first":
            assert (stored[0]["copied_files"], stored[0]["checksummed_files"], stored[0]["already_staged"]) == (
                6,
                5,
                False,
            )
            assert "staging: " in done.stdout and " GB to 1 node(s) in " in done.stdout
        else:
            assert (stored[0]["copied_files"], stored[0]["already_staged"]) == (0, True)
            assert "staging: every node had the dataset staged already" in done.stdout
        (run,) = [r for r in store.runs(store.connect(db)) if r["sweep_id"] == sweep_id]
        assert (run["status"], run["storage"]) == ("ok", "tmpfs"), run["reason"]
        assert run["worker_results"][0]["config"]["data_dir"] == str(local)
        assert live_processes(sweep_id) == []
    assert sorted(p.name for p in local.iterdir()) == sorted(
        [*(p.name for p in digits.iterdir()), ".dtfbench-stage.lock"]
    )
