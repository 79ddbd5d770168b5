"""dtfbench.forecast.cost_guard: the predicted cost of a planned sweep on EC2 and the max_cost_usd refusal."""

import math
import re

import pytest

from dtfbench.forecast import cost_guard, pricing
from dtfbench.forecast import predict as forecast

STUDY = {
    "model": "inception3",
    "batch_size": 64,
    "variable_update": "parameter_server,distributed_replicated",
    "num_ps": "",
    "repetitions": 5,
    "warmup_steps": 10,
    "steps": 100,
}


def test_the_study_sweep_costs_what_the_planner_says():
    """Expanded as run-benchmark.yml would, priced run by run: the planner's figure for the same sweep."""
    runs = cost_guard.planned_runs(STUDY, 2, 1)
    assert {r["gpus"] for r in runs} == {1, 2} and len(runs) == 2 * 5 * (1 + 2)
    got = cost_guard.estimate(runs, "p2.xlarge", 2, 1, setup_minutes=30)
    fit = forecast.calibrate(forecast.published_observations("aws-p2.xlarge"))
    planner = forecast.sweep_estimate(fit, [1, 2], 1, price=pricing.price_for("p2.xlarge"))
    assert got.runs == planner.runs and got.hours == pytest.approx(planner.hours)
    assert got.cost_usd == pytest.approx(planner.cost_usd) == pytest.approx(2 * got.hours * 0.9)
    assert "published p2.xlarge table" in got.basis and f"${got.cost_usd:,.2f} = 2 x p2.xlarge" in got.message()


def test_all_reduce_without_its_runs_is_priced_as_distributed_replicated_not_below():
    """The published tables hold no all-reduce run: a ring without its fitted per-hop cost would
    price a 64-GPU all-reduce sweep at the 1-GPU step; it is timed as distributed_replicated with
    one PS instead."""
    sweep = dict(STUDY, repetitions=1)
    all_reduce = cost_guard.planned_runs(dict(sweep, variable_update="collective_all_reduce", num_ps=0), 64, 1)
    replicated = cost_guard.planned_runs(dict(sweep, variable_update="distributed_replicated", num_ps=1), 64, 1)
    ring = cost_guard.estimate(all_reduce, "p2.xlarge", 64, 1, setup_minutes=0)
    ps = cost_guard.estimate(replicated, "p2.xlarge", 64, 1, setup_minutes=0)
    assert ring.runs == ps.runs and ring.cost_usd == pytest.approx(ps.cost_usd)


def test_only_runs_still_to_do_count_and_batch_scales_the_steps():
    runs = cost_guard.planned_runs(dict(STUDY, num_ps=1, variable_update="parameter_server"), 1, 8)
    assert [r["gpus"] for r in runs][::5] == [1, 2, 4, 8]  # 1, 2, 4 ... up to the cluster's GPUs
    full = cost_guard.estimate(runs, "p2.8xlarge", 1, 8, run_overhead_s=0)
    half = cost_guard.estimate(
        [dict(r, done=i % 2 == 0) for i, r in enumerate(runs)], "p2.8xlarge", 1, 8, run_overhead_s=0
    )
    assert half.runs == len(runs) // 2 and 0 < half.cost_usd < full.cost_usd
    double = cost_guard.estimate([dict(r, batch_size=128) for r in runs], "p2.8xlarge", 1, 8, run_overhead_s=0)
    assert double.cost_usd == pytest.approx(2 * full.cost_usd) and "scaled by batch size" in double.basis


def test_checkpoints_add_their_saves_at_the_rate_given_or_the_local_disks():
    """Issue 55: ResNet-50 (25.6 M variables, 0.103 GB; 0.205 GB with momentum's slots) saved every
    25 of 100 steps: 4 saves a run, each GB / rate."""
    sweep = dict(STUDY, model="resnet50", repetitions=1, num_ps=1, variable_update="parameter_server", gpus=1)
    plain = cost_guard.planned_runs(sweep, 1, 1)
    saved = [dict(r, checkpoint_every_steps=25, optimizer="momentum") for r in plain]
    before = cost_guard.estimate(plain, "p2.xlarge", 1, 1, run_overhead_s=0)
    local = cost_guard.estimate(saved, "p2.xlarge", 1, 1, run_overhead_s=0)
    shared = cost_guard.estimate(saved, "p2.xlarge", 1, 1, run_overhead_s=0, checkpoint_gb_per_s=0.01)
    gb = 25_636_712 * 4 * 2 / 1e9
    assert (local.hours - before.hours) * 3600 == pytest.approx(4 * gb / cost_guard.CHECKPOINT_GB_PER_S)
    assert (shared.hours - before.hours) * 3600 == pytest.approx(4 * gb / 0.01)
    assert "checkpoints add" in local.basis and "TF's save to a local disk" in local.basis
    assert "checkpoints add" not in before.basis and "(saved at 0.01 GB/s: given)" in shared.basis
    # Every S seconds: as many saves as the run's seconds hold.
    timed = dict(plain[0], checkpoint_every_secs=10)
    assert cost_guard.checkpoint_seconds(timed, 95.0, 1.0) == pytest.approx(9 * 25_636_712 * 4 / 1e9)
    with pytest.raises(cost_guard.GuardError, match=re.escape("checkpoint_gb_per_s='fast': give the rate")):
        cost_guard.estimate(saved, "p2.xlarge", 1, 1, checkpoint_gb_per_s="fast")


