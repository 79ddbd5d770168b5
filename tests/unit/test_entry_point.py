"""The one entry point: `python -m dtfbench <command>` and the `dtfbench` console script."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from dtfbench.__main__ import COMMANDS, INTERNAL, INTERNAL_LINE

MAIN_GUARD = 'if __name__ == "__main__":'
SRC = Path(__file__).resolve().parents[2] / "src" / "dtfbench"

# Run as files, not through the dispatcher: the Slurm jobs' layout step (a copy of plan/layout.py
# on the TF module's Python), the task supervisor and the compat/ code (copied alone to nodes).
# Files run alone, by path, on a node's own Python (copied beside a Slurm job or run by tf_host_run).
RUN_AS_FILES = {
    "plan/layout.py",
    "launch/supervisor.py",
    "launch/nic_sampler.py",
    "linux/read_throughput.py",
    "node/stage_data.py",
    "compat/tf_cnn_adapter.py",
    "compat/environment.py",
}


def dtfbench(*args, program=(sys.executable, "-m", "dtfbench")):
    return subprocess.run([*program, *args], capture_output=True, text=True, timeout=120)


USER_COMMANDS = [name for name in COMMANDS if name not in INTERNAL]


def internal_names(text):
    """The commands the help's internal line names."""
    [line] = [line for line in text.splitlines() if line.startswith(INTERNAL_LINE)]
    return line[len(INTERNAL_LINE) :].split(", ")


def test_help_lists_every_user_command_with_one_line_and_names_the_internal_ones():
    done = dtfbench("--help")
    assert done.returncode == 0, done.stderr
    lines = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert list(lines) == USER_COMMANDS
    for name in USER_COMMANDS:
        assert lines[name].split(None, 1)[1] == COMMANDS[name][1]
    # Run by the roles, plugins and Slurm jobs (grep roles/ playbooks/ plugins/ src/): one line, names only.
    assert set(INTERNAL) == {"interrupt", "adaptive_sweep", "layout", "record", "background_read"}
    assert internal_names(done.stdout) == list(INTERNAL)
    assert set(INTERNAL) <= set(COMMANDS)


@pytest.mark.parametrize("name", INTERNAL)
def test_an_internal_command_still_dispatches(name):
    # `python -m dtfbench interrupt ...` (the callback plugin), `adaptive_sweep` (roles/benchmark), `layout`
    # (roles/tf_virtualenv), `record` (store add's former name): left out of the list, run the same.
    done = dtfbench(name, "--help")
    assert done.returncode == 0, done.stderr
    assert f"dtfbench {name}" in done.stdout.splitlines()[0]


def test_the_console_script_is_the_same_dispatcher():
    script = Path(sys.executable).parent / "dtfbench"
    assert script.is_file(), "no dtfbench console script: run `make setup` (pyproject's [project.scripts])"
    assert dtfbench("--help", program=(str(script),)).stdout == dtfbench("--help").stdout


@pytest.mark.parametrize("args", [["trian"], ["--db", "x"]])
def test_an_unknown_command_is_named_with_the_list_of_commands(args):
    done = dtfbench(*args)
    assert done.returncode == 2
    assert done.stdout == ""
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith(f"dtfbench: error: unknown command {args[0]!r}; the commands are: "), error
    assert all(name in error for name in COMMANDS), error


def test_no_command_says_so_and_shows_the_commands():
    done = dtfbench()
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == "dtfbench: error: no command given"
    assert all(f"  {name} " in done.stderr for name in USER_COMMANDS)
    assert internal_names(done.stderr) == list(INTERNAL)


@pytest.mark.parametrize("name", list(COMMANDS))
def test_command_help_is_the_commands_own(name):
    done = dtfbench(name, "--help")
    assert done.returncode == 0, done.stderr
    usage = done.stdout.splitlines()[0]
    assert usage.startswith("usage: ") and f"dtfbench {name}" in usage, usage


# What a command must not load: the workload runs on nodes without the report's libraries or
# Ansible; recording and the layout run without TensorFlow.
NOT_LOADED = {
    "train": ("matplotlib", "scipy", "ansible", "dtfbench.report", "dtfbench.forecast", "dtfbench.results"),
    "record": ("tensorflow", "matplotlib", "dtfbench.workload", "dtfbench.report"),
    "layout": ("numpy", "tensorflow", "matplotlib", "dtfbench.results", "dtfbench.workload"),
    "s3sync": ("tensorflow", "matplotlib", "scipy", "dtfbench.results"),
}


# `python -m dtfbench NAME --help` in a fresh interpreter, then the names of every module it loaded.
LOADED_BY = """
import contextlib, io, json, runpy, sys
sys.argv = ["dtfbench", sys.argv[1], "--help"]
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    runpy.run_module("dtfbench", run_name="__main__", alter_sys=True)
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("name", list(NOT_LOADED))
def test_a_command_imports_only_its_own_module(name):
    done = subprocess.run([sys.executable, "-c", LOADED_BY, name], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(json.loads(done.stdout))
    assert COMMANDS[name][0] in loaded
    assert {m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_LOADED[name])} == set()


def test_commands_have_no_entry_point_of_their_own():
    """`python -m dtfbench <command>` is the one way in: no command module runs as `-m` itself."""
    files = [file for file in SRC.rglob("*.py") if file != SRC / "__main__.py"]
    mains = {str(f.relative_to(SRC)) for f in files if f.name == "__main__.py" or MAIN_GUARD in f.read_text()}
    assert mains <= RUN_AS_FILES, sorted(mains - RUN_AS_FILES)
    assert sorted(p.name for p in SRC.glob("*.py")) == ["__init__.py", "__main__.py"]
