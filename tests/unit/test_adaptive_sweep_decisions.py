"""num_ps=auto and stop_below_efficiency / min_doubling_gain: the two rules on known numbers, a
sweep's decisions from a store of runs made from a known model, the plan's checks, and the
figures against the published tables (docs/scaling_model.md)."""

import json
import subprocess
import sys

import pytest

from dtfbench.forecast import adaptive as adaptive_sweep
from dtfbench.forecast import narrowing as narrowing_validation
from dtfbench.forecast import report_section as report_sweep
from dtfbench.forecast import scaling_model
from dtfbench.forecast.adaptive import Settings, narrowed_ps_counts, stop_reason
from dtfbench.plan.sweep import PlanError, build_plan
from dtfbench.results import store, sweep_steps
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [
    {"name": f"n{i}", "address": f"10.0.0.{i}", "devices": 1, "device_type": "gpu", "max_ps": 8} for i in range(16)
]


def test_narrowing_keeps_the_best_and_its_neighbours():
    rates = {1: 10, 2: 30, 3: 50, 4: 45, 5: 20, 6: 5}
    assert narrowed_ps_counts([1, 2, 3, 4, 5, 6], rates, 1) == [2, 3, 4]
    assert narrowed_ps_counts([1, 2, 3, 4, 5, 6], rates, 2) == [2, 3, 4, 5]
    assert narrowed_ps_counts([1, 2, 3, 4, 5, 6], {p: 10 - p for p in range(1, 7)}, 1) == [1, 2]  # an end
    # Neighbours in the planned list, not in the integers (default_num_ps skips above 8).
    assert narrowed_ps_counts([1, 8, 16, 32], {1: 1, 8: 2, 16: 5, 32: 3}, 1) == [8, 16, 32]


def test_ties_go_to_the_fewer_bytes_then_the_fewer_ps():
    flat = {1: 100.0, 2: 100.0, 3: 100.0, 4: 100.0}
    assert narrowed_ps_counts([1, 2, 3, 4], flat, 1) == [1, 2]
    assert narrowed_ps_counts([1, 2, 3, 4], flat, 1, node_bytes={1: 4.0, 2: 2.0, 3: 1.0, 4: 1.5}) == [2, 3, 4]


def test_stop_below_efficiency_and_doubling_gain():
    best = {1: 100.0, 2: 190.0, 4: 300.0}  # efficiencies 1, 0.95, 0.75
    assert stop_reason(best, Settings(stop_below_efficiency=0.7)) is None
    why = stop_reason(best, Settings(stop_below_efficiency=0.8))
    assert "4 GPUs measured 300.0 images/sec, 75% efficiency" in why and "stop_below_efficiency=0.8" in why
    assert stop_reason({1: 100.0}, Settings(stop_below_efficiency=0.99)) is None  # nothing to judge yet
    # 190 -> 300 per doubling: +58%.
    assert stop_reason(best, Settings(min_doubling_gain=0.5)) is None
    assert "+58% per doubling" in stop_reason(best, Settings(min_doubling_gain=0.6))
    # Not a doubling: 4 -> 16 is two doublings, 1.21x -> +10% each.
    assert "+10% per doubling" in stop_reason({1: 10.0, 4: 40.0, 16: 48.4}, Settings(min_doubling_gain=0.11))
    # Against the smallest count's per-GPU rate when the sweep has no 1-GPU run.
    assert "against the per-GPU rate at 2 GPUs" in stop_reason(
        {2: 200.0, 4: 300.0}, Settings(stop_below_efficiency=0.8)
    )


