"""The command line of ``python -m dtfbench train`` (tf_cnn_benchmarks' flags) and its checks.

Everything here is pure Python: bad input is reported (one stderr line, exit 2) before
TensorFlow is imported and before any server starts. The checks that need to know which
devices exist run after the import, in ``check_devices``, still before any server starts.
"""

import argparse
import os
from dataclasses import asdict, dataclass

from ..plan.catalog import LOCAL_VARIABLE_UPDATES, MODEL_SPECS
from ..plan.catalog import VARIABLE_UPDATES as CLUSTER_VARIABLE_UPDATES
from .cluster import ClusterInfo, build_cluster, parse_tf_config
from .errors import PROG, UsageError
from .formats import FORMATS, LMDB_SUFFIX, lmdb_module, shard_files

VARIABLE_UPDATES = CLUSTER_VARIABLE_UPDATES + LOCAL_VARIABLE_UPDATES
PS_MODES = ("parameter_server", "distributed_replicated")
TFRECORD_PATTERN = "train-*"


class _OneLineParser(argparse.ArgumentParser):
    """argparse prints usage plus an error; the contract is exactly one line, so raise instead."""

    def error(self, message):
        raise UsageError(message)


def _bool(text):
    value = str(text).strip().lower()
    if value in ("1", "true", "yes", "y", "on"):
        return True
    if value in ("0", "false", "no", "n", "off"):
        return False
    raise argparse.ArgumentTypeError(f"'{text}' is not a boolean; use true or false")


def build_parser():
    """The parser of every flag, in the order --help lists them."""
    p = _OneLineParser(prog=PROG, description="tf_cnn_benchmarks-style distributed training benchmark")
    _add_cluster_flags(p)
    _add_model_and_data_flags(p)
    _add_optimizer_flags(p)
    _add_measurement_flags(p)
    _add_accuracy_flags(p)
    _add_checkpoint_flags(p)
    _add_runtime_flags(p)
    _add_lifecycle_flags(p)
    return p


def _add_cluster_flags(parser):
    """Add the cluster flags: this task's place in the cluster and how it shares the variables."""
    add = parser.add_argument
    # Cluster (tf_cnn_benchmarks names). TF_CONFIG is read when none of these is given.
    add("--job_name", default="", help="ps or worker (empty: single process)")
    add("--task_index", type=int, default=0, help="index of this task in its job's host list")
    add("--ps_hosts", default="", help="comma-separated host:port of the parameter servers")
    add("--worker_hosts", default="", help="comma-separated host:port of the workers")
    add("--variable_update", default="parameter_server", choices=VARIABLE_UPDATES)
    add(
        "--cross_replica_sync",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        help="synchronous updates (SyncReplicasOptimizer) in the PS modes; false: asynchronous",
    )
    add(
        "--ps_placement",
        default="round_robin",
        choices=("round_robin", "greedy"),
        help="how variables are spread over the PSs (greedy: fewest bytes so far)",
    )
    add(
        "--local_parameter_device",
        default="cpu",
        choices=("cpu", "gpu"),
        help="where distributed_replicated keeps a worker's copies and aggregates its towers",
    )


