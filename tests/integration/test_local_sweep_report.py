"""The study's method, short and real, on the local inventory: a sweep into the store, then the report.

2 repetitions x num_ps 1 and 2 x two variable_update modes (8 runs of 2 CPU workers), then
report.yml: the tables name the best configuration, and the plots open and hold its series.
"""

import csv
import json
import subprocess
import uuid
import xml.etree.ElementTree as ElementTree

import pytest
from matplotlib import image as mpimg

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def test_short_sweep_ends_in_store_report_and_plots(project_root, ansible_env, tmp_path, live_processes):
    sweep_id = f"pytest-sweep-{uuid.uuid4().hex[:8]}"
    db, report_dir = tmp_path / "results.sqlite", tmp_path / "report"
    sweep = subprocess.run(
        [
            "ansible-playbook",
            "run-benchmark.yml",
            "-e",
            f"sweep_id={sweep_id}",
            "-e",
            f"results_db={db}",
            "-e",
            "gpus=2",
            "-e",
            "num_ps=1,2",
            "-e",
            "variable_update=parameter_server,distributed_replicated",
            "-e",
            "repetitions=2",
            "-e",
            "model=trivial",
            "-e",
            "batch_size=8",
            "-e",
            "image_size=32",
            "-e",
            "warmup_steps=2",
            "-e",
            "steps=5",
        ],
        cwd=project_root,
        env=ansible_env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert sweep.returncode == 0, sweep.stdout[-4000:]
    assert "run 8 of 8" in sweep.stdout and "left" in sweep.stdout  # progress with the time left

    runs = store.runs(store.connect(db))
    assert len(runs) == 8 and {r["status"] for r in runs} == {"ok"}, [r["reason"] for r in runs]
    configs = {(r["num_ps"], r["variable_update"]) for r in runs}
    assert configs == {
        (1, "parameter_server"),
        (2, "parameter_server"),
        (1, "distributed_replicated"),
        (2, "distributed_replicated"),
    }
    two_ps = next(r for r in runs if r["num_ps"] == 2)
    assert two_ps["cluster_spec"]["ps"] == ["127.0.0.1:2230", "127.0.0.1:2231"]
    assert live_processes(sweep_id) == []

    report = subprocess.run(
        [
            "ansible-playbook",
            "report.yml",
            "-e",
            f"results_db={db}",
            "-e",
            f"report_dir={report_dir}",
            "-e",
            f"sweep_id={sweep_id}",
        ],
        cwd=project_root,
        env=ansible_env,
        capture_output=True,
        text=True,
        timeout=300,
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
