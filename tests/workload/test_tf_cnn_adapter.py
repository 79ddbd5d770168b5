"""The tf_cnn_benchmarks adapter: its output parser against recorded tf_cnn_benchmarks output, the
result it writes (dtfbench's own schema, through the real record and store), and the adapter as a
process (output passed through, signals forwarded, exit code relayed, result written) with a tiny
stand-in child, under this Python and, where they are installed, under Python 2.7 and 3.5/3.6 (a
TF 1.x node's Python).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtfbench.compat import tf_cnn_adapter as adapter
from dtfbench.results import record, store
from dtfbench.workload import benchmark_output

DATA = Path(__file__).parent / "data"
ADAPTER = Path(adapter.__file__)
RECORDED_2017 = DATA / "tf_cnn_benchmarks_2017_worker0.out"
RECORDED_2019 = DATA / "tf_cnn_benchmarks_2019_worker1.out"
REFUSED_2017 = DATA / "tf_cnn_benchmarks_2017_replicated_refused.err"

CLUSTER_2017 = (
    "--job_name worker --task_index 0 --worker_hosts n1:2220,n2:2220 --ps_hosts n1:2230,n2:2230"
    " --model inception3 --batch_size 64 --num_gpus 1 --num_warmup_batches 10 --num_batches 100"
    " --variable_update parameter_server"
).split()


def parse(path):
    return adapter.OutputParser().feed_text(Path(path).read_text())


# --- the parser and the result -------------------------------------------------------------


def test_the_2017_scripts_output_parses():
    parsed = parse(RECORDED_2017)
    assert parsed.header["TensorFlow"] == "1.1" and parsed.header["Model"] == "inception3"
    assert parsed.header["Variables"] == "parameter_server" and parsed.header["Sync"] == "True"
    assert parsed.step_header == ["Step", "Img/sec", "loss"]
    assert [s["step"] for s in parsed.steps] == [1] + list(range(10, 101, 10))
    assert parsed.steps[0] == {
        "step": 1,
        "images_per_sec": 129.0,
        "uncertainty": 0.0,
        "jitter": 0.0,
        "total_loss": 7.409,
        "top_1_accuracy": None,
        "top_5_accuracy": None,
    }
    assert parsed.steps[-1]["images_per_sec"] == 128.6 and parsed.steps[-1]["total_loss"] == 7.216
    assert parsed.total_images_per_sec == 255.87
    assert parsed.devices() == ["/job:worker/task:0/gpu:0"]
    assert parsed.ps_task is None


def test_a_workers_result_is_dtfbench_schema_with_the_printed_total():
    parsed = parse(RECORDED_2017)
    result = adapter.build_result(
        parsed,
        adapter.flag_values(CLUSTER_2017),
        0,
        61.5,
        workload="tf_cnn_benchmarks@abc",
        commit="ab" * 20,
        script="/x/tf_cnn_benchmarks.py",
    )
    assert result["status"] == "ok" and result["reason"] is None
    # The printed total counts both workers' steps (the global step): this worker's share is half.
    assert result["total_images_per_sec"] == 255.87
    assert result["images_per_sec"] == pytest.approx(255.87 / 2)
    assert result["step_images_per_sec"] == 128.6
    assert result["step_time"]["mean"] == pytest.approx(64 / 128.6)
    assert (result["warmup_steps"], result["measured_steps"], result["num_workers"]) == (10, 100, 2)
    assert result["images_per_step"] == 64 and result["final_loss"] == 7.216
    assert result["tf_version"] == "1.1" and result["devices"] == ["/job:worker/task:0/gpu:0"]
    assert result["config"]["cross_replica_sync"] is True and result["config"]["model"] == "inception3"
    assert result["workload"]["commit"] == "ab" * 20 and result["workload"]["exit_code"] == 0
    # Exactly the keys and samples of our own workload's result.
    ours = benchmark_output.build_result(
        config={"job_name": "worker", "task_index": 0},
        step_times=[0.5],
        images_per_step=64,
        measured_seconds=0.5,
        num_workers=2,
        warmup_steps=10,
        wall_time={"run": 1.0},
        devices=[],
        tf_version="2",
        ps_bytes=[],
    )
    assert set(ours) <= set(result)
    assert result["samples"] == benchmark_output.samples(result)
    json.dumps(result)


def test_the_measured_window_spans_the_step_header_to_the_total_line(monkeypatch):
    clock = iter(range(100, 200))

    class Clock:
        @staticmethod
        def time():
            return float(next(clock))

    monkeypatch.setattr(adapter, "time", Clock)
    lines = RECORDED_2017.read_text().splitlines()
    parser = adapter.OutputParser()
    stamps = {}
    for line in lines:
        before = parser.measured_start, parser.measured_end
        parser.feed(line)
        if (parser.measured_start, parser.measured_end) != before:
            stamps[line.split("\t")[0].split(":")[0]] = (parser.measured_start, parser.measured_end)
    assert parser.measured_start == 100.0  # the step header: the measured steps begin
    assert parser.measured_end == 100.0 + len(stamps) - 1  # the last step row, then the total line
    assert "total images/sec" in stamps
    result = adapter.build_result(parser, adapter.flag_values(CLUSTER_2017), 0, 1.0)
    assert result["measured_window"] == {
        "start": 100.0,
        "end": parser.measured_end,
        "clock": "epoch",
        "source": "step lines",
    }
    assert adapter.build_result(adapter.OutputParser(), {}, 1, 1.0)["measured_window"] is None


def test_the_later_benchmark_cnn_output_parses():
    parsed = parse(RECORDED_2019)
    assert parsed.step_header == ["Step", "Img/sec", "total_loss"]
    assert parsed.header["Dataset"] == "imagenet (synthetic)" and parsed.header["TensorFlow"] == "1.15"
    assert len(parsed.devices()) == 2
    flags = adapter.flag_values(
        [
            "--job_name=worker",
            "--task_index=1",
            "--worker_hosts=a:1,b:1",
            "--batch_size=32",
            "--num_gpus=2",
            "--num_batches=100",
            "--num_warmup_batches=10",
            "--variable_update=distributed_replicated",
            "--cross_replica_sync=false",
        ]
    )
    result = adapter.build_result(parsed, flags, 0, 40.0)
    assert result["status"] == "ok" and result["task_index"] == 1
    assert result["images_per_step"] == 64 and result["step_time"]["mean"] == pytest.approx(64 / 181.6)
    assert result["images_per_sec"] == pytest.approx(362.85 / 2)
    assert result["config"]["cross_replica_sync"] is False


@pytest.mark.parametrize(
    "line, expected",
    [
        (
            "I0718 14:02:10.123456 140123456 benchmark_cnn.py:812] 10\timages/sec: 181.4 +/- 0.8 (jitter = 3.0)\t7.815",
            (10, 181.4, 7.815, None),
        ),
        ("INFO:tensorflow:10\timages/sec: 181.4 +/- 0.8 (jitter = 3.0)\t7.815", (10, 181.4, 7.815, None)),
        ("20\timages/sec: 99.0 +/- 1.0 (jitter = 2.0)\t6.123\t0.004\t0.021", (20, 99.0, 6.123, 0.004)),
        ("30\timages/sec: 99.0\tnan", (30, 99.0, None, None)),
    ],
)
def test_rows_behind_a_logging_prefix_with_accuracies_or_at_another_scale(line, expected):
    (step,) = adapter.OutputParser().feed_text(line).steps
    loss = None if step["total_loss"] != step["total_loss"] else step["total_loss"]  # nan
    assert (step["step"], step["images_per_sec"], loss, step["top_1_accuracy"]) == expected


@given(
    st.lists(st.floats(min_value=1e-3, max_value=10.0), min_size=1, max_size=30),
    st.integers(min_value=1, max_value=512),
    st.floats(min_value=0, max_value=20),
)
def test_every_row_our_workload_prints_parses_back(times, batch, loss):
    line = benchmark_output.step_line(len(times), batch, times, loss)
    (step,) = adapter.OutputParser().feed_text(line).steps
    expected = benchmark_output.parse_output(line)["steps"][0]
    assert {k: step[k] for k in expected} == expected


def test_a_failure_names_the_scripts_own_error():
    parsed = parse(REFUSED_2017)
    result = adapter.build_result(parsed, adapter.flag_values(CLUSTER_2017), 1, 3.0)
    assert result["status"] == "failed" and result["images_per_sec"] is None
    assert result["reason"] == (
        "tf_cnn_benchmarks exited with code 1: ValueError: Invalid --variable_update in distributed mode: replicated"
    )


def test_exit_zero_without_a_total_is_a_failure_and_a_signal_is_named():
    parsed = adapter.OutputParser().feed_text("\n".join(RECORDED_2017.read_text().splitlines()[:18]))
    quiet = adapter.build_result(parsed, adapter.flag_values(CLUSTER_2017), 0, 3.0)
    assert quiet["status"] == "failed" and "printed no 'total images/sec' line (2 step rows)" in quiet["reason"]
    assert quiet["measured_steps"] == 10  # the last row's step
    stopped = adapter.build_result(parsed, adapter.flag_values(CLUSTER_2017), -signal.SIGTERM, 3.0)
    assert stopped["reason"] == "tf_cnn_benchmarks was stopped by SIGTERM"


def test_flags_as_tf_flags_reads_them():
    assert adapter.flag_values(["--a", "1", "--b=2", "--c", "--d", "x", "--noe", "--f=", "stray"]) == {
        "a": "1",
        "b": "2",
        "c": True,
        "d": "x",
        "e": False,
        "f": "",
    }
    own, rest = adapter.split_arguments(
        ["--tf_cnn_script", "s.py", "--job_name", "ps", "--result_file=r.json", "--model", "trivial", "--commit", "abc"]
    )
    assert own == {"tf_cnn_script": "s.py", "result_file": "r.json", "commit": "abc"}
    assert rest == ["--job_name", "ps", "--model", "trivial"]
    with pytest.raises(adapter.UsageError, match="--result_file needs a value"):
        adapter.split_arguments(["--result_file"])


def test_the_results_reach_the_store_as_one_ok_row(tmp_path):
    """Two workers' adapter results through the real record and store, as the playbook hands them over."""
    results = []
    for index, path in ((0, RECORDED_2017), (1, RECORDED_2017)):
        flags = adapter.flag_values(CLUSTER_2017[:3] + [str(index)] + CLUSTER_2017[4:])
        results.append(adapter.build_result(parse(path), flags, 0, 60.0))
    payload = {
        "run": {
            "run_id": "s-1-abc",
            "gpus": 2,
            "num_ps": 2,
            "variable_update": "parameter_server",
            "data": "synthetic",
            "repetition": 1,
            "model": "inception3",
            "batch_size": 64,
            "devices_per_worker": 1,
            "warmup_steps": 10,
            "steps": 100,
            "ps_on_worker_nodes": True,
        },
        "sweep_id": "s",
        "system": "aws",
        "git_revision": "v1",
        "layout": {"num_workers": 2, "hosts_used": ["n1", "n2"], "cluster_spec": {}},
        "hosts": {
            "n1": {"failure": "", "workers": [{"result": results[0], "rc": 0}]},
            "n2": {"failure": "", "workers": [{"result": results[1], "rc": 0}]},
        },
        "workload": {
            "name": "tf_cnn_benchmarks",
            "ref": "v1.1",
            "label": "tf_cnn_benchmarks@v1.1",
            "commit": "cd" * 20,
            "notes": [],
        },
    }
    row = record.build_record(payload)
    assert row["status"] == "ok" and row["reason"] is None
    assert row["images_per_sec"] == pytest.approx(255.87)
    assert row["tf_version"] == "1.1" and row["image_size"] is None
    assert (row["workload"], row["workload_ref"], row["workload_commit"]) == ("tf_cnn_benchmarks", "v1.1", "cd" * 20)
    conn = store.connect(tmp_path / "r.sqlite")
    store.add_run(conn, row)
    (stored,) = store.runs(conn)
    assert stored["workload_commit"] == "cd" * 20 and stored["images_per_sec"] == pytest.approx(255.87)


