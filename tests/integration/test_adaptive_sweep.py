"""#18 items 4 and 5 for real: a num_ps=auto sweep on the local inventory (real TF processes, the
trivial model, a few steps) narrows its PS counts once it has measured two counts, then, resumed
with stop_below_efficiency and one more count, stops before it and says why: in the playbook's
output, in the store (sweep_steps) and in the report.
"""

import uuid

import pytest
from playbook_harness import run_playbook, small_run

from dtfbench.report import stats
from dtfbench.results import store, sweep_steps

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# No image_size: the model's default, which the plan leaves as None and the store records as 32
# (the sweep must still find its own runs).
COMMON = small_run(image_size=None, num_ps="auto")


def _play(*extra):
    return run_playbook("run-benchmark.yml", *COMMON, *extra, timeout=900)


def _said_by(task, stdout):
    """The output of every run of the playbook's task `task`, spaces normalised."""
    parts = stdout.split("TASK [")
    return " ".join(" ".join(p.split()) for p in parts if p.split("]")[0].endswith(task))


def test_num_ps_auto_narrows_then_stop_below_efficiency_stops_and_says_why(tmp_path, live_processes):
    sweep_id = f"pytest-adaptive-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    first = _play("-e", f"sweep_id={sweep_id}", "-e", f"results_db={db}", "-e", "gpus=1,2,4")
    assert first.returncode == 0, first.stdout[-4000:]
    runs = store.runs(store.connect(db))
    assert {r["status"] for r in runs} == {"ok"}, [r["reason"] for r in runs]
    ran = {g: sorted(r["num_ps"] for r in runs if r["gpus"] == g) for g in (1, 2, 4)}
    # 1 and 2 GPUs: the full set (nothing to calibrate on); 4 GPUs: 2 of the study's 4 PS counts.
    # One node: the model sees no bytes on a network, every PS count ties, the fewest win.
    assert ran == {1: [1], 2: [1, 2], 4: [1, 2]}
    steps = sweep_steps.read(db, sweep_id)
    assert [(s["gpus"], s["action"]) for s in steps] == [(1, "full"), (2, "full"), (4, "narrowed")]
    assert steps[2]["detail"]["skipped"] == [["parameter_server", 3], ["parameter_server", 4]]
    assert "4 GPUs: 2 of 4 configurations (num_ps=auto" in _said_by(
        "Say what the sweep does at this count", first.stdout
    )
    assert live_processes(sweep_id) == []

    # The same sweep, one count more, with stop_below_efficiency=1.0: no CPU run scales perfectly,
    # so it stops before 8 GPUs (1, 2 and 4 are done and not judged again).
    second = _play(
        "-e",
        f"sweep_id={sweep_id}",
        "-e",
        f"results_db={db}",
        "-e",
        "gpus=1,2,4,8",
        "-e",
        "stop_below_efficiency=1.0",
        "-e",
        "sweep_extend=true",
    )
    assert second.returncode == 0, second.stdout[-4000:]
    runs = store.runs(store.connect(db))
    assert not [r for r in runs if r["gpus"] == 8]
    best4 = max(s["images_per_sec"] for s in stats.summarise(runs) if s["gpus"] == 4)
    best1 = max(s["images_per_sec"] for s in stats.summarise(runs) if s["gpus"] == 1)
    (stop,) = [s for s in sweep_steps.read(db, sweep_id) if s["action"] == "stopped"]
    assert stop["gpus"] == 8 and stop["detail"]["skipped_counts"] == [8]
    why = (
        f"the best configuration at 4 GPUs measured {best4:.1f} images/sec, {best4 / 4 / best1:.0%} efficiency "
        "(against the 1-GPU rate), below stop_below_efficiency=1"
    )
    assert why in stop["reason"]
    assert why in _said_by("Say what the sweep does at this count", second.stdout)  # said when it stopped,
    table = _said_by("Show the results", second.stdout)  # and in the sweep's table
    assert f"sweep `{sweep_id}`, 8 GPUs, stopped: stopped before 8 GPUs: {why}" in table
    assert "Predicted beside measured" in table
    assert live_processes(sweep_id) == []
