"""The benchmark plan: validate a sweep request and expand it into runs, before anything starts.

Any of gpus, model, batch_size, variable_update, num_ps and data may be a list (or a comma
string, as `-e gpus=1,2,4` gives); the sweep is their product, times the repetitions. Every
configuration's cluster layout is computed here too, so that a sweep whose 64-GPU point
does not fit the inventory fails at once, not after hours of smaller runs.

Pure standard library: Ansible ships this file to the controller as module_utils
(``ansible.module_utils.dtfbench.plan.sweep``) for the ``benchmark_plan`` module.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import posixpath
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import workloads
from .catalog import ALL_REDUCE, DATA_CHOICES
from .errors import PlanError
from .layout import DEFAULT_PS_PORT_BASE, DEFAULT_WORKER_PORT_BASE, LayoutError, compute_layout

# The sweep's axes, in the order runs are nested (the last varies fastest).
AXES = ("gpus", "model", "batch_size", "variable_update", "num_ps", "data")
# A sweep id names files, directories and Slurm jobs: keep it to safe characters.
# A run's timeouts, in seconds: checked here, passed on by roles/benchmark.
TIMEOUTS = ("step_timeout", "startup_timeout", "ready_timeout", "run_timeout")
# The one place of each plan value's default (issue #54: one default per variable). A system
# profile (playbooks/vars/systems/*.yml, system_defaults) states only what differs on that system;
# run-benchmark.yml and roles/benchmark pass a value on only when it is given, so these apply
# otherwise. tests/unit/test_one_default.py fails when another file gives one of them a default.
DEFAULTS = {
    "gpus": [1],
    "model": "small_cnn",
    "batch_size": 32,
    "variable_update": "parameter_server",
    "data": "synthetic",
    "image_size": 0,
    "repetitions": 5,
    "warmup_steps": 10,
    "steps": 100,
    "devices_per_worker": 1,
    "ps_on_worker_nodes": True,
    "workload": "ours",
    "extra_args": [],
    "data_staging": "none",
    "sweep_extend": False,
    "step_timeout": 120,
    "startup_timeout": 300,
    "ready_timeout": 180,
    "run_timeout": 1800,
}
SWEEP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# Settings a run has only when asked: what accuracy depends on and how it is measured, the page
# cache a real-data run starts with, and its data_dir where a sweep compares several. Each counts in
# a run's id (and the sweep's configuration) only when set, so that the ids of runs without them
# stay as they were.
OPTIONAL_KEYS = (
    "eval_every_steps",
    "target_accuracy",
    "max_epochs",
    "optimizer",
    "learning_rate",
    "sync",
    "lr_scaling",
    "warmup_epochs",
    "cache",
    "input_format",
    "data_dir",
    "checkpoint_every_steps",
    "checkpoint_every_secs",
    "background_io",
)
# The page cache of data_dir's files at a real-data run's start (dtfbench.linux.read_throughput.page_cache).
CACHE_SETTINGS = ("cold", "warm")
# How data_dir holds the records (dtfbench.workload.formats); tfrecord unless given.
INPUT_FORMATS = ("tfrecord", "lmdb")
# data_staging: none, or copy data_dir to stage_dir on every node before the first run (docs/storage.md).
DATA_STAGINGS = ("none", "copy")
# How the learning rate follows the global batch (dtfbench.workload.learning_rate).
LR_SCALINGS = ("none", "linear")
# What an adaptive sweep ranks configurations by (dtfbench.forecast.adaptive); images/sec unless given.
RANK_BY = ("images_per_sec", "time_to_accuracy")
# What defines a run: a resumed sweep skips a run only if this same run was recorded ok.
RUN_KEYS = (
    "gpus",
    "model",
    "batch_size",
    "image_size",
    "variable_update",
    "num_ps",
    "data",
    "repetition",
    "devices_per_worker",
    "ps_on_worker_nodes",
    "warmup_steps",
    "steps",
)


def run_digest(run: Mapping[str, Any]) -> str:
    keys = {key: run.get(key) for key in RUN_KEYS}
    # The workload counts only when it is not ours, so that the ids of sweeps recorded before
    # there was a choice stay the same (and such a sweep still resumes).
    if run.get("workload", workloads.OURS) != workloads.OURS:
        keys["workload"] = run["workload"]
    # Evaluation pauses training (images/sec includes it): a run with it is another run. Only when
    # set, as the workload, so that the ids of sweeps without it stay the same.
    for key in OPTIONAL_KEYS:
        if run.get(key) is not None:
            keys[key] = run[key]
    text = json.dumps(keys, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def as_list(name: str, value: Any) -> list[Any]:
    """`2`, `"1,2,4"`, `[1, 2]` -> list; None/"" -> []."""
    if value is None or value == "":
        return []
    if isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, str):
        # Commas separate the values; a value with a space in it stays whole, so that an error names it
        # as given ('resnet 50', not 'resnet').
        items = [part.strip().strip("'\"") for part in value.strip("[] ").split(",") if part.strip()]
    else:
        items = [value]
    if not items:
        raise PlanError(f"{name} is empty; give one value or a comma list")
    return items


def _ints(name: str, values: Iterable[Any], minimum: int) -> list[int]:
    out = []
    for value in values:
        try:
            number = int(str(value).strip("'\" "))
        except ValueError:
            raise PlanError(f"{name}={value!r} is not an integer; give e.g. {name}=1 or {name}=1,2,4") from None
        if number < minimum:
            raise PlanError(f"{name}={number} is below {minimum}; give a value >= {minimum}")
        out.append(number)
    return out


def _timeouts(request: Mapping[str, Any]) -> dict[str, int]:
    """The run's timeouts, whole seconds above 0, by the names the user gives (step_timeout, not
    the role's benchmark_step_timeout): 0 or below would end every run at once, or never."""
    timeouts = {}
    for name in TIMEOUTS:
        value = request.get(name)
        if value is None or value == "":
            continue
        try:
            number = int(str(value).strip("'\" "))
        except ValueError:
            raise PlanError(f"{name}={value!r} is not a whole number of seconds; give e.g. {name}=120") from None
        if number <= 0:
            raise PlanError(f"{name}={number}: a timeout must be above 0 seconds; give e.g. {name}=120")
        timeouts[name] = number
    return timeouts


def _choices(name: str, values: Iterable[Any], allowed: Iterable[str]) -> list[str]:
    allowed = list(allowed)
    out = []
    for value in values:
        text = str(value).strip().lower()
        if text not in allowed:
            raise PlanError(f"{name}={value!r} is unknown; choose from {', '.join(allowed)}")
        out.append(text)
    return out


# Up to this many workers the default tries every PS count, as the study did; beyond it the
# sweep is pruned to powers of two (and the worker count itself): at 64 GPUs the study's
# full sweep would be 64 configurations x 5 repetitions, and throughput changes slowly
# between neighbouring PS counts there. Give num_ps explicitly to try other values.
FULL_PS_SWEEP_UP_TO = 8


