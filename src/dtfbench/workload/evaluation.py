"""Held-out accuracy during training: top-1 and top-5 on the validation-* shards of --data_dir.

``--eval_during_training_every_n_steps N`` (tf_cnn_benchmarks' flag): after every N measured
steps, and after the last, the evaluating worker pauses its training, runs the network in
inference mode (batch norm on its moving statistics, no dropout) over the held-out split (the
whole split, or --num_eval_batches batches), and resumes. On ImageNet the split is its
validation set; on ``dtfbench tfrecords --dataset digits`` the fixed fifth of each digit.

Who evaluates, in each mode (docs/accuracy.md says why):

- parameter_server, distributed_replicated, independent: the chief (worker 0), between its
  steps, on the variables as they are (a PS's, or its tower 0's copy, refreshed after each
  update). Asynchronous workers train on meanwhile, as beside TF's side-car evaluator;
  synchronous ones wait for the chief's gradient, so the pause is the whole cluster's;
- collective_all_reduce: every worker, at the same steps (their replicas are the same
  variables, and batch norm's moving statistics are averaged across them on reading, a
  collective every worker must join); each records the same figures.

The steps' timings (step_time) exclude the pauses; the measured window, and so images/sec, includes
them: with evaluation, images/sec says what training costs with it, and ``eval_seconds`` how
much of that went to evaluating. Preprocessing is deterministic: decode, resize to
--image_size, scale to [-1, 1]; no crop, no flip.
"""

import os
import time

from . import data, formats
from .errors import RunFailure
from .flags import train_files

EVAL_PATTERN = "validation-*"
# A held-out split whose shards hold at most this many bytes is decoded once and kept in memory
# (the digits: 0.5 MB of JPEGs, 6 MB decoded); a larger one (ImageNet's validation set: 6.4 GB of
# JPEGs, 30 GB decoded at 224 pixels) is read from its files at every evaluation.
CACHE_BYTES = 64 << 20
# top-5 as ImageNet's; with fewer classes, top-k over all of them is 1, so k stays below them.
TOP_K = 5


def eval_files(data_dir, input_format="tfrecord"):
    return formats.shard_files(data_dir, "validation", input_format)


def top_k(num_classes):
    return min(TOP_K, num_classes - 1)


def eval_input(
    tf, files, batch_size, image_size, num_classes, data_format, num_eval_batches=0, input_format="tfrecord"
):
    """The held-out split as (dataset, count): in file order, deterministic, the last batch short.

    A small split (CACHE_BYTES) is decoded once into memory and repeated, so that the pipeline
    stays open between evaluations (re-opening it cost more than reading the digits): ``count``
    is its records as a tensor, to run once (in the worker's own session: a session of its own
    before the worker's would set the process's thread pools), and ``batches_per_pass`` says
    what one evaluation reads. A large split is read from its files at each evaluation, to its
    end or --num_eval_batches: ``count`` is None, and the caller starts the dataset again.
    """

    def parse(record):
        # The training pipeline's parse without its augmentation: the whole image, resized.
        return data.parse_and_preprocess(tf, record, image_size, num_classes, data_format, "none")

    records = formats.records(tf, files, input_format)
    # Not autograph-converted (data.py says why).
    parse = tf.autograph.experimental.do_not_convert(parse)
    if sum(os.path.getsize(f) for f in files) > CACHE_BYTES:
        ds = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).batch(batch_size)
        if num_eval_batches:
            ds = ds.take(num_eval_batches)
        return ds.prefetch(tf.data.AUTOTUNE), None
    count = records.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    if num_eval_batches:
        # take before cache: a cache must see its whole input before it is read again.
        records = records.take(num_eval_batches * batch_size)
    ds = records.map(parse, num_parallel_calls=tf.data.AUTOTUNE).cache().batch(batch_size)
    return ds.repeat().prefetch(tf.data.AUTOTUNE), count


