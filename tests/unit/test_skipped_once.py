"""A task skipped on every host costs one worker, not one a host: `run_once` set to the negation
of its `when`, where the condition is the sweep's (the same on every host).

ansible-playbook forks a worker for every host a task is handed to, also where the task's
condition then skips it; `run_once` hands it to the first host only, and Ansible gives every
host that host's (skipped) result. On a task that runs, the negation is false and the task runs
on every host as before. Two things can break it: a `when` changed without its `run_once` (a
task that should run everywhere would run on the first host only), and an Ansible whose
run_once no longer hands the skipped result to every host. Both are checked here, the first
on the project's task files, the second on a real ansible-playbook (issue #31, P1).
"""

import re
import sys
from pathlib import Path

import pytest
import yaml
from playbook_harness import ansible_env, run_playbook

ROOT = Path(__file__).resolve().parents[2]
TASK_FILES = sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml")])
# The file whose every condition is the sweep's (its header says so).
SWEEP_TASKS = ROOT / "roles" / "benchmark" / "tasks" / "main.yml"
NEGATION = re.compile(r"^\{\{\s*not \((?P<condition>.*)\)\s*\}\}$", re.S)


def tasks_of(entries):
    """Every task of a task list, blocks' tasks included."""
    for entry in entries or []:
        if not isinstance(entry, dict):
            continue
        if "block" in entry:
            for part in ("block", "rescue", "always"):
                yield from tasks_of(entry.get(part))
        elif "tasks" in entry or "hosts" in entry:  # a play
            for part in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from tasks_of(entry.get(part))
        else:
            yield entry


def condition(when) -> str:
    items = when if isinstance(when, list) else [when]
    assert all(" or " not in str(item) for item in items), f"put a condition with 'or' in parentheses: {items}"
    return " and ".join(str(item) for item in items)


def squeezed(text: str) -> str:
    return " ".join(text.split())


def negated_tasks():
    for path in TASK_FILES:
        for task in tasks_of(yaml.safe_load(path.read_text())):
            run_once = task.get("run_once")
            if isinstance(run_once, str) and NEGATION.match(squeezed(run_once)):
                yield path, task


def test_each_skipped_once_task_negates_its_own_condition():
    found = list(negated_tasks())
    assert len(found) >= 10, found  # the benchmark role's (guards the test's own parsing)
    wrong = {
        f"{path.relative_to(ROOT)}: {task.get('name')}": (task.get("when"), task["run_once"])
        for path, task in found
        if "when" not in task
        or squeezed(NEGATION.match(squeezed(task["run_once"]))["condition"]) != squeezed(condition(task["when"]))
    }
    assert wrong == {}


def test_every_conditional_task_of_the_sweep_is_skipped_once():
    tasks = list(tasks_of(yaml.safe_load(SWEEP_TASKS.read_text())))
    per_host = [
        task.get("name")
        for task in tasks
        if "when" in task
        and task.get("run_once") is not True
        and not NEGATION.match(squeezed(str(task.get("run_once"))))
    ]
    assert per_host == []


SKIPPING_PLAY = """
- name: A task skipped everywhere, once; a task that runs, everywhere
  hosts: all
  gather_facts: false
  tasks:
    - name: Settle the condition once (as the sweep's facts are)
      ansible.builtin.set_fact:
        wanted: "{{ wanted_text | bool }}"
      run_once: true
    - name: Maybe note something
      ansible.builtin.command: echo noted
      changed_when: false
      register: noted
      when: wanted
      run_once: "{{ not (wanted) }}"
    - name: Show what each host has
      ansible.builtin.debug:
        msg: "HOST {{ inventory_hostname }} {{ 'skipped' if noted is skipped else noted.stdout }}"
"""


@pytest.mark.ansible
@pytest.mark.parametrize("wanted", [False, True])
def test_ansible_gives_every_host_the_one_skip_and_runs_a_wanted_task_everywhere(tmp_path, wanted):
    playbook = tmp_path / "skip.yml"
    playbook.write_text(SKIPPING_PLAY)
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(
        "".join(f"host{i} ansible_connection=local ansible_python_interpreter={sys.executable}\n" for i in range(3))
    )
    done = run_playbook(
        playbook,
        "-i",
        str(inventory),
        "-e",
        f"wanted_text={wanted}",
        env=ansible_env(ANSIBLE_DISPLAY_SKIPPED_HOSTS="true"),
        timeout=120,
    )
    assert done.returncode == 0, done.output[-3000:]
    shown = sorted(re.findall(r"HOST (host\d) (\w+)", done.stdout))
    assert shown == [(f"host{i}", "noted" if wanted else "skipped") for i in range(3)], done.stdout
    # One worker skipped it for all three hosts (one 'skipping' line), or three ran it.
    task = done.stdout.split("TASK [Maybe note something]")[1].split("TASK [")[0]
    assert task.count("skipping: [") == (0 if wanted else 1), task
    assert task.count("ok: [") == (3 if wanted else 0), task