def default_num_ps(num_workers: int, variable_update: str) -> list[int]:
    """The study's sweep: 1 to the number of workers, pruned for large counts (see
    FULL_PS_SWEEP_UP_TO); 0 for all-reduce, which has no PS."""
    if variable_update == ALL_REDUCE:
        return [0]
    if num_workers <= FULL_PS_SWEEP_UP_TO:
        return list(range(1, num_workers + 1))
    values = list(range(1, FULL_PS_SWEEP_UP_TO + 1))
    power = FULL_PS_SWEEP_UP_TO * 2
    while power < num_workers:
        values.append(power)
        power *= 2
    return values + [num_workers]


def _fold(name: str, values: list[Any], notes: list[str]) -> list[Any]:
    """`values` without repeats (first place kept), with a note where there were any: a
    configuration given twice would run twice as the same repetitions and its confidence
    interval would be computed over copies."""
    unique = list(dict.fromkeys(values))
    if len(unique) < len(values):
        twice = sorted({str(v) for v in values if values.count(v) > 1})
        notes.append(
            f"{name}={','.join(map(str, values))} repeats {', '.join(twice)}: each configuration "
            f"runs once per repetition (raise repetitions to run it more often)"
        )
    return unique


def sweep_config(**settings: Any) -> dict[str, Any]:
    """What the sweep asked for, as recorded with its runs (lists in a fixed order): a resume
    must ask for the same."""
    return {name: sorted(value, key=str) if isinstance(value, list) else value for name, value in settings.items()}


def _config_text(config: Mapping[str, Any]) -> str:
    return " ".join(
        f"{key}={','.join(map(str, value)) if isinstance(value, list) else value}"
        for key, value in sorted(config.items())
    )


@dataclass(frozen=True)
class Recorded:
    """What the results store holds of one sweep. The caller reads it
    (dtfbench.results.sweep_resume) and hands it to ``resume``: the plan never opens the store."""

    config: dict[str, Any] | None = None  # the last configuration recorded for the sweep
    run_ids: frozenset[str] = field(default_factory=frozenset)  # every recorded run, in any state
    completed: frozenset[str] = field(default_factory=frozenset)  # the runs recorded ok


def _check_resume(sweep_id: str, config: Mapping[str, Any], runs: list[Mapping[str, Any]], done: Recorded) -> None:
    """A resume (sweep_id of a recorded sweep) must ask for the recorded configuration. Sweeps
    recorded before configurations were: every recorded run must be one of this plan's."""
    recorded = done.config
    if recorded is not None:
        if recorded == dict(config):
            return
        changed = sorted(key for key in set(recorded) | set(config) if recorded.get(key) != config.get(key))
        why = f"it differs in {', '.join(changed)}"
        shown = f"recorded: {_config_text(recorded)}; asked now: {_config_text(config)}"
    else:
        digests = {run_digest(run) for run in runs}
        stray = sorted(run_id for run_id in done.run_ids if run_id.rsplit("-", 1)[-1] not in digests)
        if not stray:
            return
        why = "some of its recorded runs are not in this one"
        shown = (
            f"recorded runs not in this one: {', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''}; "
            f"asked now: {_config_text(config)}"
        )
    raise PlanError(
        f"sweep_id={sweep_id} is a sweep of another configuration ({why}): "
        f"{shown}. Leave sweep_id out (or give a new one) for a new sweep, repeat the recorded "
        f"configuration to resume it, or add -e sweep_extend=true to add this one to it"
    )


def _adaptive(request: Mapping[str, Any], num_ps: list[Any], gpus: list[int]) -> dict[str, Any]:
    """num_ps=auto, num_ps_auto_keep, stop_below_efficiency, min_doubling_gain (dtfbench adaptive_sweep),
    checked; num_ps_auto_keep is None unless num_ps=auto."""
    auto = [str(v).strip().lower() for v in num_ps] == ["auto"]
    if not auto and any(str(v).strip().lower() == "auto" for v in num_ps):
        raise PlanError(
            f"num_ps={','.join(map(str, num_ps))}: auto stands alone (the planner picks the PS counts); "
            "give num_ps=auto or a list of numbers"
        )

    def number(name: str, high: float | None, example: str) -> float | None:
        value = request.get(name)
        if value is None or value == "":
            return None
        try:
            x = float(str(value).strip())
        except ValueError:
            x = float("nan")
        if not (
            x == x and x != float("inf") and (x > 0 if high is not None else x >= 0) and (high is None or x <= high)
        ):
            span = "above 0 and at most 1" if high is not None else ">= 0"
            raise PlanError(f"{name}={value!r}: give a number {span}, e.g. {name}={example}, or leave it out")
        return x

    settings: dict[str, Any] = {
        "num_ps_auto": auto,
        "num_ps_auto_keep": None,
        "stop_below_efficiency": number("stop_below_efficiency", 1.0, "0.5"),
        "min_doubling_gain": number("min_doubling_gain", None, "0.1"),
        "rank_by": None,
    }
    rank = request.get("rank_by")
    if rank not in (None, ""):
        (settings["rank_by"],) = _choices("rank_by", [rank], RANK_BY)
        if not _is_adaptive(settings):
            raise PlanError(
                f"rank_by={rank}: it ranks the configurations that num_ps=auto keeps and stop_below_efficiency or "
                "min_doubling_gain judge; give one of them, or leave rank_by out"
            )
    keep = request.get("num_ps_auto_keep")
    if keep not in (None, ""):
        if not auto:
            raise PlanError(f"num_ps_auto_keep={keep!r} goes with num_ps=auto; add -e num_ps=auto or leave it out")
        (settings["num_ps_auto_keep"],) = _ints("num_ps_auto_keep", [keep], 1)
    if (
        auto or settings["stop_below_efficiency"] is not None or settings["min_doubling_gain"] is not None
    ) and gpus != sorted(gpus):
        what = "num_ps=auto" if auto else "stop_below_efficiency/min_doubling_gain"
        raise PlanError(
            f"gpus={','.join(map(str, gpus))} with {what}: the sweep must go up in GPU counts "
            f"(it learns from the smaller ones); give gpus={','.join(map(str, sorted(gpus)))}"
        )
    return settings


def _syncs(request: Mapping[str, Any], updates: list[str], notes: list[str]) -> list[bool | None]:
    """sync: synchronous and/or asynchronous updates in the PS modes (a list: both, a sweep axis);
    [None]: the workload's own (synchronous). All-reduce is always synchronous."""
    values = as_list("sync", request.get("sync"))
    if not values:
        return [None]
    out = []
    for value in values:
        text = str(value).strip().lower()
        if text not in ("true", "false", "yes", "no", "1", "0", "on", "off"):
            raise PlanError(
                f"sync={value!r}: give true (synchronous updates), false (asynchronous) or both, true,false"
            )
        out.append(text in ("true", "yes", "1", "on"))
    out = _fold("sync", out, notes)
    if all(u == ALL_REDUCE for u in updates):
        if False in out:
            raise PlanError(
                f"sync=false with variable_update={ALL_REDUCE}: all-reduce is always synchronous; use "
                "variable_update=parameter_server or distributed_replicated for asynchronous updates"
            )
        return [None]
    if ALL_REDUCE in updates:
        notes.append(f"sync applies to the PS modes; {ALL_REDUCE} is always synchronous and runs once")
    return out


