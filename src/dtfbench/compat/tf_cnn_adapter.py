#!/usr/bin/env python
# -*- coding: utf-8 -*-
"""Run the original tf_cnn_benchmarks script as one dtfbench task and write dtfbench's result.

usage: python tf_cnn_adapter.py --tf_cnn_script PATH/tf_cnn_benchmarks.py
           [--tf_cnn_python PYTHON] [--result_file PATH] [--workload LABEL] [--commit SHA]
           FLAGS...

Every FLAG other than the adapter's own five options goes to the script unchanged, in order:
the launcher's cluster flags (--job_name --task_index --worker_hosts --ps_hosts, the same
names in both programs) and the run's tf_cnn_benchmarks flags. The script runs as this
process's child, with the same Python unless --tf_cnn_python says otherwise; its stdout and
stderr pass through to this process's own, so a task's log reads like the study's. SIGTERM,
SIGINT and SIGHUP are forwarded to it. When it ends, its output is parsed (the
``Step\\tImg/sec\\t...`` rows, ``total images/sec: N``, the header) into the result JSON of
dtfbench's own workload (``dtfbench.workload.benchmark_output``, schema 1), written atomically to
--result_file by workers (without --result_file, printed as one line ``DTFBENCH_RESULT {...}``;
with it, stdout ends as the script's did, which the study's own extraction reads).

Exit status: the script's; when a signal ended the script, the adapter ends itself by the same
signal (so whoever waits for it, such as tf_task's supervisor, sees what the script got); 1 when
the script exited 0 but printed no throughput; 2 for bad usage of the adapter itself. A parameter server of tf_cnn_benchmarks
never exits by itself (server.join()): the launcher stops it once the workers are done.

Standard library only, for the oldest Python of pyproject.toml's [tool.dtfbench.oldest-python]: the
launcher copies it to the nodes, whose Python may be as old as their TensorFlow 1.x, with ``environment.py`` (``dtfbench.compat.environment``) beside
it: a worker's result carries the node's environment document, collected before the script
starts by the script's Python with TensorFlow imported (what it cannot get is ``unknown``, with
why; it never fails the task).
"""

from __future__ import absolute_import, division, print_function

import ast
import collections
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

SCHEMA_VERSION = 1
RESULT_PREFIX = "DTFBENCH_RESULT "
PROG = "tf_cnn_adapter"
# The adapter's own options (value-taking); every other argument goes to the script.
OWN_OPTIONS = ("--tf_cnn_script", "--tf_cnn_python", "--result_file", "--workload", "--commit")
FORWARDED_SIGNALS = ("SIGTERM", "SIGINT", "SIGHUP")
TAIL_LINES = 40

# A line as the script logs it, perhaps behind a logging prefix: absl/glog
# ("I0718 14:02:10.123456 140123 benchmark_cnn.py:812] ") or tf.logging ("INFO:tensorflow:").
_PREFIX = re.compile(r"^(?:[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\] |INFO:tensorflow:)")
_NUMBER = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|-?nan|-?inf)"
# '%i\t%s\t%.3f' with %s = 'images/sec: %.1f +/- %.1f (jitter = %.1f)' (or, at other scales,
# 'images/sec: %.1f'); later versions append '\t%.3f\t%.3f' (top-1, top-5 accuracy).
_STEP = re.compile(
    r"^(\d+)\timages/sec: "
    + _NUMBER
    + r"(?: \+/- "
    + _NUMBER
    + r" \(jitter = "
    + _NUMBER
    + r"\))?"
    + r"\t"
    + _NUMBER
    + r"(?:\t"
    + _NUMBER
    + r"\t"
    + _NUMBER
    + r")?\s*$"
)
_TOTAL = re.compile(r"^total images/sec: " + _NUMBER + r"\s*$")
_STEP_HEADER = re.compile(r"^Step\tImg/sec\t")
_HEADER = re.compile(
    r"^(TensorFlow|Model|Dataset|Mode|SingleSess|Batch size|Num batches|Num epochs|"
    r"Devices|Data format|Optimizer|Variables|Sync|Staged vars|Use NCCL|AllReduce):\s+(.*?)\s*$"
)
_PS = re.compile(r"^Running parameter server (\d+)")
_ERROR = re.compile(r"^(?:[\w.]+\.)?\w*(?:Error|Exception|Exit)\b.*")


