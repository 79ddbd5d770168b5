"""python -m dtfbench forecast: the planner on the published tables, on a sweep in the store, and its refusals."""

import json

import pytest
from store_harness import run_row

from dtfbench.forecast import predict as forecast
from dtfbench.forecast import scaling_model as sm
from dtfbench.forecast.scaling_model import Config, Variables
from dtfbench.results import store


def run(capsys, *argv):
    code = forecast.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_published_p2_xlarge_plan(capsys):
    code, out, err = run(capsys, "--system", "aws-p2.xlarge", "--gpus", "1,2,4,8,16,32,64,128", "--json")
    assert code == 0, err
    result = json.loads(out)
    counts = {r["gpus"]: r for r in result["counts"]}
    assert counts[1]["efficiency"] == pytest.approx(1.0)
    assert counts[128]["worth_it"] is False and counts[128]["network_bound"]
    assert counts[32]["worth_it"] is True
    assert counts[64]["runner_up"]["images_per_sec"] < counts[64]["images_per_sec"]
    assert "beyond 64 GPUs each added GPU adds under 10% of one GPU's rate" in result["saturation"]
    sweep = result["sweep"]
    # the study's sweep: both updates x the PS counts of each GPU count x 5 repetitions
    expected_runs = sum(
        2 * 5 * len(forecast._study_ps_counts(g, "parameter_server")) for g in (1, 2, 4, 8, 16, 32, 64, 128)
    )
    assert sweep["runs"] == expected_runs
    assert sweep["instances"] == 128 and sweep["usd_per_hour"] == 0.9
    assert sweep["cost_usd"] == pytest.approx(128 * sweep["hours"] * 0.9)


def test_a_count_far_past_the_data_is_cautioned_not_called_unsaturated(capsys):
    """Issue #56, case 10: --gpus 1000000 said "no saturation" at 0% efficiency, with a $674 billion sweep."""
    code, out, err = run(capsys, "--system", "aws-p2.xlarge", "--gpus", "1000000")
    assert code == 0, err
    text = " ".join(out.split())
    assert "no saturation" not in text and "one count asked, nothing to judge a step up against" in text
    assert "Caution: 1000000 GPUs is over 8x the largest count the model was fitted on (128)" in text
    assert "Caution: at 1000000 GPUs the efficiency is under 10% (0.0% at 1000000)" in text
    assert "Caution: the sweep would cost $674," in text and "--max-cost-usd refuses" in text
    # Within the data, none.
    code, out, _ = run(capsys, "--system", "aws-p2.xlarge", "--gpus", "1,2,4,8,16,32,64,128")
    assert code == 0 and "Caution:" not in out


def test_text_output_names_best_runner_up_and_cost(capsys):
    code, out, _ = run(capsys, "--system", "aws-p2.8xlarge", "--gpus", "8,16,32")
    assert code == 0
    assert "| 16 | 2 |" in out and "distributed_replicated" in out and "runner-up" in out
    assert "Sweep:" in out and "$" in out and "p2.8xlarge at $7.2/h" in out


def test_daint_has_node_hours_without_a_price_and_dollars_with_one(capsys):
    code, out, _ = run(capsys, "--system", "daint", "--gpus", "1,64,128")
    assert code == 0 and "no price: node-hours only" in out
    code, out, _ = run(capsys, "--system", "daint", "--gpus", "1,64,128", "--price-usd-per-hour", "2", "--json")
    assert code == 0 and json.loads(out)["sweep"]["cost_usd"] > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--system", "cray-xc50", "--gpus", "8"], "no published runs for system 'cray-xc50'"),
        (
            ["--instance-type", "x9.huge", "--calibrate-from", "aws-p2.xlarge", "--gpus", "8", "--gpus-per-node", "1"],
            "no price for instance type 'x9.huge'",
        ),
        (["--system", "aws-p2.xlarge", "--gpus", "8", "--price-usd-per-hour", "-1"], "must be a number above 0"),
        (["--system", "aws-p2.xlarge", "--gpus", "8", "--price-usd-per-hour", "0"], "must be a number above 0"),
        (["--system", "aws-p2.xlarge", "--gpus", "1,64", "--max-cost-usd", "100"], "above max_cost_usd=$100.00"),
        (["--system", "aws-p2.xlarge", "--gpus", "0,8"], "--gpus '0,8': give numbers >= 1"),
        (["--gpus", "8"], "nothing to calibrate from"),
        (["--system", "aws-p2.xlarge", "--gpus", "8", "--model", "lenet"], "no published runs"),
    ],
)
def test_bad_inputs_get_one_clear_error(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_missing_store_is_refused_not_created(capsys, tmp_path):
    db = tmp_path / "typo" / "resluts.sqlite"
    code, out, err = run(capsys, "--sweep", "x", "--db", str(db), "--gpus", "8")
    assert code == 2 and out == ""
    assert f"--db {db}: no results store there" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "typo").exists()


