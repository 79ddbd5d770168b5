"""Running ansible-playbook from a test: one way, for every test that runs a playbook.

- ``ansible_env()``: the environment (this interpreter's bin first, the project's ansible.cfg, no
  colour); tests/conftest.py's ``ansible_env`` fixture is this. ``strict_inventory_env()``: the
  same, failing on an inventory that does not parse (the test beds' inventories).
  ``callbacks_enabled_but(name)``: the project's callbacks without one, for ANSIBLE_CALLBACKS_ENABLED
  (the tests of a callback's effect, with it and without). ``noted_by_sitecustomize(...)``: a
  playbook run with a sitecustomize of the test's own, and what that wrote to a file.
- ``run_playbook(playbook, *args, env=..., timeout=...)``: ansible-playbook from the project root
  (or ``cwd``), to the end; the finished process with its output as text (``.output`` is stdout
  and stderr together). A playbook that runs past its timeout is killed with everything it
  started (its own session) and the test fails with the end of what it printed.
- ``start_playbook(...)``: the same command line as a running process, for the tests that signal
  or kill it in the middle. ``run_adhoc(*args, env=..., timeout=...)``: an ad-hoc ``ansible``
  command to its end.
- ``extra_vars(name=value, ...)``, ``small_run(...)`` and ``own_ports(tmp_path)``: ``-e name=value``
  arguments, the smallest benchmark that still measures (the trivial model, 8 images of 32 px,
  a few steps), and TF ports no other test uses.
- ``run_sweep(tmp_path, ...)``: run-benchmark.yml as a sweep of its own, its store and run
  folders under the test's tmp_path.
- ``run_tf_cnn_benchmarks(tmp_path, repo, ...)``: run-benchmark.yml with tf_cnn_benchmarks
  from a local clone source, everything it writes under the test's tmp_path.
"""

from __future__ import annotations

import configparser
import hashlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The .venv's ansible-playbook and ansible, whatever PATH says.
ANSIBLE_PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
ANSIBLE = str(Path(sys.executable).parent / "ansible")
# What a failure message shows of a playbook's output: its end, where the failed task is.
TAIL = 6000

# The smallest run that still measures: one repetition of a few steps of the trivial model.
SMALL_RUN = {"model": "trivial", "batch_size": 8, "image_size": 32, "warmup_steps": 2, "steps": 5, "repetitions": 1}