@pytest.mark.parametrize(
    "name, value, fragment",
    [
        ("stop_below_efficiency", "0", "above 0 and at most 1"),
        ("stop_below_efficiency", "1.5", "above 0 and at most 1"),
        ("stop_below_efficiency", "half", "stop_below_efficiency='half'"),
        ("min_doubling_gain", "-0.1", ">= 0"),
        ("num_ps_auto_keep", "0", "num_ps_auto_keep=0 is below 1"),
    ],
)
def test_bad_values_are_one_clear_error_of_the_plan(name, value, fragment):
    request = dict(gpus="1,2,4", model="trivial", num_ps="auto", **{name: value})
    with pytest.raises(PlanError) as err:
        build_plan(request, HOSTS)
    assert fragment in str(err.value) and name in str(err.value)


def test_the_plan_marks_an_adaptive_sweep_and_checks_its_counts_go_up():
    plan = build_plan(dict(gpus="1,2,4", model="trivial", num_ps="auto", stop_below_efficiency="0.5"), HOSTS)
    assert plan["adaptive"] == {
        "num_ps_auto": True,
        "num_ps_auto_keep": None,
        "stop_below_efficiency": 0.5,
        "min_doubling_gain": None,
        "rank_by": None,
    }
    assert sorted({r["num_ps"] for r in plan["runs"] if r["gpus"] == 4}) == [1, 2, 3, 4]  # the full set, planned
    assert {r["worker_nodes"] for r in plan["runs"] if r["gpus"] == 4} == {4}
    assert plan["sweep_config"]["num_ps"] == "auto" and plan["sweep_config"]["stop_below_efficiency"] == 0.5
    assert build_plan(dict(gpus="1,2", model="trivial", num_ps="1"), HOSTS)["adaptive"] is None
    with pytest.raises(PlanError, match=r"must go up in GPU counts .*; give gpus=1,2,4"):
        build_plan(dict(gpus="4,1,2", model="trivial", num_ps="auto"), HOSTS)
    with pytest.raises(PlanError, match="auto stands alone"):
        build_plan(dict(gpus="1,2", model="trivial", num_ps="auto,2"), HOSTS)
    with pytest.raises(PlanError, match="goes with num_ps=auto"):
        build_plan(dict(gpus="1,2", model="trivial", num_ps="1", num_ps_auto_keep=2), HOSTS)


# A system of 1-GPU nodes whose link is known: runs recorded from the model itself.
TRUTH = scaling_model.Fit(
    t1=0.5,
    batch_size=64,
    variables=scaling_model.Variables.of("inception3"),
    coefficients={"sync": 0.02, "bytes": 0.3, "local": 0.0, "workers": 0.002},
    bandwidth_gb_s=0.5,
    bandwidth_floor_gb_s=0.0,
    rms_relative_error=0.0,
    points=0,
)


def _record(db, sweep_id, run, rate, **more):
    conn = store.connect(db)
    store.add_run(
        conn,
        {
            "run_id": run["run_id"],
            "sweep_id": sweep_id,
            "system": "made-up",
            "gpus": run["gpus"],
            "num_ps": run["num_ps"],
            "variable_update": run["variable_update"],
            "data": "synthetic",
            "model": run["model"],
            "batch_size": run["batch_size"],
            "repetition": run["repetition"],
            # As dtfbench record stores them: the image size the worker used (the plan
            # leaves the model's default as None), the workload's name.
            "image_size": 299,
            "workload": "ours",
            "num_workers": run["num_workers"],
            "devices_per_worker": 1,
            "ps_on_worker_nodes": True,
            "warmup_steps": run["warmup_steps"],
            "steps": run["steps"],
            "status": "ok",
            "images_per_sec": rate,
            "hosts": [f"n{i}" for i in range(run["worker_nodes"])],
            **more,
        },
    )
    conn.close()


def _plan(db, sweep_id, **settings):
    """The plan of an inception3 sweep (batch 64, PS counts "auto", one repetition) on HOSTS."""
    return plan_sweep(
        dict(
            model="inception3",
            batch_size=64,
            num_ps="auto",
            repetitions=1,
            variable_update="parameter_server",
            sweep_id=sweep_id,
            results_db=str(db),
            **settings,
        ),
        HOSTS,
    )


