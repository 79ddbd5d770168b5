"""tf_host_run's wait for the ports of the tasks it started looks again soon, then backs off.

A fixed 0.1 s between two looks was up to 0.1 s of wall time added to every host's start (a
task that listens 5 ms after a look is seen 95 ms later), which a bare launcher polling
faster does not pay (issue #19, P2). The waits now start at 10 ms and grow to POLL.
Checked on HostRun.wait_all_ready itself, with a port that opens at the ninth look and
time.sleep recorded, not timed.
"""

import types

from dtfbench.launch import host_run

PARAMS = dict(run_id="r", run_dir="/nonexistent/r", ready_timeout=60.0, grace_period=1.0, log_tail_lines=5)
TASK = dict(job="ps", task_index=0, address="127.0.0.1", port=1)


class Running:
    """A task inspector whose supervisor runs (the port decides)."""

    def read_pid(self):
        return 1234

    def is_supervisor(self, pid):
        return True


def test_the_wait_for_the_ports_looks_again_within_10_ms_then_backs_off_to_poll(monkeypatch):
    looks, sleeps = [], []

    def port_open(address, port, timeout):
        looks.append(port)
        return len(looks) > 8

    clock = types.SimpleNamespace(time=lambda: 1000.0 + sum(sleeps), sleep=sleeps.append)
    monkeypatch.setattr(host_run, "_port_open", port_open)
    monkeypatch.setattr(host_run, "time", clock)
    run = host_run.HostRun(dict(PARAMS, tasks=[TASK]))
    run.task = lambda task: Running()
    reports = [dict(name="r-ps-0")]
    run.wait_all_ready(reports)

    assert reports[0]["ready"] is True
    assert len(sleeps) == 8  # one wait between two looks
    assert sleeps[0] <= 0.01
    assert sleeps == sorted(sleeps) and sleeps[-1] == host_run.POLL
    # The first 100 ms hold several looks, not one.
    assert sum(1 for total in (sum(sleeps[: i + 1]) for i in range(len(sleeps))) if total <= 0.1) >= 4