def test_sweep_with_no_data_is_refused(capsys, tmp_path):
    db = tmp_path / "results.sqlite"
    store.connect(db).close()
    code, _, err = run(capsys, "--sweep", "nothing", "--db", str(db), "--gpus", "8")
    assert code == 2 and "sweep 'nothing'" in err and "nothing to calibrate from" in err


def test_measure_small_predict_large_from_the_store(capsys, tmp_path):
    """A sweep of 1-8 GPUs recorded in the store by a known model; the planner predicts 32 and 64.

    The sweep ran all-reduce too: the planner ranks it beside the PS configurations and names
    the count where it overtakes them (the PSs' incast of the largest variable grows with
    the nodes faster than the ring's hops).
    """
    variables = Variables.of("resnet50")
    truth = sm.Fit(
        t1=0.25,
        batch_size=32,
        variables=variables,
        coefficients={"sync": 0.01, "bytes": 0.05, "local": 0.0, "workers": 0.001, "ring": 0.002},
        bandwidth_gb_s=0.6,
        bandwidth_floor_gb_s=0,
        rms_relative_error=0,
        points=0,
    )
    db = tmp_path / "results.sqlite"
    conn = store.connect(db)
    for gpus in (1, 2, 4, 8):
        for update in sm.VARIABLE_UPDATES:
            for num_ps in [0] if update == sm.ALL_REDUCE else range(1, gpus + 1):
                rate = truth.images_per_sec(Config(gpus, 1, num_ps, update))
                for rep, wobble in enumerate((0.99, 1.01)):
                    store.add_run(
                        conn,
                        _testbed_run(
                            f"{gpus}-{update}-{num_ps}-{rep}", "small", gpus, num_ps, update, rate * wobble, rep
                        ),
                    )
    conn.close()
    code, out, err = run(capsys, "--sweep", "small", "--db", str(db), "--gpus", "8,32,64", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["model"] == "resnet50" and result["batch_size"] == 32 and result["gpus_per_node"] == 1
    assert result["fit"]["bandwidth_gb_s"] == pytest.approx(0.6, rel=0.05)
    assert result["fit"]["coefficients"]["ring"] == pytest.approx(0.002, rel=0.1)
    winners = {}
    for row in result["counts"]:
        ranked = {c: truth.images_per_sec(c) for c in forecast.candidates(row["gpus"], 1, sm.VARIABLE_UPDATES)}
        assert row["images_per_sec"] == pytest.approx(max(ranked.values()), rel=0.05)
        all_reduce = ranked[Config(row["gpus"], 1, 0, sm.ALL_REDUCE)]
        best_ps = max(rate for c, rate in ranked.items() if not c.all_reduce)
        assert row["all_reduce"]["images_per_sec"] == pytest.approx(all_reduce, rel=0.05)
        assert row["best_ps"]["images_per_sec"] == pytest.approx(best_ps, rel=0.05)
        winners[row["gpus"]] = "all-reduce" if all_reduce > best_ps else "parameter servers"
    assert winners == {8: "parameter servers", 32: "all-reduce", 64: "all-reduce"}  # the truth's crossover
    verdict = result["ps_or_all_reduce"]
    assert {int(g): w for g, w in verdict["winners"].items()} == winners
    assert verdict["crossover_gpus"] == 32 and verdict["summary"].startswith("crossover at 32 GPUs")
    code, out, _ = run(capsys, "--sweep", "small", "--db", str(db), "--gpus", "8,32,64")
    assert "| 64 | 64 |" in out and "collective_all_reduce" in out
    assert "PS or all-reduce: crossover at 32 GPUs: parameter servers win up to 8 GPUs" in out


def test_crossover_of_a_model_worked_by_hand():
    """1 PS on single-GPU nodes, 1 GB of variables, no link limit, t1 = 0.5 s.

    step - t1 = 0.3 s/GB x node bytes + 0.002 s x senders (PS) or + 0.02 s x 2(n-1) hops (ring):
    n=2: PS 0.3 + 0.004 = 0.304 s, ring 0.3 + 0.04 = 0.34 s: the PS wins;
    n=4: PS 0.9 + 0.008 = 0.908 s, ring 0.45 + 0.12 = 0.57 s: all-reduce wins, and from there on.
    """
    fit = sm.Fit(
        t1=0.5,
        batch_size=64,
        variables=Variables(1e9, 0.0),
        coefficients={"sync": 0.0, "bytes": 0.3, "local": 0.0, "workers": 0.002, "ring": 0.02},
        bandwidth_gb_s=float("inf"),
        bandwidth_floor_gb_s=0.0,
        rms_relative_error=0.0,
        points=0,
    )
    rows = forecast.predict_counts(fit, [1, 2, 4, 8], 1, sm.VARIABLE_UPDATES, ps_counts=lambda workers, update: [1])
    assert rows[1]["best_ps"]["images_per_sec"] == pytest.approx(2 * 64 / 0.804)
    assert rows[1]["all_reduce"]["images_per_sec"] == pytest.approx(2 * 64 / 0.84)
    assert rows[2]["variable_update"] == sm.ALL_REDUCE and rows[2]["num_ps"] == 0
    assert rows[2]["images_per_sec"] == pytest.approx(4 * 64 / 1.07)
    verdict = forecast.crossover(rows)
    assert verdict["winners"] == {1: "tie", 2: "parameter servers", 4: "all-reduce", 8: "all-reduce"}
    assert verdict["crossover_gpus"] == 4
    assert forecast.crossover(forecast.predict_counts(fit, [1, 2], 1)) is None  # PS modes only: no question


def test_all_reduce_without_its_runs_is_ranked_only_when_asked_for(capsys):
    code, out, _ = run(capsys, "--system", "aws-p2.xlarge", "--gpus", "1,2,4", "--json")
    result = json.loads(out)
    assert code == 0 and result["ps_or_all_reduce"] is None
    assert "collective_all_reduce is not ranked" in result["all_reduce_note"]
    assert all(r["variable_update"] != sm.ALL_REDUCE for r in result["counts"])
    updates = ",".join(sm.VARIABLE_UPDATES)
    code, out, _ = run(capsys, "--system", "aws-p2.xlarge", "--gpus", "1,2,4", "--variable-update", updates)
    assert code == 0 and "collective_all_reduce" in out
    assert "its figures are upper bounds" in out


def _testbed_run(run_id, sweep_id, gpus, num_ps, update, images_per_sec, repetition):
    """A stored run of resnet50 at batch 32 on `gpus` test-bed nodes of one GPU each."""
    return run_row(
        run_id,
        sweep_id,
        system="testbed",
        gpus=gpus,
        num_workers=gpus,
        devices_per_worker=1,
        ps_on_worker_nodes=True,
        num_ps=num_ps,
        variable_update=update,
        model="resnet50",
        batch_size=32,
        repetition=repetition,
        images_per_sec=images_per_sec,
        hosts=[f"node{i}" for i in range(gpus)],
    )


def _small_sweep(db, sweep_id="small", truth_gb_s=1.5):
    """Runs of 1-4 GPUs (one GPU a node) by a known model whose link (1.5 GB/s) they never fill."""
    variables = Variables.of("resnet50")
    truth = sm.Fit(
        t1=0.25,
        batch_size=32,
        variables=variables,
        coefficients={"sync": 0.01, "bytes": 0.05, "local": 0.0, "workers": 0.001},
        bandwidth_gb_s=truth_gb_s,
        bandwidth_floor_gb_s=0,
        rms_relative_error=0,
        points=0,
    )
    conn = store.connect(db)
    for gpus in (1, 2, 4):
        for num_ps in range(1, gpus + 1):
            rate = truth.images_per_sec(Config(gpus, 1, num_ps, "parameter_server"))
            store.add_run(conn, _testbed_run(f"{gpus}-{num_ps}", sweep_id, gpus, num_ps, "parameter_server", rate, 0))
    conn.close()
    return truth


def test_the_planner_takes_the_link_the_sweeps_probe_measured(capsys, tmp_path):
    from dtfbench.results import network

    db = tmp_path / "results.sqlite"
    truth = _small_sweep(db)
    big = Config(64, 1, 16, "parameter_server")
    argv = ["--sweep", "small", "--db", str(db), "--gpus", "4,64", "--variable-update", "parameter_server", "--json"]

    # No probe recorded: the runs alone, and the range the link rates they allow give.
    code, out, err = run(capsys, *argv)
    blind = json.loads(out)
    assert code == 0, err
    assert blind["link"]["gb_s"] is None and "no network probe recorded for sweep small" in blind["link"]["source"]
    low, high = blind["counts"][-1]["range_images_per_sec"]
    best_truth = max(truth.images_per_sec(c) for c in forecast.candidates(64, 1, ["parameter_server"]))
    assert low < best_truth < high and blind["counts"][-1]["images_per_sec"] > 1.2 * best_truth
    code, text, _ = run(capsys, *argv[:-1])
    assert "range (link unknown)" in text and "cannot rule out any from" in text

    # The probe measured 1.5 GB/s incast and 1.7 point-to-point: the planner takes the lower.
    document = network.unknown("")
    document.update(status="ok", why=None, link_gb_s=1.7, incast_gb_s=1.5, rtt_ms=0.1)
    network.record(db, "small", document)
    code, out, err = run(capsys, *argv)
    told = json.loads(out)
    assert code == 0, err
    assert told["link"]["gb_s"] == 1.5 and "measured by sweep small's link probe" in told["link"]["source"]
    assert "range_images_per_sec" not in told["counts"][-1]
    assert told["counts"][-1]["images_per_sec"] == pytest.approx(best_truth, rel=0.05)
    assert truth.network_bound(big)
    assert not any(truth.network_bound(Config(g, 1, p, "parameter_server")) for g in (1, 2, 4) for p in range(1, g + 1))

    # --link-gb-s still overrides what was measured.
    code, out, _ = run(capsys, *argv, "--link-gb-s", "5")
    given = json.loads(out)
    assert given["link"] == {"gb_s": 5.0, "source": "--link-gb-s"}
    assert given["counts"][-1]["images_per_sec"] > 1.2 * best_truth
