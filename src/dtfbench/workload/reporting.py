"""One run's bookkeeping: timings, stdout lines, the error line, the JSON result.

Shared by the graph-mode worker, the collective worker and the PS. ``fail`` may be
called from the watchdog thread while the main thread is stuck inside TensorFlow, so it
is idempotent and ends by returning the exit code for the caller to os._exit with.
"""

import math
import re
import sys
import threading
import time

from ..contract.outcomes import PEER_LOST, diverged
from . import benchmark_output as out
from .errors import FAILURE_EXIT_CODE, RunFailure, error_line

_TASK_RE = re.compile(r"/job:(ps|worker)/replica:\d+/task:(\d+)")
_ADDR_RE = re.compile(r"ipv[46]:(\[?[\w.:\-]+?\]?):(\d+)")
# TF's allocation failure: 'OOM when allocating tensor with shape[…] and type float on
# /job:worker/replica:0/task:0/device:CPU:0 by allocator cpu'.
_OOM_RE = re.compile(r"OOM when allocating tensor.*? on (/job:(\w+)/replica:\d+/task:(\d+)/device:[\w:]+)")


def say(line, stream):
    """One line to the log (stdout or stderr). A line the log cannot take (its disk is full) is
    dropped: the run goes on, and a worker's result is its --result_file; raising here would
    turn a finished measurement into a failed run, or leave TF's threads holding the process."""
    try:
        print(line, file=stream, flush=True)
    except OSError:
        pass


