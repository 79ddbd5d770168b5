"""dtfbench report build: tables, plots (PNG, SVG, JSON sidecars) and the index from a fixture store."""

import csv
import json
import shutil
import xml.etree.ElementTree as ET

import pytest
from matplotlib import image as mpimg
from store_harness import study_row

from dtfbench.linux import files
from dtfbench.report import analysis, build, cli, tables
from dtfbench.results import store

PS, DR = "parameter_server", "distributed_replicated"


def add_sweep(db, sweep="sw1"):
    """daint (inception3, batch 64): 1, 2, 4 GPUs synthetic and real, 3 repetitions, two configurations at
    2 GPUs; 8 GPUs synthetic only failed runs. local (small_cnn, batch 32): 1 and 2 workers, one failure."""
    conn = store.connect(db)
    n = 0

    def add(system, gpus, num_ps, update, data, rep, ips=None, **config):
        nonlocal n
        n += 1
        times = {"started_at": f"2024-05-01T10:{n:02d}:00Z", "finished_at": f"2024-05-01T10:{n:02d}:40Z"}
        store.add_run(
            conn, study_row(f"{sweep}-{n}", sweep, system, gpus, num_ps, update, data, rep, ips, **config, **times)
        )

    for data, factor in (("synthetic", 1.0), ("real", 0.9)):
        for rep, d in enumerate((-1.0, 0.0, 1.0), 1):
            add("daint", 1, 1, PS, data, rep, (138 + d) * factor)
            add("daint", 2, 1, PS, data, rep, (262 + d) * factor)
            add("daint", 2, 2, DR, data, rep, (258 + d) * factor)
            add("daint", 4, 3, DR, data, rep, (520 + 2 * d) * factor)
    add("daint", 8, 2, PS, "synthetic", 1, reason="worker 3: peer ps:1 died")
    add("daint", 8, 2, PS, "synthetic", 2, reason="timeout after 600 s")
    for rep in (1, 2):
        add("local", 1, 1, PS, "synthetic", rep, 50.0 + rep, model="small_cnn", batch_size=32)
        add("local", 2, 1, PS, "synthetic", rep, 90.0 + rep, model="small_cnn", batch_size=32)
    add("local", 2, 1, PS, "synthetic", 3, reason="worker 1: peer died", model="small_cnn", batch_size=32)
    conn.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("store") / "results.sqlite"
    add_sweep(path)
    return path


@pytest.fixture(scope="module")
def built(db, tmp_path_factory):
    """The report as the CLI builds it (published reference, PNG and SVG)."""
    out = tmp_path_factory.mktemp("report") / "report"
    assert cli.main(["build", "--db", str(db), "--output", str(out)]) == 0
    return out


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def sidecar(out, name):
    return json.loads((out / "plots" / f"{name}.json").read_text())


def series(spec, label):
    """The points of one series as {x: y}."""
    (found,) = [s for s in spec["series"] if s["label"] == label]
    return {p["x"]: p["y"] for p in found["points"]}


def test_build_writes_every_file_and_the_index_lists_them(built):
    manifest = json.loads((built / "manifest.json").read_text())
    for rel in manifest["files"]:
        assert (built / rel).is_file(), rel
    for name in (
        "index.md",
        "best_configurations.md",
        "best_configurations.csv",
        "io_overhead.csv",
        "configurations.md",
        "configurations.csv",
        "failures.md",
        "failures.csv",
    ):
        assert name in manifest["files"]
    plots = {f for f in manifest["files"] if f.startswith("plots/")}
    for stem in (
        "images_per_sec-daint-inception3-bs64",
        "speedup-daint-inception3-bs64",
        "efficiency-daint-inception3-bs64",
        "images_per_sec-local-small_cnn-bs32",
        "speedup-local-small_cnn-bs32",
        "efficiency-local-small_cnn-bs32",
        "io_overhead",
        "speedup-all",
    ):
        assert {f"plots/{stem}.png", f"plots/{stem}.svg", f"plots/{stem}.json"} <= plots
    index = (built / "index.md").read_text()
    for rel in manifest["files"]:
        assert rel in index
    assert "`daint` → Piz Daint (`piz-daint`)" in index
    assert "`local`: no published counterpart" in index
    assert not list(built.rglob(".*.tmp-*"))  # no temporary file left behind


