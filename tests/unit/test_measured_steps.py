"""The benchmark's timing rules, the one measured-step loop of the graph-mode and collective
workers (RunReport.measure_steps): warm-up unmeasured, each measured step timed alone, step
lines as tf_cnn_benchmarks prints them, the measured window exactly the measured steps.

A step function that advances a fake clock stands in for a training step, so the timings are
known exactly (no sleeping, nothing that a busy machine could change).
"""

import pytest

from dtfbench.workload import flags, reporting
from dtfbench.workload.reporting import RunReport

WARMUP_SECONDS = 0.15
STEP_SECONDS = [0.01, 0.03, 0.01, 0.02, 0.01]


def config_and_cluster():
    return flags.parse(
        [
            "--model",
            "trivial",
            "--variable_update",
            "independent",
            "--device",
            "cpu",
            "--num_warmup_batches",
            "2",
            "--num_batches",
            str(len(STEP_SECONDS)),
            "--display_every",
            "2",
        ],
        environ={},
    )


class Clock:
    """time for reporting: wall and CPU time advance only when a step says so."""

    def __init__(self):
        self.now = 1000.0
        self.cpu = 10.0

    def perf_counter(self):
        return self.now

    monotonic = perf_counter

    def time(self):  # the wall clock, epoch seconds
        return 1.7e9 + self.now

    def process_time(self):
        return self.cpu

    def spend(self, seconds, cpu_share=0.5):
        self.now += seconds
        self.cpu += seconds * cpu_share


@pytest.fixture
def clock(monkeypatch):
    fake = Clock()
    monkeypatch.setattr(reporting, "time", fake)
    return fake


def test_measure_steps_times_each_measured_step_alone(capsys, clock):
    config, cluster = config_and_cluster()
    report = RunReport(config, cluster)
    calls = []

    def step(what):
        calls.append(what)
        if what.startswith("warm-up"):
            clock.spend(WARMUP_SECONDS)
            return 9.0
        index = len(calls) - config.num_warmup_batches - 1
        clock.spend(STEP_SECONDS[index])
        return 5.0 - index

    report.measure_steps(step)

    assert calls == ["warm-up step 1", "warm-up step 2"] + [f"step {n}" for n in range(1, 6)]
    # Warm-up is not measured; each measured step is timed alone.
    assert len(report.step_times) == len(STEP_SECONDS)
    assert report.step_times == pytest.approx(STEP_SECONDS)
    assert report.measured_seconds == pytest.approx(sum(STEP_SECONDS))
    assert report.measured_cpu_seconds == pytest.approx(sum(STEP_SECONDS) / 2)
    # The window every host's NIC bytes are taken over: the measured steps, not the warm-up.
    start, end = report.measured_window
    assert start == pytest.approx(1.7e9 + 1000.0 + 2 * WARMUP_SECONDS, abs=1e-5)
    assert end - start == pytest.approx(sum(STEP_SECONDS), abs=1e-5)
    window = report.result()["measured_window"]
    assert (window["start"], window["end"]) == (start, end)
    assert report.final_loss == 1.0 and isinstance(report.final_loss, float)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Step\tImg/sec\ttotal_loss"
    # tf_cnn_benchmarks shows measured step 1 and every display_every-th one.
    assert [line.split("\t")[0] for line in lines[1:]] == ["1", "2", "4"]
    assert lines[-1].endswith("\t2.000")


def test_a_failing_step_leaves_the_measured_window_open(capsys, clock):
    config, cluster = config_and_cluster()
    report = RunReport(config, cluster)

    def step(what):
        if what == "step 2":
            raise RuntimeError("ps 0 died")
        clock.spend(0.01)
        return 1.0

    with pytest.raises(RuntimeError, match="ps 0 died"):
        report.measure_steps(step)
    assert len(report.step_times) == 1 and report.measured_seconds is None
    assert report.measured_window is None and report.result(status="failed")["measured_window"] is None
