"""What a run measures: one class per workload, the contract between it and everything else.

``workload`` (a run-benchmark.yml variable) is one of

* ``ours`` (the default, :class:`Ours`): ``python -m dtfbench train``, tf_cnn_benchmarks'
  semantics on TF 2.x;
* ``tf_cnn_benchmarks@<git ref>`` (:class:`TfCnnBenchmarks`):
  ``scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py`` of tensorflow/benchmarks (or a mirror) at a
  branch, tag or commit, run through ``dtfbench.compat.tf_cnn_adapter`` on the nodes' own TensorFlow;
* ``cscs2017`` or ``cscs2017@<git ref>`` (:class:`Cscs2017`): the study's own program, the copy of
  tf_cnn_benchmarks in its repository (e-bug/distributed-tensorflow-benchmarks,
  ``google-benchmarks/tf_cnn_benchmarks``: tensorflow/benchmarks@9a318c0 with the one line TF 1.1
  lacks commented out), pinned to that repository's commit; for the study's TF 1.1 stack (the
  ``cscs2017`` node profile), run like ``tf_cnn_benchmarks@<ref>``.

Each workload states, in one class (PerfKitBenchmarker's one module a benchmark):

* what it can run (:class:`Capabilities`: models, modes, data and formats, evaluation, the
  timeouts it honours, its TensorFlow), and refuses the rest by name (``check_*``);
* how the nodes start it (:meth:`Workload.program`: argv after the node's Python, fetched or not,
  in the project's virtualenv or on the node's own Python);
* each run's command line from the plan's values, and the launcher's timeouts for it
  (:meth:`Workload.run_fields`: ``launch`` on every run);
* how a recorded run becomes samples (:meth:`Workload.samples`: metric, value, unit, metadata).

The plan (``dtfbench.plan.sweep``) puts the resolved command on each run; the roles run what the
plan says and branch on no workload's name. Adding a workload is a class here and an entry in
:data:`WORKLOADS`. Every problem is one :class:`WorkloadError` whose message names the input,
what is wrong and what to do. Pure standard library: Ansible ships it with the
``benchmark_plan`` module (as ``ansible.module_utils.dtfbench.plan.workloads``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .catalog import DATA_CHOICES, MODEL_SPECS, MODELS, VARIABLE_UPDATES

OURS = "ours"
TF_CNN_BENCHMARKS = "tf_cnn_benchmarks"
DEFAULT_REPO = "https://github.com/tensorflow/benchmarks.git"
# Where the script lives in the repository, at every ref since 2017.
SCRIPT_DIR = "scripts/tf_cnn_benchmarks"
SCRIPT = "tf_cnn_benchmarks.py"
# The study's program: its repository's copy of tf_cnn_benchmarks, at the repository's last commit.
STUDY = "cscs2017"
STUDY_REPO = "https://github.com/e-bug/distributed-tensorflow-benchmarks.git"
STUDY_SCRIPT_DIR = "google-benchmarks/tf_cnn_benchmarks"
STUDY_COMMIT = "a0d3d61f4f8994d96b40e1a65e78e5a92ef09741"

# tf_cnn_benchmarks' models of the study's time (model_config.get_model_config, mid-2017).
# Later refs have more; the plan holds to these, which every ref since then still has.
TF_CNN_MODELS = (
    "alexnet",
    "googlenet",
    "inception3",
    "inception4",
    "lenet",
    "overfeat",
    "resnet50",
    "resnet101",
    "resnet152",
    "trivial",
    "vgg11",
    "vgg16",
    "vgg19",
)
# Our catalog's names (dtfbench.plan.catalog.MODELS) for tf_cnn_benchmarks: the same names where the
# network is the same; None where tf_cnn_benchmarks has no counterpart.
MODEL_NAMES = {
    "inception3": "inception3",
    "resnet50": "resnet50",
    "resnet101": "resnet101",
    "vgg16": "vgg16",
    "alexnet": "alexnet",
    "lenet": "lenet",
    "trivial": "trivial",
    "small_cnn": None,
}
# The modes tf_cnn_benchmarks runs across a cluster (PS and workers, --job_name set).
TF_CNN_VARIABLE_UPDATES = ("parameter_server", "distributed_replicated")
# Modes it has but refuses with --job_name ("Invalid --variable_update in distributed mode").
TF_CNN_SINGLE_PROCESS_UPDATES = ("replicated", "independent")

# What differs from a run of ours, said once per sweep. Our options that tf_cnn_benchmarks
# lacks are dropped, never passed on: its flag parser would stop at an unknown flag.
NOTES = (
    "step_timeout and startup_timeout do not apply: tf_cnn_benchmarks has no such flags, so a "
    "worker whose peer died waits until run_timeout ends the run",
    "no GPU utilisation samples and no per-step times: the run's figure is the 'total images/sec' "
    "tf_cnn_benchmarks prints (the study's number), its step time the mean its last step row implies",
)

# git check-ref-format's rules, as far as a name on a command line needs them.
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]")


class WorkloadError(ValueError):
    """A workload request that cannot run, with the input, the problem and the fix."""


# The seconds tf_cluster/slurm_cluster give a workload's PSs to exit by themselves once the
# workers are done, before they stop them; 0: stop them at once (PSs that never exit).
PS_EXIT_SECONDS = 60


@dataclass(frozen=True)
class Capabilities:
    """What a workload can run; the plan refuses anything else, by name, before a run starts."""

    models: tuple[str, ...]
    variable_updates: tuple[str, ...]
    # synthetic and/or real (ImageNet as files on every node), and the file formats real data may have.
    data: tuple[str, ...] = DATA_CHOICES
    data_formats: tuple[str, ...] = ("tfrecord",)
    # Whether it takes an input size other than each model's own (--image_size).
    image_size: bool = False
    # Whether it measures accuracy on held-out data beside images/sec (none does yet).
    evaluation: bool = False
    # The run timeouts it takes as flags of its own (the launcher's run_timeout and ready_timeout
    # apply to every workload).
    timeouts: tuple[str, ...] = ()
    # Whether its tasks beat the heartbeat file the launcher names (DTFBENCH_TASK_HEARTBEAT):
    # then a frozen task is found within step_timeout; otherwise only run_timeout ends it.
    heartbeat: bool = False
    # Whether its PSs exit by themselves once the workers are done (tf_cnn_benchmarks' join forever).
    ps_exits: bool = False
    # The TensorFlow major versions its code runs on; () where its ref decides.
    tf_majors: tuple[int, ...] = ()
    # The optimizers the plan may choose (with a learning rate); (): the workload's own, not set by the plan.
    optimizers: tuple[str, ...] = ()
    # Whether it saves timed checkpoints during the measured steps (checkpoint_every_steps/_secs).
    checkpoints: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {
            "models": list(self.models),
            "variable_updates": list(self.variable_updates),
            "data": list(self.data),
            "data_formats": list(self.data_formats),
            "image_size": self.image_size,
            "evaluation": self.evaluation,
            "timeouts": list(self.timeouts),
            "heartbeat": self.heartbeat,
            "ps_exits": self.ps_exits,
            "tf_majors": list(self.tf_majors),
            "optimizers": list(self.optimizers),
            "checkpoints": self.checkpoints,
        }


@dataclass(frozen=True)
class Workload:
    """One workload: its identity (name, ref, where its program comes from) and its contract.

    Subclasses set :attr:`capabilities` and override what differs; the plan and the roles use
    only these methods and fields, never the workload's name."""

    name: str
    ref: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    # Where the program comes from (tf_cnn_benchmarks and cscs2017): the repository fetched
    # unless tf_cnn_benchmarks_repo names another (a mirror, a bundle, a clone), and the
    # script's directory inside it.
    repo: str | None = None
    script_dir: str | None = None

    capabilities: ClassVar[Capabilities]

    @property
    def label(self) -> str:
        """``ours``, ``tf_cnn_benchmarks@<ref>``, ``cscs2017`` (at its pinned commit) or
        ``cscs2017@<ref>``: what runs record and run ids depend on."""
        if self.ref is None:
            return self.name
        return f"{self.name}@{self.ref}"

    @property
    def is_ours(self) -> bool:
        return self.name == OURS

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "ref": self.ref,
            "label": self.label,
            "notes": list(self.notes),
            "repo": self.repo,
            "script_dir": self.script_dir,
            "script": None if self.script_dir is None else f"{self.script_dir}/{SCRIPT}",
        }

    # --- what it can run ------------------------------------------------------------------

    def check_request(
        self,
        *,
        models: Iterable[str],
        variable_updates: Iterable[str],
        image_size: int,
        warmup_steps: int,
        launcher: str,
    ) -> None:
        """Refuse, with one clear message, what the workload cannot run (before the plan's
        own checks of the same values)."""

    def check_models(self, models: Iterable[str], image_size: int) -> None:
        """Refuse a model the (checked, known) image size does not fit."""

    def check_evaluation(self, every_steps: int) -> None:
        """Refuse evaluation during training where the workload cannot do it."""
        if not self.capabilities.evaluation:
            raise WorkloadError(
                f"eval_every_steps={every_steps}: workload={self.label} cannot evaluate during a distributed run "
                f"({self.evaluation_note}); use workload={OURS}, or leave eval_every_steps out"
            )

    def check_input_format(self, input_format: str) -> None:
        """Refuse a file format of real data the workload cannot read."""
        if input_format not in self.capabilities.data_formats:
            raise WorkloadError(
                f"input_format={input_format}: workload={self.label} reads "
                f"{', '.join(self.capabilities.data_formats)} only; use workload={OURS}, or leave input_format out"
            )

    def check_checkpoints(self, setting: str) -> None:
        """Refuse timed checkpoints where the workload cannot save them."""
        if not self.capabilities.checkpoints:
            raise WorkloadError(
                f"{setting}: workload={self.label} does not time its checkpoints; use workload={OURS}, or leave "
                "checkpoint_every_steps and checkpoint_every_secs out"
            )

    # Why a workload without evaluation has none, for the error above.
    evaluation_note: ClassVar[str] = "it has no evaluation"
    # Whether each run also carries the workload's own flags alone (``workload_args``), apart from
    # the system's extra ones: a program of another project's, whose flags a reader checks.
    shows_own_args: ClassVar[bool] = False

    def check_tf_module(self, modules: Iterable[Any]) -> None:
        """Refuse a Slurm job's TensorFlow module the workload's code cannot run on."""

    # --- how it runs ------------------------------------------------------------------------

    def program(self) -> dict[str, Any]:
        """How the nodes start it: ``argv`` after the node's Python (None: the fetched program's,
        which the role brings to the nodes when ``fetch``), and ``venv``: whether it runs in the
        project's virtualenv (dtfbench installed) or on the node's own Python (a TF module's)."""
        raise NotImplementedError

    def run_fields(
        self,
        run: Mapping[str, Any],
        *,
        layout: Mapping[str, Any],
        where: str,
        data_dir: str | None,
        timeouts: Mapping[str, int],
        extra_args: list[str],
    ) -> dict[str, Any]:
        """What the plan adds to a run: ``launch`` (``args``, the command line after the cluster
        flags; ``stall_timeout``, the seconds a task's heartbeat may stand still, 0 off;
        ``ps_exit_timeout``, the seconds its PSs get to exit by themselves, 0 none)."""
        args = self.args(run, layout=layout, where=where, data_dir=data_dir, timeouts=timeouts)
        fields = {"launch": self.launch(args + extra_args, timeouts)}
        if self.shows_own_args:
            fields["workload_args"] = args  # its own flags, apart from the system's extra ones
        return fields

    def args(
        self,
        run: Mapping[str, Any],
        *,
        layout: Mapping[str, Any],
        where: str,
        data_dir: str | None,
        timeouts: Mapping[str, int],
    ) -> list[str]:
        """The workload's flags for one run, from the plan's values."""
        raise NotImplementedError

    def launch(self, args: list[str], timeouts: Mapping[str, int]) -> dict[str, Any]:
        caps = self.capabilities
        return {
            "args": args,
            "stall_timeout": timeouts.get("step_timeout", 0) if caps.heartbeat else 0,
            "ps_exit_timeout": PS_EXIT_SECONDS if caps.ps_exits else 0,
        }

    # --- what it measured -------------------------------------------------------------------

    def samples(self, record: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A recorded run (a row of the store) as samples, PerfKitBenchmarker's shape: metric,
        value, unit and metadata (the configuration). The run's figures, then each worker's
        own samples (its result's ``samples``, which the workload's program wrote) with its
        task index. A failed run gives what it measured, with ``status`` and ``reason``."""
        metadata = {key: record.get(key) for key in SAMPLE_METADATA}
        metadata["workload"] = self.label
        out = []
        for metric, unit in RUN_METRICS:
            value = record.get(metric)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                out.append({"metric": metric, "value": value, "unit": unit, "metadata": dict(metadata)})
        for index, result in enumerate(record.get("worker_results") or ()):
            if not isinstance(result, Mapping):
                continue
            worker = {**metadata, "job": "worker", "task_index": result.get("task_index", index)}
            for sample in result.get("samples") or ():
                if isinstance(sample, Mapping) and sample.get("value") is not None:
                    out.append(
                        {
                            "metric": f"worker_{sample['metric']}",
                            "value": sample["value"],
                            "unit": sample.get("unit"),
                            "metadata": dict(worker),
                        }
                    )
        return out


# The configuration each sample carries (the store's columns of the same names).
SAMPLE_METADATA = (
    "run_id",
    "sweep_id",
    "system",
    "status",
    "reason",
    "model",
    "batch_size",
    "image_size",
    "gpus",
    "num_workers",
    "num_ps",
    "devices_per_worker",
    "variable_update",
    "data",
    "repetition",
    "warmup_steps",
    "steps",
    "workload_commit",
    "tf_version",
    "environment_key",
    "eval_every_steps",
    "target_accuracy",
    "max_epochs",
    "optimizer",
    "learning_rate",
    "lr_scaling",
    "warmup_epochs",
    "sync",
    "storage",
    "cache",
    "background_io",
    "background_io_mb_per_s",
    "input_format",
    "checkpoint_every_steps",
    "checkpoint_every_secs",
    "tta_status",
    "finished_at",
)
# A run's own figures (the store's columns), in the order a reader wants them.
RUN_METRICS = (
    ("images_per_sec", "images/sec"),
    ("step_time_mean", "s"),
    ("step_time_p50", "s"),
    ("step_time_p95", "s"),
    ("step_time_stddev", "s"),
    ("gpu_util_mean", "%"),
    ("gpu_util_max", "%"),
    ("data_read_mb_per_s", "MB/s"),
    ("nic_rx_gb_per_s", "GB/s"),
    ("nic_tx_gb_per_s", "GB/s"),
    ("eval_top1", "fraction"),
    ("eval_top5", "fraction"),
    ("eval_seconds", "s"),
    ("time_to_accuracy", "s"),
    ("epochs_to_accuracy", "epochs"),
    ("checkpoint_saves", "saves"),
    ("checkpoint_mean_s", "s"),
    ("checkpoint_max_s", "s"),
    ("checkpoint_gb", "GB"),
    ("checkpoint_gb_per_s", "GB/s"),
)


@dataclass(frozen=True)
class Ours(Workload):
    """``python -m dtfbench train`` (src/dtfbench/workload/): tf_cnn_benchmarks' method on TF 2.x."""

    name: str = OURS
    capabilities: ClassVar[Capabilities] = Capabilities(
        models=MODELS,
        variable_updates=VARIABLE_UPDATES,
        image_size=True,
        evaluation=True,
        timeouts=("step_timeout", "startup_timeout"),
        heartbeat=True,
        ps_exits=True,
        tf_majors=(2,),
        optimizers=("sgd", "momentum"),
        checkpoints=True,
        data_formats=("tfrecord", "lmdb"),
    )

    @classmethod
    def parse(cls, text: str, name: str, ref: str | None) -> Workload:
        return cls()

    def check_models(self, models: Iterable[str], image_size: int) -> None:
        for model in models:
            spec = MODEL_SPECS[model]
            if image_size and image_size < spec.min_image_size:
                raise WorkloadError(
                    f"image_size={image_size} is too small for model={model}: it needs at least "
                    f"{spec.min_image_size} pixels; raise image_size or leave it out for "
                    f"{spec.default_image_size}"
                )

    def check_tf_module(self, modules: Iterable[Any]) -> None:
        found = tf_module_version(modules)
        if found is None:
            return
        module, (major, minor) = found
        if major < 2:
            raise WorkloadError(
                f"workload={self.label} (python -m dtfbench train, TensorFlow 2 code) cannot run on "
                f"the module {module} (TensorFlow {major}.{minor}): use workload={STUDY} (the study's "
                f"program, for a TensorFlow 1.x module), or load a TensorFlow 2 module "
                f"(-e tf_module=TensorFlow/2.x... on system=daint, else slurm_cluster_modules)"
            )

    def program(self) -> dict[str, Any]:
        return {"argv": ["-m", "dtfbench", "train"], "fetch": False, "venv": True}

    def args(
        self,
        run: Mapping[str, Any],
        *,
        layout: Mapping[str, Any],
        where: str,
        data_dir: str | None,
        timeouts: Mapping[str, int],
    ) -> list[str]:
        """tf_cnn_benchmarks' flags, and ours: the timeouts the plan was given, the image size
        when one was asked for, the dataset for real data."""
        args = [
            "--variable_update",
            run["variable_update"],
            "--model",
            run["model"],
            "--batch_size",
            str(run["batch_size"]),
            "--num_gpus",
            str(run["devices_per_worker"]),
            "--num_warmup_batches",
            str(run["warmup_steps"]),
            "--num_batches",
            str(run["steps"]),
        ]
        for name in self.capabilities.timeouts:
            if name in timeouts:
                args += [f"--{name}", str(timeouts[name])]
        if run.get("image_size"):
            args += ["--image_size", str(run["image_size"])]
        if run["data"] == "real":
            args += ["--data_dir", str(data_dir)]
        if run.get("input_format"):
            args += ["--input_format", run["input_format"]]
        if run.get("eval_every_steps"):
            args += ["--eval_during_training_every_n_steps", str(run["eval_every_steps"])]
        if run.get("sync") is not None:
            args += [f"--cross_replica_sync={'true' if run['sync'] else 'false'}"]
        if run.get("optimizer"):
            args += ["--optimizer", run["optimizer"]]
        if run.get("learning_rate"):
            args += ["--learning_rate", f"{run['learning_rate']:g}"]
        if run.get("lr_scaling"):
            args += ["--lr_scaling", run["lr_scaling"]]
        if run.get("warmup_epochs"):
            args += ["--warmup_epochs", f"{run['warmup_epochs']:g}"]
        if run.get("target_accuracy"):
            args += ["--stop_at_top_1_accuracy", f"{run['target_accuracy']:g}"]
        if run.get("max_epochs"):
            args += ["--num_epochs", f"{run['max_epochs']:g}"]
        if run.get("checkpoint_every_steps"):
            args += ["--checkpoint_every_steps", str(run["checkpoint_every_steps"])]
        if run.get("checkpoint_every_secs"):
            args += ["--checkpoint_every_secs", f"{run['checkpoint_every_secs']:g}"]
        if run.get("checkpoint_dir"):
            args += ["--checkpoint_dir", str(run["checkpoint_dir"])]
        return args


@dataclass(frozen=True)
class TfCnnBenchmarks(Workload):
    """tensorflow/benchmarks' ``tf_cnn_benchmarks.py`` at a git ref, fetched on the controller,
    unpacked on the nodes and run through ``dtfbench.compat.tf_cnn_adapter`` on their Python."""

    name: str = TF_CNN_BENCHMARKS
    notes: tuple[str, ...] = field(default=NOTES, compare=False)
    repo: str | None = DEFAULT_REPO
    script_dir: str | None = SCRIPT_DIR

    capabilities: ClassVar[Capabilities] = Capabilities(models=TF_CNN_MODELS, variable_updates=TF_CNN_VARIABLE_UPDATES)
    evaluation_note: ClassVar[str] = (
        "tf_cnn_benchmarks evaluates on one host only, from checkpoints (--eval); its training top-1/top-5 "
        "are not held-out accuracy"
    )
    shows_own_args: ClassVar[bool] = True

    @classmethod
    def parse(cls, text: str, name: str, ref: str | None) -> Workload:
        if ref is None:
            raise WorkloadError(
                f"workload={text} needs a git ref: {TF_CNN_BENCHMARKS}@<branch, tag or commit>, e.g. "
                f"{TF_CNN_BENCHMARKS}@master or a commit sha (pin a commit to measure the same code every time)"
            )
        return cls(ref=cls._checked_ref(text, name, ref))

    @staticmethod
    def _checked_ref(text: str, name: str, ref: str) -> str:
        problem = ref_problem(ref)
        if problem:
            raise WorkloadError(
                f"workload={text!r}: the git ref {ref!r} {problem}; give a branch, tag or commit sha, e.g. {name}@master"
            )
        return ref

    def check_request(
        self,
        *,
        models: Iterable[str],
        variable_updates: Iterable[str],
        image_size: int,
        warmup_steps: int,
        launcher: str,
    ) -> None:
        label = self.label
        for model in models:
            name = str(model).strip().lower()
            if name in MODEL_NAMES and MODEL_NAMES[name] is None:
                raise WorkloadError(
                    f"model={name} is dtfbench's own test model; {TF_CNN_BENCHMARKS} has no such model: "
                    f"choose from {', '.join(TF_CNN_MODELS)} (e.g. model=trivial for a quick run)"
                )
            if name not in TF_CNN_MODELS:
                raise WorkloadError(
                    f"model={model!r} is not a model of {TF_CNN_BENCHMARKS} (the study's version); "
                    f"choose from {', '.join(TF_CNN_MODELS)}"
                )
        for update in variable_updates:
            mode = str(update).strip().lower()
            if mode in TF_CNN_SINGLE_PROCESS_UPDATES:
                raise WorkloadError(
                    f"variable_update={mode} is a single-process mode of {TF_CNN_BENCHMARKS}: it refuses it "
                    f"with --job_name, and runs here are always a cluster of PS and workers; use "
                    f"{' or '.join(TF_CNN_VARIABLE_UPDATES)}"
                )
            if mode not in TF_CNN_VARIABLE_UPDATES:
                raise WorkloadError(
                    f"variable_update={update!r} is not a cluster mode of {TF_CNN_BENCHMARKS} (the study's "
                    f"version); use {' or '.join(TF_CNN_VARIABLE_UPDATES)}, or workload=ours for "
                    f"collective_all_reduce"
                )
        if image_size:
            raise WorkloadError(
                f"image_size={image_size}: {TF_CNN_BENCHMARKS} has no --image_size, each model has its own "
                f"(inception3 299, most others 224); leave image_size out with workload={label}"
            )
        if warmup_steps < 1:
            raise WorkloadError(
                f"warmup_steps={warmup_steps}: {TF_CNN_BENCHMARKS} of 2017 reads 0 as 'its default' (10 "
                f"or more); give warmup_steps >= 1 with workload={label}"
            )

    def program(self) -> dict[str, Any]:
        # The adapter's command line on each node comes from the fetch (roles/benchmark/tasks/tf_cnn_benchmarks.yml);
        # it runs on the node's own Python: a TF 1.1 module's Python 3.6 cannot hold dtfbench.
        return {"argv": None, "fetch": True, "venv": False}

    def args(
        self,
        run: Mapping[str, Any],
        *,
        layout: Mapping[str, Any],
        where: str,
        data_dir: str | None,
        timeouts: Mapping[str, int],
    ) -> list[str]:
        """tf_cnn_benchmarks' flags for one run (after the launcher's cluster flags).

        Its defaults are the study's GPU settings (--device gpu, --data_format NCHW,
        --local_parameter_device gpu); CPU workers need NHWC (TF 1.x has no NCHW convolution on
        the CPU). Real data names the dataset, which it would otherwise guess from the path.
        """
        args = [
            "--model",
            MODEL_NAMES.get(run["model"]) or run["model"],
            "--batch_size",
            str(run["batch_size"]),
            "--num_gpus",
            str(run["devices_per_worker"]),
            "--num_warmup_batches",
            str(run["warmup_steps"]),
            "--num_batches",
            str(run["steps"]),
            "--variable_update",
            run["variable_update"],
        ]
        if run.get("sync") is not None:  # tf_cnn_benchmarks' own flag, true by default
            args += [f"--cross_replica_sync={'True' if run['sync'] else 'False'}"]
        if worker_device_type(layout, where) == "cpu":
            args += ["--device", "cpu", "--data_format", "NHWC", "--local_parameter_device", "cpu"]
        if run["data"] == "real":
            args += ["--data_dir", str(data_dir), "--data_name", "imagenet"]
        return args


@dataclass(frozen=True)
class Cscs2017(TfCnnBenchmarks):
    """The study's own program (its repository's copy of tf_cnn_benchmarks, TF 1.x code), pinned
    to that repository's commit unless a ref is given."""

    name: str = STUDY
    ref: str | None = STUDY_COMMIT
    repo: str | None = STUDY_REPO
    script_dir: str | None = STUDY_SCRIPT_DIR

    capabilities: ClassVar[Capabilities] = Capabilities(
        models=TF_CNN_MODELS, variable_updates=TF_CNN_VARIABLE_UPDATES, tf_majors=(1,)
    )

    @classmethod
    def parse(cls, text: str, name: str, ref: str | None) -> Workload:
        return cls() if ref is None else cls(ref=cls._checked_ref(text, name, ref))

    @property
    def label(self) -> str:
        return self.name if self.ref == STUDY_COMMIT else f"{self.name}@{self.ref}"

    def check_tf_module(self, modules: Iterable[Any]) -> None:
        found = tf_module_version(modules)
        if found is None:
            return
        module, (major, minor) = found
        if major >= 2:
            raise WorkloadError(
                f"workload={self.label} (the study's tf_cnn_benchmarks of 2017, TensorFlow 1.x code) cannot "
                f"run on the module {module} (TensorFlow {major}.{minor}): use workload={OURS} with this module, "
                f"or load a TensorFlow 1.x module (on system=daint leave tf_module out for the study's "
                f"TensorFlow/1.1.0 module)"
            )


# Every workload by the name before its '@'. A new workload: a class above, and its name here.
WORKLOADS: dict[str, type[Workload]] = {OURS: Ours, TF_CNN_BENCHMARKS: TfCnnBenchmarks, STUDY: Cscs2017}


def ref_problem(ref: str) -> str | None:
    """What makes `ref` unusable as a git branch, tag or commit on a command line, or None."""
    if not ref:
        return "is empty"
    if len(ref) > 200:
        return "is longer than 200 characters"
    bad = _REF_FORBIDDEN.search(ref)
    if bad:
        char = bad.group(0)
        shown = "a space or control character" if char <= " " or char == "\x7f" else repr(char)
        return f"contains {shown}, which git refs cannot hold"
    if ref.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    if ".." in ref:
        return "contains '..' (a range, not one ref)"
    if "@{" in ref or ref == "@":
        return "is reflog syntax ('@' or '@{'), not a branch, tag or commit"
    if ref.startswith("/") or ref.endswith("/") or "//" in ref:
        return "has an empty path component ('/' at the start or end, or '//')"
    if ref.endswith(".") or ref.endswith(".lock"):
        return "ends with '.' or '.lock'"
    if any(part.startswith(".") for part in ref.split("/")):
        return "has a path component that starts with '.'"
    return None


def parse_workload(value: Any) -> Workload:
    """``ours`` (also for None/""), ``tf_cnn_benchmarks@<ref>``, ``cscs2017`` or ``cscs2017@<ref>``;
    anything else is a WorkloadError."""
    text = "" if value is None else str(value).strip()
    if text == "":
        return Ours()
    name, sep, ref = text.partition("@")
    kind = WORKLOADS.get(name)
    if kind is None or (kind is Ours and sep):
        raise WorkloadError(
            f"workload={text!r} is unknown; use {OURS} (python -m dtfbench train, the default), "
            f"{TF_CNN_BENCHMARKS}@<git ref> (the original script at a branch, tag or commit) or "
            f"{STUDY} (the study's own copy of it, for TF 1.1)"
        )
    return kind.parse(text, name, ref if sep else None)


def workload_of(record: Mapping[str, Any]) -> Workload:
    """The workload of a stored run (its ``workload`` and ``workload_ref`` columns); a run stored
    before workloads existed ran ours."""
    name = str(record.get("workload") or OURS)
    ref = record.get("workload_ref")
    try:
        return parse_workload(name if not ref else f"{name}@{ref}")
    except WorkloadError:
        return Ours()


def extra_args(value: Any) -> list[str]:
    """The extra flags every run's command line ends with (a system profile's extra_args): a
    list of strings and numbers, or WorkloadError naming what it got."""
    if value is None or value == "":
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise WorkloadError(
            f"extra_args={value!r} is a {type(value).__name__}, not a list of flags; give a list, e.g. "
            '-e \'{"extra_args": ["--num_intra_threads", "1"]}\''
        )
    out = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            raise WorkloadError(
                f"extra_args: {item!r} is a {type(item).__name__}; each flag or value is a string or number, "
                'e.g. ["--num_intra_threads", "1"]'
            )
        text = str(item)
        if text.startswith("-") and len(text.split()) > 1:
            # A string list the role's spec split on commas only: '--num_intra_threads 1' would reach
            # the program as one argument, which it refuses only once the run has started.
            raise WorkloadError(
                f"extra_args: {text!r} holds a flag and more, separated by a space; give each flag and each "
                f'value as an item of its own, e.g. ["--num_intra_threads", "1"]'
            )
        out.append(text)
    return out


def worker_device_type(layout: Mapping[str, Any], where: str) -> str:
    """The one device type (cpu or gpu) of a layout's workers: tf_cnn_benchmarks takes one
    --device for every task."""
    kinds = sorted({task.get("device_type") or "gpu" for task in layout["tasks"] if task["job"] == "worker"})
    if len(kinds) > 1:
        raise WorkloadError(
            f"{where}: the workers would run on both CPU and GPU hosts, but {TF_CNN_BENCHMARKS} gets one "
            f"--device for all of them; use hosts of one kind (nodes_group) or fewer gpus"
        )
    return kinds[0] if kinds else "gpu"


# A site's TensorFlow module names its version first (EasyBuild, Cray: TensorFlow/1.1.0-CrayGNU-17.08-cuda-8.0-python3,
# TensorFlow/2.4.0-CrayGNU-21.09); a name without one (TensorFlow, TensorFlow/venv-python3) says nothing.
_TF_MODULE = re.compile(r"^tensorflow(?:[-_]gpu)?/v?(\d+)\.(\d+)", re.IGNORECASE)


def tf_module_version(modules: Iterable[Any]) -> tuple[str, tuple[int, int]] | None:
    """The last TensorFlow module of a Slurm job's module list and its (major, minor), or None
    when no module name says a TensorFlow version."""
    found = None
    for module in modules or ():
        match = _TF_MODULE.match(str(module).strip())
        if match:
            found = (str(module).strip(), (int(match.group(1)), int(match.group(2))))
    return found