def test_best_configurations_csv(built):
    rows = {(r["system"], r["data"], int(r["gpus"])): r for r in read_csv(built / "best_configurations.csv")}
    two = rows["daint", "synthetic", 2]
    assert (two["status"], two["num_ps"], two["variable_update"]) == ("ok", "1", PS)
    assert float(two["images_per_sec"]) == pytest.approx(262.0)
    assert float(two["ci_low"]) == pytest.approx(262 - 2.484138, abs=1e-5)
    assert float(two["ci_high"]) == pytest.approx(262 + 2.484138, abs=1e-5)
    assert (two["n_ok"], two["configurations"]) == ("3", "2")
    assert float(two["speedup"]) == pytest.approx(262 / 138, abs=1e-6)
    assert float(two["efficiency"]) == pytest.approx(262 / 138 / 2, abs=1e-6)
    assert float(two["io_overhead_pct"]) == pytest.approx(10.0)
    # Beside the published Table 1 numbers, with the relative difference.
    assert (two["ref_system"], two["ref_source"], two["ref_num_ps"]) == ("piz-daint", "cscs-2017-table1", "1")
    assert float(two["ref_images_per_sec"]) == 264.57
    assert float(two["diff_images_per_sec_pct"]) == pytest.approx((262 - 264.57) / 264.57 * 100, abs=1e-5)
    assert float(two["ref_efficiency"]) == pytest.approx(0.956992, abs=1e-6)
    assert float(two["ref_io_overhead_pct"]) == pytest.approx((264.57 - 260.84) / 264.57 * 100, abs=1e-5)
    # Every run of 8 GPUs failed: a failed row, never a best.
    eight = rows["daint", "synthetic", 8]
    assert (eight["status"], eight["num_ps"], eight["images_per_sec"], eight["speedup"]) == ("failed", "", "", "")
    assert eight["reasons"] == "timeout after 600 s; worker 3: peer ps:1 died"
    assert float(eight["ref_images_per_sec"]) == 1018.18
    # No published counterpart for local: the reference columns stay empty.
    local = rows["local", "synthetic", 2]
    assert local["ref_system"] == "" and float(local["images_per_sec"]) == pytest.approx(91.5)
    assert float(local["efficiency"]) == pytest.approx(91.5 / 51.5 / 2, abs=1e-6)


def test_best_configurations_markdown(built):
    md = (built / "best_configurations.md").read_text()
    assert "## daint: inception3, batch 64 per GPU" in md and "## local: small_cnn, batch 32 per GPU" in md
    assert (
        "| 2 | synthetic | 1 | parameter_server | 262.00 | [259.52, 264.48] | 3/3 | 1.90 | 0.9493 | 1 | "
        "parameter_server | 264.57 | -1.0% | 0.9570 | -0.8% |" in md
    )
    assert "| 8 | synthetic | - | - | failed |" in md
    assert "- 8 GPUs, synthetic: timeout after 600 s; worker 3: peer ps:1 died" in md
    assert "### I/O overhead" in md and "| 2 | 262.00 | 235.80 | 10.00 | 1.41 | +8.59 pp |" in md


