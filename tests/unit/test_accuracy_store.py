"""eval_every_steps from the plan to the store and the report: checked before anything starts,
on the run's command line, a configuration key, and the chief's top-1/top-5 in the tables."""

import re

import pytest
from store_harness import study_row

from dtfbench.plan.sweep import PlanError, run_digest
from dtfbench.report import analysis, build, plotspec, tables
from dtfbench.results import record, store
from dtfbench.results.sweep_resume import plan_sweep

LOCAL = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]


def plan(**request):
    request.setdefault("sweep_id", "s")
    request.setdefault("repetitions", 1)
    return plan_sweep(request, LOCAL)


def test_the_plan_puts_evaluation_on_the_command_line_and_in_the_run():
    result = plan(gpus=2, num_ps=1, model="lenet", data="real", data_dir="/data/digits", eval_every_steps="50")
    run = result["runs"][0]
    assert run["eval_every_steps"] == 50 and result["sweep_config"]["eval_every_steps"] == 50
    assert run["launch"]["args"][-2:] == ["--eval_during_training_every_n_steps", "50"]
    # Another run than the same one without evaluation (its images/sec includes the pauses) ...
    plain = plan(gpus=2, num_ps=1, model="lenet", data="real", data_dir="/data/digits")["runs"][0]
    assert run["run_id"] != plain["run_id"]
    # ... while a run without it keeps the id it always had, and the sweep its recorded configuration.
    assert "eval_every_steps" not in plain and plain["run_id"].endswith(run_digest(dict(plain)))
    assert "eval_every_steps" not in plan(gpus=1, num_ps=1)["sweep_config"]
    for off in ("", "0", None):
        assert "eval_every_steps" not in plan(gpus=1, num_ps=1, eval_every_steps=off)["runs"][0]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"eval_every_steps": 10}, "eval_every_steps=10 needs data=real: evaluation reads the held-out validation-*"),
        (
            {"eval_every_steps": 10, "data": "both", "data_dir": "/d"},
            "eval_every_steps=10 needs data=real",
        ),
        ({"eval_every_steps": "-3", "data": "real", "data_dir": "/d"}, "eval_every_steps=-3 is below 1"),
        ({"eval_every_steps": "often", "data": "real", "data_dir": "/d"}, "eval_every_steps='often' is not an integer"),
        (
            {"eval_every_steps": 10, "data": "real", "data_dir": "/d", "workload": "tf_cnn_benchmarks@master"},
            "eval_every_steps=10: workload=tf_cnn_benchmarks@master cannot evaluate during a distributed run "
            "(tf_cnn_benchmarks evaluates on one host only",
        ),
        (
            {"eval_every_steps": 10, "data": "real", "data_dir": "/d", "workload": "cscs2017"},
            "workload=cscs2017 cannot evaluate during a distributed run",
        ),
    ],
)
def test_evaluation_that_cannot_run_is_refused_by_name(request_, message):
    request_.setdefault("model", "trivial")
    with pytest.raises(PlanError) as err:
        plan(gpus=1, num_ps=1, **request_)
    assert message in str(err.value) and "\n" not in str(err.value)


def recorded(run_id, top1, every=50, **fields):
    accuracy = None if top1 is None else {"top1": top1, "top5": 0.99, "eval_seconds": 0.4, "curve": []}
    payload = {
        "run": {"run_id": run_id, "gpus": 2, "num_ps": 1, "variable_update": "parameter_server", "data": "real",
                "repetition": fields.pop("repetition", 1), "model": "lenet", "batch_size": 16, "eval_every_steps": every},
        "sweep_id": "s",
        "system": "local",
        "layout": {"num_workers": 2, "hosts_used": ["localhost"], "cluster_spec": {}},
        "hosts": {"localhost": {"failure": "", "workers": [
            {"result": {"task_index": 0, "status": "ok", "images_per_sec": 100.0, "accuracy": accuracy}},
            {"result": {"task_index": 1, "status": "ok", "images_per_sec": 90.0, "accuracy": None}},
        ]}},
    }  # fmt: skip
    return record.build_record(payload)