def _add_model_and_data_flags(parser):
    """Add the flags of the model, its devices and the images it trains on."""
    add = parser.add_argument
    # Model and data.
    add("--model", default="inception3", choices=sorted(MODEL_SPECS))
    add("--batch_size", type=int, default=64, help="images per device per step (the study: 64)")
    add("--num_gpus", type=int, default=1, help="devices (towers) per worker")
    add(
        "--device",
        default="auto",
        choices=("auto", "cpu", "gpu"),
        help="device type of the towers; auto: gpu when one is visible (cpu + --num_gpus N: N CPU towers)",
    )
    add("--image_size", type=int, default=0, help="image side in pixels (0: the model's default)")
    add("--num_classes", type=int, default=1001, help="classes (ImageNet + background, as tf_cnn_benchmarks)")
    add(
        "--data_format",
        default="",
        choices=("", "NCHW", "NHWC"),
        help="NCHW (GPU only) or NHWC; default NCHW on GPU, NHWC on CPU",
    )
    add("--data_dir", default="", help="directory of ImageNet TFRecords train-*; empty: synthetic data")
    add(
        "--input_format",
        default="tfrecord",
        choices=FORMATS,
        help="how --data_dir holds the records: tfrecord (train-*, validation-*) or lmdb (train-*.lmdb, "
        "validation-*.lmdb; `dtfbench tfrecords --format lmdb` writes them)",
    )
    add(
        "--augmentation",
        default="inception",
        choices=("inception", "none"),
        help="training images: inception: a random crop (5-100%% of the area), resized and flipped "
        "(tf_cnn_benchmarks'); none: the whole image resized, as evaluation reads it (small or "
        "orientation-bound images such as the digits)",
    )


def _add_optimizer_flags(parser):
    """Add the flags of the optimizer, its learning rate and the weight decay."""
    add = parser.add_argument
    add("--optimizer", default="sgd", choices=("sgd", "momentum"))
    add("--learning_rate", type=float, default=0.005)
    add("--momentum", type=float, default=0.9, help="momentum of --optimizer momentum")
    add(
        "--lr_scaling",
        default="none",
        choices=("none", "linear"),
        help="linear: --learning_rate times the images an update averages over --batch_size (Goyal et al.)",
    )
    add(
        "--warmup_epochs",
        type=float,
        default=0.0,
        help="with --lr_scaling linear: rise from --learning_rate to the scaled rate over this many epochs",
    )
    add(
        "--weight_decay",
        type=float,
        default=4e-5,
        help="L2 weight decay added to the loss, batch-norm variables excepted (tf_cnn_benchmarks'); 0: none",
    )


def _add_measurement_flags(parser):
    """Add the flags of the steps: the unmeasured warm-up, the measured ones and their lines."""
    add = parser.add_argument
    # Measurement.
    add("--num_warmup_batches", type=int, default=10, help="unmeasured steps before the measured ones")
    add("--num_batches", type=int, default=100, help="measured steps")
    add("--display_every", type=int, default=10, help="print a step line every N measured steps")


def _add_accuracy_flags(parser):
    """Add the flags of held-out evaluation and of training to a target accuracy."""
    add = parser.add_argument
    # Held-out accuracy (tf_cnn_benchmarks' names; dtfbench.workload.evaluation).
    add(
        "--eval_during_training_every_n_steps",
        type=int,
        default=0,
        help="top-1/top-5 on --data_dir's validation-* shards every N measured steps and after the last; 0: none",
    )
    add("--num_eval_batches", type=int, default=0, help="batches an evaluation reads (0: the whole held-out split)")
    # Time to accuracy (tf_cnn_benchmarks' names): train until the held-out top-1 reaches the target.
    add(
        "--stop_at_top_1_accuracy",
        type=float,
        default=0.0,
        help="stop once an evaluation's top-1 reaches this (0 < x <= 1; needs evaluation and --num_epochs); 0: off",
    )
    add(
        "--num_epochs",
        type=float,
        default=0.0,
        help="train this many epochs instead of --num_batches (with --stop_at_top_1_accuracy: at most); 0: off",
    )
    add(
        "--num_examples_per_epoch",
        type=int,
        default=0,
        help="training images an epoch (0: counted in train-* up to 256 MB of shards; ImageNet's 1,281,167 in its 1024)",
    )


def _add_checkpoint_flags(parser):
    """Add the flags of saving and restoring checkpoints."""
    add = parser.add_argument
    # Checkpoints (the Summitdev study: ~5 s for LeNet, ~70 s for ResNet-101; dtfbench.workload.checkpoints).
    add(
        "--checkpoint_every_steps",
        type=int,
        default=0,
        help="save the variables into --checkpoint_dir every N measured steps (worker 0; every worker in "
        "collective_all_reduce, as its strategy needs); 0: off",
    )
    add(
        "--checkpoint_every_secs",
        type=float,
        default=0.0,
        help="save once this many seconds passed since the last save (or the first measured step); 0: off",
    )
    add("--checkpoint_dir", default="", help="where the checkpoints go (local or shared); made when missing")
    add(
        "--restore_checkpoint",
        action="store_true",
        help="before the first step, restore the variables from --checkpoint_dir's latest checkpoint (timed)",
    )


