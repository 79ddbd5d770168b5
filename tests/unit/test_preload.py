"""ansible-playbook's workers inherit the filter and test plugins instead of loading them each
(the callback dtfbench_preload sets them up at the playbook's start): 10-30 ms of CPU a worker
where ansible-playbook itself renders no template before it forks, as in a launch
(`make bench BENCH=p2` times it). Here: which plugin modules each worker holds when it is forked,
with the project's callbacks and without this one, read by a fork hook that a sitecustomize of
the test's own registers in ansible-playbook.
"""

import json

from playbook_harness import callbacks_enabled_but, noted_by_sitecustomize

# No template anywhere that ansible-playbook renders itself: the workers' first filter and test
# are theirs (a host pattern or a task name with a template would load them in ansible-playbook).
TWO_TASKS = """
- name: Two tasks with a filter and a test
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Use a filter
      ansible.builtin.debug:
        msg: "{{ [1, 2] | length }}"

    - name: Use a test
      ansible.builtin.debug:
        msg: done
      when: 2 is truthy
"""

# Each worker, as it is forked, writes which of Ansible's filter and test plugin files it holds.
SITECUSTOMIZE = """
import json, os, sys

if "ansible-playbook" in os.path.basename(sys.argv[0] if sys.argv else ""):
    out, main = os.environ["NOTED_FILE"], os.getpid()

    def note():
        loaded = sorted({name.rsplit("_", 1)[0] for name in list(sys.modules)
                         if name.startswith(("ansible.plugins.filter.", "ansible.plugins.test."))})
        with open(out, "a") as handle:
            handle.write(json.dumps({"parent": main, "plugins": loaded}) + "\\n")

    os.register_at_fork(after_in_child=note)
"""


def plugins_at_fork(tmp_path, **env) -> list[list[str]]:
    noted = noted_by_sitecustomize(tmp_path, TWO_TASKS, SITECUSTOMIZE, **env)
    return [json.loads(line)["plugins"] for line in noted.splitlines()]


def test_workers_are_forked_with_the_filter_and_test_plugins_loaded(tmp_path):
    with_it = plugins_at_fork(tmp_path)
    without = plugins_at_fork(tmp_path, ANSIBLE_CALLBACKS_ENABLED=callbacks_enabled_but("dtfbench_preload"))
    core = {"ansible.plugins.filter.core", "ansible.plugins.test.core"}
    # Two tasks, a worker each (and no other fork of ansible-playbook's).
    assert len(with_it) >= 2 and len(without) >= 2, (with_it, without)
    assert all(core <= set(plugins) for plugins in with_it), with_it
    # Without it, every worker loads them itself: none holds them when it is forked.
    assert not any(core & set(plugins) for plugins in without), without
