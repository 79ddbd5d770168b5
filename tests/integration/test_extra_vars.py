"""Extra variables that nothing reads (issue 30, case 6), through the user's own commands.

Ansible accepts any ``-e name=value``: a typo such as ``-e modle=resnet50`` trained the default
model with exit 0. Every entry point warns with the closest known name, and
``strict_variables=true`` refuses before its first real play starts. The known names come from
the playbooks, roles and variable files themselves (plugins/action/extra_vars_check.py).
"""

from __future__ import annotations

import re

import pytest
from playbook_harness import run_playbook

pytestmark = [pytest.mark.ansible]

ENTRY_POINTS = ["run-benchmark", "launch", "report", "provision-aws", "teardown-aws", "configure-nodes"]


def playbook(name, *args):
    return run_playbook(f"{name}.yml", *args, timeout=120)


def plays_started(output):
    return re.findall(r"^PLAY \[(.*)\]", output, re.MULTILINE)


@pytest.mark.parametrize("entry", ENTRY_POINTS)
def test_strict_variables_refuses_an_unknown_name_before_anything_starts(entry):
    done = playbook(entry, "-e", "modle=resnet50", "-e", "strict_variables=true")
    assert done.returncode != 0, done.stdout
    out = done.stdout + done.stderr
    assert f"-e modle: {entry}.yml reads no variable of that name" in out, out
    assert "strict_variables=true refuses" in out
    assert plays_started(done.stdout) == ["Check the extra variables"], done.stdout


@pytest.mark.parametrize(
    "given, meant",
    [("gpu=2", "gpus"), ("modle=resnet50", "model"), ("num-ps=2", "num_ps"), ("step_timout=5", "step_timeout")],
)
def test_a_typo_gets_a_warning_with_the_closest_name(given, meant):
    # system=cray9000 stops the play at its first check: no sweep starts.
    done = playbook("run-benchmark", "-e", given, "-e", "system=cray9000")
    out = done.stdout + done.stderr
    name = given.split("=")[0]
    assert f"-e {name}: run-benchmark.yml reads no variable of that name (did you mean {meant}?)" in out, out
    assert "system=cray9000 is unknown" in out  # a warning: the run went on


def test_every_variable_the_readme_documents_is_known(project_root):
    """The README's variable table of run-benchmark.yml, all given at once, with strict_variables."""
    readme = (project_root / "README.md").read_text()
    table = readme[readme.index("| variable | default (local) | meaning |") :].split("\n\n")[0]
    names = sorted({name for row in table.splitlines()[2:] for name in re.findall(r"`(\w+)`", row.split("|")[1])})
    assert {"gpus", "model", "num_ps", "step_timeout", "workload"} <= set(names), names
    args = [arg for name in names if name != "system" for arg in ("-e", f"{name}=x")]
    done = playbook("run-benchmark", *args, "-e", "system=cray9000", "-e", "strict_variables=true")
    out = done.stdout + done.stderr
    assert "reads no variable" not in out, out
    assert "system=cray9000 is unknown" in out, out


def test_ansible_and_inventory_variables_are_not_flagged():
    done = playbook(
        "run-benchmark",
        "-e",
        "ansible_python_interpreter=/usr/bin/python3",
        "-e",
        "dtfbench_run_root=/tmp/x",
        "-e",
        "system=cray9000",
        "-e",
        "strict_variables=true",
    )
    out = done.stdout + done.stderr
    assert "reads no variable" not in out, out
    assert "system=cray9000 is unknown" in out, out
