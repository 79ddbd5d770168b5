"""dtfbench.forecast.scaling_model: the bytes of a layout, and the fit on made-up data whose answer is known."""

import dataclasses
import math

import pytest

from dtfbench.forecast import scaling_model as sm
from dtfbench.forecast.scaling_model import Config, Observation, Variables

ONE_GB = Variables(1e9, 0.0)


@pytest.mark.parametrize(
    "config, variables, expected",
    [
        # one node: nothing crosses a NIC
        (Config(8, 8, 1, "parameter_server"), ONE_GB, 0.0),
        # 2 single-GPU nodes, 1 PS on node 0: node 1 sends S; node 0's PS receives S from node 1
        (Config(2, 1, 1, "parameter_server"), ONE_GB, 1.0),
        # 4 nodes, 4 PSs: a node sends 3/4 S away and its PS receives S/4 from 3 others
        (Config(4, 1, 4, "parameter_server"), ONE_GB, 0.75 + 3 * 0.25),
        # ... unless one variable is half the model: its PS receives it whole from every other node
        (Config(4, 1, 4, "parameter_server"), Variables(1e9, 0.5e9), 0.75 + 3 * 0.5),
        # 2 nodes of 8 GPUs, 1 PS: parameter_server sends every GPU's gradients ...
        (Config(16, 8, 1, "parameter_server"), ONE_GB, 8.0),
        # ... distributed_replicated adds up a node's GPUs first: one copy per node
        (Config(16, 8, 1, "distributed_replicated"), ONE_GB, 1.0),
        # PSs on nodes of their own: the PS node receives S from both workers
        (Config(2, 1, 1, "parameter_server", ps_on_worker_nodes=False), ONE_GB, 2.0),
        # ring all-reduce over 4 nodes: 2 (n-1)/n S through every NIC, no PS incast
        (Config(4, 1, 0, "collective_all_reduce"), ONE_GB, 1.5),
        (Config(64, 1, 0, "collective_all_reduce"), Variables(1e9, 0.5e9), 2 * 63 / 64),
        # 2 nodes of 8 GPUs: the ring is over the nodes
        (Config(16, 8, 0, "collective_all_reduce"), ONE_GB, 1.0),
        (Config(8, 8, 0, "collective_all_reduce"), ONE_GB, 0.0),
    ],
)
def test_node_bytes(config, variables, expected):
    assert sm.node_bytes(config, variables) == pytest.approx(expected)


def test_more_ps_stop_helping_at_the_largest_variable():
    inception = Variables.of("inception3")
    nics = [sm.node_bytes(Config(64, 1, p, "parameter_server"), inception) for p in (4, 8, 16, 32, 64)]
    assert nics[0] > nics[1] > nics[2]  # spreading the variables helps ...
    assert nics[3] == pytest.approx(nics[2], rel=0.1) and nics[4] == pytest.approx(
        nics[3], rel=0.05
    )  # ... until one PS holds the classifier whole


TRUE = dict(t1=0.5, sync=0.02, bytes=0.3, local=0.01, workers=0.002, ring=0.004)


def made_up(bandwidth, configs, variables=ONE_GB, batch=64):
    """Observations from a known model (the answer the fit must find)."""
    fit = sm.Fit(
        t1=TRUE["t1"],
        batch_size=batch,
        variables=variables,
        coefficients={k: TRUE[k] for k in sm.FEATURES},
        bandwidth_gb_s=bandwidth,
        bandwidth_floor_gb_s=0.0,
        rms_relative_error=0.0,
        points=0,
    )
    return fit, [Observation(c, fit.images_per_sec(c)) for c in configs]


