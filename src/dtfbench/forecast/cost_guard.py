"""The dollar guard of the AWS playbooks: a planned sweep's predicted cost, and its refusal.

``provision-aws.yml`` (before anything is launched) and ``run-benchmark.yml`` with
``system=aws`` (before the first run) call ``estimate`` on the sweep's runs, print
``Estimate.message()``, and refuse through ``check`` above ``max_cost_usd``
(``pricing.DEFAULT_MAX_COST_USD`` unless raised):

    cost = instances x hours x price
    hours = setup + sum over the runs not yet done of (run overhead + steps x step time)

The step time of each run is the scaling model's (``dtfbench.forecast.scaling_model``) fitted to the
study's published table of the nodes' instance type (p2.xlarge, p2.8xlarge). Other types
have no published table: they are timed with the K80 table of as many GPUs per node (1:
p2.xlarge, more: p2.8xlarge), which newer GPUs beat, so the figure errs high; ``basis``
says which. The tables are InceptionV3 at batch 64 per GPU: another batch size scales the
step, another model is timed as InceptionV3 (said in ``basis`` too). all-reduce runs are timed
by the model's ring when the fit holds a multi-node all-reduce run, else as
distributed_replicated with one PS (the published tables have none, and a ring without its
fitted per-hop cost would price it far too low).

A run with checkpoints (checkpoint_every_steps or _secs) adds its saves: each writes the model's
variables (twice their size with the momentum optimizer's slots) at ``checkpoint_gb_per_s``,
D3's measured rate of TF's save to a local disk unless given (a shared file system under load
writes slower: the store's ``checkpoint_gb_per_s`` of a run says what it did); ``basis`` says so.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..plan import sweep as plan
from . import predict as forecast
from . import pricing, scaling_model
from .scaling_model import Config

PUBLISHED_MODEL = "inception3"
PUBLISHED_BATCH = 64
# Types without a published table are timed with the K80 table of the same node shape.
FALLBACK_SYSTEM = {1: "aws-p2.xlarge", 8: "aws-p2.8xlarge"}
# The rate a checkpoint is saved at unless given: TF's save of ResNet-50 to a local disk, measured
# by benchmarks/checkpoint_cost.py (D3: 0.27-0.33 GB/s; docs/storage.md).
CHECKPOINT_GB_PER_S = 0.3


class GuardError(ValueError):
    """An input the guard cannot price or time; the message names it and the fix."""


class OverLimit(GuardError):
    """A sweep predicted above max_cost_usd; ``result`` holds the estimate for the task's answer."""

    def __init__(self, message: str, estimate_: Estimate):
        super().__init__(message)
        self.result = {"estimate": estimate_.as_dict()}


@dataclass(frozen=True)
class Estimate:
    instance_type: str
    instances: int
    runs: int
    run_hours: float
    hours: float
    usd_per_hour: float
    cost_usd: float
    price_note: str
    basis: str

    def message(self) -> str:
        return (
            f"predicted cost of the planned sweep: ${self.cost_usd:,.2f} = {self.instances} x "
            f"{self.instance_type} x {self.hours:.2f} h x ${self.usd_per_hour:g}/h "
            f"({self.runs} runs in {self.run_hours:.2f} h, + {self.hours - self.run_hours:.2f} h setup; "
            f"price: {self.price_note}; "
            f"step times: {self.basis})"
        )

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__, message=self.message())


@functools.cache
def _fit(system: str) -> scaling_model.Fit:
    return forecast.calibrate(forecast.published_observations(system), PUBLISHED_MODEL, PUBLISHED_BATCH)


def _has_table(system: str) -> bool:
    try:
        forecast.published_observations(system)
    except forecast.ForecastError:
        return False
    return True


def calibration(instance_type: str, gpus_per_instance: int) -> tuple[scaling_model.Fit, str]:
    """The fit that times runs on `instance_type`, and what it is based on, in words."""
    own = f"aws-{instance_type}"
    if _has_table(own):
        return _fit(own), (
            f"the scaling model fitted to the study's published {instance_type} table "
            f"({PUBLISHED_MODEL}, batch {PUBLISHED_BATCH}, synthetic data)"
        )
    system = FALLBACK_SYSTEM[1 if gpus_per_instance <= 1 else 8]
    return _fit(system), (
        f"no published table of {instance_type}: the scaling model fitted to the study's "
        f"{system[len('aws-') :]} table (K80 GPUs; a newer GPU is faster, so the cost is "
        "likely overstated)"
    )


def _price(instance_type: str, price_usd_per_hour, price_file) -> pricing.Price:
    given = None if price_usd_per_hour in (None, "") else price_usd_per_hour
    if given is not None:
        try:
            pricing.check_price(given, "price_usd_per_hour")
        except pricing.PriceError:
            raise GuardError(
                f"price_usd_per_hour={given} must be a number above 0 (USD per instance-hour); "
                "give the price of one instance-hour, or leave it out for the price table's"
            ) from None
    try:
        if given is None and not instance_type:
            raise pricing.PriceError(
                "the nodes' instance type is not known (no instance_type host variable: the aws_ec2 "
                "inventory of provision-aws.yml sets it), so the sweep has no price; give "
                "-e price_usd_per_hour=... (USD per instance-hour) or -e instance_type=..."
            )
        return pricing.price_for(instance_type, pricing.load_prices(price_file or None), given)
    except pricing.PriceError as err:
        raise GuardError(
            str(err)
            .replace("(--price-usd-per-hour)", "(-e price_usd_per_hour=...)")
            .replace("--price-file)", "-e price_file=...)")
        ) from None