# --- the adapter as a process ---------------------------------------------------------------

# The stand-in child: prints a recorded output (stdout) and a line on stderr, then, per its first
# argument, exits with a code, or waits for a signal (and notes which one came).
STAND_IN = r"""
import os, signal, sys, time
mode, recorded, marker = sys.argv[1], sys.argv[2], sys.argv[3]
sys.stdout.write(open(recorded).read())
sys.stdout.flush()
sys.stderr.write("W tensorflow/core/platform/cpu_feature_guard.cc:45] a line on stderr\n")
sys.stderr.flush()
open(marker + ".args", "w").write("\n".join(sys.argv[4:]))
if mode.startswith("exit"):
    sys.exit(int(mode[4:]))
def noted(number, frame):
    open(marker, "w").write(str(number))
    signal.signal(number, signal.SIG_DFL)
    os.kill(os.getpid(), number)
for name in ("SIGTERM", "SIGINT", "SIGHUP"):
    signal.signal(getattr(signal, name), noted)
open(marker + ".waiting", "w").write("")
while True:
    time.sleep(0.05)
"""


def old_pythons():
    """Interpreters a TF 1.x node may have: $DTFBENCH_TEST_PYTHONS (os.pathsep-separated), else
    python2.7/3.5/3.6 on PATH or in pyenv."""
    if os.environ.get("DTFBENCH_TEST_PYTHONS"):
        return [p for p in os.environ["DTFBENCH_TEST_PYTHONS"].split(os.pathsep) if p]
    found = {}
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    for version in ("2.7", "3.5", "3.6"):
        candidates = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python")) + [shutil.which(f"python{version}")]
        for candidate in candidates:
            # A pyenv shim runs only the version pyenv selects: never take one.
            if candidate and "/shims/" not in candidate and os.access(candidate, os.X_OK):
                found[version] = candidate
                break
    return list(found.values())