def _add_runtime_flags(parser):
    """Add the flags of the seed, TensorFlow's threads, the result file and GPU sampling."""
    add = parser.add_argument
    add(
        "--tf_random_seed",
        type=int,
        default=1234,
        help="the graph's seed: initial variables and shuffles repeat from run to run (tf_cnn_benchmarks')",
    )
    add("--num_intra_threads", type=int, default=0, help="intra-op threads (0: TF chooses)")
    add("--num_inter_threads", type=int, default=0, help="inter-op threads (0: TF chooses)")
    add("--result_file", default="", help="write the JSON result here (atomically); workers only")
    add(
        "--gpu_sample_interval",
        type=float,
        default=1.0,
        help="seconds between nvidia-smi samples of GPU utilisation during the measured steps; 0: off",
    )


def _add_lifecycle_flags(parser):
    """Add the timeouts that bound each stage of a task's life."""
    add = parser.add_argument
    # Lifecycle bounds.
    add(
        "--step_timeout",
        type=float,
        default=300.0,
        help="seconds one step (or barrier) may take before a peer is declared dead",
    )
    add(
        "--startup_timeout",
        type=float,
        default=300.0,
        help="seconds to wait for the peers to come up and the session to be ready",
    )
    add(
        "--ps_idle_timeout",
        type=float,
        default=0.0,
        help="a PS gives up (exit 1) after this many seconds without a worker finishing; 0: no limit",
    )


@dataclass(frozen=True)
class Config:
    """Every flag after validation; ``image_size``/``data_format``/``device`` are resolved."""

    job_name: str
    task_index: int
    ps_hosts: str
    worker_hosts: str
    variable_update: str
    cross_replica_sync: bool
    ps_placement: str
    local_parameter_device: str
    model: str
    batch_size: int
    num_gpus: int
    device: str
    image_size: int
    num_classes: int
    data_format: str
    input_format: str
    data_dir: str
    augmentation: str
    optimizer: str
    learning_rate: float
    momentum: float
    lr_scaling: str
    warmup_epochs: float
    weight_decay: float
    num_warmup_batches: int
    num_batches: int
    display_every: int
    eval_during_training_every_n_steps: int
    num_eval_batches: int
    stop_at_top_1_accuracy: float
    num_epochs: float
    num_examples_per_epoch: int
    checkpoint_every_steps: int
    checkpoint_every_secs: float
    checkpoint_dir: str
    restore_checkpoint: bool
    tf_random_seed: int
    num_intra_threads: int
    num_inter_threads: int
    result_file: str
    gpu_sample_interval: float
    step_timeout: float
    startup_timeout: float
    ps_idle_timeout: float

    def as_dict(self):
        return asdict(self)