def test_the_chiefs_accuracy_is_stored_and_shown_beside_images_per_sec(tmp_path):
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    store.add_run(conn, recorded("s-1", 0.80))
    store.add_run(conn, recorded("s-2", 0.90, repetition=2))
    # The same configuration without evaluation is another configuration, never averaged with it.
    store.add_run(conn, study_row("s-3", "s", "local", 2, 1, "parameter_server", "real", 1, 200.0,
                                  model="lenet", batch_size=16, num_workers=2))  # fmt: skip
    conn.close()
    rows = analysis.load_rows(db)
    assert [(r["eval_every_steps"], r["eval_top1"], r["eval_top5"], r["eval_seconds"]) for r in rows] == [
        (50, 0.80, 0.99, 0.4),
        (50, 0.90, 0.99, 0.4),
        (None, None, None, None),
    ]
    evaluated, plain = analysis.summarise(rows)
    assert evaluated["eval_top1"] == pytest.approx(0.85) and evaluated["eval_runs"] == 2
    assert (evaluated["eval_top1_min"], evaluated["eval_top1_max"]) == (0.80, 0.90)
    assert evaluated["images_per_sec"] == pytest.approx(190.0) and plain["images_per_sec"] == pytest.approx(200.0)
    assert plain["eval_top1"] is None and plain["eval_runs"] == 0
    table = tables.format_table([evaluated, plain])
    assert table.splitlines()[0].split()[-2:] == ["top-1", "top-5"]
    assert "0.8500" in table.splitlines()[2]
    out = tmp_path / "report"
    build.build(rows, out, formats=(), db=str(db))
    md = (out / "configurations.md").read_text()
    assert "| top-1 | top-5 |" in md and "| 0.8500 | 0.9900 |" in md
    assert "eval_top1" in (out / "configurations.csv").read_text().splitlines()[0]


def test_a_time_to_accuracy_sweep_puts_its_target_and_cap_on_the_command_line():
    result = plan(
        gpus=1, num_ps=1, model="lenet", data="real", data_dir="/d", eval_every_steps=20,
        target_accuracy="0.9", max_epochs=30,
    )  # fmt: skip
    run = result["runs"][0]
    assert (run["target_accuracy"], run["max_epochs"]) == (0.9, 30.0)
    assert run["launch"]["args"][-6:] == [
        "--eval_during_training_every_n_steps", "20", "--stop_at_top_1_accuracy", "0.9", "--num_epochs", "30",
    ]  # fmt: skip
    assert {"target_accuracy": 0.9, "max_epochs": 30.0}.items() <= result["sweep_config"].items()
    other = plan(gpus=1, num_ps=1, model="lenet", data="real", data_dir="/d", eval_every_steps=20)["runs"][0]
    assert other["run_id"] != run["run_id"]


def test_max_epochs_alone_is_a_run_of_that_many_epochs():
    """The Summitdev study's accuracy after the same training: every run trains the same epochs."""
    run = plan(gpus=2, num_ps=1, model="lenet", data="real", data_dir="/d", eval_every_steps=50, max_epochs=3)["runs"][
        0
    ]
    assert run["max_epochs"] == 3.0 and "target_accuracy" not in run
    assert run["launch"]["args"][-4:] == ["--eval_during_training_every_n_steps", "50", "--num_epochs", "3"]
    with pytest.raises(PlanError, match="max_epochs=3 counts epochs of data_dir's training images"):
        plan(gpus=2, num_ps=1, model="lenet", max_epochs=3)


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"target_accuracy": 0.9, "max_epochs": 3}, "target_accuracy=0.9: the target is checked at each evaluation"),
        ({"eval_every_steps": 5, "target_accuracy": 0.9}, "target_accuracy=0.9: give max_epochs"),
        ({"eval_every_steps": 5, "target_accuracy": 90, "max_epochs": 3}, "target_accuracy=90: a top-1 fraction"),
        ({"eval_every_steps": 5, "max_epochs": "lots"}, "max_epochs='lots': give a number of epochs above 0"),
        ({"eval_every_steps": 5, "target_accuracy": 0.9, "max_epochs": "-1"}, "max_epochs='-1': give a number"),
    ],
)
def test_a_target_that_cannot_be_checked_is_refused(request_, message):
    with pytest.raises(PlanError) as err:
        plan(gpus=1, num_ps=1, model="trivial", data="real", data_dir="/d", **request_)
    assert message in str(err.value)