def _whole(value, name: str, least: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise GuardError(f"{name}={value!r} is not a whole number") from None
    if number < least or number != float(value):
        raise GuardError(f"{name}={value!r} must be a whole number >= {least}")
    return number


def _step_seconds(fit: scaling_model.Fit, run: Mapping[str, Any], gpus_per_instance: int) -> float:
    gpus = _whole(run.get("gpus"), "gpus", 1)
    update = str(run.get("variable_update") or "parameter_server")
    num_ps = int(run.get("num_ps") or 0)
    if update not in scaling_model.VARIABLE_UPDATES or (
        update == scaling_model.ALL_REDUCE and not fit.all_reduce_fitted
    ):
        # No all-reduce run in the fit (the published tables have none): its per-hop cost is
        # unknown (0), which would price it far below what it costs; time it as
        # distributed_replicated with one PS, the dearer estimate.
        update = "distributed_replicated"
    num_ps = 0 if update == scaling_model.ALL_REDUCE else max(1, num_ps)
    config = Config(
        gpus, max(1, min(gpus_per_instance, gpus)), num_ps, update, bool(run.get("ps_on_worker_nodes", True))
    )
    batch = float(run.get("batch_size") or PUBLISHED_BATCH)
    return fit.step_time(config) * batch / PUBLISHED_BATCH


def checkpoint_seconds(run: Mapping[str, Any], run_seconds: float, gb_per_s: float = CHECKPOINT_GB_PER_S) -> float:
    """What a run's checkpoints add to it: its saves x (the checkpoint's GB / gb_per_s); 0 without.

    The saves: every checkpoint_every_steps of the measured steps, or every checkpoint_every_secs
    of its `run_seconds`; the checkpoint: the model's variables (MODEL_VARIABLES; another model
    counts as InceptionV3), twice with the momentum optimizer's slots."""
    every_steps, every_secs = run.get("checkpoint_every_steps"), run.get("checkpoint_every_secs")
    if not (every_steps or every_secs):
        return 0.0
    if every_steps:
        saves = int(run.get("steps") or 0) // int(every_steps)
    else:
        saves = int(run_seconds // float(every_secs))
    model = run.get("model") if run.get("model") in scaling_model.MODEL_VARIABLES else PUBLISHED_MODEL
    gb = scaling_model.Variables.of(model).total_bytes / 1e9 * (2 if run.get("optimizer") == "momentum" else 1)
    return saves * gb / gb_per_s


def estimate(
    runs: Sequence[Mapping[str, Any]],
    instance_type: str,
    instances: int,
    gpus_per_instance: int,
    price_usd_per_hour: float | str | None = None,
    price_file: str | None = None,
    setup_minutes: float = 0.0,
    run_overhead_s: float = forecast.DEFAULT_RUN_OVERHEAD_S,
    checkpoint_gb_per_s: float | None = None,
) -> Estimate:
    """The predicted cost of the `runs` not yet done (``done`` false) on `instances` nodes."""
    price = _price(instance_type, price_usd_per_hour, price_file)
    instances = _whole(instances, "instances", 1)
    gpus_per_instance = _whole(gpus_per_instance, "gpus_per_instance", 1)
    if setup_minutes < 0 or run_overhead_s < 0:
        raise GuardError(f"setup_minutes={setup_minutes}, run_overhead_s={run_overhead_s}: both must be >= 0")
    pending = [r for r in runs if not r.get("done")]
    fit, basis = calibration(instance_type, gpus_per_instance)
    models = sorted({str(r.get("model")) for r in pending if r.get("model") not in (None, PUBLISHED_MODEL)})
    if models:
        basis += f"; {', '.join(models)} timed as {PUBLISHED_MODEL}"
    if any(int(r.get("batch_size") or PUBLISHED_BATCH) != PUBLISHED_BATCH for r in pending):
        basis += f"; steps scaled by batch size / {PUBLISHED_BATCH}"
    try:
        rate = CHECKPOINT_GB_PER_S if checkpoint_gb_per_s in (None, "") else float(checkpoint_gb_per_s)
    except (TypeError, ValueError):
        rate = -1.0
    if not rate > 0:
        raise GuardError(
            f"checkpoint_gb_per_s={checkpoint_gb_per_s!r}: give the rate the nodes write checkpoints at, in GB/s "
            f"above 0, or leave it out for {CHECKPOINT_GB_PER_S:g} (TF's save to a local disk)"
        )
    seconds = saving = 0.0
    for run in pending:
        steps = int(run.get("warmup_steps") or 0) + int(run.get("steps") or 0)
        training = steps * _step_seconds(fit, run, gpus_per_instance)
        saving += checkpoint_seconds(run, training, rate)
        seconds += run_overhead_s + training
    seconds += saving
    if saving:
        given = "given" if checkpoint_gb_per_s not in (None, "") else "TF's save to a local disk, D3"
        basis += f"; checkpoints add {saving / 3600.0:.2f} h (saved at {rate:g} GB/s: {given})"
    run_hours = seconds / 3600.0
    hours = run_hours + setup_minutes / 60.0
    note = f"{price.source}, {price.as_of}" if price.source != "price_usd_per_hour" else "price_usd_per_hour"
    return Estimate(
        instance_type or "node",
        instances,
        len(pending),
        run_hours,
        hours,
        price.usd_per_hour,
        pricing.cost_usd(instances, hours, price.usd_per_hour),
        note,
        basis,
    )


def check(estimate_: Estimate, max_cost_usd: float | str | None = None) -> None:
    """Refuse above max_cost_usd (pricing.CostLimitError: the figure and the variable to raise)."""
    pricing.check_max_cost(estimate_.cost_usd, max_cost_usd)


def doubling_gpus(total_gpus: int) -> list[int]:
    """The study's GPU counts on a cluster of `total_gpus`: 1, 2, 4, ... and the cluster's own."""
    counts, gpus = [], 1
    while gpus < total_gpus:
        counts.append(gpus)
        gpus *= 2
    return counts + [total_gpus]


def planned_runs(sweep: Mapping[str, Any], instances: int, gpus_per_instance: int) -> list[dict[str, Any]]:
    """The runs ``run-benchmark.yml`` would make of `sweep` on the cluster about to be launched.

    `sweep`: run-benchmark's variables (gpus, model, batch_size, variable_update, num_ps,
    repetitions, warmup_steps, steps, devices_per_worker); gpus empty for ``doubling_gpus``.
    """
    hosts = [
        {"name": f"node{i}", "address": f"10.0.0.{i}", "devices": gpus_per_instance, "device_type": "gpu"}
        for i in range(1, instances + 1)
    ]
    request = {k: v for k, v in sweep.items() if v not in (None, "", [])}
    request.setdefault("gpus", doubling_gpus(instances * gpus_per_instance))
    for key in ("model", "batch_size"):
        request.setdefault(key, PUBLISHED_MODEL if key == "model" else PUBLISHED_BATCH)
    try:
        return plan.build_plan(request, hosts)["runs"]
    except plan.PlanError as err:
        raise GuardError(f"the planned sweep (sweep_* variables): {err}") from None


def node_type(types: Iterable[str], price_given: bool) -> str:
    """The one instance type of the nodes ('' when unknown): several types need a given price."""
    kinds = sorted({str(t) for t in types if t})
    if len(kinds) > 1 and not price_given:
        raise GuardError(
            f"the nodes run several instance types ({', '.join(kinds)}) and the guard prices one; "
            "give -e price_usd_per_hour=... (the mean price of a node per hour)"
        )
    return kinds[0] if kinds else ""


# The options of the sweep_cost action (library/sweep_cost.py documents them).
ARGUMENT_SPEC = dict(
    runs=dict(type="list", elements="dict"),
    sweep=dict(type="dict"),
    instance_types=dict(type="list", elements="str", required=True),
    gpus_per_instance=dict(type="int", required=True),
    price_usd_per_hour=dict(type="raw"),
    price_file=dict(type="str", default=""),
    max_cost_usd=dict(type="raw"),
    setup_minutes=dict(type="float", default=0),
    checkpoint_gb_per_s=dict(type="raw"),
)
SPEC_OPTIONS = dict(required_one_of=[("runs", "sweep")], mutually_exclusive=[("runs", "sweep")])
ERRORS = (GuardError, pricing.PriceError)


def from_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep_cost options' estimate and the limit it passed; one of ERRORS otherwise
    (OverLimit above max_cost_usd, with the estimate)."""
    price = params["price_usd_per_hour"]
    price = None if price in (None, "") else price
    instance_type = node_type(params["instance_types"], price is not None)
    instances = len(params["instance_types"])
    if instances < 1:
        raise GuardError("the sweep has no nodes to price (instance_types is empty)")
    runs = params["runs"]
    if runs is None:
        runs = planned_runs(params["sweep"], instances, params["gpus_per_instance"])
    estimate_ = estimate(
        runs,
        instance_type,
        instances,
        params["gpus_per_instance"],
        price,
        params["price_file"],
        params["setup_minutes"],
        checkpoint_gb_per_s=params.get("checkpoint_gb_per_s"),
    )
    try:
        check(estimate_, params["max_cost_usd"])
    except pricing.CostLimitError as error:
        raise OverLimit(f"{error}; nothing was started. {estimate_.message()}", estimate_) from None
    limit = params["max_cost_usd"]
    return {
        "estimate": estimate_.as_dict(),
        "max_cost_usd": float(pricing.DEFAULT_MAX_COST_USD if limit in (None, "") else limit),
    }
