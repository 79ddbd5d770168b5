"""dtfbench.report.stats: the t quantile, mean and 95% CI, best configuration, speedup, I/O overhead."""

import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats
from store_harness import study_row

from dtfbench.report import stats

# Student t quantiles from the usual printed table (3 decimals).
from dtfbench.results import store

T_975 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}
T_OTHER = [
    (0.95, 1, 6.314),
    (0.95, 2, 2.920),
    (0.95, 5, 2.015),
    (0.95, 10, 1.812),
    (0.95, 30, 1.697),
    (0.995, 1, 63.657),
    (0.995, 2, 9.925),
    (0.995, 4, 4.604),
    (0.995, 10, 3.169),
    (0.995, 30, 2.750),
    (0.9, 3, 1.638),
    (0.99, 7, 2.998),
]


@pytest.mark.parametrize("df, expected", sorted(T_975.items()))
def test_t_quantile_975_matches_the_table(df, expected):
    assert stats.t_quantile(0.975, df) == pytest.approx(expected, abs=6e-4)


@pytest.mark.parametrize("p, df, expected", T_OTHER)
def test_t_quantile_other_levels(p, df, expected):
    assert stats.t_quantile(p, df) == pytest.approx(expected, abs=6e-4)


def test_t_quantile_exact_values_and_limits():
    assert stats.t_quantile(0.975, 4) == pytest.approx(2.7764451052, abs=1e-9)
    assert stats.t_quantile(0.975, 1) == pytest.approx(12.7062047362, abs=1e-8)
    assert stats.t_quantile(0.975, 30) == pytest.approx(2.0422724563, abs=1e-9)
    assert stats.t_quantile(0.975, math.inf) == pytest.approx(1.959963985, abs=1e-9)
    assert stats.t_quantile(0.975, 1e6) == pytest.approx(1.959966, abs=1e-5)
    assert stats.t_quantile(0.5, 7) == 0.0
    assert stats.t_quantile(0.025, 4) == pytest.approx(-stats.t_quantile(0.975, 4))
    for bad_p, bad_df in ((0.0, 3), (1.0, 3), (0.9, 0), (0.9, -1)):
        with pytest.raises(ValueError):
            stats.t_quantile(bad_p, bad_df)


@settings(max_examples=60, deadline=None)
@given(p=st.floats(0.501, 0.9999), df=st.floats(0.5, 500))
def test_t_quantile_inverts_the_cdf(p, df):
    assert stats.t_cdf(stats.t_quantile(p, df), df) == pytest.approx(p, abs=1e-9)


def test_mean_ci():
    ci = stats.mean_ci([1, 2, 3, 4, 5])
    half = 2.7764451052 * statistics.stdev([1, 2, 3, 4, 5]) / math.sqrt(5)
    assert ci["mean"] == 3 and ci["n"] == 5
    assert ci["half_width"] == pytest.approx(half) and half == pytest.approx(1.9632, abs=1e-4)
    assert (ci["low"], ci["high"]) == pytest.approx((3 - half, 3 + half))
    one = stats.mean_ci([7.0])
    assert one["mean"] == 7.0 and one["half_width"] is None and one["low"] is None
    none = stats.mean_ci([])
    assert none["n"] == 0 and none["mean"] is None


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(1, 1e5), min_size=2, max_size=8))
def test_ci_holds_the_mean_and_widens_with_confidence(values):
    ci95 = stats.mean_ci(values)
    ci99 = stats.mean_ci(values, 0.99)
    assert ci95["low"] <= ci95["mean"] <= ci95["high"]
    assert ci99["half_width"] >= ci95["half_width"]


# --- a recorded sweep, as the store returns it ------------------------------------------------


def run(run_id, gpus, num_ps, update, rep, ips=None, *, system="testbed", data="synthetic", **config):
    """A run of sweep "sw"; `config`: reason, status, model, batch_size (tests/harness/store_harness.py)."""
    return study_row(run_id, "sw", system, gpus, num_ps, update, data, rep, ips, **config)