@pytest.mark.parametrize(
    "converged, runs, score",
    [
        ([10.0, 12.0, 11.0, 30.0, 9.0], 5, 11.0),  # the fastest (9) and the slowest (30) dropped
        ([10.0, 12.0, 11.0, 9.0], 5, 11.0),  # one did not converge: it is the slowest, dropped
        ([10.0, 12.0, 9.0], 5, None),  # two did not: no score
        ([10.0, 14.0], 2, 12.0),  # too few to drop any
        ([10.0], 2, None),
    ],
)
def test_repetitions_are_scored_as_mlperf_scores_them(converged, runs, score):
    from dtfbench.report.stats import mlperf_score

    assert mlperf_score(converged, runs) == score


def test_time_to_accuracy_is_stored_and_scored(tmp_path):
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    for rep, (status, seconds) in enumerate([("converged", 10.0), ("converged", 14.0), ("converged", 12.0),
                                             ("not_converged", None)], start=1):  # fmt: skip
        row = recorded(f"s-{rep}", 0.9, repetition=rep)
        row.update(target_accuracy=0.85, max_epochs=5.0, tta_status=status, time_to_accuracy=seconds,
                   epochs_to_accuracy=None if seconds is None else seconds / 5)  # fmt: skip
        store.add_run(conn, row)
    conn.close()
    (summary,) = analysis.summarise(analysis.load_rows(db))
    assert summary["time_to_accuracy"] == pytest.approx(13.0)  # 10 and the not converged dropped: (12+14)/2
    assert (summary["tta_converged"], summary["tta_runs"]) == (3, 4) and summary["tta_mean"] == pytest.approx(12.0)
    assert summary["tta_ci_low"] < 12.0 < summary["tta_ci_high"]
    assert "13.00" in tables.format_table([summary])


def test_the_record_takes_the_chiefs_time_to_accuracy():
    row = recorded("s-1", 0.9)
    assert (row["tta_status"], row["time_to_accuracy"]) == (None, None)
    payload_accuracy = {"top1": 0.9, "top5": 1.0, "eval_seconds": 0.3, "curve": [], "status": "converged",
                        "time_to_target": 7.5, "epochs_to_target": 2.25}  # fmt: skip
    payload = {
        "run": {"run_id": "s-2", "gpus": 1, "num_ps": 1, "variable_update": "parameter_server", "data": "real",
                "repetition": 1, "eval_every_steps": 20, "target_accuracy": 0.85, "max_epochs": 5.0},
        "sweep_id": "s", "system": "local", "layout": {"num_workers": 1, "hosts_used": ["h"], "cluster_spec": {}},
        "hosts": {"h": {"failure": "", "workers": [{"result": {"task_index": 0, "status": "ok",
                                                               "images_per_sec": 5.0, "accuracy": payload_accuracy}}]}},
    }  # fmt: skip
    row = record.build_record(payload)
    assert (row["target_accuracy"], row["max_epochs"], row["tta_status"]) == (0.85, 5.0, "converged")
    assert (row["time_to_accuracy"], row["epochs_to_accuracy"]) == (7.5, 2.25)


def test_the_optimizer_and_learning_rate_reach_the_command_line_and_name_the_run():
    base = {"gpus": 1, "num_ps": 1, "model": "lenet"}
    run = plan(**base, optimizer="momentum", learning_rate="0.01")["runs"][0]
    assert (run["optimizer"], run["learning_rate"]) == ("momentum", 0.01)
    assert run["launch"]["args"][-4:] == ["--optimizer", "momentum", "--learning_rate", "0.01"]
    assert run["run_id"] != plan(**base)["runs"][0]["run_id"]
    with pytest.raises(PlanError, match="optimizer='adam' is unknown; choose from sgd, momentum"):
        plan(**base, optimizer="adam")
    with pytest.raises(PlanError, match="learning_rate='0': give a number above 0"):
        plan(**base, learning_rate="0")
    with pytest.raises(PlanError, match="learning_rate=0.1: workload=cscs2017 takes no optimizer settings"):
        plan(gpus=1, num_ps=1, model="trivial", workload="cscs2017", learning_rate=0.1)