def test_configurations_table_with_ci_min_max_and_failures(built):
    rows = read_csv(built / "configurations.csv")
    assert len(rows) == 11
    (ps2,) = [
        r for r in rows if r["system"] == "daint" and r["data"] == "real" and r["gpus"] == "2" and r["num_ps"] == "1"
    ]
    assert float(ps2["images_per_sec"]) == pytest.approx(235.8)
    assert (float(ps2["images_per_sec_min"]), float(ps2["images_per_sec_max"])) == (234.9, 236.7)
    spread = (236.7 - 234.9) / float(ps2["images_per_sec"])
    assert float(ps2["spread"]) == pytest.approx(spread, rel=1e-3) and float(ps2["cv"]) > 0
    assert ps2["is_best"] == "true" and ps2["ref_is_same_config"] == "false"  # the study's best was DR
    (dr2,) = [
        r for r in rows if r["system"] == "daint" and r["data"] == "real" and r["gpus"] == "2" and r["num_ps"] == "2"
    ]
    assert dr2["is_best"] == "false" and dr2["ref_is_same_config"] == "false"
    (local2,) = [r for r in rows if r["system"] == "local" and r["gpus"] == "2"]
    assert (local2["runs"], local2["n_ok"], local2["failed"]) == ("3", "2", "1")
    assert local2["reasons"] == "worker 1: peer died"
    (eight,) = [r for r in rows if r["gpus"] == "8"]
    assert (eight["status"], eight["is_best"]) == ("failed", "false")
    md = (built / "configurations.md").read_text()
    assert "1× timeout after 600 s; 1× worker 3: peer ps:1 died" in md and "★" in md
    assert "| min | max | spread | CV |" in md and f"| {spread * 100:.1f}% |" in md


def test_failures_are_listed_with_their_reasons(built):
    failures = read_csv(built / "failures.csv")
    assert [(f["system"], f["gpus"], f["repetition"], f["reason"]) for f in failures] == [
        ("daint", "8", "1", "worker 3: peer ps:1 died"),
        ("daint", "8", "2", "timeout after 600 s"),
        ("local", "2", "3", "worker 1: peer died"),
    ]
    assert "| sw1 | sw1-" in (built / "failures.md").read_text()
    index = (built / "index.md").read_text()
    assert (
        "3 failed run(s)" in index
        and "local, synthetic, 2 GPUs, 1 PS, parameter_server: 1× worker 1: peer died" in index
    )
    assert "daint (inception3, bs 64), synthetic, 8 GPUs" in index


def test_io_overhead_csv(built):
    rows = read_csv(built / "io_overhead.csv")
    assert [(r["system"], r["gpus"]) for r in rows] == [("daint", "1"), ("daint", "2"), ("daint", "4")]
    assert all(float(r["io_overhead_pct"]) == pytest.approx(10.0) for r in rows)
    assert float(rows[0]["ref_io_overhead_pct"]) == pytest.approx((138.23 - 137.03) / 138.23 * 100, abs=1e-5)


def test_plot_sidecars_hold_the_series_drawn(built):
    speed = sidecar(built, "speedup-daint-inception3-bs64")
    assert (speed["kind"], speed["x_scale"]) == ("line", "log2")
    assert speed["files"] == ["speedup-daint-inception3-bs64.png", "speedup-daint-inception3-bs64.svg"]
    labels = [s["label"] for s in speed["series"]]
    assert labels == [
        "ideal",
        "daint synthetic",
        "daint real",
        "Piz Daint synthetic (published)",
        "Piz Daint real (published)",
    ]
    assert series(speed, "daint synthetic") == pytest.approx({1: 1.0, 2: 262 / 138, 4: 520 / 138})
    published = series(speed, "Piz Daint synthetic (published)")
    assert sorted(published) == [1, 2, 4, 8, 16, 32, 64, 128]
    assert published[128] == pytest.approx(9219.7 / 138.23)
    assert series(speed, "ideal") == {x: float(x) for x in (1, 2, 4, 8, 16, 32, 64, 128)}

    eff = sidecar(built, "efficiency-daint-inception3-bs64")
    assert series(eff, "Piz Daint synthetic (published)")[8] == pytest.approx(0.9207, abs=1e-4)

    ips = sidecar(built, "images_per_sec-daint-inception3-bs64")
    assert ips["kind"] == "bar"
    (ours,) = [s for s in ips["series"] if s["label"] == "daint synthetic"]
    assert ours["points"][1] == pytest.approx({"x": 2, "y": 262.0, "low": 262 - 2.484138, "high": 262 + 2.484138})

    io = sidecar(built, "io_overhead")
    assert series(io, "daint") == pytest.approx({1: 10.0, 2: 10.0, 4: 10.0})
    assert series(io, "Piz Daint (published)")[8] == pytest.approx(10.4437, abs=1e-3)

    local = sidecar(built, "speedup-local-small_cnn-bs32")
    assert [s["source"] for s in local["series"]] == ["ideal", "ours"]  # nothing published for local
    assert series(local, "local synthetic") == pytest.approx({1: 1.0, 2: 91.5 / 51.5})