def _checkpointing(request: Mapping[str, Any], workload: workloads.Workload, updates: list[str]) -> dict[str, Any]:
    """checkpoint_every_steps / checkpoint_every_secs into checkpoint_dir: every run's timed saves
    (dtfbench.workload.checkpoints); {} without them."""
    steps = request.get("checkpoint_every_steps")
    secs = request.get("checkpoint_every_secs")
    steps = None if steps in (None, "", 0, "0") else _ints("checkpoint_every_steps", [steps], 1)[0]
    secs = None if secs in (None, "", 0, "0") else _above_zero("checkpoint_every_secs", secs, "seconds", "600")
    folder = str(request.get("checkpoint_dir") or "").strip()
    if steps is None and secs is None:
        if folder:
            raise PlanError(
                f"checkpoint_dir={folder}: nothing saves there; give checkpoint_every_steps or checkpoint_every_secs, "
                "or leave checkpoint_dir out"
            )
        return {}
    setting = f"checkpoint_every_steps={steps}" if steps is not None else f"checkpoint_every_secs={secs:g}"
    try:
        workload.check_checkpoints(setting)
    except workloads.WorkloadError as err:
        raise PlanError(str(err)) from None
    if not folder or not posixpath.isabs(folder):
        raise PlanError(
            f"{setting} needs checkpoint_dir, an absolute folder on the nodes (local disk, or a shared file system) "
            f"that worker 0 can write{'' if not folder else f'; got {folder!r}'}"
        )
    if secs is not None and ALL_REDUCE in updates:
        raise PlanError(
            f"checkpoint_every_secs={secs:g}: {ALL_REDUCE} saves on every worker at the same step, which each "
            "worker's clock would choose differently; give checkpoint_every_steps"
        )
    out: dict[str, Any] = {"checkpoint_dir": posixpath.normpath(folder)}
    if steps is not None:
        out["checkpoint_every_steps"] = steps
    if secs is not None:
        out["checkpoint_every_secs"] = secs
    return out


def _staging(request: Mapping[str, Any], data: list[str], data_dirs: list[str | None]) -> dict[str, str] | None:
    """data_staging=copy: {source: data_dir, target: stage_dir}, every node's copy before the
    first run (dtfbench.node.stage_data); None without staging."""
    if (request.get("data_staging") or DEFAULTS["data_staging"]) == "none":
        return None
    if "real" not in data:
        raise PlanError(
            "data_staging=copy copies data_dir's dataset to each node, and synthetic data reads none; "
            "set data=real (with data_dir), or leave data_staging out"
        )
    if len(data_dirs) > 1:
        raise PlanError(
            f"data_staging=copy stages one data_dir, and data_dir={','.join(map(str, data_dirs))} names "
            f"{len(data_dirs)}: stage one per sweep, or compare the shared copy with a staged one as "
            "data_dir=<shared>,<local copy> without data_staging"
        )
    target = str(request.get("stage_dir") or "").strip()
    if not target or not posixpath.isabs(target):
        raise PlanError(
            f"data_staging=copy needs stage_dir, an absolute node-local folder to copy data_dir into "
            f"(for example /mnt/local_ssd/imagenet, or /dev/shm/imagenet in a Slurm job){'' if not target else f'; got {target!r}'}"
        )
    source = posixpath.normpath(str(data_dirs[0]))
    target = posixpath.normpath(target)
    if target == source or target.startswith(source.rstrip("/") + "/") or source.startswith(target.rstrip("/") + "/"):
        raise PlanError(
            f"stage_dir={target} and data_dir={source} overlap: the copy would be in the dataset (or the "
            "dataset in the copy); give stage_dir a folder of its own on node-local disk"
        )
    return {"source": source, "target": target}


def _caches(request: Mapping[str, Any], data: list[str], notes: list[str]) -> list[str | None]:
    """cache: the page cache of data_dir's dataset at each real-data run's start, cold and/or warm
    (a list: both, a sweep axis); [None]: left as it is (and recorded all the same)."""
    values = as_list("cache", request.get("cache"))
    if not values:
        return [None]
    out = _fold("cache", _choices("cache", [str(v).strip().lower() for v in values], CACHE_SETTINGS), notes)
    if "real" not in data:
        raise PlanError(
            f"cache={','.join(out)} sets the page cache of data_dir's files, and synthetic data reads none; "
            "set data=real (with data_dir), or leave cache out"
        )
    if "synthetic" in data:
        notes.append("cache applies to the real-data runs; the synthetic ones read no files and run once")
    return out


def _background_io(
    request: Mapping[str, Any], data: list[str], hosts: list[Mapping[str, Any]], launcher: str, notes: list[str]
) -> dict[str, Any] | None:
    """background_io: nodes that read each real-data run's data_dir while it measures (another job's
    load on a shared file system, the Summitdev study's Fig. 4b). A list with ``none`` is a sweep axis
    (the runs with and without it); the nodes named run no task of the sweep, with or without.
    None: no reader."""
    values = [str(v).strip() for v in as_list("background_io", request.get("background_io"))]
    if not values:
        return None
    axis = _fold("background_io", [None if v.lower() == "none" else v for v in values], notes)
    named = [v for v in axis if v is not None]
    if not named:
        return None
    if launcher != "ssh":
        raise PlanError(
            f"background_io={','.join(named)} starts a reader over SSH beside each run; a Slurm job's nodes are "
            "its allocation's: submit the load as a job of its own, or use launcher=ssh"
        )
    if "real" not in data:
        raise PlanError(
            f"background_io={','.join(named)} reads data_dir beside the runs, and synthetic data reads none; "
            "set data=real (with data_dir), or leave background_io out"
        )
    names = [h["name"] for h in hosts]
    unknown = [v for v in named if v not in names]
    if unknown:
        raise PlanError(
            f"background_io={','.join(unknown)} is not a node of the sweep ({', '.join(names) or 'none'}): name an "
            "inventory host of the nodes group that --limit leaves in"
        )
    if len(named) == len(names):  # named is folded: no node twice
        raise PlanError(
            f"background_io={','.join(named)} names every node, and its nodes run no task: leave one or more "
            "nodes to the runs, or add hosts"
        )
    if "synthetic" in data:
        notes.append("background_io applies to the real-data runs; the synthetic ones read no files")
    notes.append(f"{', '.join(named)} read data_dir beside the runs (background_io) and run no task")
    return {"hosts": named, "axis": axis, "mb_per_s": _background_rate(request)}


def _background_rate(request: Mapping[str, Any]) -> float | None:
    """background_io_mb_per_s: the background reader's bound (None: as fast as the storage gives)."""
    rate = request.get("background_io_mb_per_s")
    if rate in (None, "", 0):
        return None
    try:
        value = float(rate)
    except (TypeError, ValueError):
        value = -1.0
    if not value > 0:
        raise PlanError(
            f"background_io_mb_per_s={rate!r} is not a rate: give MB/s above 0, or leave it out (unbounded)"
        )
    return value