def test_optimizer_learning_rate_and_lr_scaling_are_sweep_axes():
    """Each a comma list: every combination its own runs, in the sweep's configuration as lists."""
    base = {"gpus": 2, "num_ps": 1, "model": "lenet", "data": "real", "data_dir": "/data/digits"}
    result = plan(**base, optimizer="sgd,momentum", learning_rate="0.01,0.1", lr_scaling="none,linear", warmup_epochs=2)
    runs = result["runs"]
    settings = [(r["optimizer"], r["learning_rate"], r["lr_scaling"], r.get("warmup_epochs")) for r in runs]
    assert settings == [
        (o, lr, s, 2.0 if s == "linear" else None)
        for o in ("sgd", "momentum")
        for lr in (0.01, 0.1)
        for s in ("none", "linear")
    ]
    assert len({r["run_id"] for r in runs}) == 8
    config = result["sweep_config"]
    assert (config["optimizer"], config["learning_rate"], config["lr_scaling"]) == (
        ["momentum", "sgd"], [0.01, 0.1], ["linear", "none"],
    )  # fmt: skip
    assert config["warmup_epochs"] == 2.0
    linear = runs[1]["launch"]["args"]
    assert linear[linear.index("--lr_scaling") :][:4] == ["--lr_scaling", "linear", "--warmup_epochs", "2"]
    assert "--warmup_epochs" not in runs[0]["launch"]["args"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"lr_scaling": "sqrt"}, "lr_scaling='sqrt' is unknown; choose from none, linear"),
        ({"warmup_epochs": 5}, "warmup_epochs=5: the warm-up rises from learning_rate to the rate lr_scaling=linear"),
        ({"warmup_epochs": "-1", "lr_scaling": "linear"}, "warmup_epochs='-1': give a number of epochs above 0"),
        (
            {"warmup_epochs": 5, "lr_scaling": "linear", "data": "synthetic"},
            "warmup_epochs=5 counts epochs of data_dir's training images, and synthetic data has none",
        ),
    ],
)
def test_a_bad_scaling_or_warm_up_is_refused_by_name(request_, message):
    base = {"gpus": 2, "num_ps": 1, "model": "lenet", "data": "real", "data_dir": "/data/digits", **request_}
    with pytest.raises(PlanError, match=re.escape(message)):
        plan(**base)


def test_lr_scaling_and_warm_up_are_stored_configuration_keys():
    payload = {
        "run": {"run_id": "s-1", "gpus": 2, "num_ps": 1, "variable_update": "parameter_server", "data": "real",
                "repetition": 1, "lr_scaling": "linear", "warmup_epochs": 2.0},
        "layout": {"num_workers": 2}, "sweep_id": "s", "system": "local", "hosts": {},
    }  # fmt: skip
    row = record.build_record(payload)
    assert (row["lr_scaling"], row["warmup_epochs"]) == ("linear", 2.0)
    assert {"lr_scaling", "warmup_epochs"} <= set(analysis.CONFIG_KEYS)


def test_the_fastest_to_the_target_is_named_beside_the_fastest_images(tmp_path):
    """Asynchronous updates can buy images/sec and lose the race to the target: the report says so."""
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    runs = {"sync": ("parameter_server", 1, 100.0, 20.0), "async": ("distributed_replicated", 1, 150.0, 35.0)}
    n = 0
    for update, num_ps, ips, seconds in runs.values():
        for rep in (1, 2, 3):
            n += 1
            row = study_row(f"s-{n}", "s", "local", 2, num_ps, update, "real", rep, ips + rep,
                            model="lenet", batch_size=16, num_workers=2)  # fmt: skip
            row.update(eval_every_steps=20, eval_top1=0.9, eval_top5=1.0, target_accuracy=0.85, max_epochs=5.0,
                       tta_status="converged", time_to_accuracy=seconds + rep)  # fmt: skip
            store.add_run(conn, row)
    conn.close()
    rows = analysis.load_rows(db)
    (row,) = tables.fastest_to_target(analysis.summarise(rows))
    assert row["fastest"]["variable_update"] == "parameter_server" and row["fastest"]["time_to_accuracy"] == 22.0
    assert row["most_images"]["variable_update"] == "distributed_replicated" and row["same"] is False
    out = tmp_path / "report"
    build.build(rows, out, formats=(), db=str(db))
    md = (out / "best_configurations.md").read_text()
    assert "### Fastest to the target accuracy" in md
    assert "| real | 2 | 0.850 | 1 PS, parameter_server | 22.00 | 1 PS, distributed_replicated | 152.00 | no |" in md


