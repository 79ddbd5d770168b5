"""Ports claimed while a run's tasks hold them (issue 56, case 3): a claim is a flock held by the
task's supervisor from before its start, released by the kernel however the supervisor ends."""

import os
import signal
import time

from dtfbench.launch import port_claim


def test_a_claim_is_held_by_whoever_keeps_its_descriptor_and_names_its_holder(tmp_path):
    mine, held = port_claim.take(str(tmp_path), "127.0.0.1", 2222, {"run_id": "s-01", "job": "ps", "task_index": 0})
    assert held is None and mine is not None
    assert port_claim.holder(str(tmp_path), "127.0.0.1", 2222)["run_id"] == "s-01"
    assert port_claim.holder(str(tmp_path), "127.0.0.1", 2223) is None  # never claimed
    other, held = port_claim.take(str(tmp_path), "127.0.0.1", 2222, {"run_id": "t-01"})
    assert other is None and held["run_id"] == "s-01" and held["job"] == "ps"
    assert port_claim.describe(held) == "run s-01 (ps 0, for 0 s)"
    port_claim.name_holder(mine, 4321)  # once the supervisor runs
    assert port_claim.describe(port_claim.holder(str(tmp_path), "127.0.0.1", 2222)).startswith(
        "run s-01 (ps 0, pid 4321"
    )
    # A fork's copy (the supervisor's) keeps it after the starter lets go; its end releases it.
    child = os.fork()
    if child == 0:
        time.sleep(30)
        os._exit(0)
    os.close(mine)
    assert port_claim.holder(str(tmp_path), "127.0.0.1", 2222)["run_id"] == "s-01"
    assert port_claim.wait_released(str(tmp_path), "127.0.0.1", 2222, 0.3)["run_id"] == "s-01"
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
    assert port_claim.holder(str(tmp_path), "127.0.0.1", 2222) is None  # no stale claim after a kill
    again, held = port_claim.take(str(tmp_path), "127.0.0.1", 2222, {"run_id": "t-01"})
    assert held is None and port_claim.holder(str(tmp_path), "127.0.0.1", 2222)["run_id"] == "t-01"
    os.close(again)


def test_a_wait_ends_when_the_holder_does_and_ignores_the_runs_own_claim(tmp_path):
    mine, _ = port_claim.take(str(tmp_path), "10.0.0.1", 2222, {"run_id": "s-01"})
    child = os.fork()
    if child == 0:
        time.sleep(0.5)
        os._exit(0)  # the holder ends: the kernel drops its lock
    os.close(mine)
    started = time.monotonic()
    assert port_claim.wait_released(str(tmp_path), "10.0.0.1", 2222, 20) is None
    assert 0.3 < time.monotonic() - started < 10
    os.waitpid(child, 0)
    own, _ = port_claim.take(str(tmp_path), "10.0.0.1", 2222, {"run_id": "s-02"})
    assert port_claim.wait_released(str(tmp_path), "10.0.0.1", 2222, 5, ignore_run="s-02") is None
    os.close(own)