def parse(argv=None, environ=None):
    """argv -> (Config, ClusterInfo). Raises UsageError with the one-line message."""
    environ = os.environ if environ is None else environ
    args = build_parser().parse_args(argv)
    _check_numbers(args)
    cluster = _resolve_cluster(args, environ)
    _check_mode(args, cluster)
    spec = MODEL_SPECS[args.model]
    image_size = args.image_size or spec.default_image_size
    if image_size < spec.min_image_size:
        raise UsageError(
            f"--image_size {image_size}: {args.model} needs images of at least {spec.min_image_size}x"
            f"{spec.min_image_size}; use --image_size {spec.min_image_size} or more (default {spec.default_image_size})"
        )
    if args.data_dir:
        check_data_dir(args.data_dir, args.input_format)
    if args.eval_during_training_every_n_steps:
        check_eval_data(args.data_dir, args.input_format)
    _check_target(args)
    _check_warmup(args)
    if cluster.job_name != "ps":
        _check_checkpoints(args)
    device = args.device
    if device == "auto" and cluster.job_name != "ps" and environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        device = "cpu"  # known without TF: the launcher hid every GPU from this process
    if cluster.job_name == "ps":
        device = "cpu"  # a PS never takes a GPU; the device flags are the workers' business
    elif device == "cpu":
        _check_cpu_choices(args)
    values = vars(args).copy()
    values.update(
        job_name=cluster.job_name,
        task_index=cluster.task_index,
        ps_hosts=",".join(str(a) for a in cluster.ps_hosts),
        worker_hosts=",".join(str(a) for a in cluster.worker_hosts),
        image_size=image_size,
        device=device,
    )
    return Config(**values), cluster


def _check_numbers(args):
    positive = {
        "--batch_size": args.batch_size,
        "--num_gpus": args.num_gpus,
        "--num_batches": args.num_batches,
        "--display_every": args.display_every,
        "--num_classes": args.num_classes,
    }
    for flag, value in positive.items():
        if value < 1:
            raise UsageError(f"{flag} {value}: must be at least 1")
    if args.num_classes < 2:
        raise UsageError(f"--num_classes {args.num_classes}: must be at least 2")
    non_negative = {
        "--num_warmup_batches": args.num_warmup_batches,
        "--task_index": args.task_index,
        "--num_intra_threads": args.num_intra_threads,
        "--num_inter_threads": args.num_inter_threads,
        "--image_size": args.image_size,
        "--ps_idle_timeout": args.ps_idle_timeout,
        "--gpu_sample_interval": args.gpu_sample_interval,
        "--weight_decay": args.weight_decay,
        "--eval_during_training_every_n_steps": args.eval_during_training_every_n_steps,
        "--num_eval_batches": args.num_eval_batches,
        "--num_epochs": args.num_epochs,
        "--num_examples_per_epoch": args.num_examples_per_epoch,
        "--warmup_epochs": args.warmup_epochs,
    }
    for flag, value in non_negative.items():
        if value < 0:
            raise UsageError(f"{flag} {value}: must not be negative")
    for flag, value in {
        "--step_timeout": args.step_timeout,
        "--startup_timeout": args.startup_timeout,
        "--learning_rate": args.learning_rate,
    }.items():
        if not value > 0:
            raise UsageError(f"{flag} {value}: must be greater than 0")


def _resolve_cluster(args, environ):
    """Flags win; TF_CONFIG is read only when no cluster flag is given (tf_cnn_benchmarks style)."""
    if args.variable_update == "independent":
        if args.ps_hosts or args.worker_hosts or args.job_name:
            raise UsageError(
                "--variable_update independent: runs one process without a cluster;"
                " drop --job_name/--ps_hosts/--worker_hosts or pick a distributed --variable_update"
            )
        return ClusterInfo()
    if not (args.ps_hosts or args.worker_hosts or args.job_name) and environ.get("TF_CONFIG"):
        ps_hosts, worker_hosts, job_name, task_index = parse_tf_config(environ["TF_CONFIG"])
        return build_cluster(job_name, task_index, ps_hosts, worker_hosts)
    return build_cluster(args.job_name, args.task_index, args.ps_hosts, args.worker_hosts)


def _check_mode(args, cluster):
    mode = args.variable_update
    if mode in PS_MODES and not cluster.ps_hosts:
        raise UsageError(
            f"--variable_update {mode}: needs parameter servers; pass --ps_hosts host:port,... with"
            " --worker_hosts and --job_name (or TF_CONFIG), or use --variable_update independent"
        )
    if mode == "collective_all_reduce":
        if cluster.ps_hosts:
            raise UsageError(
                "--ps_hosts: collective_all_reduce has no parameter servers; drop --ps_hosts"
                " (and do not start PS tasks) or use --variable_update parameter_server"
            )
        if not cluster.worker_hosts:
            raise UsageError(
                "--variable_update collective_all_reduce: needs --worker_hosts host:port,... and --job_name worker"
            )