def ansible_env(**overrides: str) -> dict:
    """The environment for ansible-playbook: this interpreter's bin first, the project's config."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.update(overrides)
    return env


def strict_inventory_env(**overrides: str) -> dict:
    """ansible_env() in which an inventory that does not parse fails the playbook (Ansible's
    default is a warning and an empty inventory, which would hide a broken test bed)."""
    return ansible_env(ANSIBLE_INVENTORY_UNPARSED_FAILED="true", **overrides)


def extra_vars(**values) -> list[str]:
    """["-e", "name=value", ...] in the order given."""
    return [arg for name, value in values.items() for arg in ("-e", f"{name}={value}")]


def own_ports(key) -> list[str]:
    """-e arguments for TF ports of the test's own, taken from `key` (its tmp_path): other tests and
    benchmarks may use the default ones (2220, 2230), and they stay below the ephemeral range
    (32768-), whose ports outgoing connections take."""
    base = 20000 + (int(hashlib.sha1(str(key).encode()).hexdigest(), 16) % 600) * 20
    return extra_vars(tf_cluster_worker_port_base=base, tf_cluster_ps_port_base=base + 10)


def small_run(**overrides) -> list[str]:
    """The -e arguments of SMALL_RUN, with `overrides` (a value of None leaves that variable out)."""
    values = {**SMALL_RUN, **overrides}
    return extra_vars(**{name: value for name, value in values.items() if value is not None})


class Played(subprocess.CompletedProcess):
    """A finished ansible-playbook: returncode, stdout, stderr (text) and both together."""

    @property
    def output(self) -> str:
        return (self.stdout or "") + (self.stderr or "")


def command(playbook: str | Path, *args: str) -> list[str]:
    return [ANSIBLE_PLAYBOOK, str(playbook), *map(str, args)]


def start_playbook(
    playbook: str | Path, *args: str, env: dict | None = None, cwd: str | Path = ROOT, **popen
) -> subprocess.Popen:
    """ansible-playbook PLAYBOOK ARGS started in `cwd` (Popen's keyword arguments pass through)."""
    return subprocess.Popen(command(playbook, *args), cwd=cwd, env=ansible_env() if env is None else env, **popen)


def callbacks_enabled_but(name: str) -> str:
    """ansible.cfg's callbacks_enabled without `name` (which it must list), comma-separated."""
    config = configparser.ConfigParser()
    config.read(ROOT / "ansible.cfg")
    enabled = [c.strip() for c in config["defaults"]["callbacks_enabled"].split(",")]
    assert name in enabled, enabled
    return ",".join(c for c in enabled if c != name)


def noted_by_sitecustomize(tmp_path: Path, playbook: str, sitecustomize: str, **env: str) -> str:
    """Run `playbook` (its text) with `sitecustomize` (its text) on ansible-playbook's PYTHONPATH and
    return what the sitecustomize wrote to the file named by NOTED_FILE (empty before the run)."""
    site = tmp_path / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(sitecustomize)
    book = tmp_path / "playbook.yml"
    book.write_text(playbook)
    noted = tmp_path / "noted"
    noted.write_text("")
    played = run_playbook(book, env=ansible_env(PYTHONPATH=str(site), NOTED_FILE=str(noted), **env))
    assert played.returncode == 0, played.stdout + played.stderr
    return noted.read_text()


def run_playbook(
    playbook: str | Path,
    *args: str,
    env: dict | None = None,
    cwd: str | Path = ROOT,
    timeout: float = 600,
    merge_output: bool = False,
) -> Played:
    """ansible-playbook PLAYBOOK ARGS in `cwd` to its end (stderr into stdout with `merge_output`).

    Past `timeout` the playbook's whole session is killed (TF tasks it started locally
    included) and the test fails with the command and the end of its output."""
    argv = command(playbook, *args)
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        env=ansible_env() if env is None else env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_output else subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        stdout, stderr = process.communicate()
        output = (stdout or "") + (stderr or "")
        pytest.fail(f"{' '.join(argv)} ran past {timeout} s; the end of its output:\n{output[-TAIL:]}")
    return Played(argv, process.returncode, stdout, stderr)


def run_adhoc(*args: str, env: dict | None = None, cwd: str | Path = ROOT, timeout: float = 120):
    """ansible ARGS (an ad-hoc command) in `cwd` to its end: the finished process, output as text."""
    return subprocess.run(
        [ANSIBLE, *map(str, args)],
        cwd=cwd,
        env=ansible_env() if env is None else env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def run_tf_cnn_benchmarks(tmp_path: Path, repo: str | Path, *args: str, timeout: float = 600) -> Played:
    """run-benchmark.yml with the tf_cnn_benchmarks workload cloned from `repo`: its clone cache,
    the run folders and the results store under `tmp_path`, TF ports of the test's own, the
    smallest run at the program's own image size, then `args`."""
    return run_playbook(
        "run-benchmark.yml",
        *extra_vars(tf_cnn_benchmarks_repo=repo),
        *own_ports(tmp_path),
        *extra_vars(
            tf_cnn_benchmarks_cache=tmp_path / "cache",
            dtfbench_run_root=tmp_path / "runs",
            results_db=tmp_path / "results.sqlite",
        ),
        *small_run(image_size=None),
        *args,
        timeout=timeout,
    )


def run_sweep(tmp_path: Path, *args: str, prefix: str = "sweep", timeout: float = 600):
    """run-benchmark.yml as a sweep of its own: a new sweep id (`prefix`-...), its results store and
    run folders under `tmp_path`, then `args`. (the finished playbook, store, run root, sweep id)"""
    sweep_id = f"{prefix}-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    run_root = tmp_path / "runs"
    sweep = extra_vars(sweep_id=sweep_id, results_db=db, dtfbench_run_root=run_root)
    return run_playbook("run-benchmark.yml", *sweep, *args, timeout=timeout), db, run_root, sweep_id