def _input_formats(
    request: Mapping[str, Any], data: list[str], workload: workloads.Workload, notes: list[str]
) -> list[str | None]:
    """input_format: how data_dir holds the records, tfrecord and/or lmdb (a list: both, a sweep
    axis). A run reading TFRecords carries no input_format (the default; its id stays as it was),
    and is recorded as tfrecord; [None]: TFRecords only."""
    values = as_list("input_format", request.get("input_format"))
    if not values:
        return [None]
    out = _fold(
        "input_format", _choices("input_format", [str(v).strip().lower() for v in values], INPUT_FORMATS), notes
    )
    if "real" not in data:
        raise PlanError(
            f"input_format={','.join(out)} is the file format of data_dir's records, and synthetic data reads none; "
            "set data=real (with data_dir), or leave input_format out"
        )
    for value in out:
        try:
            workload.check_input_format(value)
        except workloads.WorkloadError as err:
            raise PlanError(str(err)) from None
    if "synthetic" in data:
        notes.append("input_format applies to the real-data runs; the synthetic ones read no files")
    return [None if value == "tfrecord" else value for value in out]


def _off(value: Any) -> bool:
    return value is None or value == "" or str(value).strip().lower() in ("0", "none", "off", "false")


def _accuracy_settings(request: Mapping[str, Any], workload: workloads.Workload, data: list[str]) -> dict[str, Any]:
    """eval_every_steps, target_accuracy and max_epochs, checked; only those set (docs/accuracy.md)."""
    every = _eval_every(request, workload, data)
    settings: dict[str, Any] = {"eval_every_steps": every} if every else {}
    target, epochs = request.get("target_accuracy"), request.get("max_epochs")
    if _off(target):
        if not _off(epochs):  # a run of that many epochs (the Summitdev study's accuracy after the same training)
            if "synthetic" in data:
                raise PlanError(
                    f"max_epochs={epochs} counts epochs of data_dir's training images, and synthetic data has none; "
                    "set data=real (with data_dir), or give steps for a run of a fixed length"
                )
            settings["max_epochs"] = _above_zero("max_epochs", epochs, "a number of epochs", "30")
        return settings
    number = _fraction("target_accuracy", target)
    if not every:
        raise PlanError(
            f"target_accuracy={target}: the target is checked at each evaluation; give eval_every_steps (e.g. "
            "eval_every_steps=100) with data=real"
        )
    if _off(epochs):
        raise PlanError(
            f"target_accuracy={target}: give max_epochs, the most epochs a run trains before it gives up "
            "(not converged), e.g. max_epochs=30"
        )
    cap = _above_zero("max_epochs", epochs, "a number of epochs", "30")
    return {**settings, "target_accuracy": number, "max_epochs": cap}


def _above_zero(name: str, value: Any, what: str, example: str) -> float:
    """`value` as a finite number above 0, or PlanError naming `name` and an example."""
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not 0 < number < float("inf"):
        raise PlanError(f"{name}={value!r}: give {what} above 0, e.g. {name}={example}")
    return number


TRAINING_AXES = ("optimizer", "learning_rate", "lr_scaling")