def _check_cpu_choices(args):
    if args.data_format == "NCHW":
        raise UsageError(
            "--data_format NCHW: not supported on CPU (TensorFlow has no NCHW convolutions there);"
            " use --data_format NHWC or run on a GPU"
        )
    if args.local_parameter_device == "gpu":
        raise UsageError("--local_parameter_device gpu: this worker has no GPU; use --local_parameter_device cpu")
    if args.num_gpus > 1 and args.variable_update == "collective_all_reduce":
        raise UsageError(
            f"--num_gpus {args.num_gpus}: collective_all_reduce on CPU uses one device per worker; use --num_gpus 1"
        )


def check_data_dir(data_dir, input_format="tfrecord"):
    """The real-data path needs ImageNet-format shards named train-* in --data_dir."""
    if not os.path.isdir(data_dir):
        raise UsageError(f"--data_dir {data_dir}: not a directory; give the folder holding the train-* TFRecords")
    if input_format == "lmdb":
        if not train_files(data_dir, input_format):
            raise UsageError(
                f"--data_dir {data_dir}: no LMDB files named {TFRECORD_PATTERN}{LMDB_SUFFIX} for --input_format lmdb; "
                "write them with `python -m dtfbench tfrecords --format lmdb --output_dir DIR`, or read the "
                "TFRecords (--input_format tfrecord)"
            )
        try:
            lmdb_module()
        except ImportError as err:
            raise UsageError(str(err)) from None
        return
    if not train_files(data_dir):
        raise UsageError(
            f"--data_dir {data_dir}: no TFRecord files named {TFRECORD_PATTERN}; generate some with"
            " `python -m dtfbench tfrecords --output_dir DIR` or leave --data_dir empty for synthetic data"
        )


def _check_target(args):
    """A target needs evaluation and a cap on the epochs; the cap means nothing without a target."""
    target = args.stop_at_top_1_accuracy
    if args.num_epochs and not args.data_dir and not args.num_examples_per_epoch:
        raise UsageError(
            f"--num_epochs {args.num_epochs:g}: an epoch of synthetic data has no size; give --data_dir with the "
            "train-* shards, or --num_examples_per_epoch, or --num_batches for a run of a fixed length"
        )
    if not target:
        return
    if not 0 < target <= 1:
        raise UsageError(f"--stop_at_top_1_accuracy {target:g}: a top-1 fraction above 0 and at most 1, e.g. 0.9")
    if not args.eval_during_training_every_n_steps:
        raise UsageError(
            f"--stop_at_top_1_accuracy {target:g}: the target is checked at each evaluation; give "
            "--eval_during_training_every_n_steps N (and --data_dir with validation-* shards)"
        )
    if not args.num_epochs > 0:
        raise UsageError(
            f"--stop_at_top_1_accuracy {target:g}: give --num_epochs, the most epochs to train before the run "
            "gives up (not converged)"
        )


def _check_warmup(args):
    """A warm-up ramps towards the scaled rate, and counts its length in epochs of the training set."""
    if not args.warmup_epochs:
        return
    if args.lr_scaling != "linear":
        raise UsageError(
            f"--warmup_epochs {args.warmup_epochs:g}: the warm-up rises from --learning_rate to the rate "
            "--lr_scaling linear scales it to; give --lr_scaling linear, or leave --warmup_epochs out"
        )
    if not args.data_dir and not args.num_examples_per_epoch:
        raise UsageError(
            f"--warmup_epochs {args.warmup_epochs:g}: an epoch of synthetic data has no size; give "
            "--num_examples_per_epoch, or --data_dir with the train-* shards"
        )


