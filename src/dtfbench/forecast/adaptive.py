"""A sweep that learns as it goes up in GPU counts: ``num_ps=auto`` and ``stop_below_efficiency``.

The plan (``dtfbench.plan.sweep``) expands and validates every run of the sweep before anything
starts, as for any sweep. run-benchmark then goes count by count (smallest first) and asks
this module, before each count, which of that count's planned runs to do:

- ``num_ps=auto``: the planned PS counts are the study's (``plan.default_num_ps``). Once the
  sweep has measured a count above 1 GPU (and the 1-GPU count, which gives the compute), the
  scaling model (``dtfbench.forecast.scaling_model``) is fitted to the runs of the same sweep at the
  smaller counts, ranks each variable_update's PS counts at this count, and only the best
  ``num_ps_auto_keep`` and their neighbours in the planned list run. Before that (the first
  two counts: nothing measured yet to fit the communication terms), the count runs its full
  PS set; also when the model cannot be fitted (no 1-GPU run in the sweep, a model without
  known variable sizes), which the decision says.
- ``stop_below_efficiency`` (0-1) and ``min_doubling_gain`` (>= 0): before a count, the best
  configuration measured at the count below is judged: its efficiency (images/sec per GPU
  against the per-GPU rate of the sweep's smallest count, the 1-GPU rate when the sweep has
  one) and its gain per doubling of the GPUs over the count before it. Below either, the
  sweep stops: this count and every larger one are skipped.
- ``rank_by=time_to_accuracy`` (a sweep with ``target_accuracy``): both rules rank by the time to
  the target instead of images/sec. The best configuration at a count is the one with the
  shortest time to accuracy (MLPerf's score of its repetitions); its efficiency is the smallest
  count's time times its GPUs over this count's time times its GPUs. ``num_ps=auto`` ranks the PS
  counts by their predicted time to the target: the epochs each needed at the counts below (a PS
  count not measured there: the line through its variable update's measured ones), over the
  model's images/sec; with no epochs measured yet, by images/sec, and the decision says so.

Every decision is recorded in the store (``dtfbench.results.sweep_steps``) with its reason, the
configurations kept and skipped, and the model's predictions, and printed.

Command (run-benchmark's count step; JSON request on stdin, JSON answer on stdout)::

    python -m dtfbench adaptive_sweep --db results/results.sqlite < request.json

request: ``sweep_id``, ``gpus`` (the count about to run), ``runs`` (the plan's runs),
``num_ps_auto`` (bool), ``num_ps_auto_keep``, ``stop_below_efficiency``, ``min_doubling_gain``
(null: off), ``rank_by`` (null: images_per_sec). answer: ``runs`` (this count's runs to do, not done yet), ``stopped`` (every group
stopped), ``messages``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..report import stats
from ..results import network, store, sweep_steps
from . import scaling_model

# A sweep's groups: the runs the model is fitted on and that are compared with each other.
GROUP_KEYS = ("model", "batch_size", "image_size", "data", "workload", "devices_per_worker", "ps_on_worker_nodes")
MODELLED_UPDATES = ("parameter_server", "distributed_replicated")
DEFAULT_KEEP = 1
IMAGES_PER_SEC, TIME_TO_ACCURACY = "images_per_sec", "time_to_accuracy"


class AdaptiveError(ValueError):
    """A request this module cannot answer, with the input and the fix."""


@dataclass(frozen=True)
class Settings:
    num_ps_auto: bool = False
    keep: int = DEFAULT_KEEP
    stop_below_efficiency: float | None = None
    min_doubling_gain: float | None = None
    rank_by: str = IMAGES_PER_SEC

    @property
    def stops(self) -> bool:
        return self.stop_below_efficiency is not None or self.min_doubling_gain is not None


def check_settings(
    num_ps_auto_keep: Any = DEFAULT_KEEP,
    stop_below_efficiency: Any = None,
    min_doubling_gain: Any = None,
    num_ps_auto: bool = False,
    rank_by: Any = None,
) -> Settings:
    """One clear error per bad value (the plan calls this before anything starts)."""

    def number(name: str, value: Any, low: float, high: float | None, example: str) -> float | None:
        if value is None or value == "":
            return None
        try:
            x = float(value)
        except (TypeError, ValueError):
            x = math.nan
        if not (math.isfinite(x) and x >= low and (high is None or x <= high)) or (
            name == "stop_below_efficiency" and x == 0
        ):
            span = f"between {low:g} and {high:g}" if high is not None else f">= {low:g}"
            raise AdaptiveError(
                f"{name}={value!r}: give a number {span}"
                f"{' (above 0)' if name == 'stop_below_efficiency' else ''}, e.g. {name}={example}, "
                "or leave it out"
            )
        return x

    try:
        keep = int(str(num_ps_auto_keep).strip())
    except ValueError:
        keep = 0
    if keep < 1:
        raise AdaptiveError(
            f"num_ps_auto_keep={num_ps_auto_keep!r}: give a whole number >= 1 (the best PS counts "
            "kept at each GPU count, each with its neighbours), e.g. num_ps_auto_keep=1"
        )
    rank = IMAGES_PER_SEC if rank_by in (None, "") else str(rank_by)
    if rank not in (IMAGES_PER_SEC, TIME_TO_ACCURACY):
        raise AdaptiveError(f"rank_by={rank_by!r}: give {IMAGES_PER_SEC} or {TIME_TO_ACCURACY}, or leave it out")
    return Settings(
        num_ps_auto,
        keep,
        number("stop_below_efficiency", stop_below_efficiency, 0.0, 1.0, "0.5"),
        number("min_doubling_gain", min_doubling_gain, 0.0, None, "0.1"),
        rank,
    )


# ---------------------------------------------------------------------------------------
# The two rules, on plain numbers (unit-tested on their own)
# ---------------------------------------------------------------------------------------


def narrowed_ps_counts(
    candidates: Sequence[int], predicted: Mapping[int, float], keep: int, node_bytes: Mapping[int, float] | None = None
) -> list[int]:
    """The `keep` PS counts predicted best and their neighbours in `candidates`.

    Ties (equal to 1 part in 10^6): the fewer bytes through the busiest NIC (`node_bytes`,
    the layout's; a fit that has not seen the network cost yet still prefers the layout that
    moves less), then fewer PSs.
    """
    positions = sorted(set(candidates))
    top = max(predicted[p] for p in positions)
    moved = node_bytes or {}
    order = sorted(positions, key=lambda p: (-round(predicted[p] / top, 6), round(moved.get(p, 0.0), 12), p))
    kept: set[int] = set()
    for p in order[:keep]:
        i = positions.index(p)
        kept.update(positions[max(0, i - 1) : i + 2])
    return sorted(kept)


def stop_reason(best_by_count: Mapping[int, float], settings: Settings) -> str | None:
    """Why the sweep should not go past its largest measured count (None: go on).

    `best_by_count`: the best measured figure at each count measured so far, higher better: images/sec,
    or with rank_by=time_to_accuracy the reciprocal of the shortest time to accuracy (targets a second).
    """
    counts = sorted(best_by_count)
    if len(counts) < 2 or not settings.stops:
        return None
    first, last, before = counts[0], counts[-1], counts[-2]
    rate = best_by_count[last]
    efficiency = rate / last / (best_by_count[first] / first)
    by_time = settings.rank_by == TIME_TO_ACCURACY

    def shown(value: float) -> str:
        return f"{1.0 / value:.1f} s to the target" if by_time else f"{value:.1f} images/sec"

    if by_time:
        against = f"{first} GPU{'s' if first > 1 else ''}' time times its GPUs"
    else:
        against = "the 1-GPU rate" if first == 1 else f"the per-GPU rate at {first} GPUs, the sweep's smallest count"
    best = "the fastest configuration to the target" if by_time else "the best configuration"
    if settings.stop_below_efficiency is not None and efficiency < settings.stop_below_efficiency:
        return (
            f"{best} at {last} GPUs measured {shown(rate)}, {efficiency:.0%} "
            f"efficiency (against {against}), below stop_below_efficiency={settings.stop_below_efficiency:g}"
        )
    if settings.min_doubling_gain is not None:
        gain = (rate / best_by_count[before]) ** (1.0 / math.log2(last / before)) - 1.0
        if gain < settings.min_doubling_gain:
            return (
                f"from {before} to {last} GPUs {best} went from {shown(best_by_count[before])} to "
                f"{shown(rate)}, {gain:+.0%} per doubling of the GPUs, below "
                f"min_doubling_gain={settings.min_doubling_gain:g}"
            )
    return None


# ---------------------------------------------------------------------------------------
# Calibration on the sweep's own runs
# ---------------------------------------------------------------------------------------


def group_of(row: Mapping[str, Any]) -> dict[str, Any]:
    group = {k: row.get(k) for k in GROUP_KEYS}
    group["workload"] = group["workload"] or "ours"
    group["ps_on_worker_nodes"] = bool(True if group["ps_on_worker_nodes"] is None else group["ps_on_worker_nodes"])
    return group


def variables_of(model: str, rows: Iterable[Mapping[str, Any]]):
    """The model's variable bytes: the table's, else what the runs' PSs held (ps_bytes), else
    what an all-reduce run's workers reduced (variable_bytes: its trainable variables)."""
    if model in scaling_model.MODEL_VARIABLES:
        return scaling_model.Variables.of(model)
    totals, largest, reduced = [], [], []
    for row in rows:
        for result in row.get("worker_results") or []:
            held = [b for b in (result.get("ps_bytes") or []) if b]
            if held:
                totals.append(sum(held))
                if len(held) > 1:
                    largest.append(max(held))
            if result.get("variable_bytes"):
                reduced.append(result["variable_bytes"])
    totals = totals or reduced
    if not totals:
        raise AdaptiveError(
            f"no variable sizes for model {model!r} (not in the model's table, and its runs "
            "reported neither their PSs' bytes nor the bytes their all-reduce carried)"
        )
    total = min(totals)
    # With several PSs the fullest holds at least the largest variable: an upper bound of it.
    return scaling_model.Variables.of(None, total, min(min(largest), total) if largest else 0.0)