PYTHONS = [pytest.param(sys.executable, id="this-python")] + [
    pytest.param(path, id=Path(path).parts[-3] if "versions" in path else Path(path).name) for path in old_pythons()
]


class Adapted:
    def __init__(self, tmp_path, python, mode, recorded=RECORDED_2017, job="worker", extra=()):
        script = tmp_path / "tf_cnn_benchmarks.py"
        script.write_text(STAND_IN)
        self.marker = tmp_path / "signal"
        self.result_file = tmp_path / "out" / "worker-0.json"
        # As tf_cluster starts it: the adapter's options, the cluster flags, the result flag, the run's flags.
        self.cluster = ["--job_name", job, "--task_index", "0", "--worker_hosts", "h:1,h:2", "--ps_hosts", "h:3"]
        self.run_flags = [
            "--model",
            "inception3",
            "--batch_size",
            "64",
            "--num_batches",
            "100",
            "--num_warmup_batches",
            "10",
            *extra,
        ]
        self.argv = [
            python,
            str(ADAPTER),
            "--tf_cnn_script",
            str(script),
            "--workload",
            "tf_cnn_benchmarks@t",
            "--commit",
            "ab" * 20,
            mode,
            str(recorded),
            str(self.marker),
            *self.cluster,
            "--result_file",
            str(self.result_file),
            *self.run_flags,
        ]
        self.proc = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, start_new_session=True
        )

    def wait(self, timeout=60):
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def result(self):
        return json.loads(self.result_file.read_text())


