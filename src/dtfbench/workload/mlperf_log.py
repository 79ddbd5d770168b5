"""The run as an MLPerf log: ``:::MLLOG`` lines written by mlperf-logging's own ``mllog``.

Worker 0 (the evaluating worker in every mode) logs as MLPerf Training's reference
implementations do: the settings at init (``global_batch_size``, ``seed``, ``opt_*``,
``train_samples``, ``eval_samples``), ``run_start`` at the first training step, ``epoch_start``/
``epoch_stop`` where an epoch's size is known, ``eval_start``/``eval_stop``/``eval_accuracy`` (with
``epoch_num``) at each evaluation, and ``run_stop`` with its status: ``success`` when the target
was reached (or a run without one finished), ``aborted`` otherwise.

Every time is the run's one clock: the wall time at the run's start plus the monotonic seconds
since, in milliseconds. So ``run_stop - run_start`` of a run that reached its target is the time
to accuracy the result states (its ``wall_seconds`` are monotonic seconds from the same start),
which is what mlperf-logging's result summarizer scores. The lines go to stderr with the other
progress notes (stdout stays tf_cnn_benchmarks' lines) and into the JSON result's
``mlperf_log``; the report writes each run's as ``mlperf/<run id>.log``.
"""

import logging
import time

from mlperf_logging.mllog import constants as keys
from mlperf_logging.mllog import mllog

SUCCESS = keys.SUCCESS
ABORTED = keys.ABORTED


class RunLog:
    def __init__(self, emit):
        """`emit(line)` prints one line (the report's, which survives a full disk)."""
        self.lines = []
        self._emit = emit
        logger = logging.getLogger(f"dtfbench.mllog.{id(self)}")
        logger.propagate = False
        logger.setLevel(logging.INFO)
        logger.handlers[:] = [_Collect(self)]
        self._log = mllog.MLLogger(logger=logger, default_stack_offset=2)
        self._wall0, self._mono0 = time.time(), time.monotonic()
        self.epoch = None  # the epoch in progress (0-based), where an epoch's size is known
        self.evaluated = False
        self.stopped = False

    def time_ms(self, monotonic=None):
        """A monotonic reading (now by default) on the log's clock, in milliseconds since the epoch."""
        now = time.monotonic() if monotonic is None else monotonic
        return (self._wall0 + (now - self._mono0)) * 1000.0

    def event(self, key, value=None, metadata=None, monotonic=None):
        self._log.event(key, value, metadata=metadata, time_ms=self.time_ms(monotonic))

    def start(self, key, value=None, metadata=None, monotonic=None):
        self._log.start(key, value, metadata=metadata, time_ms=self.time_ms(monotonic))

    def end(self, key, value=None, metadata=None, monotonic=None):
        self._log.end(key, value, metadata=metadata, time_ms=self.time_ms(monotonic))

    def settings(self, config, global_batch_size, peak_rate, init_started, at, train_samples=None):
        """The init block, at `at` (the run's start): what the run trains with. init_start is when
        the worker began (TensorFlow imported)."""
        self.start(keys.INIT_START, monotonic=init_started)
        values = [
            (keys.SUBMISSION_BENCHMARK, config.model),
            (keys.GLOBAL_BATCH_SIZE, global_batch_size),
            (keys.GRADIENT_ACCUMULATION_STEPS, 1),
            (keys.SEED, config.tf_random_seed),
            (keys.OPT_NAME, config.optimizer),
            (keys.OPT_BASE_LR, peak_rate),
            ("opt_learning_rate_scaling", config.lr_scaling),
            (keys.OPT_LR_WARMUP_EPOCHS, config.warmup_epochs),
            ("opt_weight_decay", config.weight_decay),
        ]
        if config.optimizer == "momentum":
            values.append(("opt_momentum", config.momentum))
        if config.stop_at_top_1_accuracy:
            values.append(("target_accuracy", config.stop_at_top_1_accuracy))
        if config.num_epochs:
            values.append(("max_epochs", config.num_epochs))
        if train_samples:
            values.append((keys.TRAIN_SAMPLES, int(train_samples)))
        for key, value in values:
            self.event(key, value, monotonic=at)

    def run_start(self, monotonic):
        self.end(keys.INIT_STOP, monotonic=monotonic)
        self.start(keys.RUN_START, monotonic=monotonic)

    def epochs(self, images, examples_per_epoch, monotonic):
        """After a step that brought the cluster's images to `images`: the epochs it ended and began."""
        if not examples_per_epoch:
            return
        current = int(images // examples_per_epoch)
        if self.epoch is None:
            self.epoch = 0
            self.start(keys.EPOCH_START, metadata={keys.EPOCH_NUM: 0}, monotonic=monotonic)
        while self.epoch < current:
            self.end(keys.EPOCH_STOP, metadata={keys.EPOCH_NUM: self.epoch}, monotonic=monotonic)
            self.epoch += 1
            self.start(keys.EPOCH_START, metadata={keys.EPOCH_NUM: self.epoch}, monotonic=monotonic)

    def evaluation(self, point, began, ended):
        metadata = {keys.EPOCH_NUM: point["epoch"], "step": point["step"]}
        if not self.evaluated:  # the held-out split's size, known once it was read
            self.evaluated = True
            self.event(keys.EVAL_SAMPLES, point["examples"], monotonic=began)
        self.start(keys.EVAL_START, metadata=metadata, monotonic=began)
        self.end(keys.EVAL_STOP, metadata=metadata, monotonic=ended)
        self.event(keys.EVAL_ACCURACY, point["top1"], metadata={**metadata, "top5": point["top5"]}, monotonic=ended)

    def run_stop(self, status, monotonic=None, reason=None):
        """The run's end, once: at the evaluation that reached the target, or when the steps ended."""
        if self.stopped:
            return
        self.stopped = True
        if self.epoch is not None:
            self.end(keys.EPOCH_STOP, metadata={keys.EPOCH_NUM: self.epoch}, monotonic=monotonic)
        metadata = {keys.STATUS: status}
        if reason:
            metadata["reason"] = reason
        self.end(keys.RUN_STOP, metadata=metadata, monotonic=monotonic)


class _Collect(logging.Handler):
    def __init__(self, run_log):
        super().__init__(logging.INFO)
        self.run_log = run_log

    def emit(self, record):
        line = record.getMessage().lstrip("\n")
        self.run_log.lines.append(line)
        self.run_log._emit(line)