def _sweep(tmp_path, outcome=lambda run, rate: {}, **settings):
    """Run a sweep through adaptive_sweep.step as roles/benchmark does, recording each run from TRUTH
    (and `outcome(run, rate)`'s further columns)."""
    db, sweep_id = tmp_path / "results.sqlite", "made-up"
    plan = _plan(db, sweep_id, gpus="1,2,4,8", **settings)
    ran = {}
    for gpus in (1, 2, 4, 8):
        answer = adaptive_sweep.step(dict(plan["adaptive"], sweep_id=sweep_id, gpus=gpus, runs=plan["runs"]), str(db))
        ran[gpus] = sorted(r["num_ps"] for r in answer["runs"])
        for run in answer["runs"]:
            rate = TRUTH.images_per_sec(scaling_model.Config(run["gpus"], 1, run["num_ps"], run["variable_update"]))
            _record(db, sweep_id, run, rate, **outcome(run, rate))
        if answer["stopped"]:
            break
    return db, sweep_id, ran


def test_a_sweep_narrows_to_the_best_ps_counts_from_its_own_smaller_counts(tmp_path):
    db, sweep_id, ran = _sweep(tmp_path)
    truth = {p: TRUTH.images_per_sec(scaling_model.Config(8, 1, p, "parameter_server")) for p in range(1, 9)}
    best = max(truth, key=truth.get)
    assert ran[1] == [1] and ran[2] == [1, 2]  # nothing to calibrate on: the full set
    assert len(ran[4]) < 4 and len(ran[8]) <= 3  # narrowed
    assert best in ran[8]  # and the true best is among them
    steps = sweep_steps.read(db, sweep_id)
    assert [s["action"] for s in steps] == ["full", "full", "narrowed", "narrowed"]
    assert "nothing measured above 1 GPU yet" in steps[1]["reason"]
    assert steps[3]["detail"]["skipped"] and "num_ps=auto" in steps[3]["reason"]


def test_a_sweep_stops_below_its_efficiency_and_says_why(tmp_path):
    db, sweep_id, ran = _sweep(tmp_path, stop_below_efficiency="0.9")
    rates = {
        g: max(TRUTH.images_per_sec(scaling_model.Config(g, 1, p, "parameter_server")) for p in range(1, g + 1))
        for g in (1, 2, 4)
    }
    first_low = next(g for g in (2, 4) if rates[g] / g / rates[1] < 0.9)  # the made-up system's own answer
    assert first_low == 4  # 2 GPUs: 90.5% efficiency, 4 GPUs: 87.6%
    assert ran[4] and ran[8] == []  # 4 ran (narrowed), 8 was not run
    (stop,) = [s for s in sweep_steps.read(db, sweep_id) if s["action"] == "stopped"]
    assert stop["gpus"] == 8 and stop["detail"]["skipped_counts"] == [8]
    assert "best configuration at 4 GPUs measured 448.4 images/sec, 88% efficiency" in stop["reason"]
    assert "below stop_below_efficiency=0.9" in stop["reason"]
    # The report says it, with the model's prediction for what was skipped, and predicted beside measured.
    text = report_sweep.markdown(store.runs(store.connect(db)), str(db))
    assert f"{stop['gpus']} GPUs, stopped: stopped before {stop['gpus']} GPUs" in text
    assert "predicted for the skipped counts" in text and "| made-up | made-up | inception3 | 2 |" in text


# Time to accuracy on the made-up system: more PSs, more images/sec but more epochs to the target
# (the Summitdev study's Fig. 9b: accuracy falls with the PSs).
EPOCH_IMAGES = 20_000
TTA_SETTINGS = dict(
    data="real",
    data_dir="/data",
    eval_every_steps="50",
    target_accuracy="0.9",
    max_epochs="30",
    rank_by="time_to_accuracy",
)