@pytest.fixture
def stop_leftovers():
    started = []
    yield started
    for adapted in started:
        if adapted.proc.poll() is None:
            os.killpg(adapted.proc.pid, signal.SIGKILL)
            adapted.proc.wait()


@pytest.mark.parametrize("python", PYTHONS)
def test_the_adapter_passes_output_through_and_writes_the_result(tmp_path, python):
    began = time.time()
    adapted = Adapted(tmp_path, python, "exit0")
    code, out, err = adapted.wait()
    assert code == 0, err
    # The measured window, from when the adapter saw the step header and the total line: within
    # the run, on the wall clock every host's NIC bytes are cut with (docs/network.md).
    window = adapted.result()["measured_window"]
    assert began <= window["start"] <= window["end"] <= time.time() and window["source"] == "step lines"
    # The script's own lines, as the study's logs read; its stderr on stderr.
    assert RECORDED_2017.read_text() in out
    assert "a line on stderr" in err and "a line on stderr" not in out
    # The arguments the script got: the adapter's own options taken out, everything else in order.
    assert (tmp_path / "signal.args").read_text().split("\n") == adapted.cluster + adapted.run_flags
    result = adapted.result()
    assert result["status"] == "ok" and result["images_per_sec"] == pytest.approx(255.87 / 2)
    assert result["workload"] == {
        "name": "tf_cnn_benchmarks",
        "label": "tf_cnn_benchmarks@t",
        "commit": "ab" * 20,
        "script": str(tmp_path / "tf_cnn_benchmarks.py"),
        "exit_code": 0,
        "step_header": ["Step", "Img/sec", "loss"],
    }
    # The result is in the file only: stdout ends as the script's did, the study's extraction
    # (tail -2 | head -n 1 | cut -d' ' -f3) reads the script's figure.
    assert adapter.RESULT_PREFIX not in out
    assert out.splitlines()[-2].split(" ")[2] == "255.87"
    # The node's environment (#20), collected by the script's Python (environment.py beside the
    # adapter, Python 2.7+): TF as that Python imports it, or unknown with why.
    environment = result["environment"]
    assert environment["python"]["executable"] == python and environment["cpu"]["logical_cores"] == os.cpu_count()
    has_tf = subprocess.run([python, "-c", "import tensorflow"], capture_output=True).returncode == 0
    if has_tf:
        assert environment["tensorflow"]["version"] != "unknown" and environment["tensorflow"]["git_version"]
    else:
        assert environment["tensorflow"] == "unknown"
        assert environment["unknown"]["tensorflow"].startswith("import tensorflow failed: ")


