"""tf_host_run through its action plugin: the direct call (no AnsiballZ) does what the module does.

plugins/action/tf_host_run.py pipes the stdlib-only launch code to the host's Python instead
of running the module through AnsiballZ, which costs ~0.17 CPU-s a call on the host (issue
#19, P2). These tests run ad-hoc ``ansible localhost -c local`` with the project's action
plugins and pipelining on, as ansible.cfg has it, with the stand-in programs of
test_tf_host_run, and check from ``-vvv`` which path ran: a whole run (finish, stop, check),
a failing worker, a warning and a bad option through the direct call; the module when
pipelining is off; and the direct call with the project's own ansible.cfg and local
inventory, unchanged (`make run`'s path).
"""

import json
import os
import subprocess

import pytest
from task_processes import no_leftovers  # noqa: F401  (autouse: no process of a test remains)
from test_tf_host_run import Host

pytestmark = pytest.mark.ansible

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRECT = "tf_host_run: direct call with"
MODULE = "tf_host_run: the module runs"


class Runner:
    """run_module's signature, through the action plugin; keeps each call's output."""

    def __init__(self, tmp_path, adhoc, pipelining=True):
        self.tmp_path, self.adhoc, self.pipelining = tmp_path, adhoc, pipelining
        self.outputs = []

    def __call__(self, module, args, check=False, timeout=180, extra_args=()):
        cmd = self.adhoc.command(module, args, "-vvv", *(["--check"] if check else []))
        env = self.adhoc.action_env(self.pipelining)
        proc = subprocess.run(cmd, cwd=str(self.tmp_path), env=env, capture_output=True, text=True, timeout=timeout)
        self.outputs.append(proc.stdout + proc.stderr)
        return proc.returncode, self.adhoc.result(proc)


@pytest.fixture
def direct(tmp_path, adhoc, monkeypatch):
    runner = Runner(tmp_path, adhoc)
    return runner, Host(tmp_path, runner, monkeypatch)


def test_a_whole_run_through_the_direct_call(direct):
    runner, host = direct
    plan = {"ps-0": {"run": 1.0}, "worker-0": {"run": 1.5, "value": 1.5}, "worker-1": {"run": 1.0, "value": 2.5}}
    rc, finished = host("finished", plan, timeout=60)
    assert rc == 0, finished
    assert finished["changed"] is True
    assert [(w["task_index"], w["rc"], w["result"]["value"]) for w in finished["workers"]] == [(0, 0, 1.5), (1, 0, 2.5)]
    results = [w["result"] for w in finished["workers"]]
    rc, stopped = host("stopped", complete_results=results)
    assert rc == 0 and stopped["died"] == [] and stopped["changed"] is True, stopped
    rc, checked = host("checked")
    assert rc == 0 and checked["complete"] is True and checked["stored_results"] == results, checked
    assert checked["run_dir"] == str(host.run_dir)
    for output in runner.outputs:
        assert DIRECT in output and "AnsiballZ_tf_host_run" not in output, output[-3000:]


def test_a_failure_and_a_warning_come_back_as_the_module_gives_them(direct, tmp_path):
    runner, host = direct
    plan = {"worker-1": {"exit_at_once": 3}}
    rc, failed = host("started", plan)
    assert rc != 0, failed
    assert "run-worker-1 exited with rc 3 before port" in failed["msg"]
    assert failed["failed_at"] > 0 and failed["changed"] is True
    # The others still run: started again with other arguments they are left as they are,
    # with the module's warning; worker-1, which had exited, starts.
    rc, again = host("started", {"worker-1": {"say": "again"}})
    assert rc == 0 and again["changed"] is True, again
    assert "already runs" in runner.outputs[-1] and "with another command line" in runner.outputs[-1]
    rc, stopped = host("stopped")
    assert rc == 0, stopped
    assert all(DIRECT in output for output in runner.outputs)


def test_a_bad_option_is_one_error_before_anything_runs(direct):
    runner, host = direct
    rc, result = runner("tf_host_run", dict(state="checked", run_id="r", run_dir=str(host.run_dir), tasks=[], bogus=1))
    assert rc != 0 and "Unsupported parameters" in result["msg"] and "bogus" in result["msg"], result
    assert not host.run_dir.exists()


def test_without_pipelining_the_module_runs(tmp_path, adhoc, monkeypatch):
    runner = Runner(tmp_path, adhoc, pipelining=False)
    host = Host(tmp_path, runner, monkeypatch)
    rc, checked = host("checked")
    assert rc == 0 and checked["complete"] is False and checked["busy"] == [], checked
    assert "data_read" not in checked  # nothing read unless asked
    assert MODULE + " (no pipelining)" in runner.outputs[0] and DIRECT not in runner.outputs[0]


@pytest.mark.parametrize("pipelining", [True, False], ids=["direct call", "module"])
def test_the_check_measures_the_data_directorys_read_rate_and_never_fails_for_it(
    tmp_path, adhoc, monkeypatch, pipelining
):
    """A real-data run's raw read rate comes from its check (one call a host that the run pays
    anyway), on either path: the direct call ships node/read_throughput.py with the host code."""
    runner = Runner(tmp_path, adhoc, pipelining=pipelining)
    host = Host(tmp_path, runner, monkeypatch)
    data = tmp_path / "data"
    data.mkdir()
    for i in range(3):
        (data / ("train-%05d-of-00003" % i)).write_bytes(os.urandom(1 << 20))
    rc, checked = host("checked", data_read_dir=str(data), data_read_files=2)
    assert rc == 0 and checked["busy"] == [], checked
    read = checked["data_read"]
    assert read["data_dir"] == str(data) and read["files"] == 2 and read["bytes"] == 2 << 20, read
    assert read["mb_per_s"] > 0, read
    # The page cache the run starts with (mincore): the whole dataset read in, or dropped.
    assert read["cache"] == dict(read["cache"], setting=None, files=3, bytes=3 << 20), read
    rc, warm = host("checked", data_read_dir=str(data), data_read_files=1, data_cache="warm")
    assert rc == 0 and warm["data_read"]["cache"]["setting"] == "warm", warm
    assert warm["data_read"]["cache"]["resident"] == 1.0, warm["data_read"]
    rc, cold = host("checked", data_read_dir=str(data), data_read_files=1, data_cache="cold")
    assert rc == 0 and cold["data_read"]["cache"]["resident"] == 0.0, cold["data_read"]
    rc, missing = host("checked", data_read_dir=str(tmp_path / "none"))
    assert rc == 0, missing
    assert (
        missing["data_read"]["data_dir"] == str(tmp_path / "none")
        and "no train-* files" in missing["data_read"]["error"]
    )
    assert all((DIRECT in output) == pipelining for output in runner.outputs), runner.outputs[-1][-3000:]


def test_the_projects_own_settings_take_the_direct_call_on_the_local_connection(tmp_path, adhoc):
    """`make run`'s path: ansible.cfg and the local inventory as they are, nothing overridden.

    The local connection reads pipelining from ``[connection]`` (or ``[defaults]``), not from
    ``[ssh_connection]``: with the setting only there, this call pays AnsiballZ.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json"
    )
    run_dir = tmp_path / "run"
    args = dict(state="checked", run_id="r", run_dir=str(run_dir), tasks=[])
    cmd = [adhoc.tool("ansible"), "tf_nodes", "-m", "tf_host_run", "-a", json.dumps(args), "-vvv"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "localhost | SUCCESS" in proc.stdout, output[-3000:]
    assert DIRECT in output and MODULE not in output and "AnsiballZ_tf_host_run" not in output, output[-3000:]