PS, DR = "parameter_server", "distributed_replicated"
SWEEP = [
    run("a1", 1, 1, PS, 1, 100.0),
    run("a2", 1, 1, PS, 2, 102.0),
    run("a3", 1, 1, PS, 3, 98.0),
    run("b1", 2, 1, PS, 1, 190.0),
    run("b2", 2, 1, PS, 2, 194.0),
    run("b3", 2, 1, PS, 3, reason="worker 1: peer ps:0 died"),
    run("c1", 2, 2, DR, 1, 195.0),
    run("c2", 2, 2, DR, 2, 197.0),
    run("c3", 2, 2, DR, 3, 199.0),
    # 4 GPUs: one configuration fails every time, the other succeeds once.
    run("d1", 4, 1, PS, 1, reason="timeout after 600 s"),
    run("d2", 4, 1, PS, 2, reason="worker 3: OOM"),
    run("e1", 4, 2, DR, 1, 360.0),
    run("e2", 4, 2, DR, 2, reason="timeout after 600 s"),
    # 8 GPUs: every configuration failed; one 'ok' row without a rate counts as failed too.
    run("f1", 8, 4, PS, 1, reason="worker 7: peer died"),
    run("f2", 8, 4, PS, 2, status="ok"),
    # real data
    run("g1", 1, 1, PS, 1, 90.0, data="real"),
    run("g2", 1, 1, PS, 2, 90.0, data="real"),
    run("h1", 2, 2, DR, 1, 180.0, data="real"),
    # a system whose 1-GPU baseline failed: no speedup
    run("i1", 1, 1, PS, 1, system="local", model="small_cnn", batch_size=32, reason="ps 0 exited 1"),
    run("i2", 2, 1, PS, 1, 50.0, system="local", model="small_cnn", batch_size=32),
]


@pytest.fixture(scope="module")
def stored_sweep(tmp_path_factory):
    """SWEEP written to a real store and read back: the rows exactly as the report gets them."""
    conn = store.connect(tmp_path_factory.mktemp("store") / "results.sqlite")
    for row in SWEEP:
        store.add_run(conn, row)
    return store.runs(conn)


def by_config(summaries, **where):
    (found,) = [s for s in summaries if all(s[k] == v for k, v in where.items())]
    return found


def test_summaries_mean_ci_min_max_and_failures(stored_sweep):
    summaries = stats.summarise(stored_sweep)
    assert len(summaries) == 10
    one = by_config(summaries, system="testbed", data="synthetic", gpus=1)
    assert one["images_per_sec"] == pytest.approx(100.0)
    assert one["ci_half_width"] == pytest.approx(4.303 * 2 / math.sqrt(3), rel=1e-3)
    assert (one["ci_low"], one["ci_high"]) == pytest.approx((100 - 4.96832, 100 + 4.96832), abs=1e-4)
    assert (one["images_per_sec_min"], one["images_per_sec_max"]) == (98.0, 102.0)
    assert (one["runs"], one["n_ok"], one["failed"], one["status"]) == (3, 3, 0, "ok")
    # The Summitdev study's variability (Fig. 4b): slowest against fastest over the mean, and the CV.
    assert one["spread"] == pytest.approx(4 / 100) and one["cv"] == pytest.approx(2 / 100)

    ps2 = by_config(summaries, system="testbed", data="synthetic", gpus=2, num_ps=1)
    assert ps2["images_per_sec"] == pytest.approx(192.0)  # the failed repetition is left out
    assert (ps2["runs"], ps2["n_ok"], ps2["failed"]) == (3, 2, 1)
    assert ps2["ci_half_width"] == pytest.approx(12.7062 * statistics.stdev([190, 194]) / math.sqrt(2), rel=1e-4)
    assert ps2["reasons"] == ["worker 1: peer ps:0 died"]
    assert ps2["failures"] == [
        {"run_id": "b3", "sweep_id": "sw", "repetition": 3, "reason": "worker 1: peer ps:0 died"}
    ]
    assert ps2["images_per_sec_per_worker"] == pytest.approx(96.0)

    dead = by_config(summaries, system="testbed", data="synthetic", gpus=4, num_ps=1)
    assert dead["status"] == "failed" and dead["images_per_sec"] is None and dead["ci_low"] is None
    assert dead["reasons"] == ["timeout after 600 s", "worker 3: OOM"]

    single = by_config(summaries, system="testbed", data="synthetic", gpus=4, num_ps=2)
    assert single["images_per_sec"] == 360.0 and single["ci_half_width"] is None  # one repetition: no CI
    assert single["spread"] is None and single["cv"] is None  # nor a spread
    assert (single["n_ok"], single["failed"]) == (1, 1)

    eight = by_config(summaries, system="testbed", data="synthetic", gpus=8)
    assert eight["status"] == "failed" and eight["failed"] == 2
    assert eight["reasons"] == ["no images/sec recorded", "worker 7: peer died"]