@pytest.mark.parametrize("itype, gpus, table", [("g5.xlarge", 1, "p2.xlarge"), ("p3.8xlarge", 4, "p2.8xlarge")])
def test_a_type_without_a_table_says_what_its_estimate_is_based_on(itype, gpus, table):
    runs = cost_guard.planned_runs(dict(STUDY, num_ps=1), 2, gpus)
    got = cost_guard.estimate(runs, itype, 2, gpus)
    assert got.basis.startswith(f"no published table of {itype}: the scaling model fitted to the study's {table} table")
    assert got.usd_per_hour == pricing.price_for(itype).usd_per_hour


def test_a_given_price_replaces_the_table_and_prices_an_unknown_type():
    runs = cost_guard.planned_runs(dict(STUDY, num_ps=1), 1, 1)
    got = cost_guard.estimate(runs, "g9.xlarge", 3, 1, price_usd_per_hour="2")
    assert got.usd_per_hour == 2 and got.cost_usd == pytest.approx(3 * got.hours * 2)
    assert got.price_note == "price_usd_per_hour"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda runs: cost_guard.estimate(runs, "g9.xlarge", 1, 1), "no price for instance type 'g9.xlarge'"),
        (lambda runs: cost_guard.estimate(runs, "", 1, 1), "the nodes' instance type is not known"),
        (
            lambda runs: cost_guard.estimate(runs, "p2.xlarge", 1, 1, price_usd_per_hour=-1),
            "price_usd_per_hour=-1 must be a number above 0",
        ),
        (
            lambda runs: cost_guard.estimate(runs, "p2.xlarge", 1, 1, price_usd_per_hour=0),
            "price_usd_per_hour=0 must be a number above 0",
        ),
        (
            lambda runs: cost_guard.estimate(runs, "p2.xlarge", 1, 1, price_usd_per_hour="cheap"),
            "price_usd_per_hour=cheap must be a number above 0",
        ),
        (lambda runs: cost_guard.node_type(["p2.xlarge", "g5.xlarge"], False), "several instance types"),
        (lambda runs: cost_guard.planned_runs(dict(STUDY, gpus=[3]), 1, 2), "the planned sweep (sweep_* variables)"),
    ],
)
def test_bad_inputs_are_one_clear_error_each(call, message):
    with pytest.raises(cost_guard.GuardError, match=re.escape(message)):
        call(cost_guard.planned_runs(dict(STUDY, num_ps=1), 1, 1))


def test_a_negative_price_in_a_price_file_is_refused(tmp_path):
    prices = tmp_path / "prices.csv"
    prices.write_text("instance_type,region,usd_per_hour,as_of\np2.xlarge,us-east-1,-0.9,2026-01-01\n")
    with pytest.raises(cost_guard.GuardError, match=r"line 2 \(p2.xlarge\): price '-0.9' must be a number above 0"):
        cost_guard.estimate([], "p2.xlarge", 1, 1, price_file=str(prices))


def test_check_refuses_above_max_cost_usd_naming_the_figure_and_the_variable():
    got = cost_guard.estimate(
        cost_guard.planned_runs(dict(STUDY, num_ps=1), 2, 8), "p2.8xlarge", 2, 8, setup_minutes=30
    )
    cost_guard.check(got)  # the default, 100 USD, lets it through
    assert got.cost_usd < pricing.DEFAULT_MAX_COST_USD
    with pytest.raises(pricing.CostLimitError) as refused:
        cost_guard.check(got, 10)
    assert str(refused.value) == (
        f"the planned sweep is predicted to cost ${got.cost_usd:,.2f}, above "
        f"max_cost_usd=$10.00; raise it (-e max_cost_usd={math.ceil(got.cost_usd)}) "
        "or plan a smaller sweep"
    )
    cost_guard.check(got, math.ceil(got.cost_usd))


def test_doubling_gpus():
    assert cost_guard.doubling_gpus(1) == [1]
    assert cost_guard.doubling_gpus(16) == [1, 2, 4, 8, 16]
    assert cost_guard.doubling_gpus(12) == [1, 2, 4, 8, 12]