def test_png_and_svg_open(built):
    for png in sorted((built / "plots").glob("*.png")):
        pixels = mpimg.imread(png)
        assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 300, png
        assert pixels.std() > 0.01, png  # not a blank canvas
    for svg in sorted((built / "plots").glob("*.svg")):
        root = ET.parse(svg).getroot()
        assert root.tag.endswith("svg"), svg
    # Text is drawn as paths; matplotlib keeps each string as a comment beside them.
    svg = (built / "plots" / "speedup-daint-inception3-bs64.svg").read_text()
    for text in (
        "Speedup: daint: inception3, batch 64 per GPU",
        "Number of GPUs",
        "ideal",
        "daint synthetic",
        "Piz Daint real (published)",
        "128",
    ):
        assert f"<!-- {text} -->" in svg


def test_rebuild_is_idempotent_and_stale_files_go(db, built, tmp_path, capsys):
    out = tmp_path / "report"
    shutil.copytree(built, out)
    (out / "notes.txt").write_text("mine")
    capsys.readouterr()
    assert cli.main(["build", "--db", str(db), "--output", str(out)]) == 0
    assert "report unchanged" in capsys.readouterr().out
    # Without plots, the plots of the previous build (its manifest) go; other files stay.
    result = build.build(analysis.load_rows(db), out, formats=(), db=str(db))
    assert "index.md" in result.changed and "plots/speedup-all.png" in result.removed
    assert not list((out / "plots").glob("*")) and (out / "notes.txt").read_text() == "mine"
    assert "None written" in (out / "index.md").read_text()


def test_a_new_run_changes_the_report(db, tmp_path):
    db2 = tmp_path / "r.sqlite"
    shutil.copy(db, db2)
    out = tmp_path / "report"
    build.build(analysis.load_rows(db2), out, formats=(), db="db")
    add_sweep(db2, sweep="sw2")  # the same sweep again: 3 more failures, more repetitions
    result = build.build(analysis.load_rows(db2), out, formats=(), db="db")
    assert {"best_configurations.csv", "failures.csv", "index.md"} <= set(result.changed)
    assert len(read_csv(out / "failures.csv")) == 6
    only_first = build.build(analysis.load_rows(db2, "sw1"), out, formats=(), db="db", sweep_id="sw1")
    assert len(read_csv(out / "failures.csv")) == 3 and "sweep `sw1`" in (out / "index.md").read_text()
    assert "failures.csv" in only_first.changed