def epochs_needed(num_ps):
    return 2.0 * (1 + 0.6 * (num_ps - 1))


def _reached(run, rate):
    """Each run converged, after the epochs its PS count needs, at the model's images/sec."""
    epochs = epochs_needed(run["num_ps"])
    return dict(target_accuracy=0.9, max_epochs=30.0, eval_every_steps=50, tta_status="converged",
                epochs_to_accuracy=epochs, time_to_accuracy=epochs * EPOCH_IMAGES / rate)  # fmt: skip


def _sweep_to_target(tmp_path, **settings):
    return _sweep(tmp_path, _reached, **TTA_SETTINGS, **settings)


def test_rank_by_time_to_accuracy_keeps_the_ps_counts_first_to_the_target(tmp_path):
    db, sweep_id, ran = _sweep_to_target(tmp_path)
    truth = {p: TRUTH.images_per_sec(scaling_model.Config(8, 1, p, "parameter_server")) for p in range(1, 9)}
    fastest_images = max(truth, key=truth.get)
    first_to_target = min(truth, key=lambda p: epochs_needed(p) / truth[p])
    assert first_to_target < fastest_images  # the made-up system's own answer: the two rankings differ
    assert first_to_target in ran[8] and fastest_images not in ran[8]
    steps = sweep_steps.read(db, sweep_id)
    assert "parameter_server by predicted time to the target" in steps[3]["reason"]
    # Ranked by images/sec, the same sweep keeps the fastest by images/sec instead.
    _, _, by_images = _sweep(tmp_path / "images")
    assert fastest_images in by_images[8]


def test_rank_by_time_to_accuracy_stops_on_the_efficiency_of_the_time(tmp_path):
    db, sweep_id, ran = _sweep_to_target(tmp_path, stop_below_efficiency="0.8")
    (stop,) = [s for s in sweep_steps.read(db, sweep_id) if s["action"] == "stopped"]
    assert "the fastest configuration to the target at" in stop["reason"] and "s to the target" in stop["reason"]
    assert "against 1 GPU' time times its GPUs" in stop["reason"]
    best = adaptive_sweep.best_by_count(store.runs(store.connect(db)), "time_to_accuracy")
    low = min(best, key=lambda g: best[g] / g / best[1])
    assert best[low] / low / best[1] < 0.8 and ran[8] == [] and stop["gpus"] == 8


def test_rank_by_is_checked_by_the_plan(tmp_path):
    request = dict(gpus="1,2", model="trivial", num_ps="auto", rank_by="time_to_accuracy")
    with pytest.raises(PlanError, match="rank_by=time_to_accuracy ranks by the time to a target; give target_accuracy"):
        build_plan(request, HOSTS)
    with pytest.raises(PlanError, match="rank_by='speed' is unknown; choose from images_per_sec, time_to_accuracy"):
        build_plan(dict(request, rank_by="speed"), HOSTS)
    with pytest.raises(PlanError, match="rank_by=images_per_sec: it ranks the configurations that num_ps=auto keeps"):
        build_plan(dict(gpus="1,2", model="trivial", num_ps="1", rank_by="images_per_sec"), HOSTS)


def test_predicted_beside_measured_is_calibrated_on_the_smaller_counts_only(tmp_path):
    db, sweep_id, _ = _sweep(tmp_path)
    rows, notes = report_sweep.predicted_rows(store.runs(store.connect(db)))
    assert notes == []
    at2 = [r for r in rows if r["gpus"] == 2]
    # Fitted on 1 GPU alone: linear scaling (2 x the 1-GPU rate), whatever the 2-GPU run measured.
    one = TRUTH.images_per_sec(scaling_model.Config(1, 1, 1, "parameter_server"))
    assert all(r["predicted"] == pytest.approx(2 * one) and r["calibrated_on"] == "1" for r in at2)
    at8 = [r for r in rows if r["gpus"] == 8]
    assert at8 and all(r["calibrated_on"] == "1,2,4" for r in at8)
    assert all(abs(r["departure"]) < 0.05 for r in at8)  # runs made from the model: it predicts them


