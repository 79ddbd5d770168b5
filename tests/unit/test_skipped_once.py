"""A task skipped on every host costs one worker, not one a host: `run_once` set to the negation
of its `when`, where the condition is the sweep's (the same on every host).

ansible-playbook forks a worker for every host a task is handed to, also where the task's
condition then skips it; `run_once` hands it to the first host only, and Ansible gives every
host that host's (skipped) result. On a task that runs, the negation is false and the task runs
on every host as before. Three things can break it: a `when` changed without its `run_once` (a
task that should run everywhere would run on the first host only), a condition that reads
something that differs from host to host (run_once is rendered with the first host's
variables, and its answer holds for all), and an Ansible whose run_once no longer hands the
skipped result to every host. The first two are checked on the project's task files, the
third on a real ansible-playbook (issue #31, P1).
"""

import re
import sys
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from playbook_harness import ansible_env, run_playbook
from task_files import leaf_tasks

ROOT = Path(__file__).resolve().parents[2]
TASK_FILES = sorted([*ROOT.glob("roles/*/tasks/*.yml"), *ROOT.glob("playbooks/*.yml")])
# The files whose every condition is the sweep's (main.yml's header says so), and every name
# those conditions read: the sweep's settings (one run_once set_fact in run-benchmark.yml),
# results registered by run_once tasks, and a view of every host's marks alike on all of them.
SWEEP_FILES = [ROOT / "roles" / "benchmark" / "tasks" / name for name in ("main.yml", "network.yml")]
SWEEP_NAMES = {
    "benchmark_launcher",
    "benchmark_submit",
    "benchmark_cost_guard",
    "benchmark_plan_result",
    "benchmark_other_sweeps",
    "benchmark_fail_on_failed_runs",
    "benchmark_failed_runs",
    "benchmark_network_skip",
    "benchmark_network_probe_required",
    "benchmark_network_record",
    "ansible_check_mode",
}
# Exactly this text: Ansible renders "{{ ... }} " (a space after it) as the string 'False ',
# which is true.
NEGATION = re.compile(r"\A\{\{ not \((?P<condition>.*)\) \}\}\Z", re.S)


def tasks_of(entries):
    """Every task of a task list or playbook, blocks' tasks included."""
    return [task for task, _run_once, _vars in leaf_tasks(entries)]


def squeezed(text: str) -> str:
    return " ".join(text.split())


def condition(when) -> str:
    """A task's `when` as one expression: its items joined with 'and', as Ansible takes them."""
    items = [squeezed(str(item)) for item in (when if isinstance(when, list) else [when])]
    if len(items) > 1:
        # Joined with 'and', an item with 'or' or 'if ... else' would bind differently.
        assert not [i for i in items if " or " in i or " if " in i], f"give this condition as one string: {items}"
    return " and ".join(items)


def negates_when(task) -> bool:
    match = NEGATION.match(task["run_once"]) if isinstance(task.get("run_once"), str) else None
    return bool(match) and "when" in task and squeezed(match["condition"]) == condition(task["when"])


def test_each_skipped_once_task_negates_its_own_condition():
    found = [
        (path, task)
        for path in TASK_FILES
        for task in tasks_of(yaml.safe_load(path.read_text()))
        if isinstance(task.get("run_once"), str) and "not (" in task["run_once"]
    ]
    assert found  # guards the test's own parsing
    wrong = {
        f"{path.relative_to(ROOT)}: {task.get('name')}": (task.get("when"), task["run_once"])
        for path, task in found
        if not negates_when(task)
    }
    assert wrong == {}


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.name)
def test_every_conditional_task_of_the_sweep_is_skipped_once(path):
    tasks = [task for task in tasks_of(yaml.safe_load(path.read_text())) if "when" in task]
    assert [t.get("name") for t in tasks if t.get("run_once") is not True and not negates_when(t)] == []


class AnyName(dict):
    def get(self, name, default=None):
        return super().get(name) or (lambda *args, **kwargs: None)


@pytest.mark.parametrize("path", SWEEP_FILES, ids=lambda p: p.name)
def test_the_sweep_conditions_read_only_what_every_host_has_alike(path):
    # run_once is rendered with the first host's variables: a condition that differs from host
    # to host would decide for all of them.
    environment = jinja2.Environment()
    # Ansible's filters and tests (bool, ...): only their names matter to the parse.
    environment.filters, environment.tests = AnyName(environment.filters), AnyName(environment.tests)
    names = {
        task.get("name"): jinja2.meta.find_undeclared_variables(environment.parse("{{ %s }}" % condition(task["when"])))
        for task in tasks_of(yaml.safe_load(path.read_text()))
        if "when" in task
    }
    assert names
    assert {name: sorted(read - SWEEP_NAMES) for name, read in names.items() if read - SWEEP_NAMES} == {}


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
    # As the sweep's includes, one with a loop (the run loop).
    - name: Maybe include a file for each of two items
      ansible.builtin.include_tasks: included.yml
      loop: [1, 2]
      when: wanted
      run_once: "{{ not (wanted) }}"
"""
INCLUDED = """
- name: Say what was included
  ansible.builtin.debug:
    msg: "INCLUDED {{ inventory_hostname }} {{ item }}"
"""


@pytest.mark.ansible
@pytest.mark.parametrize("wanted", [False, True])
def test_ansible_gives_every_host_the_one_skip_and_runs_a_wanted_task_everywhere(tmp_path, wanted):
    playbook = tmp_path / "skip.yml"
    playbook.write_text(SKIPPING_PLAY)
    (tmp_path / "included.yml").write_text(INCLUDED)
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
    included = sorted(re.findall(r"INCLUDED (host\d) (\d)", done.stdout))
    assert included == ([(f"host{i}", str(n)) for i in range(3) for n in (1, 2)] if wanted else []), done.stdout
    task = done.stdout.split("TASK [Maybe include a file for each of two items]")[1].split("TASK [")[0]
    assert set(re.findall(r"skipping: \[(\w+)\]", task)) == (set() if wanted else {"host0"}), task
