"""What bounds the step (dtfbench.report.bounds): the verdict rules, the split of the step, and
how the tables and the plot show them."""

from __future__ import annotations

import pytest

from dtfbench.report import analysis as report_analysis
from dtfbench.report import bounds, plotspec, tables


def test_network_when_the_busiest_nic_is_near_the_link():
    # Pull, compute, push: each direction half the time at the rate, in + out at 90% of it.
    v = bounds.verdict(step=1.0, compute=0.05, rx=0.045, tx=0.045, link=0.1, incast=None)
    assert v["bound"] == "network" and v["nic_share"] == pytest.approx(0.9)
    assert "busiest NIC 0.045 GB/s in + 0.045 GB/s out = 90% of the 0.1 GB/s link" in v["bound_why"]
    # The split: compute, then the busiest NIC's bytes per step over the link, then the rest.
    assert v["compute_s"] == 0.05 and v["transfer_s"] == pytest.approx(0.9) and v["rest_s"] == pytest.approx(0.05)
    # Both directions at the rate at once: the share passes 100%, the transfer fills the step.
    v = bounds.verdict(step=0.5, compute=0.1, rx=0.09, tx=0.09, link=0.1, incast=None)
    assert v["nic_share"] == pytest.approx(1.8) and v["transfer_s"] == pytest.approx(0.4) and v["rest_s"] == 0.0


def test_just_below_near_is_not_network():
    v = bounds.verdict(step=0.5, compute=0.1, rx=0.0599, tx=0.02, link=0.1, incast=None)
    assert v["bound"] == "overheads"
    assert v["transfer_s"] == pytest.approx(0.5 * 0.799) and v["rest_s"] == pytest.approx(0.5 - 0.1 - 0.3995)


def test_ps_incast_only_when_incast_is_a_limit_of_its_own():
    # Inbound near the incast rate, which is well below point to point: the PS's incast.
    v = bounds.verdict(step=1.0, compute=0.2, rx=0.05, tx=0.01, link=0.1, incast=0.055)
    assert v["bound"] == "ps incast" and v["incast_share"] == pytest.approx(0.05 / 0.055)
    assert "busiest node receives 0.05 GB/s = 91% of the 0.055 GB/s incast rate" in v["bound_why"]
    # Incast no lower than the link: it is the link that bounds.
    v = bounds.verdict(step=1.0, compute=0.2, rx=0.085, tx=0.01, link=0.1, incast=0.098)
    assert v["bound"] == "network"


def test_compute_when_the_one_gpu_step_is_most_of_the_step():
    v = bounds.verdict(step=0.11, compute=0.1, rx=0.01, tx=0.01, link=0.1, incast=None)
    assert v["bound"] == "compute" and "compute (1-GPU step) 0.1 s = 91% of the 0.11 s step" in v["bound_why"]
    # Without a link rate compute is still told.
    assert bounds.verdict(step=0.11, compute=0.1, rx=None, tx=None, link=None, incast=None)["bound"] == "compute"


def test_overheads_when_neither_and_unknown_without_a_link_rate():
    v = bounds.verdict(step=1.0, compute=0.2, rx=0.01, tx=0.02, link=0.1, incast=None)
    assert v["bound"] == "overheads" and "the rest (0.5 s) is neither" in v["bound_why"]
    v = bounds.verdict(step=1.0, compute=0.2, rx=0.01, tx=0.02, link=None, incast=None)
    assert v["bound"] == "unknown" and v["transfer_s"] is None and v["rest_s"] == pytest.approx(0.8)
    assert v["bound_why"].endswith("no measured link rate: network and overheads cannot be told apart")
    v = bounds.verdict(step=1.0, compute=0.2, rx=None, tx=None, link=0.1, incast=None)
    assert v["bound"] == "unknown" and "no NIC figures" in v["bound_why"]


def _row(gpus, step, rx, tx, rep=0, **extra):
    row = {
        "run_id": f"r{gpus}-{rep}",
        "sweep_id": "s1",
        "system": "testbed",
        "workload": "ours",
        "model": "trivial",
        "batch_size": 8,
        "data": "synthetic",
        "gpus": gpus,
        "num_workers": gpus,
        "devices_per_worker": 1,
        "num_ps": 1,
        "variable_update": "parameter_server",
        "ps_on_worker_nodes": 1,
        "warmup_steps": 2,
        "steps": 10,
        "repetition": rep,
        "status": "ok",
        "images_per_sec": 8 * gpus / step,
        "images_per_sec_per_worker": [8 / step] * gpus,
        "step_time_mean": step,
        "nic_rx_gb_per_s": rx,
        "nic_tx_gb_per_s": tx,
        "nic_busiest_host": "node1" if rx is not None else None,
        "nic": {"node1": {"status": "ok"}}
        if rx is not None
        else {"node1": {"status": "unknown", "reason": "no interface"}},
        "link_gb_s": 0.025,
    }
    row.update(extra)
    return row