def _float(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


class OutputParser(object):
    """Reads tf_cnn_benchmarks' output line by line (thread-safe) and keeps what the result needs."""

    def __init__(self):
        self.header = {}
        self.steps = []
        self.total_images_per_sec = None
        self.step_header = None
        self.ps_task = None
        # When the step header (printed as the measured steps begin) and the last step row or
        # the total line (printed as they end) came: the measured window, which the script
        # does not print (time.time(); its lines come unbuffered, PYTHONUNBUFFERED).
        self.measured_start = None
        self.measured_end = None
        self.tail = collections.deque(maxlen=TAIL_LINES)
        self._in_header = True
        self._lock = threading.Lock()

    def feed(self, line):
        line = line.rstrip("\r\n")
        with self._lock:
            if line.strip():
                self.tail.append(line)
            text = _PREFIX.sub("", line, count=1)
            step = _STEP.match(text)
            if step:
                number, rate, uncertainty, jitter, loss, top1, top5 = step.groups()
                self.steps.append(
                    {
                        "step": int(number),
                        "images_per_sec": _float(rate),
                        "uncertainty": _float(uncertainty),
                        "jitter": _float(jitter),
                        "total_loss": _float(loss),
                        "top_1_accuracy": _float(top1),
                        "top_5_accuracy": _float(top5),
                    }
                )
                self.measured_end = time.time()
                return
            total = _TOTAL.match(text)
            if total:
                self.total_images_per_sec = _float(total.group(1))
                self.measured_end = time.time()
                return
            if _STEP_HEADER.match(text):
                self.step_header = text.strip().split("\t")
                self.measured_start = time.time()
                return
            if text.startswith("=========="):
                self._in_header = False
                return
            ps = _PS.match(text)
            if ps:
                self.ps_task = int(ps.group(1))
                return
            if self._in_header:
                field = _HEADER.match(text)
                if field:
                    self.header.setdefault(field.group(1), field.group(2))

    def feed_text(self, text):
        for line in text.splitlines():
            self.feed(line)
        return self

    def devices(self):
        text = self.header.get("Devices")
        if not text:
            return []
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return [text]
        return [str(item) for item in value] if isinstance(value, (list, tuple)) else [str(value)]

    def error_line(self):
        """The last line that names an exception (a traceback's end), else the last line."""
        lines = list(self.tail)
        for line in reversed(lines):
            if _ERROR.match(_PREFIX.sub("", line, count=1).strip()):
                return line.strip()
        return lines[-1].strip() if lines else None


# --- the flags ---------------------------------------------------------------------------


def split_arguments(argv):
    """(the adapter's own options as a dict, the arguments for the script) from argv."""
    own, rest = {}, []
    index = 0
    while index < len(argv):
        arg = argv[index]
        name, sep, value = arg.partition("=")
        if name in OWN_OPTIONS:
            if not sep:
                if index + 1 >= len(argv):
                    raise UsageError("%s needs a value" % name)
                index += 1
                value = argv[index]
            own[name[2:]] = value
        else:
            rest.append(arg)
        index += 1
    return own, rest


def flag_values(args):
    """The script's flags as {name: value}: --name=value, --name value, a bare --name (True)
    and --noname (False), the last one winning, as its flag parser reads them."""
    values = {}
    index = 0
    while index < len(args):
        arg = args[index]
        index += 1
        if not arg.startswith("--") or arg == "--":
            continue
        name, sep, value = arg[2:].partition("=")
        if sep:
            values[name] = value
        elif index < len(args) and not args[index].startswith("--"):
            values[name] = args[index]
            index += 1
        elif name.startswith("no") and len(name) > 2:
            values[name[2:]] = False
        else:
            values[name] = True
    return values


def _as_bool(value, default):
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() not in ("0", "false", "no", "off", "")


def _as_int(value, default=None):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return default


class UsageError(ValueError):
    pass


# --- the result ----------------------------------------------------------------------------


def samples(result):
    """Every number of a result as {metric, value, unit}, as dtfbench.workload.benchmark_output.samples."""
    out = []

    def add(metric, value, unit):
        if value is not None:
            out.append({"metric": metric, "value": value, "unit": unit})

    add("images_per_sec", result["images_per_sec"], "images/sec")
    add("total_images_per_sec", result["total_images_per_sec"], "images/sec")
    for key in ("mean", "p50", "p95", "stddev"):
        add("step_time_" + key, result["step_time"][key], "s")
    for key, value in result["wall_time"].items():
        if key != "unit":
            add("wall_time_" + key, value, "s")
    add("cpu_time_measured", (result.get("cpu_time") or {}).get("measured"), "s")
    gpu = result.get("gpu_utilization") or {}
    add("gpu_util_mean", gpu.get("mean"), "%")
    add("gpu_util_max", gpu.get("max"), "%")
    add("warmup_steps", result["warmup_steps"], "steps")
    add("measured_steps", result["measured_steps"], "steps")
    for index, value in enumerate(result["ps_bytes"]):
        add("ps_bytes_%d" % index, value, "bytes")
    return out


def _signal_name(number):
    for name in dir(signal):
        if name.startswith("SIG") and not name.startswith("SIG_") and getattr(signal, name) == number:
            return name
    return "signal %d" % number


def build_result(
    parser,
    flags,
    returncode,
    wall_seconds,
    workload=None,
    commit=None,
    script=None,
    stopped_by=None,
    error=None,
    environment=None,
):
    """The result document (dtfbench.workload.benchmark_output's schema 1) of one worker.

    tf_cnn_benchmarks' 'total images/sec' counts every worker's steps (the global step), so it
    is the cluster's rate: images_per_sec, this worker's share, is that over the number of
    workers, and the store's sum of the workers' shares is the mean of what they printed,
    the study's figure. step_images_per_sec is the worker's own rate from its last step row.
    """
    worker_hosts = [h for h in str(flags.get("worker_hosts") or "").split(",") if h]
    num_workers = max(len(worker_hosts), 1)
    per_device = _as_int(flags.get("batch_size"))
    num_gpus = _as_int(flags.get("num_gpus"), 1)
    images_per_step = per_device * num_gpus if per_device else None
    total = parser.total_images_per_sec
    last = parser.steps[-1] if parser.steps else None
    step_rate = last["images_per_sec"] if last else None
    measured = _measured_steps(parser, flags)
    mean_step = images_per_step / step_rate if images_per_step and step_rate else None
    reason = _failure_reason(parser, returncode, stopped_by, error)
    status = "ok" if reason is None else "failed"
    config = _result_config(parser, flags, per_device, num_gpus)
    result = {
        "schema": SCHEMA_VERSION,
        "status": status,
        "job_name": config["job_name"],
        "task_index": config["task_index"],
        "images_per_sec": total / num_workers if status == "ok" else None,
        "total_images_per_sec": total if status == "ok" else None,
        "step_images_per_sec": step_rate,
        "step_time": {"mean": mean_step, "p50": None, "p95": None, "stddev": None, "unit": "s"},
        "warmup_steps": _as_int(flags.get("num_warmup_batches")),
        "measured_steps": measured,
        "wall_time": {"run": wall_seconds, "unit": "s"},
        "devices": parser.devices(),
        "tf_version": parser.header.get("TensorFlow"),
        "ps_bytes": [],
        "variable_bytes": None,
        "config": config,
        "num_workers": num_workers,
        "images_per_step": images_per_step,
        "final_loss": last["total_loss"] if last else None,
        "reason": reason,
        "cpu_time": {"measured": None, "unit": "s"},
        "gpu_utilization": None,
        "environment": environment,
        # tf_cnn_benchmarks cannot evaluate held-out data in a cluster (docs/accuracy.md); its
        # training top-1/top-5, where it prints them, are not held-out accuracy.
        "accuracy": None,
        "mlperf_log": None,  # their program writes none
        "checkpoints": None,  # nor times its checkpoints (the plan refuses checkpoint_every_* for it)
        # The step header to the total line, as this adapter saw them come (docs/network.md).
        "measured_window": _measured_window(parser),
        "workload": {
            "name": "tf_cnn_benchmarks",
            "label": workload,
            "commit": commit,
            "script": script,
            "exit_code": returncode,
            "step_header": parser.step_header,
        },
    }
    result["samples"] = samples(result)
    return result


def _measured_steps(parser, flags):
    """The measured steps: --num_batches once the total line came, else the last step row's number."""
    last = parser.steps[-1] if parser.steps else None
    num_batches = _as_int(flags.get("num_batches"))
    if parser.total_images_per_sec is not None:
        return num_batches if num_batches is not None else (last["step"] if last else 0)
    return last["step"] if last else 0


def _failure_reason(parser, returncode, stopped_by, error):
    """Why the run failed (the adapter's error, a signal, an exit code, no total line), or None."""
    if error:
        return error
    if returncode and (returncode < 0 or stopped_by is not None):
        number = -returncode if returncode < 0 else stopped_by
        reason = "tf_cnn_benchmarks was stopped by %s" % _signal_name(number)
        if returncode > 0:
            reason += " (exit code %d)" % returncode
        return reason
    if returncode:
        reason = "tf_cnn_benchmarks exited with code %d" % returncode
        line = parser.error_line()
        if line:
            reason += ": " + line
        return reason
    if parser.total_images_per_sec is None:
        return (
            "tf_cnn_benchmarks exited 0 but printed no 'total images/sec' line (%d step rows); "
            "see the task's log" % len(parser.steps)
        )
    return None


def _result_config(parser, flags, per_device, num_gpus):
    """The script's flags as the result's config, with the fields dtfbench reads filled in."""
    config = dict((key, value) for key, value in flags.items())
    config.update(
        {
            "job_name": flags.get("job_name") or "worker",
            "task_index": _as_int(flags.get("task_index"), 0),
            "model": flags.get("model") or parser.header.get("Model"),
            "batch_size": per_device,
            "num_gpus": num_gpus,
            "variable_update": flags.get("variable_update") or parser.header.get("Variables"),
            "cross_replica_sync": _as_bool(flags.get("cross_replica_sync"), True),
            # tf_cnn_benchmarks takes each model's own size; it prints none.
            "image_size": None,
            "data_dir": flags.get("data_dir") or None,
        }
    )
    return config


def _measured_window(parser):
    """When the measured steps began and ended, as this adapter saw their lines come, or None."""
    if parser.measured_start is None or parser.measured_end is None:
        return None
    return {"start": parser.measured_start, "end": parser.measured_end, "clock": "epoch", "source": "step lines"}


def write_result_atomically(path, result):
    """JSON to a temporary file beside `path`, then rename: readers never see half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        os.makedirs(folder)
    handle, tmp = tempfile.mkstemp(prefix=".result-", suffix=".json", dir=folder)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(result, out, indent=2, sort_keys=True)
            out.write("\n")
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --- running the script ----------------------------------------------------------------------


def collect_environment(python):
    """The node's environment document as `python` (the script's) sees it, from environment.py
    beside this file; never raises: a missing piece is unknown, with why."""
    try:
        import environment
    except Exception as err:  # an adapter copied without it
        return {"schema": 1, "unknown": {"environment": "environment.py is not beside %s: %s" % (PROG, err)}}
    try:
        return environment.collect_in(python)
    except Exception as err:
        return {"schema": 1, "unknown": {"environment": "%s: %s" % (type(err).__name__, err)}}


def _binary(stream):
    return getattr(stream, "buffer", stream)


def _pump(source, sink, parser):
    """Copy the child's lines to our stream as they come, and hand each to the parser."""
    out = _binary(sink)
    for raw in iter(source.readline, b""):
        try:
            out.write(raw)
            out.flush()
        except (IOError, OSError, ValueError):
            pass  # our own stdout went away: keep reading, or the child blocks on a full pipe
        parser.feed(raw.decode("utf-8", "replace"))
    source.close()