def test_best_configuration_per_gpu_count(stored_sweep):
    best = stats.best_configurations(stats.summarise(stored_sweep))
    keyed = {(b["system"], b["data"], b["gpus"]): b for b in best}
    # Ordered: system, then synthetic before real, then GPUs.
    assert list(keyed) == [
        ("testbed", "synthetic", 1),
        ("testbed", "synthetic", 2),
        ("testbed", "synthetic", 4),
        ("testbed", "synthetic", 8),
        ("testbed", "real", 1),
        ("testbed", "real", 2),
        ("local", "synthetic", 1),
        ("local", "synthetic", 2),
    ]
    two = keyed["testbed", "synthetic", 2]
    assert (two["num_ps"], two["variable_update"], two["images_per_sec"]) == (2, DR, pytest.approx(197.0))
    assert (two["configurations"], two["failed_configurations"], two["runs"], two["n_ok"]) == (2, 0, 3, 3)
    assert two["speedup"] == pytest.approx(1.97) and two["efficiency"] == pytest.approx(0.985)
    # 4 GPUs: the configuration that always failed is never best, however the other did.
    four = keyed["testbed", "synthetic", 4]
    assert (four["status"], four["num_ps"], four["variable_update"]) == ("ok", 2, DR)
    assert four["images_per_sec"] == 360.0 and four["failed_configurations"] == 1
    assert four["efficiency"] == pytest.approx(0.9)
    # 8 GPUs: everything failed: listed as failed, no best, no speedup, the reasons kept.
    eight = keyed["testbed", "synthetic", 8]
    assert eight["status"] == "failed" and eight["best_key"] is None
    assert eight["num_ps"] is None and eight["images_per_sec"] is None and eight["speedup"] is None
    assert eight["reasons"] == ["no images/sec recorded", "worker 7: peer died"]
    # Real data has its own baseline.
    assert keyed["testbed", "real", 2]["speedup"] == pytest.approx(2.0)
    # No successful 1-GPU run: no speedup, no efficiency.
    assert keyed["local", "synthetic", 1]["status"] == "failed"
    assert keyed["local", "synthetic", 2]["speedup"] is None and keyed["local", "synthetic", 2]["efficiency"] is None


def test_summaries_carry_speedup_against_the_best_one_gpu_configuration(stored_sweep):
    summaries = stats.summarise(stored_sweep)
    ps2 = by_config(summaries, system="testbed", data="synthetic", gpus=2, num_ps=1)
    assert ps2["speedup"] == pytest.approx(1.92) and ps2["efficiency"] == pytest.approx(0.96)


def test_io_overhead_from_the_best_configurations(stored_sweep):
    best = stats.best_configurations(stats.summarise(stored_sweep))
    rows = {r["gpus"]: r for r in stats.io_overhead_rows(best)}
    assert sorted(rows) == [1, 2]  # 4 and 8 GPUs have no real-data result
    assert rows[1]["io_overhead"] == pytest.approx(10.0)
    assert rows[2]["io_overhead"] == pytest.approx((197 - 180) / 197 * 100)
    assert (rows[2]["synthetic_num_ps"], rows[2]["real_variable_update"]) == (2, DR)


def test_io_overhead_formula():
    assert stats.io_overhead(200.0, 150.0) == pytest.approx(25.0)
    assert stats.io_overhead(100.0, 101.0) == pytest.approx(-1.0)
    assert stats.io_overhead(100.0, 101.0, clamp_at_zero=True) == 0.0  # as the notebook plotted
    assert stats.io_overhead(None, 1.0) is None and stats.io_overhead(0.0, 1.0) is None
    assert stats.relative_difference(110.0, 100.0) == pytest.approx(10.0)
    assert stats.relative_difference(None, 100.0) is None


