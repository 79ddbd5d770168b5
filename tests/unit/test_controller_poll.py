"""How often ansible-playbook looks for its workers' results: every 5 ms (ansible.cfg).

While a task waits on its hosts (a run's start-and-wait task lasts the whole training), the
strategy's loop sleeps ``internal_poll_interval`` between two looks: at Ansible's 1 ms it took
~0.48 CPU-s in 8 s of a wait, at 5 ms 0.16. A callback that lengthened it to 50 ms once a task
had been quiet for a second saved ~3% of one core while a task waits (0.12 against 0.016 CPU-s
over 4 s, measured before it was removed), less than 3% of any figure a user sees: it changed
Ansible's constants from a thread of its own, and is gone (docs/performance.md, "Tuning").
"""

import subprocess

from playbook_harness import ansible_env

BUSY = 0.005


def test_the_project_config_polls_for_results_every_5_ms():
    dump = subprocess.run(
        ["ansible-config", "dump", "--only-changed"], env=ansible_env(), capture_output=True, text=True, check=True
    ).stdout
    lines = [line for line in dump.splitlines() if line.startswith("DEFAULT_INTERNAL_POLL_INTERVAL(")]
    assert len(lines) == 1, dump
    assert float(lines[0].rsplit("=", 1)[1]) == BUSY
