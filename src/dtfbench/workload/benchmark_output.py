"""What a worker prints and writes: tf_cnn_benchmarks' lines, step statistics, the JSON result.

Pure functions (no TensorFlow) so they can be tested against recorded output. The stdout
lines copy tf_cnn_benchmarks (header, ``Step\\tImg/sec\\ttotal_loss`` rows, ``total
images/sec``) so logs read like the study's; the machine-readable part is one line
``DTFBENCH_RESULT {json}`` and the same JSON in ``--result_file`` (docs/design.md).
"""

import json
import math
import os
import re
import tempfile

SCHEMA_VERSION = 1
RESULT_PREFIX = "DTFBENCH_RESULT "
DASHES = "-" * 64


# --- statistics -------------------------------------------------------------------------


def percentile(values, q):
    """q-th percentile (0-100) with linear interpolation, as numpy.percentile's default."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def step_statistics(step_times):
    """mean/p50/p95/stddev (population) of the measured step times, in seconds."""
    if not step_times:
        return {"mean": None, "p50": None, "p95": None, "stddev": None, "unit": "s"}
    n = len(step_times)
    mean = sum(step_times) / n
    stddev = math.sqrt(sum((t - mean) ** 2 for t in step_times) / n)
    return {
        "mean": mean,
        "p50": percentile(step_times, 50),
        "p95": percentile(step_times, 95),
        "stddev": stddev,
        "unit": "s",
    }


def perf_timing_str(batch_size, step_times):
    """tf_cnn_benchmarks' get_perf_timing_str (scale 1): mean rate, its standard error, jitter."""
    speeds = [batch_size / t for t in step_times]
    mean_rate = batch_size / (sum(step_times) / len(step_times))
    n = len(speeds)
    mean_speed = sum(speeds) / n
    uncertainty = math.sqrt(sum((s - mean_speed) ** 2 for s in speeds) / n) / math.sqrt(n)
    median = percentile(speeds, 50)
    jitter = 1.4826 * percentile([abs(s - median) for s in speeds], 50)
    return f"images/sec: {mean_rate:.1f} +/- {uncertainty:.1f} (jitter = {jitter:.1f})"


# --- stdout lines -------------------------------------------------------------------------


def header_lines(config, devices, tf_version, num_workers):
    """tf_cnn_benchmarks' run header, plus the cluster and data lines it lacked."""
    per_device = config["batch_size"]
    towers = len(devices) or 1
    global_batch = per_device * towers * num_workers
    if config["job_name"]:
        this = f"{config['job_name']} {config['task_index']}"
        num_ps = len(config["ps_hosts"].split(",")) if config["ps_hosts"] else 0
        cluster = f"{num_ps} ps, {num_workers} worker(s); this task: {this}"
    else:
        cluster = "single process"
    sync = {
        "parameter_server": config["cross_replica_sync"],
        "distributed_replicated": config["cross_replica_sync"],
        "collective_all_reduce": True,
    }.get(config["variable_update"], "n/a")
    data = f"real ({config['data_dir']})" if config["data_dir"] else "synthetic"
    return [
        f"TensorFlow:  {tf_version}",
        f"Model:       {config['model']}",
        "Mode:        training",
        f"Batch size:  {global_batch} global",
        f"             {per_device} per device",
        f"Devices:     {devices}",
        f"Data format: {config['data_format']}",
        f"Image size:  {config['image_size']}",
        f"Optimizer:   {config['optimizer']}",
        f"Variables:   {config['variable_update']}",
        f"Sync:        {sync}",
        f"Cluster:     {cluster}",
        f"Data:        {data}",
        "==========",
    ]


def step_header():
    return "Step\tImg/sec\ttotal_loss"


def step_line(step, batch_size, step_times, loss):
    """One row, e.g. '10\\timages/sec: 132.6 +/- 0.1 (jitter = 0.3)\\t7.094'."""
    return f"{step}\t{perf_timing_str(batch_size, step_times)}\t{loss:.3f}"


def should_display(step, display_every):
    """tf_cnn_benchmarks shows measured step 1 and every display_every-th one."""
    return step == 1 or step % display_every == 0


def total_lines(total_images_per_sec):
    return [DASHES, f"total images/sec: {total_images_per_sec:.2f}", DASHES]


def result_line(result):
    return RESULT_PREFIX + json.dumps(result, sort_keys=True)


# --- the JSON result ----------------------------------------------------------------------


