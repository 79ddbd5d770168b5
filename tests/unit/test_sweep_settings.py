"""run-benchmark.yml hands the benchmark role its inputs as values, resolved once for every host.

As the include_role's `vars`, each input stayed a template that Ansible compiled and rendered
again at every use, on every host and run: the role's argument check alone rendered all of them
on each host (0.30 s against 0.17 s as values on 4 hosts; issue #31, docs/performance.md, P1).
One `set_fact` with `run_once` gives every host the same values, so none of them may depend on
the host it is rendered for.
"""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "run-benchmark.yml"
ARGUMENT_SPECS = ROOT / "roles" / "benchmark" / "meta" / "argument_specs.yml"
# What differs from host to host: rendered once, the first host's value would reach them all.
PER_HOST = re.compile(r"\b(inventory_hostname|ansible_host|private_ip|dtfbench_python|dtfbench_run_root|hostvars\s*\[)")


def sweep_tasks():
    (play,) = [p for p in yaml.safe_load(PLAYBOOK.read_text()) if "tasks" in p]
    return play["tasks"]


def test_the_role_gets_its_inputs_as_values_set_once_before_it():
    tasks = sweep_tasks()
    (position,) = [i for i, task in enumerate(tasks) if "ansible.builtin.include_role" in task]
    include, settings = tasks[position], tasks[position - 1]
    assert "vars" not in include, "an include's vars stay templates, rendered again at every use"
    assert "ansible.builtin.set_fact" in settings and settings.get("run_once") is True, settings
    options = yaml.safe_load(ARGUMENT_SPECS.read_text())["argument_specs"]["main"]["options"]
    assert sorted(set(settings["ansible.builtin.set_fact"]) - set(options)) == []


def test_no_setting_depends_on_the_host_it_is_rendered_for():
    (settings,) = [t for t in sweep_tasks() if "ansible.builtin.set_fact" in t and t.get("run_once") is True]
    per_host = {
        name: value for name, value in settings["ansible.builtin.set_fact"].items() if PER_HOST.search(str(value))
    }
    assert per_host == {}