def test_reference_none_and_a_custom_system_map(db, tmp_path):
    out = tmp_path / "plain"
    build.build(analysis.load_rows(db), out, reference="none", formats=(), db="db")
    header = (out / "best_configurations.csv").read_text().splitlines()[0]
    assert "ref_images_per_sec" not in header and "published" not in (out / "best_configurations.md").read_text()
    assert "Reference: none" in (out / "index.md").read_text()

    mapped = tmp_path / "mapped"
    assert (
        cli.main(
            [
                "build",
                "--db",
                str(db),
                "--output",
                str(mapped),
                "--formats",
                "none",
                "--system-map",
                "local=aws-p2.xlarge",
                "--system-map",
                "daint=",
            ]
        )
        == 0
    )
    rows = {(r["system"], r["data"], r["gpus"]): r for r in read_csv(mapped / "best_configurations.csv")}
    assert rows["local", "synthetic", "2"]["ref_system"] == "aws-p2.xlarge"
    assert float(rows["local", "synthetic", "2"]["ref_images_per_sec"]) == 57.45
    assert rows["daint", "synthetic", "2"]["ref_system"] == ""
    index = (mapped / "index.md").read_text()
    assert "`local` → p2.xlarge (`aws-p2.xlarge`)" in index
    assert "images/sec are not comparable" in index  # small_cnn against the study's inception3


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "t.csv"
    assert files.write_atomic(target, "one\n") is True
    assert files.write_atomic(target, "one\n") is False  # same content: not rewritten

    def boom(*_args):
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, "replace", boom)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomic(target, "two\n")
    assert target.read_text() == "one\n"
    assert [p.name for p in tmp_path.iterdir()] == ["t.csv"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sweep-id", "nope"], "no runs in"),
        (["--system-map", "local=mars"], "'mars' is not a reference system"),
        (["--formats", "gif"], "--formats: unknown gif"),
    ],
)
def test_build_errors(db, tmp_path, capsys, args, message):
    assert cli.main(["build", "--db", str(db), "--output", str(tmp_path / "r"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "r" / "index.md").exists()


def test_missing_store(tmp_path, capsys):
    assert cli.main(["build", "--db", str(tmp_path / "none.sqlite"), "--output", str(tmp_path / "r")]) == 2
    assert "no results store" in capsys.readouterr().err
    assert not (tmp_path / "none.sqlite").exists()


def test_table_command_still_prints_the_sweep_table(db, capsys):
    assert cli.main(["table", "--db", str(db), "--sweep-id", "sw1"]) == 0
    out = capsys.readouterr().out
    assert "img/s total" in out and "efficiency" in out and "±95%" in out
    assert "1.00" in out and "worker 3: peer ps:1 died" in out


def test_two_workloads_in_one_store_are_never_mixed(tmp_path):
    """Ours and tf_cnn_benchmarks on the same system and configuration: two configurations,
    two bests, each speedup against its own 1-GPU run, and every table says which is which.
    (Before, both were averaged into one figure.)"""
    db = tmp_path / "results.sqlite"
    conn = store.connect(db)
    tf_cnn = {
        "workload": "tf_cnn_benchmarks",
        "workload_ref": "v1.0",
        "workload_commit": "ab" * 20,
        "tf_version": "1.1",
    }
    ours_old = {"workload": None}  # recorded before the store knew workloads: ours
    n = 0
    for extra, ips_by_gpus in (
        (tf_cnn, {1: 100.0, 2: 150.0}),
        (ours_old, {1: 50.0, 2: 95.0}),
        ({"workload": "ours", "tf_version": "2.18.0"}, {1: 50.0, 2: 95.0}),
    ):
        for gpus, ips in ips_by_gpus.items():
            n += 1
            rep = 1 if extra.get("workload") != "ours" else 2
            store.add_run(conn, study_row(f"w-{n}", "w", "aws", gpus, 1, PS, "synthetic", rep, ips, **extra))
    n += 1
    store.add_run(
        conn,
        study_row(f"w-{n}", "w", "aws", 4, 1, PS, "synthetic", 1, None, reason="worker 0 died", **tf_cnn),
    )
    conn.close()

    label = "tf_cnn_benchmarks@v1.0 (abababababab)"
    summaries = analysis.summarise(analysis.load_rows(db))
    assert sorted((s["workload"], s["gpus"], s["runs"], s["images_per_sec"], s["speedup"]) for s in summaries) == [
        ("ours", 1, 2, 50.0, 1.0),
        ("ours", 2, 2, 95.0, 1.9),
        (label, 1, 1, 100.0, 1.0),
        (label, 2, 1, 150.0, 1.5),
        (label, 4, 1, None, None),
    ]
    table = tables.format_table(summaries)
    assert f"inception3 ({label})" in table and table.count("inception3 (") == 3

    out = tmp_path / "report"
    assert cli.main(["build", "--db", str(db), "--output", str(out), "--formats", "svg"]) == 0
    best = read_csv(out / "best_configurations.csv")
    assert [(r["workload"], r["gpus"], r["images_per_sec"], r["speedup"]) for r in best] == [
        ("ours", "1", "50.0", "1.0"),
        ("ours", "2", "95.0", "1.9"),
        (label, "1", "100.0", "1.0"),
        (label, "2", "150.0", "1.5"),
        (label, "4", "", ""),
    ]
    # Which TensorFlow each program ran on, beside it.
    assert [r["tf_version"] for r in best] == ["2.18.0", "2.18.0", "1.1", "1.1", "1.1"]
    md = (out / "best_configurations.md").read_text()
    assert "## aws: inception3, batch 64 per GPU\n" in md
    assert f"## aws: inception3, batch 64 per GPU, measured with {label}\n" in md
    assert [(r["workload"], r["gpus"]) for r in read_csv(out / "failures.csv")] == [(label, "4")]
    assert sorted(p.name for p in (out / "plots").glob("speedup-aws-*.svg")) == [
        "speedup-aws-inception3-bs64.svg",
        "speedup-aws-tf_cnn_benchmarks_v1.0_abababababab-inception3-bs64.svg",
    ]


def test_the_environment_section_shows_each_sweeps_network(tmp_path):
    """A sweep's probe in the index, environments.md and network.csv; a sweep without one is unknown, with why."""
    from dtfbench.results import network

    path = tmp_path / "results.sqlite"
    add_sweep(path, "probed")
    add_sweep(path, "never")
    hosts = {
        "node01": {"private_ip": "10.0.0.1", "send_gb_s": 0.024, "recv_gb_s": 0.025, "gb_s": 0.024, "rtt_ms": 0.2},
        "node02": {"private_ip": "10.0.0.2", "send_gb_s": 0.025, "recv_gb_s": 0.025, "gb_s": 0.025, "rtt_ms": 0.2},
        "node03": {"private_ip": "10.0.0.3", "send_gb_s": 0.005, "recv_gb_s": 0.006, "gb_s": 0.005, "rtt_ms": 0.3},
    }
    document = network.unknown("")
    document.update(
        status="ok",
        why=None,
        link_gb_s=0.024,
        incast_gb_s=0.023,
        rtt_ms=0.2,
        hosts=hosts,
        incast={"receiver": "node01", "senders": ["node02", "node03"], "gb_s": 0.023, "why": None},
        slow_hosts=network.slow_hosts(hosts),
    )
    network.record(path, "probed", document)
    out = tmp_path / "report"
    build.build(analysis.load_rows(path), out, formats=(), db=str(path))
    index = (out / "index.md").read_text()
    assert (
        "network of sweep probed: point-to-point 0.024 GB/s (192 Mbit/s), incast into node01 0.023 GB/s "
        "(184 Mbit/s), round trip 0.2 ms; WARNING: far below the others: node03 0.005 GB/s (40 Mbit/s)" in index
    )
    assert "network of sweep never: unknown (no network probe recorded for sweep never)" in index
    env = (out / "environments.md").read_text()
    assert "## Network" in env and "| node03 | 10.0.0.3 | 0.005 GB/s (40 Mbit/s) |" in env
    assert "far below the others" in env
    rows = read_csv(out / "network.csv")
    probed = {r["host"]: r for r in rows if r["sweep_id"] == "probed"}
    assert (
        sorted(probed) == ["node01", "node02", "node03"]
        and probed["node03"]["slow"] == "true"
        and probed["node01"]["slow"] == "false"
    )
    assert float(probed["node01"]["link_gb_s"]) == 0.024 and probed["node01"]["incast_receiver"] == "node01"
    (never,) = [r for r in rows if r["sweep_id"] == "never"]
    assert never["status"] == "unknown" and never["host"] == ""