def build_result(
    *,
    config,
    step_times,
    images_per_step,
    measured_seconds,
    num_workers,
    warmup_steps,
    wall_time,
    devices,
    tf_version,
    ps_bytes,
    variable_bytes=None,
    status="ok",
    reason=None,
    final_loss=None,
    measured_cpu_seconds=None,
    gpu_utilization=None,
    environment=None,
    measured_window=None,
    accuracy=None,
    mlperf_log=None,
    checkpoints=None,
):
    """The result dict of docs/design.md (schema 1) plus ``samples``, ``reason``, ``final_loss``.

    images_per_sec is this worker's measured images over the measured wall time;
    total_images_per_sec is that times the number of workers, as tf_cnn_benchmarks reports.
    cpu_time is this process's CPU time (user + sys) over the measured steps: unlike wall
    time it hardly changes when other programs share the CPUs.
    gpu_utilization is nvidia-smi's utilization.gpu sampled during the measured steps
    (dtfbench.node.nvidia_smi.summarise: mean/max per GPU and over them), None without GPUs.
    environment is the node's document (dtfbench.compat.environment.collect), None where not collected.
    variable_bytes is what one step's gradients carry (the trainable variables' bytes) where no PS
    reports its bytes: collective_all_reduce's ring reduces it every step; None in the PS modes.
    measured_window is (start, end) of the measured steps in epoch seconds (time.time(), this
    host's clock): the span over which every host's NIC bytes are taken (docs/network.md).
    accuracy is the held-out evaluation where this worker evaluated (dtfbench.workload.evaluation:
    top1, top5, examples, step, eval_seconds, curve), None otherwise.
    mlperf_log is worker 0's ``:::MLLOG`` lines (dtfbench.workload.mlperf_log), None on the others.
    checkpoints is where this worker saved or restored (dtfbench.workload.checkpoints: saves,
    mean_seconds, max_seconds, gb, gb_per_s, restore_seconds, each save), None otherwise.
    """
    measured = len(step_times)
    rate = None
    if measured and measured_seconds and measured_seconds > 0:
        rate = measured * images_per_step / measured_seconds
    total = rate * num_workers if rate is not None else None
    step_time = step_statistics(step_times)
    wall = {k: v for k, v in wall_time.items()}
    wall["unit"] = "s"
    result = {
        "schema": SCHEMA_VERSION,
        "status": status,
        "job_name": config["job_name"] or "worker",
        "task_index": config["task_index"],
        "images_per_sec": rate,
        "total_images_per_sec": total,
        "step_time": step_time,
        "warmup_steps": warmup_steps,
        "measured_steps": measured,
        "wall_time": wall,
        "devices": list(devices),
        "tf_version": tf_version,
        "ps_bytes": list(ps_bytes),
        "variable_bytes": variable_bytes,
        "config": dict(config),
        "num_workers": num_workers,
        "images_per_step": images_per_step,
        "final_loss": final_loss,
        "reason": reason,
        "cpu_time": {"measured": measured_cpu_seconds, "unit": "s"},
        "gpu_utilization": gpu_utilization,
        "environment": environment,
        "accuracy": accuracy,
        "mlperf_log": mlperf_log,
        "checkpoints": checkpoints,
        "measured_window": (
            {"start": measured_window[0], "end": measured_window[1], "clock": "epoch"} if measured_window else None
        ),
    }
    result["samples"] = samples(result)
    return result


def samples(result):
    """Every number of a result as {metric, value, unit} (PerfKitBenchmarker style)."""
    out = []

    def add(metric, value, unit):
        if value is not None:
            out.append({"metric": metric, "value": value, "unit": unit})

    add("images_per_sec", result["images_per_sec"], "images/sec")
    add("total_images_per_sec", result["total_images_per_sec"], "images/sec")
    for key in ("mean", "p50", "p95", "stddev"):
        add(f"step_time_{key}", result["step_time"][key], "s")
    for key, value in result["wall_time"].items():
        if key != "unit":
            add(f"wall_time_{key}", value, "s")
    add("cpu_time_measured", result.get("cpu_time", {}).get("measured"), "s")
    gpu = result.get("gpu_utilization") or {}
    add("gpu_util_mean", gpu.get("mean"), "%")
    add("gpu_util_max", gpu.get("max"), "%")
    add("warmup_steps", result["warmup_steps"], "steps")
    add("measured_steps", result["measured_steps"], "steps")
    for index, value in enumerate(result["ps_bytes"]):
        add(f"ps_bytes_{index}", value, "bytes")
    add("variable_bytes", result.get("variable_bytes"), "bytes")
    accuracy = result.get("accuracy") or {}
    add("eval_top1", accuracy.get("top1"), "fraction")
    add("eval_top5", accuracy.get("top5"), "fraction")
    add("eval_seconds", accuracy.get("eval_seconds"), "s")
    return out


def write_result_atomically(path, result):
    """Write JSON to a temp file in the same folder, then os.replace: readers never see half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w") as handle:
            json.dump(result, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- reading the lines back ------------------------------------------------------------------

_STEP_RE = re.compile(r"^(\d+)\timages/sec: ([\d.]+) \+/- ([\d.]+) \(jitter = ([\d.]+)\)\t([-\d.naninf]+)$")
_TOTAL_RE = re.compile(r"^total images/sec: ([\d.]+)$")


def parse_output(text):
    """Parse a worker's stdout: header fields, step rows, total images/sec, the JSON result."""
    parsed = {"header": {}, "steps": [], "total_images_per_sec": None, "result": None}
    for line in text.splitlines():
        step = _STEP_RE.match(line)
        if step:
            parsed["steps"].append(
                {
                    "step": int(step.group(1)),
                    "images_per_sec": float(step.group(2)),
                    "uncertainty": float(step.group(3)),
                    "jitter": float(step.group(4)),
                    "total_loss": float(step.group(5)),
                }
            )
            continue
        total = _TOTAL_RE.match(line)
        if total:
            parsed["total_images_per_sec"] = float(total.group(1))
            continue
        if line.startswith(RESULT_PREFIX):
            parsed["result"] = json.loads(line[len(RESULT_PREFIX) :])
            continue
        key, sep, value = line.partition(":")
        if sep and key and key[0].isupper() and "\t" not in line and key.count(" ") <= 1:
            parsed["header"].setdefault(key.strip(), value.strip())
    return parsed
