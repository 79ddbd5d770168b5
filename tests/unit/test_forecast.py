"""python -m dtfbench.forecast: the planner on the published tables, on a sweep in the store, and its refusals."""

import json

import pytest

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
        (["--system", "aws-p2.xlarge", "--gpus", "8", "--price-usd-per-hour", "-1"], "must be a number >= 0"),
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


def test_sweep_with_no_data_is_refused(capsys, tmp_path):
    db = tmp_path / "results.sqlite"
    store.connect(db).close()
    code, _, err = run(capsys, "--sweep", "nothing", "--db", str(db), "--gpus", "8")
    assert code == 2 and "sweep 'nothing'" in err and "nothing to calibrate from" in err


def test_measure_small_predict_large_from_the_store(capsys, tmp_path):
    """A sweep of 1-8 GPUs recorded in the store by a known model; the planner predicts 32 and 64."""
    variables = Variables.of("resnet50")
    truth = sm.Fit(
        t1=0.25,
        batch_size=32,
        variables=variables,
        coefficients={"sync": 0.01, "bytes": 0.05, "local": 0.0, "workers": 0.001},
        bandwidth_gb_s=0.6,
        bandwidth_floor_gb_s=0,
        rms_relative_error=0,
        points=0,
    )
    db = tmp_path / "results.sqlite"
    conn = store.connect(db)
    for gpus in (1, 2, 4, 8):
        for update in sm.VARIABLE_UPDATES:
            for num_ps in range(1, gpus + 1):
                rate = truth.images_per_sec(Config(gpus, 1, num_ps, update))
                for rep, wobble in enumerate((0.99, 1.01)):
                    store.add_run(
                        conn,
                        {
                            "run_id": f"{gpus}-{update}-{num_ps}-{rep}",
                            "sweep_id": "small",
                            "system": "testbed",
                            "gpus": gpus,
                            "num_workers": gpus,
                            "devices_per_worker": 1,
                            "ps_on_worker_nodes": True,
                            "num_ps": num_ps,
                            "variable_update": update,
                            "data": "synthetic",
                            "model": "resnet50",
                            "batch_size": 32,
                            "repetition": rep,
                            "status": "ok",
                            "images_per_sec": rate * wobble,
                            "hosts": [f"node{i}" for i in range(gpus)],
                        },
                    )
    conn.close()
    code, out, err = run(capsys, "--sweep", "small", "--db", str(db), "--gpus", "8,32,64", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["model"] == "resnet50" and result["batch_size"] == 32 and result["gpus_per_node"] == 1
    assert result["fit"]["bandwidth_gb_s"] == pytest.approx(0.6, rel=0.05)
    for row in result["counts"]:
        best_truth = max(truth.images_per_sec(c) for c in forecast.candidates(row["gpus"], 1))
        assert row["images_per_sec"] == pytest.approx(best_truth, rel=0.05)