class RunReport:
    def __init__(self, config, cluster):
        self.config = config
        self.cluster = cluster
        self.wall_time = {"import": None, "session_ready": None, "run": None}
        self.step_times = []
        self.measured_seconds = None
        self.measured_cpu_seconds = None
        self.measured_window = None  # (start, end), time.time(): the NIC bytes' window
        self.final_loss = None
        self.devices = []
        self.tf_version = None
        self.ps_bytes = []
        self.variable_bytes = None  # collective_all_reduce: the trainable bytes its ring reduces a step
        self.images_per_step = config.batch_size * config.num_gpus
        self.requested_device = config.device
        self.gpu_utilization = None
        self.environment = None  # dtfbench.compat.environment's document of this node
        self.evaluations = None  # dtfbench.workload.evaluation.Evaluations where this worker evaluates
        self.checkpoints = None  # dtfbench.workload.checkpoints.Checkpoints where this worker saves or restores
        # An epoch's training images, where known (time to accuracy, a learning-rate warm-up).
        self.examples_per_epoch = None
        self.schedule = None  # dtfbench.workload.learning_rate.Schedule, set by the worker
        self.created = time.monotonic()
        self.mlperf = None  # worker 0's MLPerf log (dtfbench.workload.mlperf_log.RunLog)
        if self.is_worker and cluster.task_index == 0:
            from .mlperf_log import RunLog

            self.mlperf = RunLog(lambda line: say(line, sys.stderr))
        # The last measured step: --num_batches, or --num_epochs' (a run of epochs, or a time-to-accuracy run's cap).
        self.last_step = config.num_batches
        self._gpu_sampler = None
        self._lock = threading.Lock()
        self._finished = False
        # Sessions and servers live until os._exit: a TF session closed by the garbage
        # collector after a peer died waits on RPCs to it (20 s and more).
        self.keepalive = []

    @property
    def is_worker(self):
        return self.cluster.job_name != "ps"

    @property
    def label(self):
        if not self.cluster.job_name:
            return "worker"
        return f"{self.cluster.job_name} {self.cluster.task_index}"

    def emit(self, line=""):
        say(line, sys.stdout)

    def log(self, message):
        # Progress notes go to stderr so stdout stays tf_cnn_benchmarks' lines + the result.
        say(f"[dtfbench {self.label}] {message}", sys.stderr)

    def start_gpu_sampling(self):
        """Sample this worker's GPUs (nvidia-smi) until stop_gpu_sampling; nothing on CPU-only nodes."""
        from ..node import nvidia_smi

        self._gpu_sampler = nvidia_smi.start_sampler(self.config.gpu_sample_interval, self.requested_device)

    def stop_gpu_sampling(self, wait=True):
        sampler, self._gpu_sampler = self._gpu_sampler, None
        if sampler is not None:
            if wait:
                self.gpu_utilization = sampler.stop()
            else:  # the watchdog's path: never wait on a hung nvidia-smi
                sampler._stop.set()

    def measure_steps(self, step, evaluate=None, stop=None, checkpoint=None):
        """The benchmark's timing rules, one loop for every kind of worker.

        ``step(what)`` runs one training step to its end and returns its loss. The warm-up
        steps (--num_warmup_batches) run unmeasured. Each of the --num_batches measured steps
        is timed alone (perf_counter around the step call and nothing else), with a step line
        every --display_every steps; the measured window's wall and CPU seconds and the GPU
        sampling span exactly the measured steps; the measured window (wall clock) is where
        every host's NIC bytes are taken (docs/network.md). A loss that is not a finite number
        (nan, inf), warm-up or measured, ends the run: it ``diverged``, in every mode.

        ``evaluate(what)``, where this worker evaluates, returns (top-1 hits, top-k hits,
        examples) over the held-out split; it runs after the measured steps its Evaluations
        call due, outside their timing (dtfbench.workload.evaluation). ``stop()``, checked after
        each measured step (and its evaluation), ends the steps before ``last_step``: a
        time-to-accuracy run whose target was reached, here or (the chief's) on another worker.

        ``checkpoint(step)``, where this worker saves (dtfbench.workload.checkpoints), saves after
        the measured steps ``self.checkpoints`` calls due, inside the measured window: images/sec
        holds what saving costs, and each save's seconds and bytes are recorded beside it.
        """
        config = self.config
        started = time.monotonic()
        if self.evaluations is not None:
            self.evaluations.start(started)
        cluster_images_per_step = self.images_per_step * self.cluster.num_workers
        if self.mlperf is not None:
            self._mlperf_settings(cluster_images_per_step, started)
            self.mlperf.run_start(started)
            self.mlperf.epochs(0, self.examples_per_epoch, started)
        for n in range(config.num_warmup_batches):
            what = f"warm-up step {n + 1}"
            self._finite(step(what), what)
            self._mlperf_epochs((n + 1) * cluster_images_per_step)
        self.emit(out.step_header())
        self.start_gpu_sampling()
        window_start = time.time()
        measured_start = time.perf_counter()
        cpu_start = time.process_time()
        if checkpoint is not None:
            self.checkpoints.start()
        for n in range(1, self.last_step + 1):
            began = time.perf_counter()
            loss = step(f"step {n}")
            self.step_times.append(time.perf_counter() - began)
            self.final_loss = self._finite(loss, f"step {n}")
            self._mlperf_epochs((config.num_warmup_batches + n) * cluster_images_per_step)
            if out.should_display(n, config.display_every):
                self.emit(out.step_line(n, self.images_per_step, self.step_times, self.final_loss))
            if evaluate is not None and self.evaluations.due(n):
                self._evaluate(n, evaluate)
            if checkpoint is not None and self.checkpoints.due(n):
                self.log(self.checkpoints.line(checkpoint(n)))
            if stop is not None and stop():
                self.log(f"stopping after step {n}: the target accuracy was reached")
                break
        if self.mlperf is not None:
            self.mlperf.run_stop(self._mlperf_status())
        self.measured_seconds = time.perf_counter() - measured_start
        self.measured_window = (window_start, time.time())
        self.measured_cpu_seconds = time.process_time() - cpu_start
        self.stop_gpu_sampling()

    def _mlperf_settings(self, cluster_images_per_step, at):
        config = self.config
        peak = self.schedule.peak if self.schedule is not None else config.learning_rate
        self.mlperf.settings(config, cluster_images_per_step, peak, self.created, at, self.examples_per_epoch)

    def _mlperf_epochs(self, images):
        if self.mlperf is not None and self.examples_per_epoch:
            self.mlperf.epochs(images, self.examples_per_epoch, time.monotonic())

    def _mlperf_status(self):
        """success: the target reached, or a run without one finished; aborted: a target not reached."""
        from .mlperf_log import ABORTED, SUCCESS

        evaluations = self.evaluations
        if evaluations is not None and evaluations.target and not evaluations.reached:
            return ABORTED
        return SUCCESS

    def set_epochs(self, examples_per_epoch, num_workers):
        """A run of --num_epochs epochs of `examples_per_epoch` images (with a target, its cap), in
        this worker's measured steps (every worker computes the same)."""
        from .evaluation import training_steps

        config = self.config
        self.last_step = training_steps(
            config.num_epochs, examples_per_epoch, self.images_per_step, num_workers, config.num_warmup_batches
        )
        if self.evaluations is not None:
            self.evaluations.examples_per_epoch = examples_per_epoch
            self.evaluations.last_step = self.last_step
        epochs = f"{config.num_epochs:g} epochs of {examples_per_epoch} images"
        if config.stop_at_top_1_accuracy:
            self.log(
                f"time to accuracy: top-1 {config.stop_at_top_1_accuracy:g} within {epochs} "
                f"({self.last_step} measured steps at most)"
            )
        else:
            self.log(f"training {epochs}: {self.last_step} measured steps")

    def _evaluate(self, n, evaluate):
        began = time.monotonic()
        top1, topk, examples = evaluate(f"the evaluation after step {n}")
        ended = time.monotonic()
        point = self.evaluations.record(n, top1, topk, examples, ended - began, self.final_loss, ended)
        self.log(self.evaluations.line(point))
        if self.mlperf is not None:
            self.mlperf.evaluation(point, began, ended)
            if self.evaluations.reached_at is point:  # MLPerf's run ends at the evaluation that reached the target
                from .mlperf_log import SUCCESS

                self.mlperf.run_stop(SUCCESS, monotonic=ended)

    @staticmethod
    def _finite(loss, what):
        value = float(loss)
        if not math.isfinite(value):
            raise RunFailure(diverged(value, what))
        return value

    def result(self, status="ok", reason=None):
        return out.build_result(
            config=self.config.as_dict(),
            step_times=self.step_times,
            images_per_step=self.images_per_step,
            measured_seconds=self.measured_seconds,
            num_workers=self.cluster.num_workers,
            warmup_steps=self.config.num_warmup_batches,
            wall_time=self.wall_time,
            devices=self.devices,
            tf_version=self.tf_version,
            ps_bytes=self.ps_bytes,
            variable_bytes=self.variable_bytes,
            status=status,
            reason=reason,
            final_loss=self.final_loss,
            measured_cpu_seconds=self.measured_cpu_seconds,
            gpu_utilization=self.gpu_utilization,
            environment=self.environment,
            measured_window=self.measured_window,
            accuracy=self.evaluations.summary() if self.evaluations is not None else None,
            checkpoints=self.checkpoints.summary() if self.checkpoints is not None else None,
            mlperf_log=list(self.mlperf.lines) if self.mlperf is not None else None,
        )

    def succeed(self):
        with self._lock:
            if self._finished:
                return 0
            self._finished = True
            result = self.result()
            # The result before the totals: the log ends as tf_cnn_benchmarks' did ('total
            # images/sec: N' and the dashes), which the study's extraction (tail -2 | head -n 1 |
            # cut -d' ' -f3) and PerfKitBenchmarker's parser read.
            self._publish(result)
            for line in out.total_lines(result["total_images_per_sec"]):
                self.emit(line)
            return 0

    def fail(self, reason):
        """Print the one error line (and, for workers, a failed JSON result); return exit code 1."""
        with self._lock:
            if self._finished:
                return FAILURE_EXIT_CODE
            self._finished = True
            self.stop_gpu_sampling(wait=False)
            say(error_line(f"{self.label}: {reason}"), sys.stderr)
            if self.mlperf is not None:
                from .mlperf_log import ABORTED

                self.mlperf.run_stop(ABORTED, reason=reason)
            if self.is_worker:
                try:
                    self._publish(self.result(status="failed", reason=reason))
                except Exception as exc:  # reporting must not mask the failure
                    say(error_line(f"{self.label}: could not write the result: {exc}"), sys.stderr)
            return FAILURE_EXIT_CODE

    def _publish(self, result):
        self.emit(out.result_line(result))
        if self.config.result_file:
            out.write_result_atomically(self.config.result_file, result)


