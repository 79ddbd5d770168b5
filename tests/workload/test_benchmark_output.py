"""Step statistics, tf_cnn_benchmarks lines and the JSON result (pure functions, no TF)."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtfbench.workload import benchmark_output as out

RECORDED = Path(__file__).parent / "data" / "worker0_parameter_server.out"

CONFIG = {
    "job_name": "worker",
    "task_index": 1,
    "ps_hosts": "h:1",
    "worker_hosts": "h:2,h:3",
    "model": "trivial",
    "batch_size": 32,
    "data_format": "NHWC",
    "image_size": 32,
    "optimizer": "sgd",
    "variable_update": "parameter_server",
    "cross_replica_sync": True,
    "data_dir": "",
}


def tf_cnn_benchmarks_timing_str(batch_size, step_train_times):
    """The formula of tf_cnn_benchmarks' get_perf_timing_str (scale=1), restated in numpy as the oracle:
    mean rate, standard error of the per-step rates, 1.4826 x their median absolute deviation."""
    times = np.array(step_train_times)
    speeds = batch_size / times
    speed_mean = batch_size / np.mean(times)
    speed_uncertainty = np.std(speeds) / np.sqrt(float(len(speeds)))
    speed_madstd = 1.4826 * np.median(np.abs(speeds - np.median(speeds)))
    return "images/sec: %.1f +/- %.1f (jitter = %.1f)" % (speed_mean, speed_uncertainty, speed_madstd)


@given(
    st.lists(st.floats(min_value=1e-3, max_value=10.0), min_size=1, max_size=50),
    st.integers(min_value=1, max_value=512),
)
def test_perf_timing_str_matches_tf_cnn_benchmarks(times, batch):
    ours, theirs = out.perf_timing_str(batch, times), tf_cnn_benchmarks_timing_str(batch, times)
    pattern = r"images/sec: ([\d.]+) \+/- ([\d.]+) \(jitter = ([\d.]+)\)"
    # Same format; the same numbers up to the last printed digit (sums may round differently).
    assert re.fullmatch(pattern, ours)
    for a, b in zip(re.fullmatch(pattern, ours).groups(), re.fullmatch(pattern, theirs).groups()):
        assert float(a) == pytest.approx(float(b), abs=0.1 + 1e-9 * float(b))


def test_perf_timing_str_example():
    assert out.perf_timing_str(64, [0.5, 0.5, 0.25]) == tf_cnn_benchmarks_timing_str(64, [0.5, 0.5, 0.25])


@given(
    st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=1, max_size=50), st.sampled_from([0, 5, 50, 95, 100])
)
def test_percentile_matches_numpy(values, q):
    assert out.percentile(values, q) == pytest.approx(float(np.percentile(values, q)), rel=1e-9, abs=1e-12)


def test_step_statistics():
    stats = out.step_statistics([0.1, 0.2, 0.3, 0.4])
    assert stats["mean"] == pytest.approx(0.25)
    assert stats["p50"] == pytest.approx(0.25)
    assert stats["p95"] == pytest.approx(0.385)
    assert stats["stddev"] == pytest.approx(math.sqrt(0.0125))
    assert stats["unit"] == "s"
    assert out.step_statistics([])["mean"] is None


def test_step_line_format():
    line = out.step_line(10, 64, [0.5, 0.5], 7.0941)
    assert line == "10\timages/sec: 128.0 +/- 0.0 (jitter = 0.0)\t7.094"


def test_display_steps_like_tf_cnn_benchmarks():
    assert [s for s in range(1, 31) if out.should_display(s, 10)] == [1, 10, 20, 30]


def build(step_times=(0.5, 0.5, 1.0), measured_seconds=2.0, status="ok", reason=None):
    return out.build_result(
        config=CONFIG,
        step_times=list(step_times),
        images_per_step=32,
        measured_seconds=measured_seconds,
        num_workers=2,
        warmup_steps=10,
        wall_time={"import": 9.0, "session_ready": 3.0, "run": 12.0},
        devices=["/job:worker/replica:0/task:1/device:CPU:0"],
        tf_version="2.21.0",
        ps_bytes=[100, 200],
        status=status,
        reason=reason,
        final_loss=6.9,
        measured_cpu_seconds=3.5,
    )


def test_result_follows_the_design_schema():
    result = build()
    for key in (
        "schema",
        "status",
        "job_name",
        "task_index",
        "images_per_sec",
        "total_images_per_sec",
        "step_time",
        "warmup_steps",
        "measured_steps",
        "wall_time",
        "devices",
        "tf_version",
        "ps_bytes",
        "config",
    ):
        assert key in result
    assert result["schema"] == 1 and result["status"] == "ok"
    assert result["images_per_sec"] == pytest.approx(3 * 32 / 2.0)
    assert result["total_images_per_sec"] == pytest.approx(2 * 48.0)  # tf_cnn_benchmarks: rate x workers
    assert result["measured_steps"] == 3 and result["warmup_steps"] == 10
    assert set(result["step_time"]) == {"mean", "p50", "p95", "stddev", "unit"}
    assert set(result["wall_time"]) == {"import", "session_ready", "run", "unit"}
    assert result["config"] == CONFIG
    json.dumps(result)


def test_every_number_is_a_sample_with_a_unit():
    samples = {s["metric"]: s for s in build()["samples"]}
    assert samples["images_per_sec"]["unit"] == "images/sec"
    assert samples["step_time_p95"]["unit"] == "s"
    assert samples["wall_time_import"]["value"] == 9.0
    assert samples["cpu_time_measured"] == {"metric": "cpu_time_measured", "value": 3.5, "unit": "s"}
    assert samples["ps_bytes_1"] == {"metric": "ps_bytes_1", "value": 200, "unit": "bytes"}
    assert all(set(s) == {"metric", "value", "unit"} for s in samples.values())


def test_failed_result_without_steps():
    result = build(step_times=(), measured_seconds=None, status="failed", reason="ps 0 died")
    assert result["status"] == "failed" and result["reason"] == "ps 0 died"
    assert result["images_per_sec"] is None and result["total_images_per_sec"] is None
    assert result["measured_steps"] == 0 and result["step_time"]["mean"] is None


def test_atomic_write(tmp_path):
    path = tmp_path / "sub" / "result.json"
    out.write_result_atomically(str(path), build())
    assert json.loads(path.read_text())["status"] == "ok"
    out.write_result_atomically(str(path), build(status="failed", reason="x"))
    assert json.loads(path.read_text())["status"] == "failed"
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temp files left


def test_header_and_total_lines():
    lines = out.header_lines(CONFIG, ["/gpu:0"], "2.21.0", num_workers=2)
    assert lines[0] == "TensorFlow:  2.21.0"
    assert "Model:       trivial" in lines and "Variables:   parameter_server" in lines
    assert "Batch size:  64 global" in lines and "             32 per device" in lines
    assert lines[-1] == "=========="
    assert out.total_lines(123.456) == ["-" * 64, "total images/sec: 123.46", "-" * 64]


def test_parse_printed_lines_round_trip():
    result = build()
    text = "\n".join(
        [
            *out.header_lines(CONFIG, ["/cpu:0"], "2.21.0", 2),
            out.step_header(),
            out.step_line(1, 32, [0.5], 6.9),
            *out.total_lines(result["total_images_per_sec"]),
            out.result_line(result),
        ]
    )
    parsed = out.parse_output(text)
    assert parsed["header"]["Model"] == "trivial"
    assert parsed["steps"] == [
        {"step": 1, "images_per_sec": 64.0, "uncertainty": 0.0, "jitter": 0.0, "total_loss": 6.9}
    ]
    assert parsed["total_images_per_sec"] == pytest.approx(96.0)
    assert parsed["result"] == json.loads(json.dumps(result))


def test_recorded_worker_output_is_consistent():
    """A real worker's stdout (1 PS + 2 workers, parameter_server, small_cnn, 6 measured steps)."""
    parsed = out.parse_output(RECORDED.read_text())
    result = parsed["result"]
    assert parsed["header"]["Variables"] == "parameter_server"
    assert [s["step"] for s in parsed["steps"]] == [1, 2, 4, 6]
    assert result["status"] == "ok" and result["measured_steps"] == 6
    # The last row covers every measured step: its rate is images per step / mean step time.
    last = parsed["steps"][-1]
    assert last["images_per_sec"] == pytest.approx(result["images_per_step"] / result["step_time"]["mean"], abs=0.05)
    # total images/sec is this worker's rate times the workers, printed with 2 decimals.
    assert result["total_images_per_sec"] == pytest.approx(result["images_per_sec"] * result["num_workers"])
    assert parsed["total_images_per_sec"] == pytest.approx(result["total_images_per_sec"], abs=0.005)
    # The wall-clock rate can only be lower than the step-time rate (it includes the printing).
    assert result["images_per_sec"] <= result["images_per_step"] / result["step_time"]["mean"] * 1.0001
    assert result["step_time"]["p50"] <= result["step_time"]["p95"]
