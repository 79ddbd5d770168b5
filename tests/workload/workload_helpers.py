"""Helpers for the workload tests: free ports, dtfbench train processes, their output."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from ports import free_ports

SRC = Path(__file__).resolve().parents[2] / "src"
RESULT_PREFIX = "DTFBENCH_RESULT "

# Small and quick on a 2-core machine: one thread pool each, tiny model and images.
SMALL = [
    "--model",
    "small_cnn",
    "--batch_size",
    "8",
    "--image_size",
    "32",
    "--num_warmup_batches",
    "2",
    "--num_batches",
    "6",
    "--display_every",
    "2",
    "--num_intra_threads",
    "1",
    "--num_inter_threads",
    "1",
    "--step_timeout",
    "20",
    "--startup_timeout",
    "90",
]


def task_env(marker):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["DTFBENCH_TEST_MARKER"] = marker  # finds leftovers of this test, and only them
    env.pop("TF_CONFIG", None)
    return env


class Task:
    def __init__(self, name, args, folder, env, peers=()):
        self.name = name
        # The other tasks of its cluster (a list the cluster fills): when this one outlives its
        # bound, what they said is the evidence (did the PS see the peer go?).
        self.peers = peers
        self.args = list(args)
        self.stdout_path = folder / f"{name}.out"
        self.stderr_path = folder / f"{name}.err"
        self._stdout = open(self.stdout_path, "w")
        self._stderr = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dtfbench", "train", *self.args],
            stdout=self._stdout,
            stderr=self._stderr,
            env=env,
            start_new_session=True,
        )
        self.ended_at = None

    @property
    def stdout(self):
        return self.stdout_path.read_text()

    @property
    def stderr(self):
        return self.stderr_path.read_text()

    def poll(self):
        code = self.proc.poll()
        if code is not None and self.ended_at is None:
            self.ended_at = time.monotonic()
        return code

    def wait(self, timeout):
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{self.name} still running after {timeout} s\n{self.tails()}")
        self.poll()
        return code

    def tails(self):
        """The last lines of this task's output and of every other task of its cluster."""
        parts = []
        for task in [self, *(t for t in self.peers if t is not self)]:
            state = "running" if task.proc.poll() is None else f"exited {task.proc.returncode}"
            parts.append(
                f"--- {task.name} ({state}) stdout ---\n{task.stdout[-1000:]}\n"
                f"--- {task.name} stderr ---\n{task.stderr[-2000:]}"
            )
        return "\n".join(parts)

    def result(self):
        lines = [line for line in self.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
        assert len(lines) == 1, f"{self.name}: expected one result line\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}"
        return json.loads(lines[0][len(RESULT_PREFIX) :])

    def kill_group(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        self._stdout.close()
        self._stderr.close()


class Tasks:
    """Starts dtfbench train processes; the fixture kills whatever is left."""

    def __init__(self, folder):
        self.folder = folder
        self.marker = uuid.uuid4().hex
        self.env = task_env(self.marker)
        # The tasks' temporary folder: what they leave there is this test's to see, not /tmp's.
        self.tmpdir = folder / "tmp"
        self.tmpdir.mkdir(exist_ok=True)
        self.env["TMPDIR"] = str(self.tmpdir)
        self.started = []

    def start(self, name, args, env=None, peers=()):
        task = Task(name, args, self.folder, {**self.env, **(env or {})}, peers)
        self.started.append(task)
        return task

    def cluster(self, mode, num_ps, num_workers, extra=(), worker_extra=None):
        """Start num_ps PSs and num_workers workers of one cluster; returns (ps_tasks, worker_tasks)."""
        ports = free_ports(num_ps + num_workers)
        ps_hosts = ",".join(f"127.0.0.1:{p}" for p in ports[:num_ps])
        worker_hosts = ",".join(f"127.0.0.1:{p}" for p in ports[num_ps:])
        common = ["--variable_update", mode, "--worker_hosts", worker_hosts, *SMALL, *extra]
        if num_ps:
            common += ["--ps_hosts", ps_hosts]
        members = []
        ps = [
            self.start(f"ps{i}", [*common, "--job_name", "ps", "--task_index", str(i)], peers=members)
            for i in range(num_ps)
        ]
        workers = [
            self.start(
                f"worker{i}",
                [
                    *common,
                    "--job_name",
                    "worker",
                    "--task_index",
                    str(i),
                    "--result_file",
                    str(self.folder / f"worker{i}.json"),
                    *((worker_extra or {}).get(i, ())),
                ],
                peers=members,
            )
            for i in range(num_workers)
        ]
        members.extend(ps + workers)
        return ps, workers

    def cleanup(self):
        for task in self.started:
            task.kill_group()


def wait_for_line(task, prefix, timeout):
    """Wait until a line of the task's stdout starts with prefix."""
    _wait_for_output(task, lambda: any(line.startswith(prefix) for line in task.stdout.splitlines()), prefix, timeout)


def wait_for_stderr(task, text, timeout):
    """Wait until the task's stderr (its progress notes) holds text."""
    _wait_for_output(task, lambda: text in task.stderr, text, timeout)


def _wait_for_output(task, seen, what, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if seen():
            return
        if task.poll() is not None:
            pytest.fail(f"{task.name} exited ({task.proc.returncode}) before printing {what!r}\n{task.tails()}")
        time.sleep(0.1)
    pytest.fail(f"{task.name} did not print {what!r} within {timeout} s\n{task.tails()}")


def run_train(args, env_extra=None, timeout=60):
    """Run `python -m dtfbench train` to completion (for the bad-input checks)."""
    env = task_env(uuid.uuid4().hex)
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "dtfbench", "train", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        start_new_session=True,
    )


def helper_output(script, *args, prefix):
    """Run a helper script of this folder in its own TF process; the JSON after ``prefix``."""
    env = dict(os.environ, PYTHONPATH=str(SRC), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    here = Path(__file__).resolve().parent
    done = subprocess.run(
        [sys.executable, str(here / script), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith(prefix + " ")][-1]
    return json.loads(line.split(" ", 1)[1])


def model_variables(*args):
    """model_variables.py's answer: {model: [image size, [[name below cg/, shape, trainable]]]}."""
    return helper_output("model_variables.py", *args, prefix="MODEL_VARIABLES")
