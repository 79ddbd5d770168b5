"""dtfbench.report.reference: the published numbers, and the study notebook's figures reproduced from them."""

from importlib import resources

import pytest

from dtfbench.report import reference, stats

# The study notebook's arrays (more decimals than the tables) for the I/O overhead check.
NOTEBOOK_GPUS = [1, 2, 4, 8, 16, 32, 64, 128]
NOTEBOOK = {
    "piz-daint": (
        [138.23, 264.57, 523.38, 1018.18, 2001.00, 3840.35, 7118.31, 9219.70],
        [137.03, 260.84, 516.707, 911.839, 1772.34, 3425.546, 6348.74, 9055.64],
    ),
    "aws-p2.xlarge": (
        [30.55, 57.448, 114.5678, 228.41, 431.645, 825.638, 996.3205, 1077.59125],
        [30.04, 56.94, 113.03, 224.06, 431.307, 734.97, 986.9066, 1080.1246],
    ),
    "aws-p2.8xlarge": (
        [30.55, 58.378, 116.338, 230.748, 448.574, 863.723, 1731.309, 3333.196],
        [30.04, 58.234, 115.56, 190.024, 387.674, 717.4942, 1430.2846, 2832.8334],
    ),
}


@pytest.fixture(scope="module")
def best():
    return {(r["system"], r["data"], r["gpus"]): r for r in reference.published_best()}


def test_published_rows_have_the_summary_shape():
    rows = reference.published()
    assert len(rows) == 59
    assert {r["source"] for r in rows} == {"cscs-2017-table1", "cscs-2017-table2", "cscs-2017-table3", "google-2017"}
    for r in rows:
        assert {"system", "gpus", "data", "images_per_sec", "num_ps", "variable_update", "source"} <= set(r)
        assert r["data"] in ("synthetic", "real") and r["images_per_sec"] > 0
        assert (r["model"], r["batch_size"]) == ("inception3", 64)
    daint8 = [r for r in rows if r["system"] == "piz-daint" and r["gpus"] == 8]
    assert {(r["data"], r["num_ps"], r["variable_update"], r["images_per_sec"]) for r in daint8} == {
        ("synthetic", 2, "parameter_server", 1018.18),
        ("real", 2, "parameter_server", 911.84),
    }
    google = reference.published(["google-2017"])
    assert len(google) == 11 and all(r["num_ps"] is None and r["variable_update"] is None for r in google)
    assert all(r["data"] == "synthetic" for r in google)


@pytest.mark.parametrize(
    "system, gpus, expected",
    [
        ("piz-daint", 8, 0.9207),
        ("piz-daint", 128, 0.5211),
        ("aws-p2.xlarge", 64, 0.5096),
        ("aws-p2.8xlarge", 64, 0.8855),
    ],
)
def test_the_notebooks_efficiencies(best, system, gpus, expected):
    assert round(best[system, "synthetic", gpus]["efficiency"], 4) == expected


@pytest.mark.parametrize(
    "system, data, gpus, expected",
    [
        # More of the notebook's printed efficiencies (In [14], [17], [20], [11]).
        ("piz-daint", "synthetic", 2, 0.95699197),
        ("piz-daint", "synthetic", 64, 0.80462703),
        ("piz-daint", "real", 8, 0.83178775),
        ("piz-daint", "real", 128, 0.51628977),
        ("aws-p2.xlarge", "synthetic", 16, 0.88307079),
        ("aws-p2.xlarge", "synthetic", 128, 0.27557059),
        ("aws-p2.xlarge", "real", 32, 0.76457432),
        ("aws-p2.8xlarge", "synthetic", 8, 0.94414075),
        ("aws-p2.8xlarge", "synthetic", 128, 0.85239259),
        ("aws-p2.8xlarge", "real", 128, 0.73673472),
    ],
)
def test_more_notebook_efficiencies(best, system, data, gpus, expected):
    # The tables round to 2 decimals where the notebook kept 3-4: agreement to ~1e-4.
    assert best[system, data, gpus]["efficiency"] == pytest.approx(expected, abs=2e-4)


def test_speedup_is_against_the_one_gpu_row(best):
    daint = best["piz-daint", "synthetic", 128]
    assert daint["speedup"] == pytest.approx(9219.7 / 138.23)
    assert best["piz-daint", "synthetic", 1]["speedup"] == 1.0