def test_the_figures_against_the_published_tables():
    """docs/scaling_model.md and the README quote these: a change shows here."""
    s = narrowing_validation.summary(narrowing_validation.oracle())
    assert (s["narrowed_counts"], s["narrowed_hits"], s["counts"], s["hits"]) == (15, 7, 24, 16)
    assert (s["runs"], s["full_runs"]) == (510, 5440)
    p = narrowing_validation.summary(narrowing_validation.oracle(candidates="plan"))
    assert (p["narrowed_hits"], p["runs"], p["full_runs"]) == (7, 480, 1410)


def test_the_store_keeps_decisions_append_only_and_reads_an_old_store(tmp_path):
    db = tmp_path / "results.sqlite"
    assert sweep_steps.read(db, "s") == []  # no store yet: nothing, and nothing created
    assert not db.exists()
    sweep_steps.record(db, "s", 4, "narrowed", "first", {"group": {"model": "m"}})
    sweep_steps.record(db, "s", 4, "narrowed", "again", {"group": {"model": "m"}})
    assert [d["reason"] for d in sweep_steps.read(db, "s")] == ["first", "again"]
    assert [d["reason"] for d in sweep_steps.latest(db, "s")] == ["again"]
    with pytest.raises(ValueError):
        sweep_steps.record(db, "s", 4, "maybe", "", {})
    version = store.connect(db).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    assert json.loads(version) == store.SCHEMA_VERSION >= 6


def test_a_resumed_sweep_does_not_judge_a_count_it_has_started(tmp_path):
    db, sweep_id, ran = _sweep(tmp_path)  # 1, 2, 4, 8 measured, nothing stopped
    plan = _plan(db, sweep_id, gpus="1,2,4,8,16", stop_below_efficiency="0.99", sweep_extend=True)
    for gpus in (4, 8):  # started: some runs done, so not judged again (it would stop: 4 GPUs are at 88%)
        answer = adaptive_sweep.step(dict(plan["adaptive"], sweep_id=sweep_id, gpus=gpus, runs=plan["runs"]), str(db))
        assert not answer["stopped"] and answer["runs"] == []  # the narrowed set is done; the rest skipped
    answer = adaptive_sweep.step(dict(plan["adaptive"], sweep_id=sweep_id, gpus=16, runs=plan["runs"]), str(db))
    assert answer["stopped"] and answer["runs"] == []
    assert "the best configuration at 8 GPUs" in answer["messages"][0]


def test_the_report_index_and_the_sweep_table_show_it(tmp_path, capsys):
    from dtfbench.report import build, cli

    db, sweep_id, _ = _sweep(tmp_path, stop_below_efficiency="0.9")
    rows = store.runs(store.connect(db))
    result = build.build(
        rows, tmp_path / "report", formats=(), db=str(db), sweep_id=sweep_id, appendix=report_sweep.markdown
    )
    index = result.index.read_text()
    assert "8 GPUs, stopped: stopped before 8 GPUs" in index and "## Predicted beside measured" in index
    assert cli.main(["table", "--db", str(db), "--sweep-id", sweep_id], appendix=report_sweep.markdown) == 0
    out = capsys.readouterr().out
    assert "8 GPUs, stopped: stopped before 8 GPUs" in out and "| made-up | made-up | inception3 | 4 | 3 |" in out


def test_the_report_command_composes_the_forecast_section(tmp_path):
    # report/ does not import forecast/ (a later stage); the command puts the two together.
    db, sweep_id, _ = _sweep(tmp_path, stop_below_efficiency="0.9")
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "report", "table", "--db", str(db), "--sweep-id", sweep_id],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "8 GPUs, stopped: stopped before 8 GPUs" in done.stdout and "## Predicted beside measured" in done.stdout
