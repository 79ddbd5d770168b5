"""The planner across a network onset, on the shaped test bed: fitted on 1 and 2 GPUs, it predicts 4.

Five test-bed hosts whose private links are shaped to 100 Mbit/s (tbf, tests/testbed/testbed.py
--link-mbit): one PS on a host of its own (ps_on_worker_nodes=false: the host after the
workers'), one worker a host. The updates are asynchronous (--cross_replica_sync false): each
worker pulls the variables (`trivial` at 16 px: 3.07 MB), computes (little: ~0.01 s at batch
512, so that the two cores do not blur it) and pushes its gradients on its own, so that one
worker's transfers overlap the others'. The PS's link carries one pull and one push a
worker-step, one each way, in the turns the workers fall into: the scaling model has them take
random turns (a closed queueing network, `scaling_model.random_turns_step`).

- 1 and 2 GPUs: the step is the worker's own pull and push; the PS's link is busy half and
  three quarters of the time, and a second worker adds most of a worker's rate.
- 4 GPUs: four workers' pulls need more of the PS's link than a step lasts; the link sets the
  step (network-bound), and the total gains little over 2 GPUs.

So the planner fitted on 1 and 2 GPUs alone sees no network limit and predicts 4 GPUs
scaling on (about twice too high), while with the link rate the sweep's probe measured it
meets the link at 4 GPUs, and with no rate the range it prints holds the measured value.
One repetition of 3 + 10 steps a count (the sweep ~75 s); benchmarks/netprobe.py repeats it.
"""

import json
import uuid

import pytest
from playbook_harness import extra_vars, run_playbook
from testbed_fixtures import measure_again_on_a_miss, testbed_factory  # noqa: F401

from dtfbench.forecast import validation
from dtfbench.results import network, store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

LINK_MBIT = 100
BATCH = 512
ASYNC = ["--num_intra_threads", "1", "--num_inter_threads", "1", "--cross_replica_sync", "false"]


def onset_sweep(bed, db, ansible_env):
    """One sweep over 1, 2 and 4 GPUs into `db`: (sweep_id, its rows, runs by GPU count, rates)."""
    sweep_id = f"pytest-onset-{uuid.uuid4().hex[:8]}"
    done = run_playbook(
        "run-benchmark.yml",
        "-i",
        bed.inventory,
        *extra_vars(system="testbed", gpus="1,2,4", num_ps=1, sweep_id=sweep_id),
        "-e",
        json.dumps({"benchmark_ps_on_worker_nodes": False, "benchmark_extra_args": ASYNC}),
        *extra_vars(results_db=db, model="trivial", batch_size=BATCH, image_size=16),
        *extra_vars(warmup_steps=3, steps=10, repetitions=1),
        env=ansible_env,
        timeout=600,
    )
    assert done.returncode == 0, done.output[-7000:]
    rows = store.runs(store.connect(db), "sweep_id = ?", (sweep_id,))
    runs = {r["gpus"]: r for r in rows}
    return sweep_id, rows, runs, {g: r["images_per_sec"] for g, r in runs.items()}


def crosses_the_onset(rate: dict) -> bool:
    """2 GPUs add most of a worker's rate (but not more than one: a slowed 1-GPU run would bend
    the fit), 4 add at most 30% over 2. The planner fitted on 1 and 2 GPUs without the link
    predicts twice 2 GPUs' total at 4 (when 2 GPUs are at most twice 1), so the test's 'misses
    by more than 50%' needs 4 below 4/3 of 2: a looser bound here let a blurred sweep (4 at
    1.36x of 2) through to an assertion it could not meet instead of measuring it again."""
    one, two, four = rate.get(1, 0), rate.get(2, 0), rate.get(4, 0)
    return 1.3 * one <= two <= 2 * one and four <= 1.3 * two


def misses_the_onset(sweep) -> str | None:
    rate = sweep[3]
    return None if crosses_the_onset(rate) else f"rates {rate} do not show the onset"


def test_fitted_below_the_onset_with_the_measured_link_the_planner_predicts_past_it(
    testbed_factory, ansible_env, tmp_path, live_processes
):
    bed = testbed_factory(hosts=5, link_mbit=LINK_MBIT)
    db = tmp_path / "results.sqlite"
    # Before the onset a second worker adds most of a worker's rate; past it, at 4, the total
    # gains little over 2: the PS's link carries what it can. One repetition a count is at the
    # mercy of the other lane's load on the two cores (in a full suite 2 GPUs can come at 1.2x
    # the 1-GPU rate), so a sweep whose rates miss that shape is measured once more; the second
    # must have it.
    sweeps = measure_again_on_a_miss(lambda: onset_sweep(bed, db, ansible_env), misses_the_onset)
    sweep_id, rows, runs, rate = sweeps[-1]
    assert sorted(runs) == [1, 2, 4] and all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    assert all(r["cross_replica_sync"] == 0 for r in rows)
    measured = network.measured(db, sweep_id)
    assert measured.known, measured.why
    shaped_gb_s = LINK_MBIT / 8e3
    assert 0.8 * shaped_gb_s <= measured.planner_gb_s <= 1.1 * shaped_gb_s
    assert crosses_the_onset(rate), rate
    # The PS's host (the one after the workers') is the busiest, its NIC out at most of the link
    # at 4 (81-85 Mbit/s of 100 on a quiet machine, 64 in a full suite's run: the two cores
    # that five hosts' TF processes share slow the pulls a little too).
    ps_host = runs[4]["hosts"][-1]
    assert runs[4]["nic_busiest_host"] == ps_host, runs[4]["nic"]
    assert runs[4]["nic_tx_gb_per_s"] >= 0.5 * shaped_gb_s, runs[4]["nic"]

    result = validation.sweep_extrapolation(rows, "trivial", BATCH, 2, measured.planner_gb_s)
    (case,) = result["cases"]
    print("rates", rate, "ps tx GB/s", runs[4]["nic_tx_gb_per_s"], "case", case)
    assert case["gpus"] == 4 and case["network_bound_with_link"], case
    assert result["fit_with_link"]["asynchronous"], result["fit_with_link"]
    # With the measured link the planner meets the onset; with none, the fit of 1 and 2 GPUs
    # scales on past it (the planner that ignored the link misses by about 100%). The goal, 15%
    # with the link and the range holding the value, is N3's in `make bench` (benchmarks/netprobe.py,
    # 3 repetitions a count). One repetition here varies with the turns the workers fall into
    # and with the machine: the PS's shaped link carries 70-85% of its rate at 4 (random turns:
    # 80%), so 4 GPUs came -11% to +8% from the prediction with the link, and up to 12% below
    # 2 GPUs' total (the range's low end: 20% below it).
    assert abs(case["error_with_link"]) <= 0.25, case
    assert case["error_without_link"] > 0.5, case
    low, high = case["range"]
    assert 0.95 * low <= case["measured"] <= high, case
    assert [p for sweep in sweeps for p in live_processes(sweep[0])] == []