def test_google_rows_stand_in_only_where_the_study_has_none(best):
    dgx = best["nvidia-dgx-1", "synthetic", 8]
    assert dgx["source"] == "google-2017" and round(dgx["efficiency"], 4) == 0.9956  # notebook: 0.99559859
    assert best["aws-p2.8xlarge", "synthetic", 64]["source"] == "cscs-2017-table3"
    google_p28 = [
        r for r in reference.published_best(reference.published(["google-2017"])) if r["system"] == "aws-p2.8xlarge"
    ]
    effs = {r["gpus"]: r["efficiency"] for r in google_p28}
    assert effs[8] == pytest.approx(0.94583333) and effs[64] == pytest.approx(0.92864583)


@pytest.mark.parametrize(
    "system, gpus, expected",
    [
        # The notebook's I/O overhead bars (labels with 2 decimals).
        ("piz-daint", 8, 10.44),
        ("piz-daint", 16, 11.43),
        ("piz-daint", 128, 1.78),
        ("aws-p2.xlarge", 32, 10.98),
        ("aws-p2.xlarge", 128, 0.00),
        ("aws-p2.8xlarge", 8, 17.65),
        ("aws-p2.8xlarge", 64, 17.39),
    ],
)
def test_io_overhead_as_the_notebook(best, system, gpus, expected):
    synthetic, real = NOTEBOOK[system]
    i = NOTEBOOK_GPUS.index(gpus)
    assert round(stats.io_overhead(synthetic[i], real[i], clamp_at_zero=True), 2) == expected
    # The same from the published tables (2 decimals), with the formula's sign kept.
    ours = stats.io_overhead(
        best[system, "synthetic", gpus]["images_per_sec"], best[system, "real", gpus]["images_per_sec"]
    )
    assert ours == pytest.approx(expected, abs=0.25 if expected == 0 else 0.01)


def test_io_overhead_rows_from_the_reference(best):
    rows = {(r["system"], r["gpus"]): r for r in stats.io_overhead_rows(reference.published_best())}
    assert len(rows) == 24  # three systems x eight GPU counts; Google has no real data
    assert rows["aws-p2.xlarge", 128]["io_overhead"] == pytest.approx(-0.2351, abs=1e-3)  # real faster
    assert rows["piz-daint", 8]["io_overhead"] == pytest.approx((1018.18 - 911.84) / 1018.18 * 100)


def test_theano_mpi_times():
    rows = reference.theano_mpi()
    assert len(rows) == 20
    assert {r["model"] for r in rows} == {"googlenet", "alexnet", "vgg16", "resnet50"}
    for r in rows:
        assert r["images_per_sec"] == pytest.approx(5120 / r["seconds_per_5120_images"], abs=0.01)


def test_reference_files_are_package_data():
    folder = resources.files("dtfbench.report") / "published_data"
    assert (folder / "published_results.csv").is_file() and (folder / "theano_mpi_times.csv").is_file()
    readme = (folder / "README.md").read_text()
    assert "Tables 1–3" in readme and "google-2017" in readme and "Theano-MPI" in readme


def test_system_map_defaults_and_overrides():
    default = reference.parse_system_map()
    assert default["daint"] == "piz-daint" and default["aws-p2.xlarge"] == "aws-p2.xlarge"
    assert "local" not in default and "testbed" not in default
    mapped = reference.parse_system_map(["testbed=aws-p2.xlarge,local=aws-p2.8xlarge", "daint="])
    assert mapped["testbed"] == "aws-p2.xlarge" and mapped["local"] == "aws-p2.8xlarge"
    assert "daint" not in mapped
    assert reference.parse_system_map(["daint=none"]).get("daint") is None


@pytest.mark.parametrize(
    "spec, message",
    [
        ("testbed=mars", "'mars' is not a reference system; known: piz-daint"),
        ("testbed", "is not OURS=REFERENCE"),
        ("=piz-daint", "is not OURS=REFERENCE"),
    ],
)
def test_system_map_errors(spec, message):
    with pytest.raises(reference.ReferenceDataError, match=message):
        reference.parse_system_map([spec])


def test_matcher_finds_by_mapped_system_gpus_and_data():
    matcher = reference.Matcher(reference.published_best(), reference.parse_system_map(["testbed=aws-p2.xlarge"]))
    assert matcher.find("daint", 8, "real")["images_per_sec"] == 911.84
    assert matcher.find("testbed", 2, "synthetic")["variable_update"] == "distributed_replicated"
    assert matcher.find("testbed", 3, "synthetic") is None
    assert matcher.find("local", 1, "synthetic") is None
    assert matcher.system_for("daint") == "piz-daint" and matcher.system_for("local") is None
    assert len(matcher.rows_for("daint")) == 16