def describe_peer(message, cluster):
    """Name the peer a TF error message points at ('ps 0 (host:port)'), other than ourselves."""
    own = (cluster.job_name or "worker", cluster.task_index)
    for job, task in _TASK_RE.findall(message or ""):
        if (job, int(task)) != own:
            address = cluster.address_of(job, int(task))
            return f"{job} {task}" + (f" ({address})" if address else "")
    for host, port in _ADDR_RE.findall(message or ""):
        for job, hosts in (("ps", cluster.ps_hosts), ("worker", cluster.worker_hosts)):
            for index, address in enumerate(hosts):
                if str(address.port) == port and (address.host == host or host in ("127.0.0.1", "[::1]")):
                    if (job, index) != own:
                        return f"{job} {index} ({address})"
    return None


def describe_tf_error(exc, cluster, during):
    """One line: what we were doing, which peer (if known), the TF error type and message."""
    message = str(getattr(exc, "message", None) or exc)
    first = " ".join(message.split())[:300]
    if type(exc).__name__ == "ResourceExhaustedError" or "OOM when allocating" in message:
        return describe_out_of_memory(exc, cluster, during, " ".join(message.split()))
    peer = describe_peer(message, cluster)
    where = f" with {peer}" if peer else ""
    return f"{during} failed{where}: {type(exc).__name__}: {first} {PEER_LOST}"


def describe_out_of_memory(exc, cluster, during, message):
    """TF's allocation failure, first in the line and as this task's own failure (or, when the
    allocation was on a peer's device, that peer's): not a lost peer."""
    own = (cluster.job_name or "worker", cluster.task_index)
    who = f"{own[0]} {own[1]}"
    found = _OOM_RE.search(message)
    if found and found.group(2) in ("ps", "worker") and (found.group(2), int(found.group(3))) != own:
        address = cluster.address_of(found.group(2), int(found.group(3)))
        who = f"{found.group(2)} {found.group(3)}" + (f" ({address})" if address else "")
    where = f" on {found.group(1)}" if found else ""
    # TF's sentence itself (its message may start with the graph's traceback), else the start.
    sentence = re.search(r"OOM when allocating tensor.*?(?:by allocator \S+|$)", message)
    text = sentence.group(0)[:300] if sentence else message[:300]
    return (
        f"out of memory: {who} could not allocate a tensor{where} in {during} "
        f"({type(exc).__name__}: {text}); lower batch_size or use a node with more memory"
    )