@pytest.mark.parametrize("python", PYTHONS)
def test_the_adapter_relays_the_exit_code_and_the_error(tmp_path, python):
    adapted = Adapted(tmp_path, python, "exit3", recorded=REFUSED_2017)
    code, _, _ = adapted.wait()
    assert code == 3
    result = adapted.result()
    assert result["status"] == "failed" and result["workload"]["exit_code"] == 3
    assert result["reason"] == (
        "tf_cnn_benchmarks exited with code 3: ValueError: Invalid --variable_update in distributed mode: replicated"
    )


@pytest.mark.parametrize("python", PYTHONS)
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT", "SIGHUP"])
def test_the_adapter_forwards_signals_to_the_script(tmp_path, python, signame, stop_leftovers):
    adapted = Adapted(tmp_path, python, "wait")
    stop_leftovers.append(adapted)
    deadline = time.time() + 30
    while not (tmp_path / "signal.waiting").exists():
        assert adapted.proc.poll() is None and time.time() < deadline, adapted.wait()
        time.sleep(0.05)
    os.kill(adapted.proc.pid, getattr(signal, signame))  # the adapter alone, not its group
    returncode, _, err = adapted.wait()
    assert (tmp_path / "signal").read_text() == str(int(getattr(signal, signame))), err
    # The script died of the signal, and so does the adapter: its waiter sees the signal, not an exit code.
    assert returncode == -getattr(signal, signame)
    result = adapted.result()
    assert result["status"] == "failed" and result["reason"] == f"tf_cnn_benchmarks was stopped by {signame}"


@pytest.mark.parametrize("python", PYTHONS)
def test_exit_zero_without_a_throughput_fails_the_task(tmp_path, python):
    adapted = Adapted(tmp_path, python, "exit0", recorded=REFUSED_2017)
    code, _, err = adapted.wait()
    assert code == 1
    assert "tf_cnn_adapter: error: tf_cnn_benchmarks exited 0 but printed no 'total images/sec' line" in err
    assert adapted.result()["status"] == "failed"


def test_a_parameter_server_writes_no_result_and_a_missing_script_is_named(tmp_path):
    adapted = Adapted(tmp_path, sys.executable, "exit0", job="ps")
    assert adapted.wait()[0] == 0 and not adapted.result_file.exists()
    missing = subprocess.run(
        [
            sys.executable,
            str(ADAPTER),
            "--tf_cnn_script",
            str(tmp_path / "nope.py"),
            "--job_name",
            "worker",
            "--result_file",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert missing.returncode == 2
    assert (
        f"tf_cnn_adapter: error: --tf_cnn_script must name tf_cnn_benchmarks.py; '{tmp_path / 'nope.py'}' is no file"
        in missing.stderr
    )
    assert json.loads((tmp_path / "r.json").read_text())["reason"].startswith("tf_cnn_adapter: --tf_cnn_script")
