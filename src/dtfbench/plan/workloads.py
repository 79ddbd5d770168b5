"""What a run measures: our workload, or the original tf_cnn_benchmarks at a git ref.

``workload`` (a run-benchmark.yml variable) is one of

* ``ours`` (the default): ``python -m dtfbench train``, tf_cnn_benchmarks' semantics on TF 2.x;
* ``tf_cnn_benchmarks@<git ref>``: ``scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py`` of
  tensorflow/benchmarks (or a mirror) at a branch, tag or commit, run through
  ``dtfbench.compat.tf_cnn_adapter`` on the nodes' own TensorFlow;
* ``cscs2017`` (or ``cscs2017@<git ref>``): the study's own program, the copy of
  tf_cnn_benchmarks in its repository (e-bug/distributed-tensorflow-benchmarks,
  ``google-benchmarks/tf_cnn_benchmarks``: tensorflow/benchmarks@9a318c0 with the one line TF 1.1
  lacks commented out), pinned to that repository's commit; for the study's TF 1.1 stack (the
  ``cscs2017`` node profile), run like ``tf_cnn_benchmarks@<ref>``.

This module checks a sweep request against what the chosen workload can run and builds the
tf_cnn_benchmarks flags of each run, on the controller, before anything starts
(``dtfbench.plan.sweep`` calls it). Every problem is one :class:`WorkloadError` whose message names
the input, what is wrong and what to do. Pure standard library: Ansible ships it with the
``benchmark_plan`` module (as ``ansible.module_utils.dtfbench.plan.workloads``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class Workload:
    name: str
    ref: str | None = None
    notes: tuple[str, ...] = field(default=(), compare=False)
    # Where the program comes from (tf_cnn_benchmarks and cscs2017): the repository fetched
    # unless tf_cnn_benchmarks_repo names another (a mirror, a bundle, a clone), and the
    # script's directory inside it.
    repo: str | None = None
    script_dir: str | None = None

    @property
    def label(self) -> str:
        """``ours``, ``tf_cnn_benchmarks@<ref>``, ``cscs2017`` (at its pinned commit) or
        ``cscs2017@<ref>``: what runs record and run ids depend on."""
        if self.ref is None or (self.name == STUDY and self.ref == STUDY_COMMIT):
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
    if text in ("", OURS):
        return Workload(OURS)
    name, sep, ref = text.partition("@")
    if name not in (TF_CNN_BENCHMARKS, STUDY):
        raise WorkloadError(
            f"workload={text!r} is unknown; use {OURS} (python -m dtfbench train, the default), "
            f"{TF_CNN_BENCHMARKS}@<git ref> (the original script at a branch, tag or commit) or "
            f"{STUDY} (the study's own copy of it, for TF 1.1)"
        )
    if name == STUDY and not sep:
        return Workload(STUDY, STUDY_COMMIT, NOTES, STUDY_REPO, STUDY_SCRIPT_DIR)
    if not sep:
        raise WorkloadError(
            f"workload={text} needs a git ref: {TF_CNN_BENCHMARKS}@<branch, tag or commit>, e.g. "
            f"{TF_CNN_BENCHMARKS}@master or a commit sha (pin a commit to measure the same code every time)"
        )
    problem = ref_problem(ref)
    if problem:
        raise WorkloadError(
            f"workload={text!r}: the git ref {ref!r} {problem}; give a branch, tag or commit sha, e.g. {name}@master"
        )
    if name == STUDY:
        return Workload(STUDY, ref, NOTES, STUDY_REPO, STUDY_SCRIPT_DIR)
    return Workload(TF_CNN_BENCHMARKS, ref, NOTES, DEFAULT_REPO, SCRIPT_DIR)


def check_request(
    workload: Workload,
    *,
    models: Iterable[str],
    variable_updates: Iterable[str],
    image_size: int,
    warmup_steps: int,
    launcher: str,
) -> None:
    """Refuse, with one clear message, what the workload cannot run. Ours accepts everything
    the plan's own checks accept."""
    if workload.is_ours:
        return
    label = workload.label
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


def check_tf_module(workload: Workload, modules: Iterable[Any]) -> None:
    """Refuse a workload on a TensorFlow module it cannot run on, before anything is submitted:
    ours (TF 2 code) on a TF 1.x module, the study's program (TF 1.x code: tf.contrib, queues)
    on a TF 2 module. tf_cnn_benchmarks@<ref> follows its ref (master needs TF 2, the
    cnn_tf_v1.x_compatible branches TF 1.x): not checked here."""
    found = tf_module_version(modules)
    if found is None:
        return
    module, (major, minor) = found
    on = f"the module {module} (TensorFlow {major}.{minor})"
    if workload.is_ours and major < 2:
        raise WorkloadError(
            f"workload={workload.label} (python -m dtfbench train, TensorFlow 2 code) cannot run on {on}: "
            f"use workload={STUDY} (the study's program, for a TensorFlow 1.x module), or load a "
            f"TensorFlow 2 module (-e tf_module=TensorFlow/2.x... on system=daint, else slurm_cluster_modules)"
        )
    if workload.name == STUDY and major >= 2:
        raise WorkloadError(
            f"workload={workload.label} (the study's tf_cnn_benchmarks of 2017, TensorFlow 1.x code) cannot "
            f"run on {on}: use workload={OURS} with this module, or load a TensorFlow 1.x module (on "
            f"system=daint leave tf_module out for the study's TensorFlow/1.1.0 module)"
        )


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


def tf_cnn_benchmarks_args(run: Mapping[str, Any], *, device_type: str, data_dir: str | None) -> list[str]:
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
    if device_type == "cpu":
        args += ["--device", "cpu", "--data_format", "NHWC", "--local_parameter_device", "cpu"]
    if run["data"] == "real":
        args += ["--data_dir", str(data_dir), "--data_name", "imagenet"]
    return args
