"""Run the project's Ansible modules for real (ad-hoc ``ansible localhost -c local``)."""

import json
import os
import re
import shutil
import subprocess
import sys
import types

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARY = os.path.join(REPO, "library")
MODULE_UTILS = os.path.join(REPO, "module_utils")
BIN = os.path.dirname(sys.executable)
RESULT_RE = re.compile(r"^localhost \| [A-Z!]+(?: \| rc=-?\d+)? => \{", re.MULTILINE)


def ansible_tool(name):
    """The ansible executable next to this interpreter (any venv), else on PATH."""
    path = os.path.join(BIN, name)
    if os.path.exists(path):
        return path
    found = shutil.which(name)
    if not found:
        pytest.skip("%s is not installed" % name)
    return found


def adhoc_env():
    env = dict(os.environ)
    env.update(
        ANSIBLE_MODULE_UTILS=MODULE_UTILS,
        ANSIBLE_LIBRARY=LIBRARY,
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_CALLBACK_RESULT_FORMAT="json",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="false",
        ANSIBLE_LOCALHOST_WARNING="false",
        ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
        ANSIBLE_DEPRECATION_WARNINGS="false",
        ANSIBLE_RETRY_FILES_ENABLED="false",
    )
    env.pop("ANSIBLE_CONFIG", None)
    if os.environ.get("DTFBENCH_TEST_DIRECT_CALL"):
        # The project's action plugins with pipelining, as ansible.cfg has them:
        # tf_host_run runs without AnsiballZ (plugins/action/tf_host_run.py).
        env = action_env(pipelining=True, env=env)
    return env


def action_env(pipelining, env=None):
    """`env` (adhoc_env()'s by default) with the project's action plugins, pipelining on or off:
    the host actions (tf_host_run, sweep_marker) take the direct call only with it on."""
    env = dict(adhoc_env() if env is None else env)
    env.update(
        ANSIBLE_ACTION_PLUGINS=os.path.join(REPO, "plugins", "action"), ANSIBLE_PIPELINING=str(pipelining).lower()
    )
    return env


def adhoc_result(proc):
    """The module's result from an ad-hoc run's output: the minimal callback prints
    "localhost | CHANGED => {json}"."""
    match = RESULT_RE.search(proc.stdout)
    if not match:
        raise AssertionError("ansible gave no result (rc %d):\n%s\n%s" % (proc.returncode, proc.stdout, proc.stderr))
    result, _ = json.JSONDecoder().raw_decode(proc.stdout, match.end() - 1)
    return result


def run_ansible_doc(*args, library=LIBRARY, timeout=120):
    """ansible-doc -M `library` ARGS with the project's doc fragments, not its ansible.cfg."""
    tool = os.path.join(BIN, "ansible-doc")
    if not os.path.exists(tool):
        pytest.skip("ansible-doc is not installed next to %s" % sys.executable)
    env = dict(
        os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_DOC_FRAGMENT_PLUGINS=os.path.join(REPO, "plugins", "doc_fragments")
    )
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run(
        [tool, "-M", library, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def ansible_doc():
    """run_ansible_doc(*args, library=..., timeout=...): ansible-doc's finished process."""
    return run_ansible_doc


def adhoc_command(module, args, *extra_args):
    """The command line that runs one module on localhost with this interpreter: ``ansible
    localhost -c local -M library -m module -a args``, then `extra_args` (``--check``, ``-vvv``)."""
    return [
        ansible_tool("ansible"),
        "localhost",
        "-i",
        "localhost,",
        "-c",
        "local",
        "-M",
        LIBRARY,
        "-m",
        module,
        "-a",
        json.dumps(args),
        "-e",
        "ansible_python_interpreter=%s" % sys.executable,
        *extra_args,
    ]


@pytest.fixture
def adhoc():
    """What run_module is made of, for a test that starts the command itself. (A fixture:
    `from conftest import ...` in a test finds whichever conftest module was imported first.)"""
    return types.SimpleNamespace(
        library=LIBRARY,
        env=adhoc_env,
        action_env=action_env,
        tool=ansible_tool,
        command=adhoc_command,
        result=adhoc_result,
    )


@pytest.fixture
def run_module(tmp_path):
    """run_module(name, args, check=False, extra_args=()) -> (rc, result) via ``ansible -m``."""

    def run(module, args, check=False, timeout=180, extra_args=()):
        cmd = adhoc_command(module, args, *(["--check"] if check else []), *extra_args)
        # cwd: a directory without ansible.cfg, so the test does not depend on the project's.
        proc = subprocess.run(cmd, cwd=str(tmp_path), env=adhoc_env(), capture_output=True, text=True, timeout=timeout)
        return proc.returncode, adhoc_result(proc)

    return run