CONFIGS = [
    Config(g, 4, p, u)
    for g in (1, 2, 4, 8, 16, 32, 64)
    for u in sm.PS_UPDATES
    for p in sorted({1, max(1, g // 8), max(1, g // 4)})
] + [Config(g, 4, 0, sm.ALL_REDUCE) for g in (1, 2, 4, 8, 16, 32, 64)]


def test_fit_recovers_known_parameters_and_link():
    truth, observations = made_up(2.0, CONFIGS)
    assert any(truth.network_bound(o.config) for o in observations)  # the link sets some steps
    assert not all(truth.network_bound(o.config) for o in observations)
    fitted = sm.fit(observations, 64, ONE_GB)
    assert fitted.t1 == pytest.approx(TRUE["t1"])
    assert fitted.bandwidth_gb_s == pytest.approx(2.0, rel=0.03)  # the grid's step is 2.3%
    for key in sm.FEATURES:
        assert fitted.coefficients[key] == pytest.approx(TRUE[key], rel=0.05, abs=1e-4)
    assert fitted.rms_relative_error < 0.01
    target = Config(256, 4, 32, "distributed_replicated")
    assert fitted.images_per_sec(target) == pytest.approx(truth.images_per_sec(target), rel=0.03)


def test_fit_without_a_network_limit_keeps_none():
    truth, observations = made_up(math.inf, CONFIGS)
    fitted = sm.fit(observations, 64, ONE_GB)
    assert fitted.bandwidth_gb_s == math.inf and fitted.bandwidth_floor_gb_s > 0
    assert "no network limit" in fitted.notes[0]
    for key in sm.FEATURES:
        assert fitted.coefficients[key] == pytest.approx(TRUE[key], rel=1e-3, abs=1e-6)


def test_fit_is_non_negative():
    # Runs that get *faster* with more bytes: least squares would take a negative per-byte
    # cost; NNLS keeps every cost >= 0.
    obs = [Observation(Config(1, 1, 1, "parameter_server"), 100.0)]
    obs += [Observation(Config(g, 1, 1, "parameter_server"), 100.0 * g * (1 + 0.01 * g)) for g in (2, 4, 8)]
    fitted = sm.fit(obs, 64, ONE_GB)
    assert all(v >= 0 for v in fitted.coefficients.values())


def test_optimus_baseline_recovers_its_own_form():
    coeffs = [0.4, 0.05, 0.01, 0.002]
    configs = [Config(g, 1, p, "parameter_server") for g in (1, 2, 4, 8, 16) for p in (1, 2, 4) if p <= g]
    obs = [Observation(c, c.gpus * 64 / sum(a * b for a, b in zip(coeffs, sm.optimus_features(c)))) for c in configs]
    baseline = sm.fit_optimus(obs, 64)
    assert list(baseline.coefficients) == pytest.approx(coeffs, rel=1e-6)


@pytest.mark.parametrize(
    "observations, message",
    [
        ([], "no runs to fit"),
        ([Observation(Config(2, 1, 1, "parameter_server"), 100.0)], "no 1-GPU run"),
    ],
)
def test_fit_refuses_what_it_cannot_use(observations, message):
    with pytest.raises(sm.ModelError, match=message):
        sm.fit(observations, 64, ONE_GB)


def test_bad_inputs():
    with pytest.raises(sm.ModelError, match="no variable sizes for model 'lenet'.*--variable-bytes"):
        Variables.of("lenet")
    with pytest.raises(sm.ModelError, match="num_ps=0"):
        Config(2, 1, 0, "parameter_server")
    with pytest.raises(sm.ModelError, match="num_ps=1: collective_all_reduce has no parameter servers"):
        Config(2, 1, 1, "collective_all_reduce")
    with pytest.raises(sm.ModelError, match="variable_update='horovod'"):
        Config(2, 1, 1, "horovod")
    with pytest.raises(sm.ModelError, match="gpus=0"):
        Config(0, 1, 1, "parameter_server")
    assert Variables.of(None, 5e8).total_bytes == 5e8


def runs_below_the_link():
    """Made-up runs up to 8 GPUs, none of them bound by the 0.6 GB/s link, and a configuration of
    64 GPUs where the link sets the step: (truth, observations, variables, the 64-GPU config)."""
    small = [c for c in CONFIGS if c.gpus <= 8 and (c.variable_update == "distributed_replicated" or c.nodes == 1)]
    # a third node: from 1 to 2 nodes the bytes and the senders grow together, and the fit
    # could not tell the per-GB cost from the per-sender cost, which add to the step past the link
    small.append(Config(12, 4, 3, "distributed_replicated"))
    variables = Variables(0.2e9, 0.05e9)
    truth, observations = made_up(0.6, small, variables=variables)
    return truth, observations, variables, Config(64, 4, 16, "distributed_replicated")


def test_a_measured_link_rate_shows_a_limit_the_runs_never_reached():
    # Runs up to 8 GPUs, none of them bound by the 0.6 GB/s link; at 64 GPUs the link sets the step.
    truth, observations, variables, big = runs_below_the_link()
    assert not any(truth.network_bound(o.config) for o in observations) and truth.network_bound(big)
    blind = sm.fit(observations, 64, variables)
    assert blind.bandwidth_gb_s == math.inf
    assert blind.images_per_sec(big) > 1.2 * truth.images_per_sec(big)  # the runs alone cannot see it
    told = sm.fit(observations, 64, variables, link_gb_s=0.6)
    assert told.bandwidth_gb_s == pytest.approx(0.6)
    assert told.images_per_sec(big) == pytest.approx(truth.images_per_sec(big), rel=0.02)
    # a link slower than what the runs moved: the runs win, and the fit says so
    slow = sm.fit(observations, 64, variables, link_gb_s=0.001)
    assert (
        slow.bandwidth_gb_s == pytest.approx(slow.bandwidth_floor_gb_s)
        and "more than the link rate given" in slow.notes[0]
    )
    with pytest.raises(sm.ModelError, match="link rate -1"):
        sm.fit(observations, 64, variables, link_gb_s=-1)


def test_the_transfer_hides_under_the_gpu_compute_and_the_overheads_add_to_either():
    # 4 single-GPU nodes, 4 PSs, 1 GB of variables: the busiest NIC moves 1.5 GB a step
    # (test_node_bytes); overheads 0.02 s (sync) + 4 senders x 0.01 s.
    slow = sm.Fit(
        t1=0.5,
        batch_size=64,
        variables=ONE_GB,
        coefficients={"sync": 0.02, "bytes": 0.0, "local": 0.0, "workers": 0.01},
        bandwidth_gb_s=1.0,
        bandwidth_floor_gb_s=0.0,
        rms_relative_error=0.0,
        points=0,
    )
    config = Config(4, 1, 4, "parameter_server")
    # at 1 GB/s the transfer (1.5 s) outlasts the compute: the step is the transfer + overheads
    assert slow.step_time(config) == pytest.approx(1.5 + 0.02 + 4 * 0.01) and slow.network_bound(config)
    # at 4 GB/s it takes 0.375 s, hidden under the 0.5 s of compute
    fast = dataclasses.replace(slow, bandwidth_gb_s=4.0)
    assert fast.step_time(config) == pytest.approx(0.5 + 0.02 + 4 * 0.01) and not fast.network_bound(config)


def test_fit_recovers_a_link_that_sets_the_step_under_the_overheads():
    # Runs written by hand from step = max(t1, bytes / 3 GB/s) + 0.02 + 0.01 x senders: from
    # 8 nodes on, the link sets the step and the per-sender overhead still adds to it.
    def step(c):
        return max(0.5, sm.node_bytes(c, ONE_GB) / 3.0) + (0.02 + 0.01 * c.nodes if c.gpus > 1 else 0.0)

    configs = [Config(g, 1, p, "parameter_server") for g in (1, 2, 4, 8, 16, 32) for p in {1, g} if p <= g]
    observations = [Observation(c, c.gpus * 64 / step(c)) for c in configs]
    fitted = sm.fit(observations, 64, ONE_GB)
    assert fitted.bandwidth_gb_s == pytest.approx(3.0, rel=0.03)
    # (the grid's 2.3% step in the rate is made up by the other costs, a few ms)
    assert fitted.coefficients["workers"] == pytest.approx(0.01, rel=0.1)
    assert fitted.rms_relative_error < 0.01
    big = Config(128, 1, 128, "parameter_server")
    assert fitted.network_bound(big)
    assert fitted.images_per_sec(big) == pytest.approx(128 * 64 / step(big), rel=0.03)


def test_all_reduce_has_no_incast_and_a_per_hop_cost_that_grows_with_the_nodes():
    small, large = Config(2, 1, 0, sm.ALL_REDUCE), Config(32, 1, 0, sm.ALL_REDUCE)
    for config in (small, large):
        f = sm.features(config, ONE_GB)
        assert f["workers"] == 0.0  # no PS serves anyone
        assert f["ring"] == 2 * (config.nodes - 1)
        assert config.instances == config.nodes
    # The bytes per node level off at 2 S; the hops keep growing.
    assert sm.node_bytes(large, ONE_GB) < 2.0
    truth, _ = made_up(math.inf, [])
    assert truth.overheads(large) - truth.overheads(small) == pytest.approx(
        TRUE["bytes"] * (2 * 31 / 32 - 1.0) + TRUE["ring"] * 2 * 30
    )
    assert sm.features(Config(32, 1, 4, "parameter_server"), ONE_GB)["ring"] == 0.0


def test_without_multi_node_all_reduce_runs_its_hop_cost_is_not_fitted():
    ps_only = [c for c in CONFIGS if not c.all_reduce]
    _, observations = made_up(math.inf, ps_only)
    fitted = sm.fit(observations, 64, ONE_GB)
    assert not fitted.all_reduce_fitted and fitted.coefficients["ring"] == 0.0
    assert any("no multi-node collective_all_reduce run" in note for note in fitted.notes)
    _, observations = made_up(math.inf, CONFIGS)
    assert sm.fit(observations, 64, ONE_GB).all_reduce_fitted


def test_store_rows_of_all_reduce_become_configurations_without_ps():
    rows = [
        {
            "gpus": 4,
            "hosts": ["a", "b", "c", "d"],
            "variable_update": sm.ALL_REDUCE,
            "num_ps": 0,
            "images_per_sec": 9.0,
        },
        {
            "gpus": 4,
            "hosts": ["a", "b", "c", "d"],
            "variable_update": "parameter_server",
            "num_ps": 2,
            "images_per_sec": 8.0,
        },
    ]
    configs = [o.config for o in sm.observations_from_rows(rows)]
    assert configs == [Config(4, 1, 0, sm.ALL_REDUCE), Config(4, 1, 2, "parameter_server")]


def test_with_no_link_known_the_range_covers_what_a_link_the_runs_never_reached_gives():
    truth, observations, variables, big = runs_below_the_link()
    fits = sm.link_fits(observations, 64, variables)
    rates = [f.bandwidth_gb_s for f in fits]
    predictions = [f.images_per_sec(big) for f in fits]
    # Every rate from about what the runs moved up to no limit fits them: the range is wide, it
    # holds the truth (the 0.6 GB/s link) and the blind fit's no-limit answer at its top.
    assert rates[-1] == math.inf and min(rates) < 0.6
    assert min(predictions) < truth.images_per_sec(big) < max(predictions)
    assert max(predictions) == pytest.approx(sm.fit(observations, 64, variables).images_per_sec(big))
    assert all(f.rms_relative_error <= sm.NOISE for f in fits)
    # The runs past the onset rule out the rates far from the truth.
    _, all_runs = made_up(0.6, CONFIGS, variables=variables)
    narrow = [f.images_per_sec(big) for f in sm.link_fits(all_runs, 64, variables)]
    assert max(narrow) / min(narrow) < 1.05 < max(predictions) / min(predictions)


def test_random_turns_are_the_closed_networks_exact_answer():
    # One worker: its pull, its push and the rest of its step, one after the other.
    assert sm.random_turns_step(1, 0.25, 0.1) == pytest.approx(0.6)
    # No time between transfers: N workers keep each direction busy N/(N+1) of the time.
    for n in range(1, 9):
        assert n * 0.25 / sm.random_turns_step(n, 0.25, 0.0) == pytest.approx(n / (n + 1))
    # Two workers, by hand: each finds the other on a link with probability D / (Z + 2D).
    d, z = 0.26, 0.05
    assert sm.random_turns_step(2, d, z) == pytest.approx(z + 2 * d * (1 + d / (z + 2 * d)))
    # Never under the fluid bound (a link never idle, or no wait at all), and up to it with many.
    for n in (1, 2, 4, 16, 64):
        assert sm.random_turns_step(n, d, z) >= max(z + 2 * d, n * d) - 1e-12
    assert 200 * d / sm.random_turns_step(200, d, z) > 0.99
    with pytest.raises(sm.ModelError, match="customers=0"):
        sm.random_turns_step(0, d, z)


def test_asynchronous_ps_workers_take_turns_and_synchronous_ones_do_not():
    # 1 PS on a node of its own, 3 MB of variables, a 100 Mbit/s link (0.0125 GB/s), 0.5 s of
    # compute: 4 workers need 0.98 s of the PS's link a step, past the onset.
    variables = Variables(3.072e6, 0.0)
    fit = sm.Fit(0.5, 512, variables, {}, 0.0125, 0.0, 0.0, 0)
    synchronous = Config(4, 1, 1, "parameter_server", ps_on_worker_nodes=False)
    asynchronous = dataclasses.replace(synchronous, synchronous=False)
    transfer = fit.transfer_time(synchronous)
    assert transfer == pytest.approx(4 * 3.072e6 / 1e9 / 0.0125)
    assert fit.step_time(synchronous) == pytest.approx(transfer)  # the fluid bound
    d = transfer / 4
    assert fit.step_time(asynchronous) == pytest.approx(sm.random_turns_step(4, d, 0.5 - 2 * d))
    assert fit.step_time(asynchronous) > 1.1 * fit.step_time(synchronous)
    # No network limit, or a ring: nothing to take turns on.
    unlimited = dataclasses.replace(fit, bandwidth_gb_s=math.inf)
    assert unlimited.step_time(asynchronous) == unlimited.step_time(synchronous) == 0.5
    assert not Config(4, 1, 0, sm.ALL_REDUCE, synchronous=False).takes_turns
    # The PS beside a worker: that worker's bytes stay on its node, three cross.
    assert Config(4, 1, 1, "parameter_server", synchronous=False).crossing_senders == 3
    # The planner predicts configurations updated as its runs were.
    assert dataclasses.replace(fit, asynchronous=True).config(8, 1, 2, "parameter_server").takes_turns
    assert not fit.config(8, 1, 2, "parameter_server").takes_turns