def test_sync_is_a_sweep_axis_of_the_ps_modes():
    result = plan(gpus=2, num_ps=1, model="trivial", sync="true,false",
                  variable_update="parameter_server,collective_all_reduce")  # fmt: skip
    runs = [(r["variable_update"], r.get("sync"), r["launch"]["args"]) for r in result["runs"]]
    assert [(u, s) for u, s, _ in runs] == [
        ("parameter_server", True), ("parameter_server", False), ("collective_all_reduce", None),
    ]  # fmt: skip
    assert "--cross_replica_sync=true" in runs[0][2] and "--cross_replica_sync=false" in runs[1][2]
    assert not any(a.startswith("--cross_replica_sync") for a in runs[2][2])
    assert result["sweep_config"]["sync"] == [False, True]
    assert any("collective_all_reduce is always synchronous" in note for note in result["notes"])
    # Without sync the runs are what they were: no flag, no key, the same ids.
    plain = plan(gpus=2, num_ps=1, model="trivial")["runs"][0]
    assert "sync" not in plain and not any(a.startswith("--cross_replica_sync") for a in plain["launch"]["args"])
    # tf_cnn_benchmarks takes its own flag, capitalised as its parser expects.
    tf_cnn = plan(gpus=1, num_ps=1, model="trivial", sync="false", workload="tf_cnn_benchmarks@master")["runs"][0]
    assert "--cross_replica_sync=False" in tf_cnn["launch"]["args"]
    with pytest.raises(PlanError, match="sync=false with variable_update=collective_all_reduce: all-reduce is always"):
        plan(gpus=2, num_ps=0, model="trivial", sync="false", variable_update="collective_all_reduce")
    with pytest.raises(PlanError, match="sync='sometimes': give true"):
        plan(gpus=2, num_ps=1, model="trivial", sync="sometimes")


def test_configurations_that_differ_only_in_a_setting_are_told_apart_in_the_tables(tmp_path):
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    for index, sync in enumerate((1, 0), start=1):
        row = study_row(f"s-{index}", "s", "local", 2, 1, "parameter_server", "synthetic", 1, 100.0 * index,
                        model="trivial", batch_size=8, num_workers=2)  # fmt: skip
        store.add_run(conn, dict(row, sync=sync, eval_every_steps=1))
    conn.close()
    rows = analysis.load_rows(db)
    summaries = analysis.summarise(rows)
    assert len(summaries) == 2
    lines = tables.format_table(summaries).splitlines()
    assert lines[0].split()[-2:] == ["sync", "eval_every_steps"]
    assert lines[2].split()[-2:] == ["true", "1"] and lines[3].split()[-2:] == ["false", "1"]
    out = tmp_path / "report"
    build.build(rows, out, formats=(), db=str(db))
    assert "| sync | eval_every_steps |" in (out / "configurations.md").read_text()


def _curve(top1s, seconds_per_point=2.0, epoch_per_point=0.5):
    return [
        {"step": 20 * (i + 1), "top1": t, "top5": 1.0, "wall_seconds": seconds_per_point * (i + 1),
         "epoch": epoch_per_point * (i + 1), "examples": 364}
        for i, t in enumerate(top1s)
    ]  # fmt: skip


