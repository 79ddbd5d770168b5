"""ansible-playbook's last garbage collection skips what it held at the playbook's end (the
callback dtfbench_quick_exit freezes it): 0.1-0.15 s of the 0.18-0.25 s between a sweep's last
task and the process's exit (`make bench BENCH=timeline` times both). Here: how many objects
were frozen when ansible-playbook's interpreter reached its exit, with the project's callbacks
and without this one, read by an atexit hook that a sitecustomize of the test's own registers.
"""

import json

from playbook_harness import callbacks_enabled_but, noted_by_sitecustomize

ONE_TASK = """
- name: One task on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Say something
      ansible.builtin.debug:
        msg: done
"""

# Registered when ansible-playbook's interpreter starts, so it runs after every other atexit
# hook (they run last registered, first called), as the interpreter's finalization begins.
SITECUSTOMIZE = """
import atexit, gc, json, os, sys

if "ansible-playbook" in os.path.basename(sys.argv[0] if sys.argv else ""):
    out, main = os.environ["NOTED_FILE"], os.getpid()

    def write():
        if os.getpid() == main:
            with open(out, "w") as handle:
                json.dump({"frozen": gc.get_freeze_count()}, handle)

    atexit.register(write)
"""


def frozen_at_exit(tmp_path, **env) -> int:
    return json.loads(noted_by_sitecustomize(tmp_path, ONE_TASK, SITECUSTOMIZE, **env))["frozen"]


def test_what_ansible_playbook_holds_at_the_end_is_frozen_before_its_last_collection(tmp_path):
    with_it = frozen_at_exit(tmp_path)
    without = frozen_at_exit(tmp_path, ANSIBLE_CALLBACKS_ENABLED=callbacks_enabled_but("dtfbench_quick_exit"))
    # Ansible's inventory, plugins and variables: tens of thousands of objects. Without the
    # callback, only what Ansible itself freezes early on, if anything.
    assert with_it > 10_000 and with_it > 10 * without, (with_it, without)
