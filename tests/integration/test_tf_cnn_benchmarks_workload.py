"""run-benchmark.yml with workload=tf_cnn_benchmarks@<ref> on the local inventory, end to end.

The repository is a local git repository made here and reached through a file:// URL; its
scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py is a small stand-in for the real script, which
cannot be fetched or run from where these tests were written (GitHub is unreachable, and the
study's script needs TensorFlow 1.x). The stand-in takes the real script's flags (and stops, as
a strict flag parser would, at any other), imports a sibling module of its directory as the
real one does, listens on its task's port like a TF server, waits for its parameter servers,
and prints its output in the real script's format (header, ``Step\\tImg/sec\\tloss`` rows,
``total images/sec``); its parameter servers, like the real ones, never exit by themselves.

What this proves: the ref is fetched on the controller and resolved to a commit, the script's
directory and the adapter reach the node and run there under the launcher (cluster flags,
result file, stopping the PSs), the output is parsed into the results store (status, images/sec,
workload, ref, commit), and a second run changes nothing. What it does not prove: that the real
tf_cnn_benchmarks at a given ref runs on a node's TF 1.x and GPUs, that its real output matches
the recorded format in every version, or that its numbers are right; nor the fetch from GitHub.
"""

import json
import re
import subprocess
import uuid

import pytest
from playbook_harness import run_tf_cnn_benchmarks

from dtfbench.results import store

pytestmark = [pytest.mark.ansible]