def test_the_report_draws_the_accuracy_and_writes_each_runs_mlperf_log(tmp_path):
    """Curves averaged over the repetitions, time to accuracy against GPUs, top-1 against the
    workers (the Summitdev study's Fig. 8b), and every run's MLPerf log as mlperf/<run id>.log."""
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    curves = {1: ([0.3, 0.6, 0.8], [0.5, 0.7, 0.9]), 2: ([0.2, 0.5, 0.7], [0.4, 0.6, 0.8])}
    n = 0
    for gpus, reps in curves.items():
        for rep, top1s in enumerate(reps, start=1):
            n += 1
            row = study_row(f"s-{n}-abc", "s", "local", gpus, 1, "parameter_server", "real", rep, 100.0 * gpus,
                            model="lenet", batch_size=16, num_workers=gpus, eval_every_steps=20)  # fmt: skip
            lines = [f':::MLLOG {{"key": "run_start", "run": {n}}}', f':::MLLOG {{"key": "run_stop", "run": {n}}}']
            row.update(
                eval_top1=top1s[-1], eval_top5=1.0, target_accuracy=0.75, max_epochs=5.0, tta_status="converged",
                time_to_accuracy=5.0 * gpus + rep,
                worker_results=[{"task_index": 0, "accuracy": {"curve": _curve(top1s)}, "mlperf_log": lines},
                                {"task_index": 1, "accuracy": None, "mlperf_log": None}],
            )  # fmt: skip
            store.add_run(conn, row)
    conn.close()
    out = tmp_path / "report"
    result = build.build(analysis.load_rows(db), out, formats=(), db=str(db))
    specs = dict(plotspec.plot_specs(result.analysis))
    curve = specs["accuracy_time-local-lenet"]
    target, one_gpu, two_gpus = curve["series"]
    assert target["label"] == "target 0.75" and [p["y"] for p in target["points"]] == [0.75, 0.75]
    assert one_gpu["label"] == "1 GPU, PS x1 (2 runs)"
    assert [(p["x"], p["y"], p["low"], p["high"]) for p in one_gpu["points"]] == [
        (2.0, 0.4, 0.3, 0.5), (4.0, 0.6499999999999999, 0.6, 0.7), (6.0, 0.8500000000000001, 0.8, 0.9),
    ]  # fmt: skip
    assert [p["x"] for p in specs["accuracy_epochs-local-lenet"]["series"][1]["points"]] == [0.5, 1.0, 1.5]
    (tta,) = specs["time_to_accuracy-local-lenet"]["series"]
    assert [(p["x"], p["y"]) for p in tta["points"]] == [(1, 6.5), (2, 11.5)]  # 2 runs each: their mean
    (workers,) = specs["accuracy_vs_workers-local-lenet"]["series"]
    assert [(p["x"], p["y"]) for p in workers["points"]] == [(1, pytest.approx(0.85)), (2, pytest.approx(0.75))]
    logs = sorted(p.name for p in (out / "mlperf").iterdir())
    assert logs == [f"s-{n}-abc.log" for n in range(1, 5)]
    assert (out / "mlperf" / "s-3-abc.log").read_text() == (
        ':::MLLOG {"key": "run_start", "run": 3}\n:::MLLOG {"key": "run_stop", "run": 3}\n'
    )
    assert "[mlperf/](mlperf/): each run's MLPerf log (4," in (out / "index.md").read_text()


def test_configurations_that_differ_in_a_sweeps_constant_are_told_apart_too(tmp_path):
    """Issue 56: `report table` showed one 1-GPU configuration twice with nothing to tell the rows
    apart (two sweeps of other steps in one store): a key the rows differ in gets a column."""
    db = tmp_path / "r.sqlite"
    conn = store.connect(db)
    for index, (batch_size, steps, ps_on_worker_nodes) in enumerate(((8, 100, 1), (8, 20, 1), (16, 100, 0)), start=1):
        row = study_row(f"s-{index}", "s", "local", 1, 1, "parameter_server", "synthetic", 1, 100.0 * index,
                        model="trivial", batch_size=batch_size, num_workers=1)  # fmt: skip
        store.add_run(conn, dict(row, steps=steps, ps_on_worker_nodes=ps_on_worker_nodes))
    conn.close()
    rows = analysis.load_rows(db)
    lines = tables.format_table(analysis.summarise(rows)).splitlines()
    assert lines[0].split()[-3:] == ["batch_size", "ps_on_worker_nodes", "steps"], lines[0]
    assert [line.split()[-3:] for line in lines[2:5]] == [
        ["8", "true", "100"],
        ["8", "true", "20"],
        ["16", "false", "100"],
    ]
    assert len(set(lines[2:5])) == 3
    # Within a batch size's section of configurations.md (its title names the batch), the rest.
    out = tmp_path / "report"
    build.build(rows, out, formats=(), db=str(db))
    md = (out / "configurations.md").read_text()
    assert "| steps | failures |" in md and "ps_on_worker_nodes" not in md.split("bs 16")[-1].split("\n\n")[1]