class Runner(object):
    def __init__(self, argv):
        self.child = None
        self.signalled = None
        self.argv = argv
        self._previous = {}

    def _forward(self, number, _frame):
        self.signalled = number
        child = self.child
        if child is not None and child.poll() is None:
            try:
                child.send_signal(number)
            except OSError:
                pass

    def install_handlers(self):
        for name in FORWARDED_SIGNALS:
            number = getattr(signal, name, None)
            if number is not None:
                self._previous[number] = signal.signal(number, self._forward)

    def run(self, parser):
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"  # its lines reach the log (and the parser) as printed
        self.install_handlers()
        self.child = subprocess.Popen(
            self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, close_fds=True
        )
        if self.signalled is not None:  # a signal that came before the child existed
            self._forward(self.signalled, None)
        pumps = [
            threading.Thread(target=_pump, args=(self.child.stdout, sys.stdout, parser)),
            threading.Thread(target=_pump, args=(self.child.stderr, sys.stderr, parser)),
        ]
        for pump in pumps:
            pump.daemon = True
            pump.start()
        returncode = self.child.wait()
        for pump in pumps:
            # A grandchild that kept the pipes open must not hold the result back.
            pump.join(5)
        return returncode


def die_by(number):
    """End this process by signal `number`, as the script ended."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        signal.signal(number, signal.SIG_DFL)
        os.kill(os.getpid(), number)
    except (OSError, ValueError, RuntimeError):
        return
    time.sleep(1)  # the signal is delivered at once; this only waits for it


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        own, script_args = split_arguments(argv)
    except UsageError as err:
        sys.stderr.write("%s: error: %s\n" % (PROG, err))
        return 2
    flags = flag_values(script_args)
    result_file = own.get("result_file")
    script = own.get("tf_cnn_script")
    python = own.get("tf_cnn_python") or sys.executable
    parser = OutputParser()
    found = {}

    def finish(returncode, wall, stopped_by=None, error=None):
        if flags.get("job_name") == "ps":
            return
        result = build_result(
            parser,
            flags,
            returncode,
            wall,
            workload=own.get("workload"),
            commit=own.get("commit"),
            script=script,
            stopped_by=stopped_by,
            error=error,
            environment=found.get("environment"),
        )
        if result_file:
            # In the file only: the log ends as the script's output did ('total images/sec: N'
            # and the dashes), so the study's extraction (tail -2 | head -n 1 | cut -d' ' -f3)
            # reads it.
            write_result_atomically(result_file, result)
        else:
            sys.stdout.write(RESULT_PREFIX + json.dumps(result, sort_keys=True) + "\n")
            sys.stdout.flush()
        return result

    if not script or not os.path.isfile(script):
        message = (
            "--tf_cnn_script must name tf_cnn_benchmarks.py; %r is no file" % script
            if script
            else "--tf_cnn_script PATH/tf_cnn_benchmarks.py is required"
        )
        sys.stderr.write("%s: error: %s\n" % (PROG, message))
        finish(None, 0.0, error="%s: %s" % (PROG, message))
        return 2
    if flags.get("job_name") != "ps":  # once, before the script's steps
        found["environment"] = collect_environment(python)
    runner = Runner([python, script] + script_args)
    started = time.time()
    try:
        returncode = runner.run(parser)
    except OSError as err:
        message = "cannot start %s %s: %s" % (python, script, err)
        sys.stderr.write("%s: error: %s\n" % (PROG, message))
        finish(None, time.time() - started, error="%s: %s" % (PROG, message))
        return 127
    result = finish(returncode, time.time() - started, stopped_by=runner.signalled)
    if returncode < 0:
        die_by(-returncode)
        return 128 - returncode  # a signal that does not end a process by default
    if returncode == 0 and result is not None and result["status"] != "ok":
        sys.stderr.write("%s: error: %s\n" % (PROG, result["reason"]))
        return 1
    return returncode


if __name__ == "__main__":
    sys.exit(main())
