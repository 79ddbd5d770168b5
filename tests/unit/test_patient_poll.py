"""The callback dtfbench_patient_poll: ansible-playbook looks for results less often once it is quiet.

The rule on the plugin object (short times, ansible.constants' real attribute), then on a real
ansible-playbook: its CPU while one task sleeps, with the plugin against without it.
"""

import importlib.util
import os
import subprocess
import time
from pathlib import Path

import pytest
from ansible import constants as C
from playbook_harness import ansible_env, start_playbook

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "plugins" / "callback" / "dtfbench_patient_poll.py"


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.setattr(C, "DEFAULT_INTERNAL_POLL_INTERVAL", 0.005)
    spec = importlib.util.spec_from_file_location("dtfbench_patient_poll_under_test", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    callback = module.CallbackModule()
    # What set_options() takes from the plugin's options under Ansible (the playbook test below).
    callback.after, callback.quiet_interval = 0.3, 0.05
    yield callback
    callback.v2_playbook_on_stats(None)


def quiet_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.05:
            return True
        time.sleep(0.01)
    return False


def test_the_interval_lengthens_after_a_quiet_time_and_each_event_shortens_it(plugin):
    plugin.v2_playbook_on_task_start(None, False)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005
    # Events closer together than `after` keep the configured interval.
    for _ in range(4):
        time.sleep(0.15)
        plugin.v2_runner_on_ok(None)
        assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005
    assert quiet_within(1.0)
    # A host's result (here a failure) brings the configured interval back at once...
    plugin.v2_runner_on_failed(None)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005
    # ...and the next quiet time lengthens it again (the thread counts down anew).
    assert quiet_within(1.0)
    plugin.v2_playbook_on_task_start(None, False)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005


def test_the_end_of_the_playbook_leaves_the_configured_interval(plugin):
    plugin.v2_playbook_on_task_start(None, False)
    assert quiet_within(1.0)
    plugin.v2_playbook_on_stats(None)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005
    time.sleep(0.5)  # no countdown left to lengthen it
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == 0.005


SLEEPING_PLAY = """
- name: One task that sleeps, on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Sleep
      ansible.builtin.shell: touch {{ started | quote }} && sleep 6
      changed_when: false
"""


def controller_cpu_while_a_task_sleeps(tmp_path: Path, callbacks: str) -> float:
    """ansible-playbook's CPU seconds (all its threads) over 3 s in the middle of a 6-s task."""
    playbook = tmp_path / "sleep.yml"
    playbook.write_text(SLEEPING_PLAY)
    # The project's local inventory (localhost on the controller's own interpreter).
    env = ansible_env(ANSIBLE_CALLBACKS_ENABLED=callbacks)
    started = tmp_path / f"started-{callbacks}"
    process = start_playbook(
        playbook, "-e", f"started={started}", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), process.communicate()[0]
        time.sleep(1.5)  # past the plugin's quiet time (1 s)
        before = cpu_seconds(process.pid)
        time.sleep(3)
        used = cpu_seconds(process.pid) - before
        rest = process.stdout.read()
        assert process.wait(timeout=60) == 0, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return used


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.ansible
def test_a_waiting_ansible_playbook_spends_less_cpu_with_the_plugin(tmp_path):
    # Every 5 ms (ansible.cfg) costs ansible-playbook ~0.1 CPU-s over 3 s here; every 50 ms a
    # tenth of that (the clock tick is 10 ms: 0-0.03 s).
    without = controller_cpu_while_a_task_sleeps(tmp_path, "dtfbench_interrupt")
    with_plugin = controller_cpu_while_a_task_sleeps(tmp_path, "dtfbench_interrupt,dtfbench_patient_poll")
    print("CPU-s over 3 s of waiting: without", without, "with", with_plugin)
    assert with_plugin <= 0.5 * without and without >= 0.04, (without, with_plugin)