def calibrate(rows: Sequence[Mapping[str, Any]], batch_size: int, model: str, link_gb_s: float | None = None):
    """Fit the scaling model to a group's ok runs (their per-configuration means); `link_gb_s`:
    the sweep's measured link rate (GB/s), None where unknown."""
    return scaling_model.fit(observations_of(rows), int(batch_size), variables_of(model, rows), link_gb_s)


def observations_of(rows: Sequence[Mapping[str, Any]]):
    """The scaling model's observations of a group's ok runs (their per-configuration means)."""
    summaries = [s for s in stats.summarise(rows) if s["status"] == "ok"]
    hosts = {}
    for r in rows:
        hosts.setdefault(tuple(r.get(k) for k in stats.CONFIG_KEYS), r.get("hosts"))
    for s in summaries:
        s["hosts"] = hosts.get(tuple(s.get(k) for k in stats.CONFIG_KEYS))
    return scaling_model.observations_from_rows(summaries)


def best_by_count(rows: Iterable[Mapping[str, Any]], rank_by: str = IMAGES_PER_SEC) -> dict[int, float]:
    """The best configuration's figure at each GPU count (ok runs only), higher better: its mean
    images/sec, or 1 / its time to accuracy (MLPerf's score: a configuration that did not
    converge has none, and a count where none did is not judged)."""
    best: dict[int, float] = {}
    for s in stats.summarise([r for r in rows if r.get("status") == "ok"]):
        if s["status"] != "ok":
            continue
        if rank_by == TIME_TO_ACCURACY:
            value = 1.0 / float(s["time_to_accuracy"]) if s.get("time_to_accuracy") else None
        else:
            value = float(s["images_per_sec"]) if s.get("images_per_sec") is not None else None
        if value is not None:
            best[int(s["gpus"])] = max(best.get(int(s["gpus"]), 0.0), value)
    return best