def _training_settings(
    request: Mapping[str, Any], workload: workloads.Workload, data: list[str], notes: list[str]
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """What the workload trains with, where given (its defaults otherwise): the axes optimizer,
    learning_rate and lr_scaling (lists: each value its own runs), and warmup_epochs (one value).
    Returns ({axis: values given}, {warmup_epochs: value} or {})."""
    given = {name: as_list(name, request.get(name)) for name in TRAINING_AXES}
    warmup = request.get("warmup_epochs")
    warmup = None if _off(warmup) else warmup
    choices = workload.capabilities.optimizers
    for name, values in [*given.items(), ("warmup_epochs", [warmup] if warmup is not None else [])]:
        if values and not choices:
            raise PlanError(
                f"{name}={','.join(map(str, values))}: workload={workload.label} takes no optimizer settings from the "
                "plan; use workload=ours, or leave it out"
            )
    axes: dict[str, list[Any]] = {}
    if given["optimizer"]:
        axes["optimizer"] = _fold("optimizer", _choices("optimizer", given["optimizer"], choices), notes)
    if given["learning_rate"]:
        rates = [_above_zero("learning_rate", v, "a number", "0.01") for v in given["learning_rate"]]
        axes["learning_rate"] = _fold("learning_rate", rates, notes)
    if given["lr_scaling"]:
        axes["lr_scaling"] = _fold("lr_scaling", _choices("lr_scaling", given["lr_scaling"], LR_SCALINGS), notes)
    if warmup is None:
        return axes, {}
    epochs = _above_zero("warmup_epochs", warmup, "a number of epochs", "5")
    if "linear" not in axes.get("lr_scaling", []):
        raise PlanError(
            f"warmup_epochs={warmup}: the warm-up rises from learning_rate to the rate lr_scaling=linear scales it "
            "to; add lr_scaling=linear, or leave warmup_epochs out"
        )
    if "synthetic" in data:
        raise PlanError(
            f"warmup_epochs={warmup} counts epochs of data_dir's training images, and synthetic data has none; "
            "set data=real (with data_dir), or leave warmup_epochs out"
        )
    return axes, {"warmup_epochs": epochs}


def _trainings(axes: Mapping[str, list[Any]], warmup: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the training axes given, as the keys a run gets ([{}]: none given).
    The warm-up goes with lr_scaling=linear only (with none there is nothing to rise to)."""
    names = list(axes)
    out = []
    for values in itertools.product(*(axes[name] for name in names)):
        setting = dict(zip(names, values))
        if setting.get("lr_scaling") == "linear":
            setting.update(warmup)
        out.append(setting)
    return out


def _fraction(name: str, value: Any) -> float:
    try:
        number = float(str(value).strip())
    except ValueError:
        number = float("nan")
    if not 0 < number <= 1:
        raise PlanError(f"{name}={value!r}: a top-1 fraction above 0 and at most 1, e.g. {name}=0.9")
    return number


def _eval_every(request: Mapping[str, Any], workload: workloads.Workload, data: list[str]) -> int | None:
    """eval_every_steps, checked: held-out top-1/top-5 every N measured steps (and after the
    last), on data_dir's validation-* shards; None: no evaluation."""
    value = request.get("eval_every_steps")
    if _off(value):
        return None
    (every,) = _ints("eval_every_steps", [value], 1)
    try:
        workload.check_evaluation(every)
    except workloads.WorkloadError as err:
        raise PlanError(str(err)) from None
    if "synthetic" in data:
        raise PlanError(
            f"eval_every_steps={every} needs data=real: evaluation reads the held-out validation-* shards "
            "of data_dir, and synthetic data has none; set data=real (with data_dir), or leave eval_every_steps out"
        )
    return every


def _left_out(request: Mapping[str, Any]) -> str:
    """Why the hosts may be too few: the ones ansible-playbook's --limit took out of the sweep."""
    left = [str(h) for h in request.get("left_out") or []]
    if not left:
        return ""
    return (
        f" (--limit left out {', '.join(left[:5])}{' ...' if len(left) > 5 else ''}: the sweep may use only the "
        "hosts it keeps; widen --limit, or ask for fewer gpus)"
    )


def _is_adaptive(adaptive: Mapping[str, Any]) -> bool:
    """Whether a sweep learns from its smaller GPU counts (any of _adaptive's settings on)."""
    return bool(adaptive["num_ps_auto"]) or any(
        adaptive[name] is not None for name in ("stop_below_efficiency", "min_doubling_gain")
    )


def _check_submit(submit: bool, launcher: str, adaptive: Mapping[str, Any]) -> None:
    """submit=false writes a Slurm job's scripts and runs nothing: PlanError where that cannot be."""
    if submit:
        return
    if launcher != "slurm":
        raise PlanError(
            f"submit=false only writes Slurm job scripts, and this sweep's launcher is {launcher}: leave "
            "submit out to run the sweep, or choose a system with the Slurm launcher (system=daint)"
        )
    if _is_adaptive(adaptive):
        raise PlanError(
            "num_ps=auto, stop_below_efficiency and min_doubling_gain choose each GPU count's runs from the "
            "results of the smaller counts: they need submit=true (submit=false only writes job scripts); "
            "leave them out"
        )


def _fits(hosts, gpus, num_ps, devices_per_worker, ps_on_worker_nodes, port_bases) -> bool:
    try:
        compute_layout(
            hosts,
            gpus=gpus,
            num_ps=num_ps,
            devices_per_worker=devices_per_worker,
            ps_on_worker_nodes=ps_on_worker_nodes,
            **port_bases,
        )
    except LayoutError:
        return False
    return True


@dataclass(frozen=True)
class _Sweep:
    """A sweep request, validated: the axes and settings build_plan expands into runs."""

    workload: workloads.Workload
    timeouts: dict[str, int]
    extra_args: list[str]
    gpus: list[int]
    models: list[str]
    batch_sizes: list[int]
    updates: list[str]
    data: list[str]  # synthetic and/or real ("both" expanded)
    adaptive: dict[str, Any]  # _adaptive's settings
    num_ps_given: list[int] | None  # None: each configuration's default_num_ps
    repetitions: int
    warmup_steps: int
    steps: int
    devices_per_worker: int
    ps_on_worker_nodes: bool
    image_size: int  # 0: the model's own
    sweep_id: str
    accuracy: dict[str, Any]
    training_axes: dict[str, list[Any]]
    warmup: dict[str, Any]
    data_dirs: list[str | None]  # [None]: no data_dir
    staging: dict[str, str] | None
    checkpointing: dict[str, Any]
    syncs: list[bool | None]
    caches: list[str | None]
    input_formats: list[str | None]
    port_bases: dict[str, int]  # ps_port_base, worker_port_base: the ports the launcher's tasks listen on
    background_io: dict[str, Any] | None  # {"hosts", "axis", "mb_per_s"}; None: no background reader
    notes: list[str]

    @property
    def mixed_modes(self) -> bool:
        """_mixed_modes of the sweep's variable updates."""
        return _mixed_modes(self.updates)


@dataclass(frozen=True)
class _Configuration:
    """One point of the sweep's product that has a cluster layout: its runs differ only in their variants."""

    gpus: int
    model: str
    batch_size: int
    variable_update: str
    num_ps: int
    data: str


def _mixed_modes(updates: list[str]) -> bool:
    """Whether all-reduce (no parameter servers) runs beside PS modes, so num_ps applies to some runs only."""
    return ALL_REDUCE in updates and len(updates) > 1


def build_plan(request: Mapping[str, Any], hosts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Validate `request` against `hosts` (the layout's host list) and expand it into runs.

    request keys: gpus, model, batch_size, variable_update, num_ps (None: the study's sweep),
    data (synthetic|real|both), repetitions, warmup_steps, steps, devices_per_worker,
    ps_on_worker_nodes, sweep_id, data_dir (required for real data; several: a sweep axis), workload (``ours`` or ``tf_cnn_benchmarks@<git ref>``, see dtfbench.plan.workloads), launcher
    (``ssh`` or ``slurm``), submit (false: a Slurm job's scripts only, refused with ssh and with an
    adaptive sweep), tf_modules (a Slurm job's modules: a TensorFlow module of the wrong major
    version for the workload is refused).

    Every run is pending (``done`` false); ``resume`` marks those the store holds. Repeated
    axis values are folded, with a note.
    """
    sweep = _validated(request, hosts)
    if sweep.background_io is not None:  # the readers' nodes run no task of the sweep
        hosts = [h for h in hosts if h["name"] not in sweep.background_io["hosts"]]
    runs = _expand(sweep, hosts, request)
    config = _recorded_config(sweep)
    _number_runs(runs, sweep.sweep_id)
    workload = sweep.workload
    return {
        "sweep_id": sweep.sweep_id,
        "runs": runs,
        "total_runs": len(runs),
        "pending_runs": len(runs),
        "workload": workload.as_dict(),
        "program": workload.program(),
        "capabilities": workload.capabilities.as_dict(),
        "sweep_config": config,
        # Every data location the sweep reads (the dataset check looks in each, on every node).
        "data_dirs": [d for d in sweep.data_dirs if d is not None] if "real" in sweep.data else [],
        # data_staging=copy: every node copies source (data_dir) to target (stage_dir) before the first run.
        "staging": sweep.staging,
        # checkpoint_every_steps/_secs: the folder worker 0 saves into (checked writable on every node first).
        "checkpoint_dir": sweep.checkpointing.get("checkpoint_dir"),
        # background_io: the nodes that read the runs' data_dir while they measure, and their bound.
        "background_io": sweep.background_io,
        "notes": sweep.notes,
        "adaptive": sweep.adaptive if _is_adaptive(sweep.adaptive) else None,
        # The run timeouts the launchers apply (given, or DEFAULTS' through the module's spec).
        "timeouts": sweep.timeouts,
    }


def _validated(request: Mapping[str, Any], hosts: list[Mapping[str, Any]]) -> _Sweep:
    """Every check of `request` (and that there are hosts), before any layout: in this order, which
    decides the error a request with several wrong inputs gets."""
    notes: list[str] = []
    timeouts = _timeouts(request)
    launcher = str(request.get("launcher") or "ssh")
    workload, extra_args = _checked_workload(request, launcher)
    gpus, models, batch_sizes, updates, data = _axes(request, workload, notes)
    adaptive, num_ps_given = _ps_settings(request, gpus, launcher, notes)
    repetitions, warmup_steps, steps, devices_per_worker, ps_on_worker_nodes, image_size = _run_shape(
        request, workload, models
    )
    sweep_id = _sweep_id(request)
    accuracy = _accuracy_settings(request, workload, data)
    if adaptive["rank_by"] == "time_to_accuracy" and not accuracy.get("target_accuracy"):
        raise PlanError(
            "rank_by=time_to_accuracy ranks by the time to a target; give target_accuracy (with eval_every_steps "
            "and max_epochs), or rank_by=images_per_sec"
        )
    training_axes, warmup = _training_settings(request, workload, data, notes)
    data_dirs = _data_dirs(request, data, notes)
    staging = _staging(request, data, data_dirs)
    checkpointing = _checkpointing(request, workload, updates)
    if not hosts:
        raise PlanError(f"the inventory has no TF nodes; add hosts to the tf_nodes group{_left_out(request)}")
    if num_ps_given is not None and _mixed_modes(updates):
        notes.append(
            f"num_ps={','.join(map(str, num_ps_given))} applies to "
            f"{', '.join(u for u in updates if u != ALL_REDUCE)}; {ALL_REDUCE} has no parameter "
            "servers and runs with num_ps 0"
        )
    syncs = _syncs(request, updates, notes)
    caches = _caches(request, data, notes)
    input_formats = _input_formats(request, data, workload, notes)
    background_io = _background_io(request, data, hosts, launcher, notes)
    return _Sweep(
        workload=workload,
        timeouts=timeouts,
        extra_args=extra_args,
        gpus=gpus,
        models=models,
        batch_sizes=batch_sizes,
        updates=updates,
        data=data,
        adaptive=adaptive,
        num_ps_given=num_ps_given,
        repetitions=repetitions,
        warmup_steps=warmup_steps,
        steps=steps,
        devices_per_worker=devices_per_worker,
        ps_on_worker_nodes=ps_on_worker_nodes,
        image_size=image_size,
        sweep_id=sweep_id,
        accuracy=accuracy,
        training_axes=training_axes,
        warmup=warmup,
        data_dirs=data_dirs,
        staging=staging,
        checkpointing=checkpointing,
        syncs=syncs,
        caches=caches,
        input_formats=input_formats,
        port_bases=_port_bases(request),
        background_io=background_io,
        notes=notes,
    )


def _checked_workload(request: Mapping[str, Any], launcher: str) -> tuple[workloads.Workload, list[str]]:
    """The workload and its extra_args, checked first: its capabilities decide which models and
    variable updates the rest of the request may name."""
    try:
        workload = workloads.parse_workload(request.get("workload"))
        workload.check_request(
            models=as_list("model", request.get("model")),
            variable_updates=as_list("variable_update", request.get("variable_update")),
            image_size=_ints("image_size", [request.get("image_size") or DEFAULTS["image_size"]], 0)[0],
            warmup_steps=_ints("warmup_steps", [request.get("warmup_steps", DEFAULTS["warmup_steps"])], 0)[0],
            launcher=launcher,
        )
        workload.check_tf_module(request.get("tf_modules") or [])
        extra_args = workloads.extra_args(request.get("extra_args"))
    except workloads.WorkloadError as err:
        raise PlanError(str(err)) from None
    return workload, extra_args


def _axes(
    request: Mapping[str, Any], workload: workloads.Workload, notes: list[str]
) -> tuple[list[int], list[str], list[int], list[str], list[str]]:
    """The sweep's axes but num_ps (gpus, model, batch_size, variable_update, data), checked and
    folded, with their defaults; data=both is synthetic and real."""
    gpus = _fold("gpus", _ints("gpus", as_list("gpus", request.get("gpus")) or DEFAULTS["gpus"], 1), notes)
    models = _fold(
        "model",
        _choices("model", as_list("model", request.get("model")) or [DEFAULTS["model"]], workload.capabilities.models),
        notes,
    )
    batch_sizes = _fold(
        "batch_size",
        _ints("batch_size", as_list("batch_size", request.get("batch_size")) or [DEFAULTS["batch_size"]], 1),
        notes,
    )
    updates = _fold(
        "variable_update",
        _choices(
            "variable_update",
            as_list("variable_update", request.get("variable_update")) or [DEFAULTS["variable_update"]],
            workload.capabilities.variable_updates,
        ),
        notes,
    )
    data = _fold(
        "data",
        _choices("data", as_list("data", request.get("data")) or [DEFAULTS["data"]], DATA_CHOICES + ("both",)),
        notes,
    )
    data = ["synthetic", "real"] if "both" in data else data
    return gpus, models, batch_sizes, updates, data


def _ps_settings(
    request: Mapping[str, Any], gpus: list[int], launcher: str, notes: list[str]
) -> tuple[dict[str, Any], list[int] | None]:
    """The adaptive settings (_adaptive) and the PS counts asked for: None where each configuration
    takes default_num_ps (num_ps not given, or num_ps=auto, which narrows those as the sweep goes)."""
    num_ps_request = as_list("num_ps", request.get("num_ps"))
    adaptive = _adaptive(request, num_ps_request, gpus)
    _check_submit(request.get("submit") is None or bool(request.get("submit")), launcher, adaptive)
    if adaptive["num_ps_auto"]:
        num_ps_request = []
    num_ps_given = _fold("num_ps", _ints("num_ps", num_ps_request, 0), notes) if num_ps_request else None
    return adaptive, num_ps_given


def _run_shape(
    request: Mapping[str, Any], workload: workloads.Workload, models: list[str]
) -> tuple[int, int, int, int, bool, int]:
    """(repetitions, warmup_steps, steps, devices_per_worker, ps_on_worker_nodes, image_size): what
    every run shares, checked; image_size also against the models (0: each model's own)."""
    (repetitions,) = _ints("repetitions", [request.get("repetitions", DEFAULTS["repetitions"])], 1)
    (warmup_steps,) = _ints("warmup_steps", [request.get("warmup_steps", DEFAULTS["warmup_steps"])], 0)
    (steps,) = _ints("steps", [request.get("steps", DEFAULTS["steps"])], 1)
    (devices_per_worker,) = _ints(
        "devices_per_worker", [request.get("devices_per_worker", DEFAULTS["devices_per_worker"])], 1
    )
    ps_on_worker_nodes = bool(request.get("ps_on_worker_nodes", DEFAULTS["ps_on_worker_nodes"]))
    (image_size,) = _ints("image_size", [request.get("image_size") or DEFAULTS["image_size"]], 0)
    try:
        workload.check_models(models, image_size)
    except workloads.WorkloadError as err:
        raise PlanError(str(err)) from None
    return repetitions, warmup_steps, steps, devices_per_worker, ps_on_worker_nodes, image_size


def _port_bases(request: Mapping[str, Any]) -> dict[str, int]:
    """ps_port_base and worker_port_base, the launcher's (the tf_cluster role's variables where given, else
    the layout's defaults): every run's layout is computed with them (compute_layout checks them)."""
    given = {"ps_port_base": request.get("ps_port_base"), "worker_port_base": request.get("worker_port_base")}
    defaults = {"ps_port_base": DEFAULT_PS_PORT_BASE, "worker_port_base": DEFAULT_WORKER_PORT_BASE}
    return {name: defaults[name] if value is None else value for name, value in given.items()}


def _sweep_id(request: Mapping[str, Any]) -> str:
    """sweep_id ("sweep" unless given), checked to be a plain name: it names files, directories and Slurm jobs."""
    sweep_id = str(request.get("sweep_id") or "sweep")
    if not SWEEP_ID.match(sweep_id):
        raise PlanError(
            f"sweep_id={sweep_id!r} is not a plain name; use letters, digits, '.', '_' and '-' "
            "(up to 64, starting with a letter or digit)"
        )
    return sweep_id


def _data_dirs(request: Mapping[str, Any], data: list[str], notes: list[str]) -> list[str | None]:
    """The data locations ([None]: none given), which real data needs. Several (a comma list: a shared
    copy and a local one) are a sweep axis of the real-data runs; their storage (each node's file
    system under it) tells them apart in the store."""
    if "real" in data and not request.get("data_dir"):
        raise PlanError(
            "data=real needs a dataset: set data_dir to a directory of ImageNet TFRecords "
            "(train-*), or use data=synthetic"
        )
    return _fold("data_dir", [str(d) for d in as_list("data_dir", request.get("data_dir"))], notes) or [None]


def _expand(sweep: _Sweep, hosts: list[Mapping[str, Any]], request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every run of the sweep, not numbered yet: the product of its axes (AXES' order, the last
    varying fastest) and each GPU count's PS counts, each such configuration's layout computed on
    `hosts` (so that a point that does not fit fails now), times its variants and repetitions."""
    trainings = _trainings(sweep.training_axes, sweep.warmup)
    runs: list[dict[str, Any]] = []
    for n_gpus, model, batch_size, update, data_kind in itertools.product(
        sweep.gpus, sweep.models, sweep.batch_sizes, sweep.updates, sweep.data
    ):
        if n_gpus % sweep.devices_per_worker:
            raise PlanError(
                f"gpus={n_gpus} is not a multiple of devices_per_worker={sweep.devices_per_worker}; "
                f"choose gpus in steps of {sweep.devices_per_worker}"
            )
        for num_ps in _ps_counts(sweep, n_gpus // sweep.devices_per_worker, update):
            layout = _configuration_layout(sweep, hosts, request, n_gpus, update, num_ps)
            if layout is None:
                continue
            configuration = _Configuration(n_gpus, model, batch_size, update, num_ps, data_kind)
            runs += _configuration_runs(sweep, configuration, layout, trainings)
    return runs


def _ps_counts(sweep: _Sweep, num_workers: int, update: str) -> list[int]:
    """The PS counts a configuration runs with: those given, else the study's (default_num_ps)."""
    if sweep.num_ps_given is None:
        return default_num_ps(num_workers, update)
    if sweep.mixed_modes:
        # PS counts only where there are PSs: all-reduce runs once, with none; the PS
        # modes take the counts above 0.
        return [0] if update == ALL_REDUCE else [p for p in sweep.num_ps_given if p >= 1] or [0]
    return sweep.num_ps_given


def _configuration_layout(
    sweep: _Sweep, hosts: list[Mapping[str, Any]], request: Mapping[str, Any], n_gpus: int, update: str, num_ps: int
) -> dict[str, Any] | None:
    """The cluster layout of `n_gpus` with `num_ps` on `hosts`, the PS count checked against the update
    first; None where the default PS sweep has gone past the PS slots the nodes have (it stops there)."""
    if update == ALL_REDUCE and num_ps:
        raise PlanError(
            f"num_ps={num_ps} with variable_update={ALL_REDUCE}: all-reduce "
            "has no parameter servers; use num_ps=0 or another variable_update"
        )
    if update != ALL_REDUCE and num_ps < 1:
        raise PlanError(
            f"num_ps=0 with variable_update={update}: this mode keeps the variables "
            "on parameter servers; give num_ps >= 1"
        )
    try:
        return compute_layout(
            hosts,
            gpus=n_gpus,
            num_ps=num_ps,
            devices_per_worker=sweep.devices_per_worker,
            ps_on_worker_nodes=sweep.ps_on_worker_nodes,
            **sweep.port_bases,
        )
    except LayoutError as err:
        # The default sweep stops where the nodes run out of PS slots; a value the
        # user asked for must fit.
        if (
            sweep.num_ps_given is None
            and num_ps > 1
            and _fits(hosts, n_gpus, 1, sweep.devices_per_worker, sweep.ps_on_worker_nodes, sweep.port_bases)
        ):
            return None
        raise PlanError(f"gpus={n_gpus}, num_ps={num_ps}: {err}{_left_out(request)}") from None


def _configuration_runs(
    sweep: _Sweep, configuration: _Configuration, layout: Mapping[str, Any], trainings: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The runs of one configuration: each variant (data location, input format, sync, training
    setting, page cache: those of real data or PS modes only where they apply) times the repetitions."""
    real = configuration.data == "real"
    runs = []
    for data_dir, input_format, sync, training, cache, background, repetition in itertools.product(
        sweep.data_dirs if real else [None],
        sweep.input_formats if real else [None],
        sweep.syncs if configuration.variable_update != ALL_REDUCE else [None],
        trainings,
        sweep.caches if real else [None],
        sweep.background_io["axis"] if real and sweep.background_io else [None],
        range(1, sweep.repetitions + 1),
    ):
        run = _run_keys(sweep, configuration, layout, repetition)
        run.update(sweep.accuracy)
        run.update(training)
        run.update(sweep.checkpointing)
        if sync is not None:
            run["sync"] = sync
        if cache is not None:
            run["cache"] = cache
        if background is not None:
            run["background_io"] = background
        if input_format is not None:
            run["input_format"] = input_format
        if sweep.staging is not None and data_dir is not None:
            data_dir = run["data_dir"] = sweep.staging["target"]  # the runs read the node-local copy
        elif len(sweep.data_dirs) > 1 and data_dir is not None:
            run["data_dir"] = data_dir  # one of several: the run's own (the roles read it)
        # The command line the launcher runs (the workload's contract): the roles run it as it is.
        try:
            run.update(
                sweep.workload.run_fields(
                    run,
                    layout=layout,
                    where=f"gpus={configuration.gpus}, num_ps={configuration.num_ps}",
                    data_dir=data_dir,
                    timeouts=sweep.timeouts,
                    extra_args=sweep.extra_args,
                )
            )
        except workloads.WorkloadError as err:
            raise PlanError(str(err)) from None
        # The layout the SSH launcher runs (tf_cluster takes it as it is: computed once, here); a Slurm
        # job computes its own on the nodes it gets, known only inside the job.
        run["layout"] = layout
        runs.append(run)
    return runs


def _run_keys(
    sweep: _Sweep, configuration: _Configuration, layout: Mapping[str, Any], repetition: int
) -> dict[str, Any]:
    """The keys every run has: its configuration, repetition and layout's shape, and what all runs share."""
    return {
        "gpus": configuration.gpus,
        "model": configuration.model,
        "batch_size": configuration.batch_size,
        "image_size": sweep.image_size or None,
        "variable_update": configuration.variable_update,
        "num_ps": configuration.num_ps,
        "data": configuration.data,
        "repetition": repetition,
        "num_workers": layout["num_workers"],
        "devices_per_worker": sweep.devices_per_worker,
        "worker_nodes": len({t["host"] for t in layout["tasks"] if t["job"] == "worker"}),
        "ps_on_worker_nodes": sweep.ps_on_worker_nodes,
        "warmup_steps": sweep.warmup_steps,
        "steps": sweep.steps,
        "workload": sweep.workload.label,
    }


def _recorded_config(sweep: _Sweep) -> dict[str, Any]:
    """The sweep's configuration as recorded with its runs (sweep_config): the optional settings only
    where given, so that a resume compares what was asked."""
    return sweep_config(
        gpus=sweep.gpus,
        model=sweep.models,
        batch_size=sweep.batch_sizes,
        image_size=sweep.image_size,
        variable_update=sweep.updates,
        num_ps=_recorded_num_ps(sweep),
        data=sweep.data,
        repetitions=sweep.repetitions,
        warmup_steps=sweep.warmup_steps,
        steps=sweep.steps,
        devices_per_worker=sweep.devices_per_worker,
        ps_on_worker_nodes=sweep.ps_on_worker_nodes,
        workload=sweep.workload.label,
        **sweep.accuracy,
        **sweep.training_axes,
        **sweep.warmup,
        **({"sync": [s for s in sweep.syncs if s is not None]} if sweep.syncs != [None] else {}),
        **({"cache": sweep.caches} if sweep.caches != [None] else {}),
        **_recorded_background_io(sweep.background_io),
        **({"input_format": [f or "tfrecord" for f in sweep.input_formats]} if sweep.input_formats != [None] else {}),
        **({"data_dir": sweep.data_dirs} if len(sweep.data_dirs) > 1 else {}),
        **({"data_staging": "copy", "stage_dir": sweep.staging["target"]} if sweep.staging else {}),
        **{k: v for k, v in sweep.checkpointing.items() if k != "checkpoint_dir"},
        **{k: v for k, v in sweep.adaptive.items() if k != "num_ps_auto" and v is not None},
    )


def _recorded_background_io(background_io: dict[str, Any] | None) -> dict[str, Any]:
    """background_io as recorded: its axis (none for the runs without) and its bound, where given."""
    if background_io is None:
        return {}
    recorded = {"background_io": [b or "none" for b in background_io["axis"]]}
    if background_io["mb_per_s"]:
        recorded["background_io_mb_per_s"] = background_io["mb_per_s"]
    return recorded


def _recorded_num_ps(sweep: _Sweep) -> list[int] | str:
    """num_ps as recorded: the counts given, else auto or default (each GPU count's default_num_ps)."""
    if sweep.num_ps_given is not None:
        return sweep.num_ps_given
    return "auto" if sweep.adaptive["num_ps_auto"] else "default"


def _number_runs(runs: list[dict[str, Any]], sweep_id: str) -> None:
    """Number the runs in plan order: index, run_id (sweep, position, configuration digest) and done=false."""
    width = len(str(len(runs)))
    for index, run in enumerate(runs, start=1):
        # The digest makes the id name the configuration, not only its position: resuming a
        # sweep with other axes never takes a different run for a done one.
        digest = run_digest(run)
        run["index"] = index
        run["run_id"] = f"{sweep_id}-{index:0{width}d}-{digest}"
        run["done"] = False


def resume(plan: dict[str, Any], recorded: Recorded, extend: bool = False) -> dict[str, Any]:
    """Mark the runs of `plan` that `recorded` holds as ok done, so a re-run of a sweep resumes
    it. A resume must ask for the recorded configuration, unless `extend` (sweep_extend: add
    this configuration to the sweep); PlanError otherwise."""
    if not extend:
        _check_resume(plan["sweep_id"], plan["sweep_config"], plan["runs"], recorded)
    done_digests = {run_id.rsplit("-", 1)[-1] for run_id in recorded.completed}
    for run in plan["runs"]:
        run["done"] = run["run_id"].rsplit("-", 1)[-1] in done_digests
    plan["pending_runs"] = sum(1 for run in plan["runs"] if not run["done"])
    return plan


# The options of the benchmark_plan action (library/benchmark_plan.py documents them).
ARGUMENT_SPEC = dict(
    hosts=dict(type="list", elements="dict", required=True),
    gpus=dict(type="raw", required=True),
    model=dict(type="raw", default=DEFAULTS["model"]),
    batch_size=dict(type="raw", default=DEFAULTS["batch_size"]),
    variable_update=dict(type="raw", default=DEFAULTS["variable_update"]),
    num_ps=dict(type="raw"),
    num_ps_auto_keep=dict(type="raw"),
    stop_below_efficiency=dict(type="raw"),
    min_doubling_gain=dict(type="raw"),
    rank_by=dict(type="raw"),
    image_size=dict(type="int", default=DEFAULTS["image_size"]),
    data=dict(type="raw", default=DEFAULTS["data"]),
    data_dir=dict(type="str"),
    repetitions=dict(type="int", default=DEFAULTS["repetitions"]),
    warmup_steps=dict(type="int", default=DEFAULTS["warmup_steps"]),
    steps=dict(type="int", default=DEFAULTS["steps"]),
    devices_per_worker=dict(type="int", default=DEFAULTS["devices_per_worker"]),
    ps_on_worker_nodes=dict(type="bool", default=DEFAULTS["ps_on_worker_nodes"]),
    sweep_id=dict(type="str", required=True),
    results_db=dict(type="path"),
    check_only=dict(type="bool", default=False),
    left_out=dict(type="list", elements="str", default=[]),
    sweep_extend=dict(type="bool", default=DEFAULTS["sweep_extend"]),
    workload=dict(type="str", default=DEFAULTS["workload"]),
    extra_args=dict(type="raw", default=DEFAULTS["extra_args"]),
    eval_every_steps=dict(type="raw"),
    target_accuracy=dict(type="raw"),
    max_epochs=dict(type="raw"),
    optimizer=dict(type="raw"),
    learning_rate=dict(type="raw"),
    lr_scaling=dict(type="raw"),
    warmup_epochs=dict(type="raw"),
    sync=dict(type="raw"),
    cache=dict(type="raw"),
    background_io=dict(type="raw"),
    background_io_mb_per_s=dict(type="raw"),
    input_format=dict(type="raw"),
    data_staging=dict(type="str", default=DEFAULTS["data_staging"], choices=list(DATA_STAGINGS)),
    checkpoint_every_steps=dict(type="raw"),
    checkpoint_every_secs=dict(type="raw"),
    checkpoint_dir=dict(type="str"),
    stage_dir=dict(type="str"),
    # The role's (roles/benchmark/defaults): it needs them before the plan; a direct caller gets ssh, submitted.
    launcher=dict(type="str", choices=["ssh", "slurm"]),
    submit=dict(type="bool"),
    tf_modules=dict(type="list", elements="str", default=[]),
    # The launcher's ports (the tf_cluster role's variables where given): each run's layout is the one it runs.
    ps_port_base=dict(type="int", default=DEFAULT_PS_PORT_BASE),
    worker_port_base=dict(type="int", default=DEFAULT_WORKER_PORT_BASE),
    **{name: dict(type="raw", default=DEFAULTS[name]) for name in TIMEOUTS},
)