def batches_per_pass(records, batch_size, num_eval_batches):
    """The batches of one pass over a split of `records` (the last one short), at most num_eval_batches."""
    batches = max(1, -(-int(records) // batch_size))
    return min(batches, num_eval_batches) if num_eval_batches else batches


def correct_counts(tf, logits, labels, num_classes):
    """(top-1 hits, top-k hits, examples) of one batch, as int32 scalars."""
    labels = tf.cast(labels, tf.int32)

    def hits(k):
        return tf.reduce_sum(tf.cast(tf.math.in_top_k(labels, logits, k), tf.int32))

    return hits(1), hits(top_k(num_classes)), tf.shape(labels)[0]


class Evaluations:
    """When to evaluate, the accuracy curve (one point per evaluation) and, with a target, when
    it was first reached (time to accuracy)."""

    def __init__(self, config, images_per_step, num_workers):
        self.every = config.eval_during_training_every_n_steps
        self.last_step = config.num_batches
        self.num_eval_batches = config.num_eval_batches
        self.k = top_k(config.num_classes)
        # The images the cluster has trained on after this worker's n-th measured step (the
        # warm-up's too): exact in the synchronous modes, the expected count in the asynchronous one.
        self.images_per_step = images_per_step * num_workers
        self.warmup = config.num_warmup_batches
        self.target = config.stop_at_top_1_accuracy or None
        self.max_epochs = config.num_epochs or None
        self.examples_per_epoch = None
        self.reached_at = None  # the first point whose top-1 reached the target
        self.curve = []
        self.seconds = 0.0
        self.started = None
        self.rate = None  # () -> the learning rate the next update applies (the worker's)

    @property
    def enabled(self):
        return bool(self.every)

    @property
    def reached(self):
        return self.reached_at is not None

    def due(self, step):
        return self.enabled and (step % self.every == 0 or step == self.last_step)

    def start(self, now=None):
        """The clock of the curve and of time to accuracy: the first training step's start (the
        warm-up steps train too), a time.monotonic() reading."""
        self.started = time.monotonic() if now is None else now

    def record(self, step, top1_hits, topk_hits, examples, seconds, loss=None, now=None):
        """One evaluation's point; `now`: when it ended (time.monotonic(), the time to accuracy's end)."""
        now = time.monotonic() if now is None else now
        self.seconds += seconds
        images = (self.warmup + step) * self.images_per_step
        point = {
            "step": step,
            "images": images,
            "epoch": images / self.examples_per_epoch if self.examples_per_epoch else None,
            "wall_seconds": now - self.started if self.started is not None else None,
            "top1": top1_hits / examples if examples else None,
            "top5": topk_hits / examples if examples else None,
            "examples": examples,
            "eval_seconds": seconds,
            "loss": loss,  # the training loss of the step just before
            "learning_rate": self.rate() if self.rate is not None else None,
        }
        self.curve.append(point)
        if self.target and self.reached_at is None and point["top1"] is not None and point["top1"] >= self.target:
            self.reached_at = point
        return point

    def summary(self):
        """The result's ``accuracy``: the last evaluation's figures, the curve, the time spent and,
        with a target, time to accuracy (``status``: converged, or not_converged at the cap)."""
        if not self.curve:
            return None
        last = self.curve[-1]
        summary = {
            "split": "validation",
            "top1": last["top1"],
            "top5": last["top5"],
            "top_k": self.k,
            "examples": last["examples"],
            "step": last["step"],
            "eval_seconds": self.seconds,
            "curve": list(self.curve),
        }
        if self.target:
            reached = self.reached_at or {}
            summary.update(
                target_top1=self.target,
                max_epochs=self.max_epochs,
                examples_per_epoch=self.examples_per_epoch,
                status="converged" if self.reached else "not_converged",
                time_to_target=reached.get("wall_seconds"),
                steps_to_target=reached.get("step"),
                epochs_to_target=reached.get("epoch"),
            )
        return summary

    def line(self, point):
        epoch = f" (epoch {point['epoch']:.2f})" if point.get("epoch") is not None else ""
        reached = (
            f"; target top-1 {self.target:g} reached after {point['wall_seconds']:.2f} s"
            if self.reached_at is point
            else ""
        )
        return (
            f"eval at step {point['step']}{epoch}: top-1 {point['top1']:.4f}, top-{self.k} {point['top5']:.4f} "
            f"on {point['examples']} held-out images ({point['eval_seconds']:.2f} s){reached}"
        )


# ImageNet's training set (ILSVRC-2012), in build_imagenet_data.py's 1024 train-* shards.
IMAGENET_TRAIN_SHARDS = 1024
IMAGENET_TRAIN_EXAMPLES = 1281167
# Training shards up to this size are counted (the digits: 2 MB); a larger set must say its size.
COUNT_TRAIN_BYTES = 256 << 20


def epoch_examples(files, given=0):
    """How an epoch's training images are known without reading them: given (--num_examples_per_epoch),
    ImageNet's count for its 1024 shards, or None: to be counted (when small) by the caller."""
    if given:
        return given
    if len(files) == IMAGENET_TRAIN_SHARDS and all(f.endswith(f"-of-{IMAGENET_TRAIN_SHARDS:05d}") for f in files):
        return IMAGENET_TRAIN_EXAMPLES
    return None


def record_count(tf, files, input_format="tfrecord"):
    """The records of `files` as an int64 scalar (a graph op in a graph, a value eagerly)."""
    return formats.record_count(tf, files, input_format)


def epoch_size(config, count):
    """An epoch's training images (time to accuracy, a warm-up): --num_examples_per_epoch, ImageNet's
    count, or `count()` of a small training split; RunFailure naming the flag otherwise."""
    files = train_files(config.data_dir, config.input_format)
    known = epoch_examples(files, config.num_examples_per_epoch)
    if known:
        return known
    # An LMDB file knows its count; TFRecords are read to be counted.
    if config.input_format != "lmdb" and sum(os.path.getsize(f) for f in files) > COUNT_TRAIN_BYTES:
        raise RunFailure(
            f"an epoch's size (for --num_epochs or --warmup_epochs): the training images of --data_dir {config.data_dir} are too many to "
            f"count at every start ({len(files)} train-* shards, over {COUNT_TRAIN_BYTES >> 20} MB); give "
            "--num_examples_per_epoch"
        )
    return int(count())


def set_up_epochs(config, report, schedule, num_workers, count, load_warmup=None):
    """Size an epoch where the run needs one and hand it to the report and the learning-rate schedule."""
    # `count` is epoch_size's; `load_warmup()` hands the warm-up's length to a graph that holds it
    # in a variable (the graph-mode worker), before the schedule's line is logged.
    examples_per_epoch = None
    if config.num_epochs or schedule.warms_up:
        examples_per_epoch = epoch_size(config, count)
    report.examples_per_epoch, report.schedule = examples_per_epoch, schedule
    if schedule.warms_up:
        schedule.set_epoch(examples_per_epoch)
        if load_warmup is not None:
            load_warmup()
    if schedule.line():
        report.log(schedule.line())
    if config.num_epochs:
        report.set_epochs(examples_per_epoch, num_workers)


def training_steps(max_epochs, examples_per_epoch, images_per_step, num_workers, warmup):
    """The measured steps of `max_epochs` epochs (the warm-up's count towards them): this worker's."""
    total = -(-int(max_epochs * examples_per_epoch) // (images_per_step * num_workers))
    return max(1, total - warmup)


def run_batches(next_counts, num_eval_batches, out_of_range):
    """Sum (top-1, top-k, examples) over the split: `next_counts()` gives one batch's, and raises
    `out_of_range` at the split's end; at most `num_eval_batches` batches (0: all)."""
    top1 = topk = examples = batches = 0
    while not num_eval_batches or batches < num_eval_batches:
        try:
            a, b, n = next_counts()
        except out_of_range:
            break
        top1, topk, examples, batches = top1 + int(a), topk + int(b), examples + int(n), batches + 1
    return top1, topk, examples