def _check_checkpoints(args):
    """Saves and restores need a folder this process can write; the modes that can restore one."""
    every = args.checkpoint_every_steps or args.checkpoint_every_secs
    if not (every or args.restore_checkpoint):
        if args.checkpoint_dir:
            raise UsageError(
                f"--checkpoint_dir {args.checkpoint_dir}: nothing saves or restores there; give "
                "--checkpoint_every_steps N or --checkpoint_every_secs S (or --restore_checkpoint)"
            )
        return
    if args.checkpoint_every_steps < 0 or args.checkpoint_every_secs < 0:
        raise UsageError("--checkpoint_every_steps and --checkpoint_every_secs: 0 (off) or more")
    if not args.checkpoint_dir:
        raise UsageError(
            "--checkpoint_every_steps/--checkpoint_every_secs/--restore_checkpoint: give --checkpoint_dir, "
            "the folder the checkpoints go to (a local disk, or a shared one every worker reaches)"
        )
    if args.variable_update == "collective_all_reduce" and args.checkpoint_every_secs:
        raise UsageError(
            f"--checkpoint_every_secs {args.checkpoint_every_secs:g}: collective_all_reduce saves on every worker at "
            "the same step (its strategy needs them all), and each worker's clock would choose another; give "
            "--checkpoint_every_steps N"
        )
    if args.restore_checkpoint and args.variable_update == "distributed_replicated":
        raise UsageError(
            "--restore_checkpoint: distributed_replicated keeps a copy of the variables on each worker, made "
            "from the PS's before the first step; restore with parameter_server or collective_all_reduce"
        )
    from .checkpoints import writable_problem

    problem = writable_problem(args.checkpoint_dir)
    if problem:
        raise UsageError(f"--checkpoint_dir {args.checkpoint_dir}: {problem}")


def check_eval_data(data_dir, input_format="tfrecord"):
    """Evaluation reads the held-out validation-* shards beside the train-* ones."""
    from .evaluation import EVAL_PATTERN, eval_files

    if not data_dir:
        raise UsageError(
            "--eval_during_training_every_n_steps: evaluation needs real data with a held-out split; give "
            f"--data_dir with {TFRECORD_PATTERN} and {EVAL_PATTERN} shards (`python -m dtfbench tfrecords "
            "--dataset digits --output_dir DIR` makes a small one), or leave evaluation off"
        )
    if not eval_files(data_dir, input_format):
        raise UsageError(
            f"--data_dir {data_dir}: no held-out shards named {EVAL_PATTERN}{LMDB_SUFFIX if input_format == 'lmdb' else ''} for "
            "--eval_during_training_every_n_steps; add ImageNet's validation shards (or make a set with "
            "`python -m dtfbench tfrecords --dataset digits`), or leave evaluation off"
        )


def train_files(data_dir, input_format="tfrecord"):
    """The training shards of `data_dir` in `input_format` (dtfbench.workload.formats)."""
    return shard_files(data_dir, "train", input_format)


def check_devices(config, num_visible_gpus):
    """After TF is imported: resolve --device auto and data_format; reject what cannot run.

    Returns the Config with ``device`` and ``data_format`` resolved.
    """
    if config.job_name == "ps":
        return config
    device = config.device
    if device == "auto":
        device = "gpu" if num_visible_gpus > 0 else "cpu"
    if device == "gpu" and config.job_name != "ps":
        if num_visible_gpus < config.num_gpus:
            raise UsageError(
                f"--num_gpus {config.num_gpus}: only {num_visible_gpus} GPU(s) visible"
                f" (CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>')});"
                " lower --num_gpus, or pass --device cpu for CPU towers"
            )
    if device == "cpu" and config.device == "auto" and config.num_gpus > 1:
        raise UsageError(
            f"--num_gpus {config.num_gpus}: no GPU visible on this host; use --num_gpus 1,"
            " or --device cpu to run that many CPU towers"
        )
    if device == "cpu":
        _check_cpu_choices(config)
    data_format = config.data_format or ("NCHW" if device == "gpu" else "NHWC")
    values = config.as_dict()
    values.update(device=device, data_format=data_format)
    return Config(**values)
