"""The honest validation of #18 item 3: the model against the study's tables, beside the Optimus form.

Deterministic (no timing): the figures are the README's (section "Planning: predicted
scaling"). Asserted: the goals reached. Not reached, and pinned so that a change shows:
the maximum extrapolation error (p2.xlarge 32 -> 64, where nothing in the rows up to 32
shows the link limit that sets the step at 64).
"""

import pytest
from store_harness import run_row

from dtfbench.forecast import adaptive
from dtfbench.forecast import validation as v


@pytest.fixture(scope="module")
def extrapolations():
    return v.extrapolations()


@pytest.fixture(scope="module")
def loo():
    return v.leave_one_out()


def by_case(rows, key):
    return {(r["system"], r["gpus"]): round(r[key], 1) for r in rows}


def test_the_baseline_is_the_issues(extrapolations):
    # The Optimus form's errors quoted in the issue, computed again in this run.
    assert [abs(e) for e in by_case(extrapolations, "baseline_error").values()] == [
        1.9,
        3.5,
        10.8,
        30.4,
        23.4,
        5.2,
        46.3,
        32.6,
        4.9,
        7.2,
        8.8,
        6.6,
    ]


def test_extrapolation_median_beats_the_baseline_and_the_goal(extrapolations):
    s = v.summary(extrapolations)
    assert s["cases"] == 12
    assert s["model_median"] <= 6.0 < s["baseline_median"]
    assert s["model_median"] == pytest.approx(2.1, abs=0.05)


def test_extrapolation_errors_as_reported(extrapolations):
    assert list(by_case(extrapolations, "model_error").values()) == [
        -1.1,
        2.4,
        -1.6,
        32.2,
        5.2,
        -1.7,
        48.1,
        -0.4,
        2.9,
        1.0,
        -6.1,
        1.8,
    ]
    # Better than the baseline in 10 of 12 cases; the two saturation onsets (Piz Daint 128,
    # p2.xlarge 64) it misses like the baseline does, by 1.8 points more.
    better = [r for r in extrapolations if abs(r["model_error"]) < abs(r["baseline_error"])]
    assert len(better) == 10
    assert v.summary(extrapolations)["model_max"] == pytest.approx(48.1, abs=0.05)  # goal 25: not reached


def test_leave_one_out_beats_the_baseline(loo):
    s = v.summary(loo)
    assert s["cases"] == 18
    assert s["model_median"] < s["baseline_median"] and s["model_max"] < s["baseline_max"]
    assert s["model_max"] <= 25.0
    assert (round(s["model_median"], 1), round(s["model_max"], 1)) == (0.8, 1.9)


def test_p2_xlarge_64_to_128_is_flagged_not_worth_it():
    verdict = v.doubling_verdict("aws-p2.xlarge", 64)
    assert verdict["worth_it"] is False and verdict["network_bound"]
    assert "64 -> 128 GPUs: not worth it" in verdict["verdict"]
    # and the p2.8xlarge, whose nodes add up 8 GPUs before sending, still scales there
    assert v.doubling_verdict("aws-p2.8xlarge", 64)["worth_it"] is True


def test_the_command_prints_every_error(capsys):
    assert v.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("| fit <= ") == 12 and out.count("| leave out |") == 18
    assert "model median 2.1%, max 48.1%; Optimus form median 8.0%, max 46.3%" in out


def ps_on_its_own_host(rates, batch, variable_bytes, **fields):
    """A sweep's ok runs of `trivial`, {gpus: images/sec}: a worker a host, 1 PS on a host after them."""
    return [
        run_row(
            f"r{g}",
            gpus=g,
            num_workers=g,
            devices_per_worker=1,
            ps_on_worker_nodes=False,
            model="trivial",
            batch_size=batch,
            images_per_sec=rate,
            hosts=[f"node{i}" for i in range(g + 1)],
            worker_results=[{"ps_bytes": [variable_bytes]}],
            **fields,
        )
        for g, rate in rates.items()
    ]


def test_a_sweep_past_its_network_onset_needs_the_link_to_be_predicted():
    # Made-up runs by a known truth: 1 PS on a node of its own, step = max(compute, the PS's
    # bytes / link). 1 and 2 GPUs never fill the link, 4 do: fitted on <= 2, only the
    # measured link puts the onset where it is; without it the range printed must hold it.
    variable_bytes, batch, t1, link = 3.072e6, 512, 0.6, 0.012
    truth = {g: g * batch / max(t1, g * variable_bytes / 1e9 / link) for g in (1, 2, 4)}
    rows = ps_on_its_own_host(truth, batch, variable_bytes)
    result = v.sweep_extrapolation(rows, "trivial", batch, 2, link)
    (case,) = result["cases"]
    assert case["gpus"] == 4 and case["measured"] == pytest.approx(truth[4])
    assert case["network_bound_with_link"] and case["error_with_link"] == pytest.approx(0, abs=0.01)
    # With no link, 1 and 2 GPUs scale perfectly: 4 GPUs predicted at the 1-GPU step, 71% high.
    assert case["error_without_link"] == pytest.approx(4 * variable_bytes / 1e9 / link / t1 - 1, rel=0.01)
    assert case["inside_range"]
    assert result["fit_with_link"]["bandwidth_gb_s"] == pytest.approx(link)