def test_the_tables_and_the_plot_show_the_verdict_per_configuration():
    rows = [
        _row(1, 0.10, 0.0001, 0.0001),
        _row(1, 0.10, 0.0001, 0.0001, rep=1),
        _row(2, 0.40, 0.011, 0.012),
        _row(2, 0.44, 0.012, 0.012, rep=1),
        _row(4, 0.50, None, None),
    ]
    analysis = report_analysis.analyse(rows, reference="none")
    by_gpus = {s["gpus"]: s for s in analysis.summaries}
    assert by_gpus[1]["bound"] == "compute"
    two = by_gpus[2]
    assert two["bound"] == "network" and two["nic_rx_gb_per_s"] == pytest.approx(0.0115)
    assert two["compute_s"] == pytest.approx(0.1) and two["step_time"] == pytest.approx(0.42)
    assert two["nic_share"] == pytest.approx(0.0235 / 0.025)
    four = by_gpus[4]
    assert four["bound"] == "unknown" and four["nic_unknown"] == "node1: no interface"

    text = tables.format_table(analysis.summaries)
    assert "0.0115/0.012" in text and "94%" in text
    assert "2 GPUs, 1 PS, parameter_server: network: busiest NIC 0.0115 GB/s in + 0.012 GB/s out = 94%" in text
    _csv, md = tables.configuration_tables(analysis)
    assert "### What bounds the step" in md
    assert (
        "| synthetic | 2 | 1 | parameter_server | 0.4200 | 0.1000 | 0.3200 | 0.0000 | node1 | 0.0115 | 0.0120 |" in md
    )
    best_csv, best_md = tables.best_tables(analysis)
    assert "| 94% | network |" in best_md and "bound_why" in best_csv.splitlines()[0]

    specs = dict(plotspec.plot_specs(analysis))
    split = specs["step_split-testbed-trivial-bs8-synthetic"]
    assert split["kind"] == "stacked"
    parts = {s["part"]: {p["x"]: p["y"] for p in s["points"]} for s in split["series"]}
    assert parts["compute_s"][2] == pytest.approx(0.1) and parts["transfer_s"][2] == pytest.approx(0.32)
    assert [p["bound"] for p in split["series"][0]["points"]] == ["compute", "network", "unknown"]


def test_no_ps_incast_verdict_for_a_configuration_without_a_ps():
    """Inbound near a distinct incast rate: the PS's incast with a PS, never under all-reduce."""
    rows = [
        _row(1, 0.10, 0.0001, 0.0001),
        _row(2, 0.40, 0.0125, 0.001, incast_gb_s=0.013),
        _row(2, 0.40, 0.0125, 0.001, variable_update="collective_all_reduce", num_ps=0, incast_gb_s=0.013),
    ]
    summaries = report_analysis.analyse(rows, reference="none").summaries
    by_update = {s["variable_update"]: s for s in summaries if s["gpus"] == 2}
    assert by_update["parameter_server"]["bound"] == "ps incast"
    assert by_update["collective_all_reduce"]["bound"] != "ps incast"


def test_a_full_duplex_ring_fills_the_link_with_its_busier_direction():
    """A PS worker pulls then pushes: in + out share the link. A ring sends and receives at once,
    each direction on its own half of the full-duplex link: 60% each way is 60%, not 120%."""
    ps = bounds.verdict(step=1.0, compute=0.5, rx=0.015, tx=0.015, link=0.025, incast=None)
    ring = bounds.verdict(step=1.0, compute=0.5, rx=0.015, tx=0.015, link=0.025, incast=None, full_duplex=True)
    assert ps["nic_share"] == pytest.approx(1.2) and ps["bound"] == "network"
    assert ring["nic_share"] == pytest.approx(0.6) and ring["bound"] != "network"
    assert "0.015 GB/s in and, at once, 0.015 GB/s out = 60% of the 0.025 GB/s link" in ring["bound_why"]


def test_the_split_plot_renders():
    from dtfbench.report import plots

    spec = {
        "plot": "step_split",
        "kind": "stacked",
        "title": "t",
        "series": [
            {"label": "compute", "points": [{"x": 1, "y": 0.1, "bound": "compute"}, {"x": 2, "y": 0.1}], "style": 0},
            {"label": "transfer", "points": [{"x": 1, "y": 0.0}, {"x": 2, "y": 0.3, "bound": "network"}], "style": 1},
        ],
    }
    # A kind the renderer did not know would raise; the bars are drawn as rectangles.
    out = plots.render(spec, ("png", "svg"))
    assert out["png"].startswith(b"\x89PNG") and out["svg"].count(b"<path") > 4


def test_the_report_takes_each_sweeps_measured_link_rate_from_the_store(tmp_path):
    from dtfbench.results import network

    db = tmp_path / "r.sqlite"
    document = network.unknown("placeholder")
    document.update(status="ok", why=None, link_gb_s=0.025, incast_gb_s=0.02, rtt_ms=0.2, hosts={})
    network.record(db, "s1", document)
    network.record(db, "s2", network.unknown("one host: nothing to measure between"))
    rows = [_row(2, 0.4, 0.023, 0.01, link_gb_s=None), _row(2, 0.4, 0.023, 0.01, sweep_id="s2", link_gb_s=None)]
    report_analysis.attach_link_rates(rows, db)
    assert (rows[0]["link_gb_s"], rows[0]["incast_gb_s"], rows[0]["link_why"]) == (0.025, 0.02, None)
    assert (rows[1]["link_gb_s"], rows[1]["link_why"]) == (None, "one host: nothing to measure between")
    # The second sweep alone: its verdict says why the share is unknown.
    summary = report_analysis.analyse([rows[1]], reference="none").summaries[0]
    assert (
        summary["bound"] == "unknown"
        and "no measured link rate (one host: nothing to measure between)" in summary["bound_why"]
    )