def test_ties_go_to_the_configuration_seen_first():
    rows = [run("x", 2, 1, PS, 1, 100.0), run("y", 2, 2, DR, 1, 100.0)]
    (best,) = stats.best_configurations(stats.summarise(rows))
    assert (best["num_ps"], best["variable_update"]) == (1, PS)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 4), st.sampled_from([PS, DR]), st.one_of(st.none(), st.floats(1, 1000))),
        min_size=1,
        max_size=12,
    )
)
def test_best_is_the_highest_mean_of_a_configuration_that_succeeded(draws):
    rows = [
        run(f"r{i}", 4, num_ps, update, i, ips, reason=None if ips else "boom")
        for i, (num_ps, update, ips) in enumerate(draws)
    ]
    summaries = stats.summarise(rows)
    (best,) = stats.best_configurations(summaries)
    ok = [s for s in summaries if s["status"] == "ok"]
    if not ok:
        assert best["status"] == "failed" and best["images_per_sec"] is None
    else:
        assert best["status"] == "ok"
        assert best["images_per_sec"] == max(s["images_per_sec"] for s in ok)
        for s in ok:
            assert s["images_per_sec_min"] <= s["images_per_sec"] <= s["images_per_sec_max"]


def test_a_workload_pinned_to_a_commit_is_labelled_once_by_it():
    sha = "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741"
    assert (
        stats.workload_label({"workload": "cscs2017", "workload_ref": sha, "workload_commit": sha})
        == "cscs2017@a0d3d61f4f89"
    )
    assert (
        stats.workload_label({"workload": "cscs2017", "workload_ref": "master", "workload_commit": sha})
        == "cscs2017@master (a0d3d61f4f89)"
    )


# PS or all-reduce: the best PS configuration beside all-reduce per GPU count.

PS_AND_RING = [
    # (num_ps, variable_update, images/sec of the repetitions)
    (1, "parameter_server", [100.0, 104.0, 98.0]),
    (2, "distributed_replicated", [120.0, 118.0, 125.0]),
    (0, "collective_all_reduce", [140.0, 138.0, 145.0]),
]


def _mode_rows(configs, gpus=8, data="synthetic"):
    return [
        study_row(f"r{gpus}{data}{ps}{update}{rep}", "s", "aws", gpus, ps, update, data, rep, ips)
        for ps, update, values in configs
        for rep, ips in enumerate(values, 1)
    ]


def test_welch_interval_is_scipys():
    # scipy's Welch t-test from the raw values gives the same interval of the difference.
    ring, ps = [140.0, 138.0, 145.0], [120.0, 118.0, 125.0, 119.0]
    a, b = (stats.mean_ci(v) | {"images_per_sec": statistics.fmean(v), "n_ok": len(v)} for v in (ring, ps))
    low, high = stats.difference_ci(a, b)
    expected = scipy_stats.ttest_ind(ring, ps, equal_var=False).confidence_interval(0.95)
    assert (low, high) == pytest.approx((expected.low, expected.high), rel=1e-9)


def test_ps_or_all_reduce_names_the_best_ps_configuration_and_the_winner():
    rows = _mode_rows(PS_AND_RING) + _mode_rows(
        PS_AND_RING[:1] + [(0, "collective_all_reduce", [99.0, 103.0, 101.0])], gpus=4
    )
    four, eight = stats.ps_or_all_reduce(stats.summarise(rows))
    assert (eight["gpus"], eight["ps_num_ps"], eight["ps_variable_update"]) == (8, 2, "distributed_replicated")
    assert eight["winner"] == "all-reduce"
    ps_mean, ring_mean = statistics.fmean([120.0, 118.0, 125.0]), statistics.fmean([140.0, 138.0, 145.0])
    assert eight["all_reduce_vs_ps_pct"] == pytest.approx((ring_mean - ps_mean) / ps_mean * 100)
    assert (
        0 < eight["all_reduce_vs_ps_ci_low_pct"] < eight["all_reduce_vs_ps_pct"] < eight["all_reduce_vs_ps_ci_high_pct"]
    )
    # 4 GPUs: the two means lie within each other's noise, so the interval holds 0.
    assert four["gpus"] == 4 and four["winner"] == "neither"
    assert four["all_reduce_vs_ps_ci_low_pct"] < 0 < four["all_reduce_vs_ps_ci_high_pct"]


def test_ps_or_all_reduce_with_one_repetition_has_no_interval_and_only_counts_that_ran_both():
    one_each = [(1, "parameter_server", [100.0]), (0, "collective_all_reduce", [90.0])]
    rows = _mode_rows(one_each) + _mode_rows(PS_AND_RING[:2], gpus=16)
    (row,) = stats.ps_or_all_reduce(stats.summarise(rows))
    assert row["gpus"] == 8 and row["winner"] == "PS (no interval)"
    assert row["all_reduce_vs_ps_ci_low_pct"] is None and row["all_reduce_vs_ps_pct"] == pytest.approx(-10.0)
