"""background_io (issue 55, item 5): the reader's bounds, the plan's axis and checks, and the record's
columns and configuration key (the readers across hosts: tests/integration/test_shared_storage_testbed.py)."""

import json
import os
import re
import sys
import time

import pytest

from dtfbench.linux import background_read
from dtfbench.plan.sweep import PlanError
from dtfbench.report import stats
from dtfbench.results import record
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [{"name": f"node0{i}", "address": f"10.0.0.{i}", "devices": 1, "device_type": "cpu"} for i in range(1, 4)]
BASE = {"gpus": 1, "num_ps": 1, "model": "trivial", "sweep_id": "s", "repetitions": 1, "data": "real",
        "data_dir": "/data/digits"}  # fmt: skip


@pytest.fixture
def dataset(tmp_path):
    for name, size in (("train-00000-of-00002", 3 << 20), ("train-00001-of-00002", 2 << 20), ("validation-0", 1 << 20)):
        (tmp_path / name).write_bytes(os.urandom(size))
    (tmp_path / "SHA256SUMS").write_text("not read\n")
    return tmp_path


def test_the_reader_keeps_to_its_rate_and_ends_by_itself(dataset):
    fast = background_read.read_loop(dataset, seconds=0.5)
    assert fast["ended"] == "time" and fast["passes"] >= 1 and fast["bytes"] >= 6 << 20
    bounded = background_read.read_loop(dataset, seconds=1.0, mb_per_s=4)
    assert bounded["ended"] == "time" and bounded["bound_mb_per_s"] == 4
    # A 4 MiB block may land just before the deadline: at most one block over the bound's bytes.
    assert 2.0 <= bounded["mb_per_s"] <= 4 + 4.2 / bounded["seconds"], bounded
    assert fast["mb_per_s"] > 2 * bounded["mb_per_s"]


def test_start_detaches_a_reader_and_stop_ends_it_with_its_figures(dataset, tmp_path, capsys):
    state = str(tmp_path / "state" / "reader.json")
    assert background_read.main(["start", str(dataset), "--state", state, "--seconds", "60", "--mb-per-s", "20"]) == 0
    started = json.loads(capsys.readouterr().out)
    pid = started["pid"]
    # What the controller's interrupt watchdog keeps to stop it (plugins/callback/dtfbench_interrupt.py).
    assert (started["reader"], started["state"], started["python"]) == ("started", state, sys.executable)
    time.sleep(0.5)
    assert os.path.exists(f"/proc/{pid}")
    assert background_read.main(["stop", "--state", state]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert (
        figures["reader"] == "stopped"
        and figures["ended"] == "stopped"
        and 0 < figures["mb_per_s"] <= 20 * 1.5
        and figures["bytes"] > 0
    )
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().split()[2] != "Z":
        assert time.monotonic() < deadline, "the reader outlived its stop"
        time.sleep(0.05)
    assert os.listdir(tmp_path / "state") == []


def test_start_refuses_a_folder_without_the_dataset(tmp_path, capsys):
    assert background_read.main(["start", str(tmp_path), "--state", str(tmp_path / "s.json"), "--seconds", "5"]) == 2
    assert "holds no train-* or validation-* files" in capsys.readouterr().err


def test_the_plan_makes_it_an_axis_and_keeps_the_readers_off_the_runs():
    # node01, which a 2-GPU layout would take first.
    plan = plan_sweep({**BASE, "gpus": 2, "background_io": "none,node01", "background_io_mb_per_s": 50}, HOSTS)
    without, with_ = plan["runs"]
    assert "background_io" not in without and with_["background_io"] == "node01"
    assert plan["background_io"] == {"hosts": ["node01"], "axis": [None, "node01"], "mb_per_s": 50.0}
    assert sorted(plan["sweep_config"]["background_io"]) == ["node01", "none"]
    # Neither run has a task on the reader's node, the run without it included (the same layout).
    for run in plan["runs"]:
        assert {t["host"] for t in run["layout"]["tasks"]} == {"node02", "node03"}, run["layout"]
    plain = plan_sweep({**BASE, "gpus": 2}, HOSTS)
    assert {t["host"] for t in plain["runs"][0]["layout"]["tasks"]} == {"node01", "node02"}
    # A run without the reader keeps the id it had before there was one (its hosts are not in it).
    assert without["run_id"] == plain["runs"][0]["run_id"] != with_["run_id"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"background_io": "node09"}, "background_io=node09 is not a node of the sweep (node01, node02, node03)"),
        ({"background_io": "node03", "data": "synthetic"}, "background_io=node03 reads data_dir beside the runs"),
        ({"background_io": "node03", "launcher": "slurm"}, "background_io=node03 starts a reader over SSH"),
        ({"background_io": "node01,node02,node03"}, "names every node"),
        ({"background_io": "node03", "background_io_mb_per_s": "fast"}, "background_io_mb_per_s='fast' is not a rate"),
        ({"background_io": "node03", "gpus": 3}, "gpus=3"),
    ],
)  # fmt: skip
def test_a_reader_that_cannot_run_is_refused_before_anything_starts(request_, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_sweep({**BASE, **request_}, HOSTS)


def test_the_record_keeps_the_reader_and_its_rate_and_the_summary_keeps_them_apart():
    plan = plan_sweep({**BASE, "background_io": "none,node03"}, HOSTS)
    worker = {"task_index": 0, "status": "ok", "images_per_sec": 9.0}
    read = {"mb_per_s": 31.5, "ended": "stopped"}
    stored = [
        record.build_record(
            dict(
                run=dict(run),
                layout={"num_workers": 1},
                sweep_id="s",
                system="testbed",
                hosts={"node01": {"workers": [{"result": worker}]}},
                background_read=read if run.get("background_io") else {},
            )
        )  # fmt: skip
        for run in plan["runs"]
    ]
    assert [(r["background_io"], r["background_io_mb_per_s"]) for r in stored] == [(None, None), ("node03", 31.5)]
    assert "background_io" in stats.CONFIG_KEYS and len(stats.summarise(stored)) == 2
