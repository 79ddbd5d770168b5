"""ansible-playbook looks for its workers' results every 5 ms, not Ansible's 1 ms.

While a task waits on its hosts (a run's start-and-wait task lasts the whole training), the
strategy's loop sleeps ``internal_poll_interval`` between two looks: at 1 ms it took ~0.48
CPU-s in 8 s of a wait, at 5 ms 0.16, CPU that a controller sharing its cores with the run
(the test bed, a login node) takes from the training (issue #31, P1). The setting is read by
Ansible itself here, through the project's ansible.cfg.
"""

import subprocess

from playbook_harness import ansible_env


def test_the_project_config_polls_for_results_every_5_ms():
    dump = subprocess.run(
        ["ansible-config", "dump", "--only-changed"], env=ansible_env(), capture_output=True, text=True, check=True
    ).stdout
    lines = [line for line in dump.splitlines() if line.startswith("DEFAULT_INTERNAL_POLL_INTERVAL(")]
    assert len(lines) == 1, dump
    assert float(lines[0].rsplit("=", 1)[1]) == 0.005
