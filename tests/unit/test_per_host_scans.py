"""No per-host task of a role reads every host's variables: that is N^2 hostvars lookups a run.

A template such as ``ansible_play_hosts | map('extract', hostvars, 'x')`` in a task that runs
on every host makes each of N hosts look up N hosts' variables; Ansible's hostvars lookups
cost (the tf_cluster role's decision whether every host's ports are free took 2.6 s at 64
hosts and 24 s at 256, per run, before it ran once for all hosts: issue #19,
benchmarks/controller_scaling.py). Such a template belongs in a task with ``run_once: true``
(a set_fact's facts then reach every host) or delegated to the controller once.

A lookup of one host (``hostvars[name]``, ``hostvars['localhost']``) is fine anywhere.
"""

import re
from pathlib import Path

import pytest
import yaml
from task_files import leaf_tasks

ROOT = Path(__file__).resolve().parents[2]
TASK_FILES = sorted(ROOT.glob("roles/*/tasks/*.yml"))
# hostvars handed whole to a filter, or mapped over a list of hosts (not hostvars[...]).
SCAN = re.compile(r"hostvars(?!\s*\[)")


def scans_every_host(task, block_vars):
    return bool(SCAN.search(yaml.safe_dump([task, block_vars])))


def per_host_scans(path):
    return [
        task.get("name", "?")
        for task, run_once, block_vars in leaf_tasks(yaml.safe_load(path.read_text()))
        if scans_every_host(task, block_vars) and not run_once
    ]


@pytest.mark.parametrize("path", TASK_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_task_on_every_host_reads_every_hosts_variables(path):
    assert per_host_scans(path) == [], (
        f"{path.relative_to(ROOT)}: these tasks run on every host and read every host's variables "
        "(N^2 lookups a run): compute the value once with run_once: true"
    )


def test_the_check_finds_a_per_host_scan_and_accepts_run_once_and_single_lookups(tmp_path):
    scan = {
        "name": "scan",
        "ansible.builtin.set_fact": {
            "ok": "{{ ansible_play_hosts | map('extract', hostvars, 'failure') | select | list | length == 0 }}"
        },
    }
    in_vars = {
        "name": "scan in vars",
        "ansible.builtin.debug": {"msg": "{{ x }}"},
        "vars": {"x": "{{ groups['all'] | tf_node_specs(hostvars) }}"},
    }
    in_block_vars = {
        "name": "block",
        "vars": {"y": "{{ groups['all'] | map('extract', hostvars) | list }}"},
        "block": [{"name": "uses the block's scan", "ansible.builtin.debug": {"msg": "{{ y }}"}}],
    }
    once = dict(scan, name="once", run_once=True)
    sometimes = dict(scan, name="once where it fits", run_once="{{ groups['all'] | length < 32 }}")
    single = {"name": "single", "ansible.builtin.debug": {"msg": "{{ hostvars['localhost'].x }}"}}
    path = tmp_path / "tasks.yml"
    path.write_text(yaml.safe_dump([scan, in_vars, in_block_vars, once, sometimes, single]))
    assert per_host_scans(path) == ["scan", "scan in vars", "uses the block's scan", "once where it fits"]


def per_host_set_facts(tasks):
    """The names of the set_fact tasks that run on every host on the way a run goes when nothing
    fails (rescue sections left out)."""
    return [
        task.get("name", "?")
        for task, run_once, _vars in leaf_tasks(tasks, parts=("block", "always"))
        if "ansible.builtin.set_fact" in task and not run_once
    ]


def test_a_run_keeps_each_hosts_outcome_with_one_per_host_task():
    # Each per-host task costs the controller a worker process a host a run (~8 ms of
    # ansible-playbook's own time a host before the worker's): the host's workers' results,
    # failure and NIC bytes are kept once, after the stop (docs/performance.md, P1).
    run = yaml.safe_load((ROOT / "roles" / "tf_cluster" / "tasks" / "run.yml").read_text())
    assert per_host_set_facts(run) == ["Keep this host's outcome of the run"]


def imported(tasks, folder):
    """The tasks of a task file with its static imports (import_tasks, import_role) unfolded,
    blocks unfolded: what a run executes, before conditions."""
    for task, _run_once, _vars in leaf_tasks(tasks):
        if "ansible.builtin.import_tasks" in task:
            path = folder / task["ansible.builtin.import_tasks"]
            yield from imported(yaml.safe_load(path.read_text()), path.parent)
        elif "ansible.builtin.import_role" in task:
            role = task["ansible.builtin.import_role"]
            path = ROOT / "roles" / role["name"] / "tasks" / (role.get("tasks_from", "main") + ".yml")
            yield from imported(yaml.safe_load(path.read_text()), path.parent)
        else:
            yield task


@pytest.mark.parametrize("launcher", ["ssh", "slurm"])
def test_a_run_pays_no_task_to_show_count_or_skip_the_other_launcher(launcher):
    # Every task of a run costs it a turn over the hosts, a skipped one too (~0.05 s at 4 hosts):
    # the progress is the first task's name, the record shows itself (run_record), a failed run
    # is counted by the next run's start, and each launcher has its own run file, whose
    # imports cost nothing (docs/performance.md, P1).
    folder = ROOT / "roles" / "benchmark" / "tasks"
    tasks = list(imported(yaml.safe_load((folder / f"run_{launcher}.yml").read_text()), folder))
    names = [task.get("name", "?") for task in tasks]
    assert [n for n, t in zip(names, tasks) if "ansible.builtin.debug" in t] == [], names
    assert [n for n, t in zip(names, tasks) if "benchmark_launcher" in str(t.get("when", ""))] == [], names
    dynamic = [n for n, t in zip(names, tasks) if any(k.endswith(("include_tasks", "include_role")) for k in t)]
    assert dynamic == ([] if launcher == "ssh" else ["Run the benchmark through Slurm"]), names
    assert names[0].startswith("Start run {{") and names[-1] == "Record the run in the results store", names
