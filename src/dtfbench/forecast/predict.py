"""Plan before you pay: predicted scaling, the best PS count, and what a sweep costs.

    python -m dtfbench forecast --system aws-p2.xlarge --gpus 1,2,4,8,16,32,64,128
    python -m dtfbench forecast --instance-type p2.8xlarge --gpus 8,16,32 --calibrate-from aws-p2.8xlarge
    python -m dtfbench forecast --sweep SWEEP_ID --db results/results.sqlite --gpus 8,16,32,64 --gpus-per-node 1

It fits the scaling model (``dtfbench.forecast.scaling_model``) to runs of the system, the study's
published tables (``--system``/``--calibrate-from``) or your own sweep in the store
(``--sweep``: measure small, predict large), then prints for each GPU count the predicted
images/sec, speedup, efficiency, the best variable_update and num_ps and the runner-up, the
best PS configuration beside ``collective_all_reduce`` and the GPU count where one overtakes
the other (the crossover); the sweep's run count, wall time and dollar cost; and where scaling
stops paying, in words.

For the sweep wiring (num_ps=auto, stop_below_efficiency, the dollar guard): ``calibrate``
gives a ``Fit``; ``rank(fit, gpus, gpus_per_node)`` the configurations best first;
``predict_counts`` the per-count rows with ``worth_it``; ``sweep_estimate`` runs, hours and
``cost_usd``; ``dtfbench.forecast.pricing.check_max_cost`` the refusal.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from ..plan import ec2_types
from ..plan.sweep import default_num_ps
from ..report import reference, stats
from ..results import store
from . import pricing, scaling_model
from .scaling_model import Config, Fit, ModelError

# Each added GPU should add at least this share of one GPU's rate to be worth paying for.
DEFAULT_GAIN_THRESHOLD = 0.10
# A run besides its steps: TF start, graph, session, the orchestration (README, P1: ~35 s
# with InceptionV3 on the test bed; a GPU node's CUDA start adds more).
DEFAULT_RUN_OVERHEAD_S = 60.0
# Provisioning and configuring the nodes before the first run (docs/aws.md, docs/nodes.md).
DEFAULT_SETUP_MINUTES = 30.0
UPDATES = scaling_model.VARIABLE_UPDATES
ALL_REDUCE = scaling_model.ALL_REDUCE
# What the study swept, the functions' default (the command ranks all-reduce too when fitted).
STUDY_UPDATES = scaling_model.PS_UPDATES


class ForecastError(ValueError):
    """A planner request that cannot be answered, with the input and the fix."""


def _study_ps_counts(num_workers: int, variable_update: str) -> list[int]:
    return default_num_ps(num_workers, variable_update)


# ---------------------------------------------------------------------------------------
# Calibration
# ---------------------------------------------------------------------------------------


def published_observations(
    system: str, model: str = "inception3", batch_size: int = 64, data: str = "synthetic"
) -> list[scaling_model.Observation]:
    theirs = reference.DEFAULT_SYSTEM_MAP.get(system, system)
    rows = [
        r
        for r in reference.published()
        if r["system"] == theirs
        and r["model"] == model
        and r["batch_size"] == batch_size
        and r["data"] == data
        and r.get("num_ps")
    ]
    if not rows:
        known = sorted({r["system"] for r in reference.published() if r.get("num_ps")})
        raise ForecastError(
            f"no published runs for system {system!r} (model {model}, batch {batch_size}, "
            f"{data} data); published: {', '.join(known)}; or calibrate from your own "
            "runs with --sweep SWEEP_ID"
        )
    return scaling_model.observations_from_rows(rows)


def store_observations(
    db: str, sweep_id: str, model: str | None = None, data: str = "synthetic", gpus_per_node: int | None = None
) -> tuple[list[scaling_model.Observation], dict[str, Any]]:
    """Every ok configuration of a sweep (the mean of its repetitions), and what it ran."""
    # Read-only: a mistyped --db is refused, not created as an empty store (and its folder).
    try:
        conn = store.open_readonly(db, f"--db {db}")
    except store.StoreError as err:
        raise ForecastError(str(err)) from None
    try:
        rows = store.runs(conn, "sweep_id = ? AND status = 'ok'", (sweep_id,))
    finally:
        conn.close()
    rows = [r for r in rows if r.get("data") == data and (model is None or r.get("model") == model)]
    if not rows:
        raise ForecastError(
            f"sweep {sweep_id!r} in {db} has no ok {data}-data runs"
            f"{' of model ' + model if model else ''}: nothing to calibrate from; "
            "run a small sweep first (gpus=1,2,...) or use the published tables (--system)"
        )
    hosts = {}
    for r in rows:
        key = tuple(r.get(k) for k in stats.CONFIG_KEYS)
        hosts.setdefault(key, r.get("hosts"))
    summaries = [s for s in stats.summarise(rows) if s["status"] == "ok"]
    for s in summaries:
        s["hosts"] = hosts.get(tuple(s.get(k) for k in stats.CONFIG_KEYS))
    info = {
        "models": sorted({str(s["model"]) for s in summaries}),
        "batch_sizes": sorted({int(s["batch_size"]) for s in summaries if s.get("batch_size")}),
        "systems": sorted({str(s["system"]) for s in summaries}),
    }
    return scaling_model.observations_from_rows(summaries, gpus_per_node), info


def calibrate(
    observations: Sequence[scaling_model.Observation],
    model: str = "inception3",
    batch_size: int = 64,
    variable_bytes: float | None = None,
    link_gb_s: float | None = None,
) -> Fit:
    try:
        variables = scaling_model.Variables.of(model, variable_bytes, 0.0 if variable_bytes else None)
        return scaling_model.fit(observations, batch_size, variables, link_gb_s)
    except ModelError as err:
        raise ForecastError(str(err)) from None


# ---------------------------------------------------------------------------------------
# Prediction and ranking
# ---------------------------------------------------------------------------------------


def candidates(
    gpus: int,
    gpus_per_node: int,
    updates: Iterable[str] = STUDY_UPDATES,
    devices_per_worker: int = 1,
    ps_counts: Callable[[int, str], list[int]] = _study_ps_counts,
    synchronous: bool = True,
) -> list[Config]:
    """The configurations a sweep would try at `gpus`: each PS update with each of its PS counts,
    and all-reduce (no PS); `synchronous`: the PS updates' cross_replica_sync."""
    workers = max(1, gpus // devices_per_worker)
    return [
        Config(gpus, gpus_per_node, p, u, synchronous=synchronous)
        for u in updates
        for p in ([0] if u == ALL_REDUCE else [p for p in ps_counts(workers, u) if p >= 1])
    ]


def rank(
    fit: Fit,
    gpus: int,
    gpus_per_node: int,
    updates: Iterable[str] = STUDY_UPDATES,
    devices_per_worker: int = 1,
    ps_counts: Callable[[int, str], list[int]] = _study_ps_counts,
) -> list[tuple[Config, float]]:
    """(configuration, predicted images/sec), best first (ties: fewer PSs, parameter_server first)."""
    scored = [
        (c, fit.images_per_sec(c))
        for c in candidates(
            gpus, gpus_per_node, updates, devices_per_worker, ps_counts, synchronous=not fit.asynchronous
        )
    ]
    return sorted(scored, key=lambda cr: (-round(cr[1], 6), cr[0].num_ps, UPDATES.index(cr[0].variable_update)))


def predict_counts(
    fit: Fit,
    gpus_list: Sequence[int],
    gpus_per_node: int,
    updates: Iterable[str] = STUDY_UPDATES,
    gain_threshold: float = DEFAULT_GAIN_THRESHOLD,
    devices_per_worker: int = 1,
    ps_counts: Callable[[int, str], list[int]] = _study_ps_counts,
) -> list[dict[str, Any]]:
    """One row per GPU count: best and runner-up, speedup, efficiency, and whether the step up pays.

    ``gain_per_added_gpu``: (rate(N) - rate(previous N)) / (N - previous N) / 1-GPU rate;
    ``worth_it`` is False when it is under `gain_threshold`.
    """
    one = fit.batch_size / fit.t1
    rows, previous = [], None
    for gpus in sorted(set(int(g) for g in gpus_list)):
        ranked = rank(fit, gpus, gpus_per_node, updates, devices_per_worker, ps_counts)
        if not ranked:
            raise ForecastError(f"gpus={gpus}: no configuration to predict (no variable update given)")
        (best, rate) = ranked[0]
        # The runner-up: the best configuration predicted to differ (two updates are the same
        # configuration on one-GPU nodes), else the second.
        differing = [cr for cr in ranked[1:] if abs(cr[1] - rate) > 1e-9 * rate]
        runner = differing[0] if differing else (ranked[1] if len(ranked) > 1 else None)
        row = {
            "gpus": gpus,
            "nodes": best.nodes,
            "images_per_sec": rate,
            "speedup": rate / one,
            "efficiency": rate / one / gpus,
            "variable_update": best.variable_update,
            "num_ps": best.num_ps,
            "network_bound": fit.network_bound(best),
            "runner_up": None
            if runner is None
            else {
                "variable_update": runner[0].variable_update,
                "num_ps": runner[0].num_ps,
                "images_per_sec": runner[1],
            },
            "best_ps": _best_of(ranked, lambda c: not c.all_reduce),
            "all_reduce": _best_of(ranked, lambda c: c.all_reduce),
            "gain_per_added_gpu": None,
            "worth_it": True,
            "verdict": "first count",
        }
        if previous is not None:
            gain = (rate - previous["images_per_sec"]) / (gpus - previous["gpus"]) / one
            row["gain_per_added_gpu"] = gain
            row["worth_it"] = gain >= gain_threshold
            row["verdict"] = (
                f"{previous['gpus']} -> {gpus} GPUs: "
                + ("worth it" if row["worth_it"] else "not worth it")
                + f", each added GPU adds {gain:.0%} of one GPU's rate"
            )
        rows.append(row)
        previous = row
    return rows


def _best_of(ranked: Sequence[tuple[Config, float]], keep: Callable[[Config], bool]) -> dict[str, Any] | None:
    for config, rate in ranked:
        if keep(config):
            return {"variable_update": config.variable_update, "num_ps": config.num_ps, "images_per_sec": rate}
    return None


def crossover(rows: Sequence[dict[str, Any]], all_reduce_fitted: bool = True) -> dict[str, Any] | None:
    """PS or all-reduce, per count: the winner of each, and the first count where the winner changes.

    None when the rows do not have both (only PS modes or only all-reduce asked for). Returns
    ``winners`` ({gpus: "parameter servers" | "all-reduce" | "tie"}; a tie where nothing
    crosses a network, one node), ``crossover_gpus`` (the first count won by the other side
    than the count won before; None when one side wins throughout) and ``summary`` in words.
    """
    pairs = [(r["gpus"], r["best_ps"], r["all_reduce"]) for r in rows if r["best_ps"] and r["all_reduce"]]
    if not pairs:
        return None

    def winner(ps: float, ar: float) -> str:
        if abs(ar - ps) <= 1e-9 * ps:
            return "tie"
        return "all-reduce" if ar > ps else "parameter servers"

    winners = {g: winner(ps["images_per_sec"], ar["images_per_sec"]) for g, ps, ar in pairs}
    counts = [g for g, _, _ in pairs if winners[g] != "tie"]
    if not counts:
        return {
            "winners": winners,
            "crossover_gpus": None,
            "summary": "a tie at every count: nothing crosses a network",
        }
    switch = next((g for prev, g in zip(counts, counts[1:]) if winners[g] != winners[prev]), None)
    ratio = {g: ar["images_per_sec"] / ps["images_per_sec"] for g, ps, ar in pairs}
    if switch is None:
        side = winners[counts[0]]
        text = (
            f"{side} {'wins' if side == 'all-reduce' else 'win'} at every count from {counts[0]} to {counts[-1]} GPUs (all-reduce / best PS: "
            + (", ".join(f"{ratio[g]:.2f}x at {g}" for g in counts) + ")")
        )
    else:
        before = counts[counts.index(switch) - 1]
        text = (
            f"crossover at {switch} GPUs: {winners[before]} {'wins' if winners[before] == 'all-reduce' else 'win'} "
            f"up to {before} GPUs ({ratio[before]:.2f}x all-reduce / best PS), {winners[switch]} from {switch} "
            f"({ratio[switch]:.2f}x)"
        )
    if not all_reduce_fitted:
        text += "; all-reduce's per-hop cost is not fitted (no multi-node all-reduce run): its figures are upper bounds"
    return {"winners": winners, "crossover_gpus": switch, "summary": text}


def saturation(rows: Sequence[dict[str, Any]], gain_threshold: float = DEFAULT_GAIN_THRESHOLD) -> str:
    """Where scaling stops paying, in plain words."""
    for row in rows:
        if row["gain_per_added_gpu"] is not None and not row["worth_it"]:
            before = rows[rows.index(row) - 1]["gpus"]
            return (
                f"beyond {before} GPUs each added GPU adds under {gain_threshold:.0%} of one GPU's rate "
                f"({row['gain_per_added_gpu']:.0%} from {before} to {row['gpus']})"
                + ("; the network sets the step there" if row["network_bound"] else "")
            )
    last = rows[-1]
    if len(rows) == 1:
        return (
            f"one count asked, nothing to judge a step up against (efficiency at {last['gpus']} GPUs: "
            f"{last['efficiency']:.0%}); give several, e.g. --gpus 1,2,4,8,{last['gpus']}"
        )
    return (
        f"no saturation up to {last['gpus']} GPUs: each step up adds at least {gain_threshold:.0%} of "
        f"one GPU's rate per GPU (efficiency at {last['gpus']}: {last['efficiency']:.0%})"
    )


# A prediction this many times past the largest count the fit saw is the model's shape, not a
# measurement: the forecast says so.
FAR_BEYOND = 8
# Below this efficiency a count is mostly idle GPUs, whatever the model's shape.
IDLE_EFFICIENCY = 0.10


def cautions(rows: Sequence[dict[str, Any]], fitted_gpus: int, cost_usd: float | None) -> list[str]:
    """What a reader should know before trusting or paying for the forecast."""
    out = []
    far = [r["gpus"] for r in rows if r["gpus"] > FAR_BEYOND * fitted_gpus]
    if far:
        out.append(
            f"{', '.join(map(str, far))} GPUs {'is' if len(far) == 1 else 'are'} over {FAR_BEYOND}x the largest count "
            f"the model was fitted on ({fitted_gpus}): there it extrapolates its shape, nothing measured says it holds; "
            f"measure up to a count within reach of those first"
        )
    idle = [r for r in rows if r["efficiency"] < IDLE_EFFICIENCY]
    if idle:
        worst = min(idle, key=lambda r: r["efficiency"])
        out.append(
            f"at {', '.join(str(r['gpus']) for r in idle)} GPUs the efficiency is under {IDLE_EFFICIENCY:.0%} "
            f"({worst['efficiency']:.1%} at {worst['gpus']}): nearly every GPU would wait; fewer give the same images/sec"
        )
    if cost_usd is not None and cost_usd > 1e6:
        out.append(f"the sweep would cost ${cost_usd:,.0f}; --max-cost-usd refuses a sweep above a bound")
    return out


# ---------------------------------------------------------------------------------------
# The sweep's size, time and cost
# ---------------------------------------------------------------------------------------


@dataclass
class SweepEstimate:
    runs: int
    run_hours: float
    hours: float
    instances: int
    usd_per_hour: float | None
    cost_usd: float | None
    price_note: str

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def sweep_estimate(
    fit: Fit,
    gpus_list: Sequence[int],
    gpus_per_node: int,
    updates: Iterable[str] = STUDY_UPDATES,
    repetitions: int = 5,
    steps: int = 110,
    devices_per_worker: int = 1,
    run_overhead_s: float = DEFAULT_RUN_OVERHEAD_S,
    setup_minutes: float = DEFAULT_SETUP_MINUTES,
    price: pricing.Price | None = None,
    ps_counts: Callable[[int, str], list[int]] = _study_ps_counts,
) -> SweepEstimate:
    """Runs (every configuration x repetitions), wall time, and instances x hours x price.

    The cluster is sized for the largest count and held for the whole sweep, as
    ``provision-aws.yml`` does; `steps` is warm-up + measured steps.
    """
    if repetitions < 1 or steps < 1:
        raise ForecastError(f"repetitions={repetitions}, steps={steps}: both must be >= 1")
    updates = list(updates)
    runs, seconds = 0, 0.0
    for gpus in gpus_list:
        for config in candidates(
            int(gpus), gpus_per_node, updates, devices_per_worker, ps_counts, synchronous=not fit.asynchronous
        ):
            runs += repetitions
            seconds += repetitions * (run_overhead_s + steps * fit.step_time(config))
    instances = max(math.ceil(int(g) / gpus_per_node) for g in gpus_list)
    run_hours = seconds / 3600.0
    hours = run_hours + setup_minutes / 60.0
    if price is None:
        return SweepEstimate(runs, run_hours, hours, instances, None, None, "no price: node-hours only")
    cost = pricing.cost_usd(instances, hours, price.usd_per_hour)
    return SweepEstimate(
        runs,
        run_hours,
        hours,
        instances,
        price.usd_per_hour,
        cost,
        f"{price.instance_type} at ${price.usd_per_hour:g}/h ({price.source}, {price.as_of})",
    )


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------


def _ints(text: str, name: str) -> list[int]:
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        raise ForecastError(f"--{name} {text!r}: give whole numbers, comma-separated (e.g. 1,2,4,8)") from None
    if not values or min(values) < 1:
        raise ForecastError(f"--{name} {text!r}: give numbers >= 1")
    return values


def _gpus_per_node(args, rows) -> int:
    if args.gpus_per_node:
        return args.gpus_per_node
    if args.instance_type:
        try:
            return ec2_types.instance_type(args.instance_type).gpus
        except ec2_types.Ec2TypeError as err:
            raise ForecastError(str(err)) from None
    per_node = {o.config.gpus_per_node for o in rows}
    if len(per_node) == 1:
        return per_node.pop()
    raise ForecastError("the runs do not say how many GPUs a node has: give --gpus-per-node")


def link_of(args: argparse.Namespace) -> dict[str, Any]:
    """The link rate the fit takes: --link-gb-s, else what the sweep's link probe measured
    (``dtfbench.results.network``), else none (with why)."""
    if args.link_gb_s is not None:
        return {"gb_s": args.link_gb_s, "source": "--link-gb-s"}
    if args.sweep:
        from ..results import network

        measured = network.measured(args.db, args.sweep)
        if measured.planner_gb_s:
            return {
                "gb_s": measured.planner_gb_s,
                "source": f"measured by sweep {args.sweep}'s link probe (point-to-point "
                f"{measured.link_gb_s:.4g} GB/s, incast "
                + (f"{measured.incast_gb_s:.4g} GB/s" if measured.incast_gb_s else "unknown")
                + ")",
            }
        return {"gb_s": None, "source": f"unknown: {measured.why}"}
    return {"gb_s": None, "source": "unknown: the published tables give no link rate"}


def link_range(
    observations: Sequence[scaling_model.Observation],
    model: str,
    batch_size: int,
    variable_bytes: float | None,
    counts: list[dict[str, Any]],
    gpus_per_node: int,
) -> dict[str, Any]:
    """With no link rate known: to each count's row, the range of images/sec its best
    configuration would have at the link rates the runs cannot rule out (``range_images_per_sec``),
    and the span of those rates (GB/s)."""
    variables = scaling_model.Variables.of(model, variable_bytes, 0.0 if variable_bytes else None)
    fits = scaling_model.link_fits(observations, batch_size, variables)
    rates = [f.bandwidth_gb_s for f in fits]
    for row in counts:
        config = fits[0].config(row["gpus"], gpus_per_node, row["num_ps"], row["variable_update"])
        predictions = [f.images_per_sec(config) for f in fits]
        row["range_images_per_sec"] = [min(predictions), max(predictions)]
    return {"lowest_gb_s": min(rates), "highest_gb_s": None if math.isinf(max(rates)) else max(rates)}


def build(args: argparse.Namespace) -> dict[str, Any]:
    gpus_list = _ints(args.gpus, "gpus")
    asked = args.variable_update is not None
    updates = [u.strip() for u in (args.variable_update or ",".join(UPDATES)).split(",") if u.strip()]
    for u in updates:
        if u not in UPDATES:
            raise ForecastError(f"--variable-update {u!r}: the model knows {', '.join(UPDATES)}")
    if args.sweep:
        rows, info = store_observations(args.db, args.sweep, args.model, args.data, args.gpus_per_node)
        model = args.model or (info["models"][0] if len(info["models"]) == 1 else None)
        batch = args.batch_size or (info["batch_sizes"][0] if len(info["batch_sizes"]) == 1 else None)
        if model is None or batch is None:
            raise ForecastError(
                f"sweep {args.sweep} ran models {info['models']} and batch sizes "
                f"{info['batch_sizes']}: give --model and --batch-size"
            )
        source = f"sweep {args.sweep} ({args.db})"
    else:
        system = args.calibrate_from or args.system or (f"aws-{args.instance_type}" if args.instance_type else None)
        if not system:
            raise ForecastError(
                "nothing to calibrate from: give --system (a published one), --calibrate-from, or --sweep SWEEP_ID"
            )
        model, batch = args.model or "inception3", args.batch_size or 64
        rows = published_observations(system, model, batch, args.data)
        source = f"published table of {system}"
    per_node = _gpus_per_node(args, rows)
    link = link_of(args)
    fit = calibrate(rows, model, batch, args.variable_bytes, link["gb_s"])
    all_reduce_note = None
    if not asked and not fit.all_reduce_fitted and ALL_REDUCE in updates:
        # Its per-hop cost is unknown without its runs: ranked only when asked for (an upper bound).
        updates.remove(ALL_REDUCE)
        all_reduce_note = (
            f"{ALL_REDUCE} is not ranked: no multi-node run of it to fit; "
            f"--variable-update {','.join(UPDATES)} ranks it anyway (its figures then an upper bound)"
        )
    counts = predict_counts(fit, gpus_list, per_node, updates, args.gain_threshold, args.devices_per_worker)
    if link["gb_s"] is None:
        try:
            link["rates_not_ruled_out"] = link_range(rows, model, batch, args.variable_bytes, counts, per_node)
        except ModelError as err:
            raise ForecastError(str(err)) from None
    price = None
    named = reference.DEFAULT_SYSTEM_MAP.get(args.system or "", args.system or args.calibrate_from or "")
    instance = args.instance_type or (named[len("aws-") :] if named.startswith("aws-") else None)
    if instance or args.price_usd_per_hour is not None:
        price = pricing.price_for(
            instance or named or "node", pricing.load_prices(args.price_file), args.price_usd_per_hour
        )
    estimate = sweep_estimate(
        fit,
        gpus_list,
        per_node,
        updates,
        args.repetitions,
        args.steps,
        args.devices_per_worker,
        args.run_overhead_s,
        args.setup_minutes,
        price,
    )
    result = {
        "calibrated_from": source,
        "model": model,
        "batch_size": batch,
        "gpus_per_node": per_node,
        "fit": fit.as_dict(),
        "link": link,
        "counts": counts,
        "saturation": saturation(counts, args.gain_threshold),
        "ps_or_all_reduce": crossover(counts, fit.all_reduce_fitted),
        "all_reduce_note": all_reduce_note,
        "sweep": estimate.as_dict(),
        "cautions": cautions(counts, max(o.config.gpus for o in rows), estimate.cost_usd),
    }
    if args.max_cost_usd is not None:
        pricing.check_max_cost(estimate.cost_usd, args.max_cost_usd)
    return result


def render(result: dict[str, Any]) -> str:
    fit = result["fit"]
    bw = fit["bandwidth_gb_s"]
    link = result.get("link") or {}
    ranged = link.get("rates_not_ruled_out")
    lines = [
        f"Calibrated from the {result['calibrated_from']}: {result['model']}, batch {result['batch_size']} "
        f"per GPU, {result['gpus_per_node']} GPU(s) per node; 1-GPU step {fit['t1_s']:.3f} s, "
        f"link {'%.3g GB/s' % bw if bw else 'not limiting in these runs (it carried at least %.3g GB/s)' % fit['bandwidth_floor_gb_s']}, "
        f"fit error {fit['rms_relative_error']:.1%} (rms over {fit['points']} runs).",
        f"Link rate taken: {'%.4g GB/s, ' % link['gb_s'] if link.get('gb_s') else ''}{link.get('source', 'unknown')}.",
    ]
    if ranged:
        top = ranged["highest_gb_s"]
        lines.append(
            f"With no link rate known, the runs cannot rule out any from {ranged['lowest_gb_s']:.3g} GB/s "
            f"to {'%.3g GB/s' % top if top else 'no limit at all'}: the range column is what the best "
            "configuration would reach across them (measure the link: the link probe, docs/network.md)."
        )
    lines += [
        "",
        "| GPUs | nodes | images/sec | "
        + ("range (link unknown) | " if ranged else "")
        + "speedup | efficiency | best | runner-up | step up |",
        "|---|---|---|" + ("---|" if ranged else "") + "---|---|---|---|---|",
    ]
    for r in result["counts"]:
        ru = r["runner_up"]
        runner = f"{_configuration(ru)} ({ru['images_per_sec']:.0f})" if ru else "-"
        span = r.get("range_images_per_sec")
        lines.append(
            f"| {r['gpus']} | {r['nodes']} | {r['images_per_sec']:.0f} | "
            + (f"{span[0]:.0f}-{span[1]:.0f} | " if ranged and span else "")
            + f"{r['speedup']:.1f} | "
            f"{r['efficiency']:.0%} | {_configuration(r)}"
            f"{' (network-bound)' if r['network_bound'] else ''} | {runner} | {r['verdict']} |"
        )
    s = result["sweep"]
    cost = f"${s['cost_usd']:,.2f} ({s['price_note']})" if s["cost_usd"] is not None else s["price_note"]
    lines += [
        "",
        f"Scaling: {result['saturation']}.",
        *([f"PS or all-reduce: {result['ps_or_all_reduce']['summary']}."] if result.get("ps_or_all_reduce") else []),
        *([f"Note: {result['all_reduce_note']}."] if result.get("all_reduce_note") else []),
        f"Sweep: {s['runs']} runs, {s['run_hours']:.1f} h of runs + setup = {s['hours']:.1f} h on "
        f"{s['instances']} node(s) ({s['instances'] * s['hours']:.1f} node-hours): {cost}.",
        *[f"Caution: {c}." for c in result.get("cautions") or []],
    ]
    return "\n".join(lines)


def _configuration(row: dict[str, Any]) -> str:
    if row["variable_update"] == ALL_REDUCE:
        return ALL_REDUCE
    return f"{row['variable_update']}, {row['num_ps']} PS"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dtfbench forecast", description=__doc__.splitlines()[0])
    src = p.add_argument_group("calibration (one of)")
    src.add_argument("--system", help="a published system: piz-daint (daint), aws-p2.xlarge, aws-p2.8xlarge")
    src.add_argument("--calibrate-from", help="a published system to fit, when --system/--instance-type names another")
    src.add_argument("--sweep", help="a sweep id in the store: fit on your own runs")
    p.add_argument("--db", default="results/results.sqlite", help="the store (with --sweep)")
    p.add_argument("--instance-type", help="EC2 type to plan on (GPUs per node and price)")
    p.add_argument("--gpus", required=True, help="GPU counts, e.g. 1,2,4,8,16")
    p.add_argument("--gpus-per-node", type=int, help="default: the instance type's, or the runs'")
    p.add_argument(
        "--variable-update",
        help=f"the modes to rank, comma-separated; default {','.join(UPDATES)} "
        f"({ALL_REDUCE} only when the runs include it on 2+ nodes)",
    )
    p.add_argument("--devices-per-worker", type=int, default=1, help="as the sweep's (workers = GPUs / this)")
    p.add_argument("--model", help="default inception3 (published) or the sweep's")
    p.add_argument("--batch-size", type=int, help="per GPU; default 64 (published) or the sweep's")
    p.add_argument("--data", default="synthetic", choices=("synthetic", "real"))
    p.add_argument("--variable-bytes", type=float, help="the model's variable bytes, for a model the table lacks")
    p.add_argument(
        "--link-gb-s",
        type=float,
        help="the link rate between two nodes, GB/s (10^9 bytes/s): bounds the network where the runs "
        "never reached it; default with --sweep: what the sweep's link probe measured (docs/network.md)",
    )
    p.add_argument("--repetitions", type=int, default=5)
    p.add_argument("--steps", type=int, default=110, help="warm-up + measured steps per run")
    p.add_argument("--run-overhead-s", type=float, default=DEFAULT_RUN_OVERHEAD_S)
    p.add_argument("--setup-minutes", type=float, default=DEFAULT_SETUP_MINUTES)
    p.add_argument(
        "--gain-threshold",
        type=float,
        default=DEFAULT_GAIN_THRESHOLD,
        help="a step up is worth it when each added GPU adds this share of one GPU's rate",
    )
    p.add_argument("--price-file", help=f"a price table overriding the packaged one (also ${pricing.PRICE_FILE_ENV})")
    p.add_argument("--price-usd-per-hour", type=float, help="one price per instance-hour, for any system")
    p.add_argument("--max-cost-usd", type=float, help="refuse (exit 2) when the sweep is predicted above this")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        result = build(args)
    except (ForecastError, ModelError, pricing.PriceError, pricing.CostLimitError) as err:
        print(f"forecast: {err}", file=sys.stderr)
        return 2
    print(json.dumps(result, indent=2, default=str) if args.json else render(result))
    return 0
