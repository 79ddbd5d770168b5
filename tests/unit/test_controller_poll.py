"""How often ansible-playbook looks for its workers' results: 5 ms while tasks come and go, 50 ms
once nothing has happened for a second (the callback dtfbench_patient_poll).

While a task waits on its hosts (a run's start-and-wait task lasts the whole training), the
strategy's loop sleeps ``internal_poll_interval`` between two looks: at Ansible's 1 ms it took
~0.48 CPU-s in 8 s of a wait, at 5 ms 0.16, CPU that a controller sharing its cores with the
run (the test bed, a login node) takes from the training (issue #31, P1). The callback lengthens
it once the task has been quiet for a second, so that short tasks keep 5 ms. Here: the
project's setting as Ansible reads it, the callback's rule on its object (short times,
ansible.constants' real attribute), and a real ansible-playbook's CPU while one task sleeps,
with the callback against without it.
"""

import importlib.util
import subprocess
import time
from pathlib import Path

import pytest
from ansible import constants as C
from ansible.errors import AnsibleError
from playbook_harness import ansible_env, start_playbook

from dtfbench.linux import procfs

PLUGIN = Path(__file__).resolve().parents[2] / "plugins" / "callback" / "dtfbench_patient_poll.py"
BUSY, QUIET = 0.005, 0.05


def test_the_project_config_polls_for_results_every_5_ms():
    dump = subprocess.run(
        ["ansible-config", "dump", "--only-changed"], env=ansible_env(), capture_output=True, text=True, check=True
    ).stdout
    lines = [line for line in dump.splitlines() if line.startswith("DEFAULT_INTERNAL_POLL_INTERVAL(")]
    assert len(lines) == 1, dump
    assert float(lines[0].rsplit("=", 1)[1]) == BUSY


def load_plugin():
    spec = importlib.util.spec_from_file_location("dtfbench_patient_poll_under_test", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CallbackModule()


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.setattr(C, "DEFAULT_INTERNAL_POLL_INTERVAL", BUSY)
    callback = load_plugin()
    # What set_options() takes from the plugin's options under Ansible (the playbook test below).
    callback.after, callback.quiet_interval = 1.0, QUIET
    yield callback
    callback.v2_playbook_on_stats(None)


def quiet_within(seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if C.DEFAULT_INTERNAL_POLL_INTERVAL == QUIET:
            return True
        time.sleep(0.01)
    return False


def test_the_interval_lengthens_after_a_quiet_time_and_each_event_shortens_it(plugin):
    plugin.v2_playbook_on_task_start(None, False)
    # Events closer together than `after` (1 s; 0.1 s apart, so that a loaded machine's late
    # wake-up cannot reach it) keep the configured interval.
    for _ in range(12):
        time.sleep(0.1)
        assert C.DEFAULT_INTERNAL_POLL_INTERVAL == BUSY
        plugin.v2_runner_on_ok(None)
    assert quiet_within(3.0)
    # A host's result (here a failure) brings the configured interval back at once...
    plugin.v2_runner_on_failed(None)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == BUSY
    # ...and the next quiet time lengthens it again (the thread counts down anew).
    assert quiet_within(3.0)
    plugin.v2_playbook_on_task_start(None, False)
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == BUSY


def test_the_end_of_the_playbook_stops_the_countdown(plugin):
    plugin.v2_playbook_on_task_start(None, False)
    plugin.v2_playbook_on_stats(None)  # while the countdown runs
    time.sleep(1.5)  # past `after`: nothing may lengthen it now
    assert C.DEFAULT_INTERNAL_POLL_INTERVAL == BUSY


@pytest.mark.parametrize("option", ["after", "interval"])
def test_a_setting_that_is_not_a_positive_time_is_refused(monkeypatch, option):
    # Through Ansible's plugin loader, which reads the options from the plugin's documentation.
    from ansible.plugins.loader import callback_loader

    monkeypatch.setenv(f"DTFBENCH_PATIENT_POLL_{option.upper()}", "0")
    callback_loader.add_directory(str(PLUGIN.parent))
    callback = callback_loader.get("dtfbench_patient_poll")
    with pytest.raises(AnsibleError, match=f"{option}=0.0 is not a positive.*DTFBENCH_PATIENT_POLL_{option.upper()}"):
        callback.set_options()


SLEEPING_PLAY = """
- name: One task that sleeps, on the controller
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Sleep
      ansible.builtin.shell: touch {{ started | quote }} && sleep 8
      changed_when: false
"""


def controller_cpu_while_a_task_sleeps(tmp_path: Path, callbacks: str) -> float:
    """ansible-playbook's CPU seconds (all its threads, to the nanosecond: a fast machine's
    5-ms polls take ~0.02 s, two of the clock's ticks) over 4 s in the middle of an 8-s task."""
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
        time.sleep(1.5)  # past the callback's quiet time (1 s)
        before = procfs.live_threads_cpu_seconds(process.pid)
        time.sleep(4)
        used = procfs.live_threads_cpu_seconds(process.pid) - before
        rest = process.stdout.read()
        assert process.wait(timeout=60) == 0, rest
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return used


@pytest.mark.ansible
def test_a_waiting_ansible_playbook_spends_less_cpu_with_the_callback(tmp_path):
    # Every 5 ms costs ansible-playbook 0.02-0.12 CPU-s over 4 s here (a fast sitting to a slow
    # one); every 50 ms a tenth of that, beside ~0.01 s that both pay (measured with the
    # callback in a fast sitting: 0.36-0.44 of without). A loaded machine's late wake-ups lower
    # both. Without the callback's effect the two are the same.
    without = controller_cpu_while_a_task_sleeps(tmp_path, "dtfbench_interrupt")
    with_callback = controller_cpu_while_a_task_sleeps(tmp_path, "dtfbench_interrupt,dtfbench_patient_poll")
    print("CPU-s over 4 s of waiting: without", without, "with", with_callback)
    assert without >= 0.01 and with_callback <= 0.6 * without, (without, with_callback)
