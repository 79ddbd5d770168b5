"""The NIC sampler and the verdict on a test bed with a real network limit.

Three test-bed hosts whose private links are shaped to 200 Mbit/s (tbf on both ends of each
node's veth, tests/testbed/testbed.py --link-mbit), one CPU worker slot each, one PS on the
first host. The configuration is network-heavy and almost compute-free: the `trivial` model
(one dense layer: 32x32x3 inputs to 1000 classes, 12 MB of variables) at batch 8, so that the
two cores of the machine do not blur it. At 1 GPU the PS and the worker share node01 (their
traffic stays on loopback): compute bounds it. From 2 GPUs every step moves the variables
and their gradients through node01's shaped NIC: the busiest NIC sits near the shaped rate
and the verdict must say network-bound. The sweep's link probe (on by default) measures the
rate the verdict compares with.
"""

import uuid

import pytest
from playbook_harness import extra_vars, run_playbook
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.report import analysis
from dtfbench.results import network, store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

LINK_MBIT = 200
SHAPED_GB_S = LINK_MBIT * 1e6 / 8 / 1e9  # 0.025 GB/s


def test_a_shaped_sweep_is_network_bound_where_the_nic_is_at_the_shaped_rate(
    testbed_factory, ansible_env, tmp_path, live_processes
):
    bed = testbed_factory(hosts=3, link_mbit=LINK_MBIT)
    sweep_id = f"pytest-nic-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    done = run_playbook(
        "run-benchmark.yml",
        "-i",
        str(bed.dir / "hosts.yml"),
        *extra_vars(system="testbed", gpus="1,2,3", num_ps=1, sweep_id=sweep_id),
        *extra_vars(results_db=db, model="trivial", batch_size=8, image_size=32),
        *extra_vars(warmup_steps=2, steps=6, repetitions=1),
        env=ansible_env,
        timeout=540,
    )
    assert done.returncode == 0, done.output[-7000:]

    runs = {r["gpus"]: r for r in store.runs(store.connect(db))}
    assert sorted(runs) == [1, 2, 3] and all(r["status"] == "ok" for r in runs.values())
    for run in runs.values():
        # Every host of the run was measured over the workers' window, on its private interface.
        assert sorted(run["nic"]) == run["hosts"], run["nic"]
        for host, figures in run["nic"].items():
            assert figures["status"] == "ok", (host, figures)
            assert figures["address"] == next(n["private_ip"] for n in bed.nodes if n["name"] == host)
            assert figures["interface"] != "lo" and figures["seconds"] > 0
    # 1 GPU: the PS and the worker talk over loopback, the private NIC is all but idle.
    assert runs[1]["nic_rx_gb_per_s"] + runs[1]["nic_tx_gb_per_s"] < 0.1 * SHAPED_GB_S
    for gpus in (2, 3):
        run = runs[gpus]
        # The PS's host serves every remote worker: it is the busiest, its NIC near the shaped
        # rate. A worker pulls the variables, then pushes the gradients: each direction is at the
        # rate about half the time, in + out is what reaches it (docs/network.md).
        busiest = run["nic_rx_gb_per_s"] + run["nic_tx_gb_per_s"]
        # (At 2 GPUs node02's worker moves what node01 does: either is the busiest.)
        assert run["nic_busiest_host"] in ({"node01", "node02"} if gpus == 2 else {"node01"}), run["nic"]
        assert 0.7 * SHAPED_GB_S <= busiest <= 1.1 * SHAPED_GB_S, (gpus, run["nic"])

    # The probe measured the shaped link; the report compares the busiest NIC with it.
    measured = network.measured(db, sweep_id)
    assert measured.known, measured.why
    assert 0.8 * SHAPED_GB_S <= measured.link_gb_s <= 1.1 * SHAPED_GB_S
    summaries = {s["gpus"]: s for s in analysis.analyse(analysis.load_rows(db, sweep_id), reference="none").summaries}
    assert summaries[1]["bound"] == "compute", summaries[1]["bound_why"]
    for gpus in (2, 3):
        assert summaries[gpus]["bound"] == "network", summaries[gpus]["bound_why"]
        assert summaries[gpus]["nic_share"] >= 0.8
        assert summaries[gpus]["transfer_s"] > summaries[gpus]["compute_s"]
    # The table printed after the sweep says it too.
    assert "network: busiest NIC" in done.stdout, done.stdout[-3000:]