STAND_IN = r'''"""Stand-in for tensorflow/benchmarks' tf_cnn_benchmarks.py (dtfbench's tests; not the real script)."""
from __future__ import print_function
import argparse, socket, sys, time
import cnn_util  # a sibling module, as the real script imports its own

FLAGS = ("model", "batch_size", "num_batches", "num_warmup_batches", "num_gpus", "variable_update", "job_name",
         "task_index", "ps_hosts", "worker_hosts", "device", "data_format", "local_parameter_device", "data_dir",
         "data_name", "num_intra_threads", "num_inter_threads", "display_every", "cross_replica_sync")
parser = argparse.ArgumentParser()
for name in FLAGS:
    parser.add_argument("--" + name)
args = parser.parse_args()  # any other flag: exit 2
time.sleep(cnn_util.IMPORT_SECONDS)  # 'import tensorflow' takes seconds before a server listens
index = int(args.task_index)
me = (args.ps_hosts if args.job_name == "ps" else args.worker_hosts).split(",")[index]
host, port = me.rsplit(":", 1)
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((host, int(port)))
server.listen(16)
if args.job_name == "ps":
    print("TensorFlow:  %s" % cnn_util.VERSION)
    print("Running parameter server %d" % index)
    sys.stdout.flush()
    while True:  # server.join(): a PS never exits by itself
        connection, _ = server.accept()
        connection.close()
# The session needs the PSs, and synchronous steps every worker.
for peer in args.ps_hosts.split(",") + args.worker_hosts.split(","):
    peer_host, peer_port = peer.rsplit(":", 1)
    for _ in range(600):
        try:
            socket.create_connection((peer_host, int(peer_port)), timeout=1).close()
            break
        except socket.error:
            time.sleep(0.1)
workers = len(args.worker_hosts.split(","))
batch = int(args.batch_size) * int(args.num_gpus)
rate = cnn_util.RATE
print("TensorFlow:  %s" % cnn_util.VERSION)
print("Model:       %s" % args.model)
print("Mode:        training")
print("Batch size:  %s global" % batch)
print("             %s per device" % (batch / int(args.num_gpus)))
print("Devices:     %s" % ["/job:worker/task:%d/%s:%d" % (index, args.device or "gpu", i)
                           for i in range(int(args.num_gpus))])
print("Data format: %s" % (args.data_format or "NCHW"))
print("Optimizer:   sgd")
print("Variables:   %s" % args.variable_update)
print("Sync:        True")
print("==========")
print("Generating model")
print("Running warm up")
time.sleep(cnn_util.STEP_SECONDS * int(args.num_warmup_batches))
print("Done warm up")
print("Step\tImg/sec\tloss")
for step in range(1, int(args.num_batches) + 1):
    time.sleep(cnn_util.STEP_SECONDS)
    if step == 1 or step % 10 == 0 or step == int(args.num_batches):
        print("%i\t%s\t%.3f" % (step, "images/sec: %.1f +/- %.1f (jitter = %.1f)" % (rate, 0.0, 0.0), 7.0 - step / 1000.0))
print("-" * 64)
print("total images/sec: %.2f" % (rate * workers))
print("-" * 64)
'''
CNN_UTIL = "VERSION = '1.1'\nRATE = 37.5\nIMPORT_SECONDS = 4\nSTEP_SECONDS = 1.0\n"


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def benchmarks_repo(tmp_path_factory):
    """A git repository laid out like tensorflow/benchmarks, its stand-in script tagged 'study-2017'."""
    repo = tmp_path_factory.mktemp("benchmarks")
    script_dir = repo / "scripts" / "tf_cnn_benchmarks"
    script_dir.mkdir(parents=True)
    (script_dir / "tf_cnn_benchmarks.py").write_text(STAND_IN)
    (script_dir / "cnn_util.py").write_text(CNN_UTIL)
    (repo / "README.md").write_text("stand-in of tensorflow/benchmarks\n")
    git(repo, "init", "-q", "-b", "master")
    git(repo, "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "stand-in")
    git(repo, "tag", "study-2017")
    return repo, git(repo, "rev-parse", "HEAD")


def playbook(tmp_path, repo, *args, timeout=600):
    return run_tf_cnn_benchmarks(tmp_path, f"file://{repo}", *args, timeout=timeout)


def statuses(output, task_prefix):
    """The status words (ok, changed, skipping, ...) Ansible printed under each task whose name starts so."""
    found = []
    for block in re.split(r"\n(?=TASK \[)", output):
        header, _, body = block.partition("\n")
        if header.startswith(f"TASK [benchmark : {task_prefix}"):
            found += re.findall(r"^(ok|changed|skipping|failed|fatal):", body, flags=re.M)
    return found


def test_tf_cnn_benchmarks_at_a_ref_runs_records_and_changes_nothing_the_second_time(
    tmp_path, benchmarks_repo, live_processes
):
    repo, commit = benchmarks_repo
    sweep_id = f"tfcnn-{uuid.uuid4().hex[:8]}"
    args = ["-e", "workload=tf_cnn_benchmarks@study-2017", "-e", "gpus=1,2", "-e", f"sweep_id={sweep_id}"]
    done = playbook(tmp_path, repo, *args)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert f"workload tf_cnn_benchmarks@study-2017: commit {commit}" in " ".join(done.stdout.split())

    runs = store.runs(store.connect(tmp_path / "results.sqlite"))
    assert [(r["gpus"], r["status"]) for r in runs] == [(1, "ok"), (2, "ok")], [r["reason"] for r in runs]
    one, two = runs
    # The figure tf_cnn_benchmarks printed: 'total images/sec' (37.5 per worker in the stand-in).
    assert one["images_per_sec"] == pytest.approx(37.5) and two["images_per_sec"] == pytest.approx(75.0)
    assert two["images_per_sec_per_worker"] == pytest.approx([37.5, 37.5])
    for run in runs:
        assert (run["workload"], run["workload_ref"], run["workload_commit"]) == (
            "tf_cnn_benchmarks",
            "study-2017",
            commit,
        )
        assert run["tf_version"] == "1.1" and run["sweep_id"] == sweep_id
        # The NIC bytes of an external program: its window from the step lines the adapter saw,
        # the host's bytes (TF traffic on loopback here) over it (docs/network.md).
        assert all(w["measured_window"]["source"] == "step lines" for w in run["worker_results"])
        assert run["nic"]["localhost"]["status"] == "ok", run["nic"]
        assert run["nic"]["localhost"]["interface"] == "lo" and run["nic_busiest_host"] == "localhost"
    worker = two["worker_results"][1]
    assert worker["workload"]["commit"] == commit and worker["workload"]["exit_code"] == 0
    # The run's flags as tf_cnn_benchmarks got them: CPU workers here, and no option of ours.
    assert worker["config"]["device"] == "cpu" and worker["config"]["data_format"] == "NHWC"
    assert worker["config"]["num_intra_threads"] == "1"  # the system profile's extra_args
    assert not {"step_timeout", "startup_timeout", "image_size"} & {
        k for k, v in worker["config"].items() if v not in (None, "")
    }
    # The node's copy: the commit's directory (with its sibling module) and the adapter.
    node_dir = tmp_path / "runs" / "_tf_cnn_benchmarks"
    assert (node_dir / commit / "scripts" / "tf_cnn_benchmarks" / "cnn_util.py").is_file()
    assert (node_dir / commit / ".complete").read_text().strip() == commit
    assert (node_dir / "tf_cnn_adapter.py").is_file()
    # The PS log reads like the study's, and the PSs (which never exit) were stopped.
    logs = [path.read_text() for path in (tmp_path / "runs" / one["run_id"]).glob("*.log")]
    assert any("Running parameter server 0" in log for log in logs), logs
    assert live_processes(sweep_id) == []

    # The same sweep again: nothing left to do, nothing changes, nothing is fetched.
    again = playbook(tmp_path, repo, *args)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "0 of 2 runs to do of tf_cnn_benchmarks@study-2017" in " ".join(again.stdout.split())
    assert re.search(r"localhost\s*:\s*ok=\d+\s+changed=0\s", again.stdout), again.stdout[-2000:]
    assert [r["id"] for r in store.runs(store.connect(tmp_path / "results.sqlite"))] == [one["id"], two["id"]]

    # A new sweep at the same ref: the clone, pack and node copies are there already.
    third = playbook(
        tmp_path,
        repo,
        "-e",
        "workload=tf_cnn_benchmarks@study-2017",
        "-e",
        "gpus=1",
        "-e",
        f"sweep_id={sweep_id}-b",
    )
    assert third.returncode == 0, third.stdout[-3000:]
    assert statuses(third.stdout, "Fetch tf_cnn_benchmarks on the controller") == ["ok"]
    for task in (
        "Make the controller's cache",
        "Pack the script",
        "Make the commit's",
        "Unpack the script",
        "Mark the unpacked",
        "Copy the adapter",
    ):
        # (A task skipped on every host, as the unpacking is, prints nothing here.)
        assert "changed" not in statuses(third.stdout, task), task
    (new,) = store.runs(store.connect(tmp_path / "results.sqlite"), "sweep_id = ?", [f"{sweep_id}-b"])
    assert new["status"] == "ok", new["reason"]
    assert new["workload_commit"] == commit
    assert json.dumps(new["cluster_spec"]) and live_processes(sweep_id) == []


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["-e", "workload=tf_cnn_benchmarks@no-such-ref"],
            "workload=tf_cnn_benchmarks@no-such-ref: cannot fetch no-such-ref from file://",
        ),
        (["-e", "workload=tf_cnn_benchmarks@..", "-e", "gpus=1"], "the git ref '..' contains '..'"),
        (
            ["-e", "workload=tf_cnn_benchmarks@master", "-e", "model=small_cnn"],
            "model=small_cnn is dtfbench's own test model; tf_cnn_benchmarks has no such model",
        ),
        (
            ["-e", "workload=tf_cnn_benchmarks@master", "-e", "image_size=32"],
            "image_size=32: tf_cnn_benchmarks has no --image_size",
        ),
    ],
)
def test_a_bad_workload_is_one_clear_error_before_anything_starts(tmp_path, benchmarks_repo, args, message):
    repo, _ = benchmarks_repo
    done = playbook(
        tmp_path,
        repo,
        "-e",
        "gpus=1",
        "-e",
        f"sweep_id=bad-{uuid.uuid4().hex[:6]}",
        *args,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode != 0, output[-3000:]
    assert message in " ".join(output.split()), output[-3000:]
    assert "Traceback" not in output
    assert not (tmp_path / "results.sqlite").exists() and not (tmp_path / "runs").exists()
