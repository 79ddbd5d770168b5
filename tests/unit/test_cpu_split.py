"""benchmarks/cpu_split.py (launch_scaling.py --cpu-split) puts each perf sample to its process's
place in the process tree: the controller and its workers, the hosts' sshd, and the hosts' Python
processes by generation, including a supervisor whose parent has ended."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cpu_split  # noqa: E402


def fork(comm, parent, child, t=1.0):
    return f"{comm:>16} {parent}/{parent} {t:.6f}: PERF_RECORD_FORK({child}:{child}):({parent}:{parent})"


def exec_(comm, pid, t=1.0):
    return f"{comm:>16} {pid}/{pid} {t:.6f}: PERF_RECORD_COMM exec: {comm}:{pid}/{pid}"


def sample(comm, pid, t):
    return f"{comm:>16} {pid}/{pid} {t:.6f}: cpu-clock:pppH: "


def test_samples_in_the_window_go_to_their_processes_roles():
    lines = [
        # perf's note of the processes already running: systemd, sshd, the benchmark's Python
        exec_("systemd", 1, 0.0),
        fork("systemd", 1, 50, 0.0),
        exec_("sshd", 50, 0.0),
        fork("systemd", 1, 100, 0.0),
        exec_("python", 100, 0.0),
        # the controller: ansible-playbook, a worker it forks, the worker's ssh client
        fork("python", 100, 101),
        exec_(cpu_split.CONTROLLER, 101),
        fork(cpu_split.CONTROLLER, 101, 102),
        fork(cpu_split.CONTROLLER, 102, 103),
        exec_("ssh", 103),
        # a host: sshd's session, sh, the host code, a supervisor, its program
        fork("sshd", 50, 201),
        fork("sshd", 201, 202),
        exec_("sh", 202),
        fork("sh", 202, 203),
        exec_("python", 203),
        fork("python", 203, 204),
        fork("python", 204, 205),
        sample("python", 205, 10.0),  # the program, before its exec: still its parent's copy
        exec_("python", 205, 10.1),
    ]
    window = [
        ("ansible-playboo", 101, 3),
        ("ansible-playboo", 102, 2),
        ("ssh", 103, 1),
        ("sshd", 201, 1),
        ("sh", 202, 1),
        ("python", 203, 4),
        ("python", 204, 5),
        ("python", 205, 6),
        ("swapper", 0, 7),  # idle
        ("kworker/0:1", 9, 1),  # unknown to the tree
    ]
    for comm, pid, count in window:
        lines += [sample(comm, pid, 11.0 + i / 100) for i in range(count)]
    lines.append(sample("python", 205, 20.0))  # after the window
    cpu = cpu_split.split(lines, 10.0, 12.0, host_sshds={50}, rate=1)
    assert cpu == {
        "controller: ansible-playbook": 3,
        "controller: its workers": 2,
        "ssh clients": 1,
        "hosts: sshd": 1,
        "hosts: shell and tools": 1,
        "hosts: Python, generation 1": 4,
        "hosts: Python, generation 2": 5,
        "hosts: Python, generation 3": 7,
        "other": 1,
    }


def test_ours_counts_its_forked_supervisors_and_sampler_as_python():
    host = ["systemd", "sshd", "sshd", "bash", "python3"]
    assert cpu_split.role(host + [cpu_split.SUPERVISOR_COMM], True) == "hosts: Python, generation 2"
    assert cpu_split.role(host + [cpu_split.SUPERVISOR_COMM] * 2, True) == "hosts: Python, generation 3"
    assert cpu_split.role(host + [cpu_split.SUPERVISOR_COMM, "python3"], True) == "hosts: Python, generation 3"


def test_the_bare_fan_out_counts_its_supervisors_as_the_first_generation():
    assert cpu_split.role(["systemd", "sshd", "sshd", "bash", "python"], True) == "hosts: Python, generation 1"
    assert (
        cpu_split.role(["systemd", "sshd", "sshd", "bash", "python", "python"], True) == "hosts: Python, generation 2"
    )
    assert cpu_split.role(["systemd", "python", "xargs"], False) == "controller: xargs"
    assert cpu_split.role(["systemd", "python", "xargs", "sh", "ssh"], False) == "ssh clients"


def test_a_benchmark_run_from_an_ssh_login_keeps_its_controller_off_the_hosts():
    """Only the test bed's sshd daemons make a host: the login's sshd is above the controller."""
    lines = [
        exec_("systemd", 1, 0.0),
        fork("systemd", 1, 40, 0.0),
        exec_("sshd", 40, 0.0),  # the user's login
        fork("sshd", 40, 41, 0.0),
        exec_("bash", 41, 0.0),
        fork("bash", 41, 100, 0.0),
        exec_("python", 100, 0.0),
        fork("python", 100, 101),
        exec_("xargs", 101),
        fork("systemd", 1, 50, 0.0),
        exec_("sshd", 50, 0.0),  # a test-bed host's sshd
        fork("sshd", 50, 201),
        fork("sshd", 201, 202),
        exec_("bash", 202),
        sample("xargs", 101, 11.0),
        sample("python", 100, 11.0),
        sample("bash", 202, 11.0),
    ]
    assert cpu_split.split(lines, 10.0, 12.0, host_sshds={50}, rate=1) == {
        "controller: xargs": 1,
        "other": 1,
        "hosts: shell and tools": 1,
    }


def test_no_sample_in_the_window_is_an_error_not_an_empty_split():
    lines = [exec_("python", 100, 0.0), sample("python", 100, 20.0)]
    with pytest.raises(SystemExit, match="no cpu-clock sample"):
        cpu_split.split(lines, 10.0, 12.0, host_sshds=set(), rate=1)