def test_an_all_reduce_sweep_is_fitted_on_the_bytes_its_ring_reduced():
    # Made-up runs of a ring by a known truth: step = max(compute, 2(n-1)/n S / link) + a cost
    # per hop x 2(n-1). No PS reports the variables' bytes: the workers' variable_bytes
    # (what the ring reduced a step) size the model. Fitted on 1 and 2 GPUs with the link,
    # 4 GPUs is network-bound; 2 GPUs alone cannot tell a cost per hop from a fixed one per
    # step, so the prediction lies between the two readings of that one overhead.
    variable_bytes, batch, t1, link, hop = 3.072e6, 512, 0.02, 0.012, 0.01
    transfer = {g: 2 * (g - 1) / g * variable_bytes / 1e9 / link for g in (1, 2, 4)}
    truth = {g: g * batch / (max(t1, transfer[g]) + hop * 2 * (g - 1)) for g in (1, 2, 4)}
    rows = [
        run_row(
            f"r{g}",
            gpus=g,
            num_workers=g,
            num_ps=0,
            variable_update="collective_all_reduce",
            devices_per_worker=1,
            model="trivial",
            batch_size=batch,
            images_per_sec=rate,
            hosts=[f"node{i}" for i in range(g)],
            worker_results=[{"ps_bytes": [], "variable_bytes": variable_bytes}] * g,
        )
        for g, rate in truth.items()
    ]
    assert adaptive.variables_of("trivial", rows).total_bytes == variable_bytes
    result = v.sweep_extrapolation(rows, "trivial", batch, 2, link)
    (case,) = result["cases"]
    assert case["gpus"] == 4 and case["variable_update"] == "collective_all_reduce"
    assert case["network_bound_with_link"] and result["fit_with_link"]["all_reduce_fitted"]
    overhead_at_2 = 2 * hop
    as_hops = 4 * batch / (transfer[4] + 3 * overhead_at_2)  # all of it a cost per hop (x3 at 4)
    as_fixed = 4 * batch / (transfer[4] + overhead_at_2)  # all of it a cost per step
    assert as_hops * 0.999 <= case["with_link"] <= as_fixed * 1.001, (case, as_hops, truth[4], as_fixed)
    assert as_hops <= truth[4] <= as_fixed


@pytest.mark.parametrize(
    "sitting, rates, link_mbit, fluid_error",
    [
        # make bench BENCH=netprobe-planner, 3 repetitions (docs/network.md, Figures)
        ("benchmark", {1: 956, 2: 1706, 4: 1582}, 94.3, 0.17),
        # the onset test's one repetition on another machine (docs/network.md)
        ("test", {1: 975, 2: 1497, 4: 1766}, 94.9, -0.03),
    ],
)
def test_past_an_asynchronous_onset_the_planner_predicts_random_turns(sitting, rates, link_mbit, fluid_error):
    # N3's measured sittings: 5 test-bed hosts at 100 Mbit/s, 1 PS on a host of its own,
    # asynchronous workers (cross_replica_sync off), trivial at 16 px (3.07 MB), batch 512.
    # Fitted on 1 and 2 GPUs with the probe's link, 4 GPUs within 15% in both; recorded as
    # synchronous (the fluid bound, what the planner did before it knew) the same runs miss the
    # benchmark's sitting by 17%. With no link, the range holds both.
    def rows(synchronous):
        return ps_on_its_own_host(rates, 512, 3.07e6, cross_replica_sync=int(synchronous))

    link = link_mbit / 8e3
    result = v.sweep_extrapolation(rows(False), "trivial", 512, 2, link)
    (case,) = result["cases"]
    assert result["fit_with_link"]["asynchronous"] and case["network_bound_with_link"]
    assert abs(case["error_with_link"]) <= 0.15, (sitting, case)
    assert case["inside_range"] and case["error_without_link"] > 0.5, (sitting, case)
    (fluid,) = v.sweep_extrapolation(rows(True), "trivial", 512, 2, link)["cases"]
    assert fluid["error_with_link"] == pytest.approx(fluid_error, abs=0.01)
    assert case["with_link"] < fluid["with_link"]