def epochs_to_target(rows: Iterable[Mapping[str, Any]]) -> dict[str, dict[int, float]]:
    """The mean epochs to the target of converged runs: {variable_update: {num_ps: epochs}}."""
    seen: dict[str, dict[int, list[float]]] = {}
    for r in rows:
        if r.get("status") == "ok" and r.get("tta_status") == "converged" and r.get("epochs_to_accuracy"):
            seen.setdefault(r["variable_update"], {}).setdefault(int(r["num_ps"]), []).append(
                float(r["epochs_to_accuracy"])
            )
    return {update: {p: sum(v) / len(v) for p, v in counts.items()} for update, counts in seen.items()}


def epochs_at(measured: Mapping[int, float], num_ps: int) -> float:
    """The epochs to the target at `num_ps`: measured, else on the least-squares line through the
    measured PS counts (more PSs, staler updates: the epochs move with them), never below the
    fewest measured; the one measured value where there is one."""
    if num_ps in measured:
        return measured[num_ps]
    if len(measured) < 2:
        return next(iter(measured.values()))
    import numpy

    slope, intercept = numpy.polyfit(list(measured), list(measured.values()), 1)
    return max(min(measured.values()), float(intercept + slope * num_ps))


def planned_config(fit, run: Mapping[str, Any], num_ps: int | None = None):
    """A planned run's configuration, updated as the fitted runs were (synchronous or not)."""
    nodes = int(run.get("worker_nodes") or 1)
    return fit.config(
        int(run["gpus"]),
        max(1, math.ceil(int(run["gpus"]) / nodes)),
        int(run["num_ps"] if num_ps is None else num_ps),
        run["variable_update"],
        ps_on_worker_nodes=bool(run.get("ps_on_worker_nodes", True)),
    )


