"""eval_every_steps from the plan to the store and the report: checked before anything starts,
on the run's command line, a configuration key, and the chief's top-1/top-5 in the tables."""

import pytest
from store_harness import study_row

from dtfbench.plan.sweep import PlanError, run_digest
from dtfbench.report import analysis, build, tables
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
