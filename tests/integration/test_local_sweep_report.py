"""The study's method, short and real, on the local inventory: a sweep into the store, then the report.

2 repetitions x (parameter_server with num_ps 1 and 2, and collective_all_reduce with no PS): 6 runs
of 2 CPU workers; then report.yml: the tables name the best configuration and the winner of
PS or all-reduce, and the plots open and hold their series. The other PS mode,
distributed_replicated, differs from parameter_server only in the workload's flags: its processes
are tests/workload/test_training_processes.py's, its place in a sweep tests/unit/test_plan.py's.
"""

import csv
import json
import uuid
import xml.etree.ElementTree as ElementTree

import pytest
from matplotlib import image as mpimg
from playbook_harness import extra_vars, run_playbook, small_run

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def test_short_sweep_ends_in_store_report_and_plots(tmp_path, live_processes):
    sweep_id = f"pytest-sweep-{uuid.uuid4().hex[:8]}"
    db, report_dir = tmp_path / "results.sqlite", tmp_path / "report"
    sweep = run_playbook(
        "run-benchmark.yml",
        *extra_vars(sweep_id=sweep_id, results_db=db, gpus=2, num_ps="1,2"),
        *extra_vars(variable_update="parameter_server,collective_all_reduce"),
        *small_run(repetitions=2),
        timeout=900,
    )
    assert sweep.returncode == 0, sweep.stdout[-4000:]
    assert "run 6 of 6" in sweep.stdout and "left" in sweep.stdout  # progress with the time left

    runs = store.runs(store.connect(db))
    assert len(runs) == 6 and {r["status"] for r in runs} == {"ok"}, [r["reason"] for r in runs]
    configs = {(r["num_ps"], r["variable_update"]) for r in runs}
    assert configs == {
        (1, "parameter_server"),
        (2, "parameter_server"),
        (0, "collective_all_reduce"),  # PS counts only where there are PSs
    }
    two_ps = next(r for r in runs if r["num_ps"] == 2)
    assert two_ps["cluster_spec"]["ps"] == ["127.0.0.1:2230", "127.0.0.1:2231"]
    assert live_processes(sweep_id) == []

    report = run_playbook(
        "report.yml", *extra_vars(results_db=db, report_dir=report_dir, sweep_id=sweep_id), timeout=300
    )
    assert report.returncode == 0, report.stdout[-4000:]

    # The best configuration is the one with the highest mean over its repetitions.
    means = {}
    for r in runs:
        means.setdefault((r["num_ps"], r["variable_update"]), []).append(r["images_per_sec"])
    best_config, best_values = max(means.items(), key=lambda item: sum(item[1]) / len(item[1]))
    with open(report_dir / "best_configurations.csv", newline="") as handle:
        (best,) = list(csv.DictReader(handle))
    assert (int(best["num_ps"]), best["variable_update"]) == best_config
    assert float(best["images_per_sec"]) == pytest.approx(sum(best_values) / 2, rel=1e-3)

    plot = report_dir / "plots" / "images_per_sec-local-trivial-bs8"
    pixels = mpimg.imread(str(plot.with_suffix(".png")))
    assert pixels.shape[0] > 100 and pixels.std() > 0  # a real, non-blank picture
    ElementTree.parse(plot.with_suffix(".svg"))
    drawn = json.loads(plot.with_suffix(".json").read_text())
    (series,) = [s for s in drawn["series"] if s["source"] == "ours"]
    (point,) = series["points"]
    assert point["x"] == 2 and point["y"] == pytest.approx(sum(best_values) / 2, rel=1e-3)

    # PS or all-reduce: the best PS configuration of the two beside all-reduce, the difference
    # and its interval from the same repetitions.
    with open(report_dir / "ps_or_all_reduce.csv", newline="") as handle:
        (duel,) = list(csv.DictReader(handle))
    best_ps, ps_values = max(
        ((c, v) for c, v in means.items() if c[1] != "collective_all_reduce"), key=lambda item: sum(item[1]) / 2
    )
    ring = sum(means[(0, "collective_all_reduce")]) / 2
    assert (int(duel["ps_num_ps"]), duel["ps_variable_update"]) == best_ps
    assert float(duel["all_reduce_images_per_sec"]) == pytest.approx(ring, rel=1e-3)
    difference = (ring - sum(ps_values) / 2) / (sum(ps_values) / 2) * 100
    assert float(duel["all_reduce_vs_ps_pct"]) == pytest.approx(difference, rel=1e-3)
    low, high = float(duel["all_reduce_vs_ps_ci_low_pct"]), float(duel["all_reduce_vs_ps_ci_high_pct"])
    assert low <= difference <= high
    assert duel["winner"] == ("all-reduce" if low > 0 else "PS" if high < 0 else "neither")
    index = (report_dir / "index.md").read_text()
    assert "## PS or all-reduce" in index and f"{duel['winner']}:" in index
    drawn = json.loads((report_dir / "plots" / "ps_or_all_reduce-local-trivial-bs8.json").read_text())
    assert [s["label"] for s in drawn["series"]] == ["best PS synthetic", "all-reduce synthetic"]
    assert drawn["series"][1]["points"][0]["y"] == pytest.approx(ring, rel=1e-3)