# ---------------------------------------------------------------------------------------
# One count of one group
# ---------------------------------------------------------------------------------------


def decide(
    planned: Sequence[Mapping[str, Any]],
    measured: Sequence[Mapping[str, Any]],
    gpus: int,
    settings: Settings,
    link: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The decision for one group at `gpus`: which planned runs of that count to do.

    `planned`: the group's planned runs (every count); `measured`: the group's recorded runs
    in this sweep (any status); `link`: {"gb_s": the link rate the model takes (GB/s) or None,
    "source": where it comes from} (the sweep's link probe, or the request's override). Returns action ('full', 'narrowed', 'stopped'), reason, the
    run ids kept, the configurations kept and skipped, skipped counts and predictions.
    """
    here = [r for r in planned if int(r["gpus"]) == gpus]
    below = [r for r in measured if int(r["gpus"]) < gpus]
    ok_below = [r for r in below if r.get("status") == "ok"]
    configs = sorted({(r["variable_update"], int(r["num_ps"])) for r in here})
    decision: dict[str, Any] = {
        "gpus": gpus,
        "run_ids": [r["run_id"] for r in here],
        "kept": configs,
        "skipped": [],
        "skipped_counts": [],
        "predicted": {},
        "link": dict(link or {"gb_s": None, "source": "not given"}),
    }
    model, batch = here[0]["model"], here[0]["batch_size"]

    def fitted():
        return calibrate(ok_below, batch, model, (link or {}).get("gb_s"))

    # A resumed sweep does not judge again a count it has started (some of its runs are done).
    started = any(r.get("done") for r in here)
    why = stop_reason(best_by_count(ok_below, settings.rank_by), settings) if settings.stops and not started else None
    if why:
        return _stopped(decision, planned, gpus, configs, why, fitted)
    if not settings.num_ps_auto:
        decision.update(action="full", reason=f"{gpus} GPUs: every planned configuration")
        return decision
    missing = _not_calibrated(ok_below)
    if missing:
        decision.update(
            action="full", reason=f"{gpus} GPUs: every planned PS count ({missing}: the model is not calibrated)"
        )
        return decision
    try:
        fit = fitted()
    except Exception as err:  # noqa: BLE001 - any reason the model cannot be fitted: run the full set, say why
        decision.update(
            action="full",
            reason=f"{gpus} GPUs: every planned PS count (the model could not be fitted to the smaller counts: {err})",
        )
        return decision
    epochs = epochs_to_target(ok_below) if settings.rank_by == TIME_TO_ACCURACY else {}
    kept, skipped, predicted, ranked_by = _narrowed(here, fit, settings, epochs, gpus)
    keep_set = set(kept)
    decision.update(
        action="narrowed" if skipped else "full",
        reason=_narrowed_reason(gpus, kept, len(configs), ranked_by),
        run_ids=[r["run_id"] for r in here if (r["variable_update"], int(r["num_ps"])) in keep_set],
        kept=sorted(kept),
        skipped=sorted(skipped),
        predicted=predicted,
        fit={
            "t1_s": fit.t1,
            "bandwidth_gb_s": fit.bandwidth_gb_s if math.isfinite(fit.bandwidth_gb_s) else None,
            "rms_relative_error": fit.rms_relative_error,
            "points": fit.points,
        },
    )
    return decision


def _stopped(
    decision: dict[str, Any],
    planned: Sequence[Mapping[str, Any]],
    gpus: int,
    configs: list[tuple[str, int]],
    why: str,
    fitted: Callable[[], Any],
) -> dict[str, Any]:
    """`decision` as a stop at `gpus` and every larger count, with the model's best prediction for
    each skipped count where it can be fitted (what the stop gives up, for the record)."""
    later = sorted({int(r["gpus"]) for r in planned if int(r["gpus"]) >= gpus})
    decision.update(
        action="stopped",
        reason=f"stopped before {gpus} GPUs: {why}; skipped {', '.join(map(str, later))} GPUs",
        run_ids=[],
        kept=[],
        skipped=configs,
        skipped_counts=later,
    )
    try:
        _predict_best(fitted(), planned, later, decision["predicted"])
    except Exception as err:  # noqa: BLE001 - a prediction is extra information; the stop stands
        decision["prediction_note"] = f"no prediction for the skipped counts: {err}"
    return decision


def _predict_best(fit, planned: Sequence[Mapping[str, Any]], counts: Iterable[int], into: dict[str, Any]) -> None:
    """Put in `into`, by count, the planned modelled configuration `fit` predicts fastest there. Filled
    count by count, so that what was predicted before an error stays."""
    for count in counts:
        runs = [r for r in planned if int(r["gpus"]) == count and r["variable_update"] in MODELLED_UPDATES]
        if runs:
            rate, run = max(((fit.images_per_sec(planned_config(fit, r)), r) for r in runs), key=lambda x: x[0])
            into[str(count)] = {
                "images_per_sec": rate,
                "num_ps": run["num_ps"],
                "variable_update": run["variable_update"],
            }


def _not_calibrated(ok_below: Sequence[Mapping[str, Any]]) -> str | None:
    """What the sweep lacks below this count to fit the model (a 1-GPU run gives the compute, a larger
    one the communication); None: nothing, it can be fitted."""
    one_gpu = any(int(r["gpus"]) == 1 for r in ok_below)
    if one_gpu and any(int(r["gpus"]) > 1 for r in ok_below):
        return None
    if not ok_below:
        return "nothing measured yet"
    if not one_gpu:
        return "no 1-GPU run in this sweep (it gives the compute)"
    return "nothing measured above 1 GPU yet"


def _narrowed(
    here: Sequence[Mapping[str, Any]], fit, settings: Settings, epochs: Mapping[str, Mapping[int, float]], gpus: int
) -> tuple[list[tuple[str, int]], list[tuple[str, int]], dict[str, float], list[str]]:
    """num_ps=auto at this count: each modelled variable_update's PS counts ranked by the fit (or by
    the predicted time to the target), the best kept with their neighbours. Returns the (update,
    num_ps) kept and skipped, the predicted images/sec by "update/num_ps", and how each update was ranked
    where the reason must say it."""
    kept, skipped, predicted = [], [], {}
    ranked_by = []
    for update in sorted({r["variable_update"] for r in here}):
        runs = [r for r in here if r["variable_update"] == update]
        counts = sorted({int(r["num_ps"]) for r in runs})
        if update not in MODELLED_UPDATES or len(counts) < 2:
            kept += [(update, p) for p in counts]
            continue
        first = {int(r["num_ps"]): r for r in runs}
        rates = {p: fit.images_per_sec(planned_config(fit, first[p])) for p in counts}
        moved = {p: scaling_model.node_bytes(planned_config(fit, first[p]), fit.variables) for p in counts}
        ranks = rates
        if update in epochs:
            # The predicted time to the target, inverted (higher better): images/sec over the epochs it needs.
            ranks = {p: rates[p] / epochs_at(epochs[update], p) for p in counts}
            ranked_by.append(f"{update} by predicted time to the target")
        elif settings.rank_by == TIME_TO_ACCURACY:
            ranked_by.append(f"{update} by images/sec (no run below {gpus} GPUs reached the target yet)")
        chosen = narrowed_ps_counts(counts, ranks, settings.keep, moved)
        kept += [(update, p) for p in chosen]
        skipped += [(update, p) for p in counts if p not in chosen]
        predicted.update({f"{update}/{p}": rates[p] for p in counts})
    return kept, skipped, predicted, ranked_by


def _narrowed_reason(gpus: int, kept: Sequence[tuple[str, int]], configurations: int, ranked_by: Sequence[str]) -> str:
    """The reason of a num_ps=auto decision: how many configurations run, and which PS counts of each update."""
    return (
        f"{gpus} GPUs: {len(kept)} of {configurations} configurations (num_ps=auto: the model fitted to "
        f"the sweep's runs below {gpus} GPUs ranks "
        + "; ".join(f"{u} {', '.join(str(p) for v, p in kept if v == u)} PS" for u in sorted({u for u, _ in kept}))
        + " best, with neighbours"
        + (f"; {'; '.join(ranked_by)}" if ranked_by else "")
        + ")"
    )


def step(request: Mapping[str, Any], db: str) -> dict[str, Any]:
    """Decide every group at request['gpus'], record the decisions, and return the runs to do."""
    keep = request.get("num_ps_auto_keep")
    settings = check_settings(
        DEFAULT_KEEP if keep in (None, "") else keep,
        request.get("stop_below_efficiency"),
        request.get("min_doubling_gain"),
        bool(request.get("num_ps_auto")),
        request.get("rank_by"),
    )
    try:
        sweep_id, gpus, planned = str(request["sweep_id"]), int(request["gpus"]), list(request["runs"])
    except (KeyError, TypeError, ValueError) as err:
        raise AdaptiveError(f"the request needs sweep_id, gpus and runs ({err})") from None
    conn = store.connect(db)
    try:
        recorded = store.runs(conn, "sweep_id = ?", (sweep_id,))
    finally:
        conn.close()
    earlier = sweep_steps.read(db, sweep_id)
    # The link rate the model takes: the request's (link_gb_s, the user's), else what the
    # sweep's link probe measured (dtfbench.results.network), else none (the runs alone).
    if request.get("link_gb_s") not in (None, ""):
        try:
            given = float(request["link_gb_s"])
        except (TypeError, ValueError):
            given = 0.0
        if not 0 < given < math.inf:
            raise AdaptiveError(
                f"link_gb_s={request['link_gb_s']!r}: give the link rate in GB/s (10^9 bytes/s), a number > 0, "
                "or leave it out to use what the sweep's link probe measured"
            )
        link = {"gb_s": given, "source": "link_gb_s given"}
    else:
        measured = network.measured(db, sweep_id)
        link = (
            {"gb_s": measured.planner_gb_s, "source": "measured by the sweep's link probe"}
            if measured.planner_gb_s
            else {"gb_s": None, "source": f"unknown ({measured.why})"}
        )
    todo, messages, groups, stopped = [], [], [], []
    keys = []
    for run in planned:
        key = group_of(run)
        if key not in keys:
            keys.append(key)
    # A recorded run belongs to the group of the planned run it is (the digest that ends its id):
    # the store's own columns differ from the plan's (the image size the worker used where the
    # plan left the model's default, the workload's name without its git ref).
    by_digest = {r["run_id"].rsplit("-", 1)[-1]: r for r in planned}

    def group_of_recorded(row):
        return group_of(by_digest.get(str(row["run_id"]).rsplit("-", 1)[-1], row))

    for key in keys:
        mine = [r for r in planned if group_of(r) == key]
        if not any(int(r["gpus"]) == gpus for r in mine):
            continue
        groups.append(key)
        decision = decide(mine, [r for r in recorded if group_of_recorded(r) == key], gpus, settings, link)
        decision["group"] = key
        seen = [
            e
            for e in earlier
            if e["action"] == "stopped"
            and e["detail"].get("group") == key
            and gpus in e["detail"].get("skipped_counts", [])
        ]
        if decision["action"] == "stopped":
            stopped.append(key)
        if not (decision["action"] == "stopped" and seen):  # a stop is recorded once, at its first count
            sweep_steps.record(db, sweep_id, gpus, decision["action"], decision["reason"], decision)
            messages.append(decision["reason"])
        wanted = set(decision["run_ids"])
        todo += [r for r in mine if r["run_id"] in wanted and not r.get("done")]
    return {"runs": todo, "stopped": bool(groups) and len(stopped) == len(groups), "messages": messages}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench adaptive_sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="the results store of the sweep")
    args = parser.parse_args(argv)
    try:
        answer = step(json.load(sys.stdin), args.db)
    except (AdaptiveError, ValueError) as err:
        print(f"dtfbench adaptive_sweep: error: {err}", file=sys.stderr)
        return 2
    print(json.dumps(answer))
    return 0
