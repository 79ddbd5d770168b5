"""The scaling model against the study's published tables, beside the Optimus-form baseline.

For each of the CSCS tables (Piz Daint, p2.xlarge, p2.8xlarge; synthetic data, InceptionV3,
batch 64 per GPU):

- extrapolation: fit on the rows up to N GPUs, predict 2N (N = 8, 16, 32, 64);
- leave-one-out: leave out each interior row (neither the 1-GPU row, which gives the
  compute, nor the largest), fit on the rest, predict it.

Both the model (``dtfbench.forecast.scaling_model.fit``) and the baseline (the Optimus form
``step = b + c*w/p + d*w + e*p`` by NNLS, ``fit_optimus``) see the same rows and predict the
published row's own configuration (its num_ps and variable update). Errors are
(predicted - published) / published x 100. Deterministic: no timing, no randomness.

Each extrapolation also gets the range the planner prints when no link rate is known: the
predictions at every link rate the rows cannot rule out (``scaling_model.link_fits``), as
errors against the published row (``range_low``, ``range_high``), whether the published value
lies inside, and the range's width in percent of it.

``python -m dtfbench scaling_validation`` prints every error and the summary.

``sweep_extrapolation`` does the same on a sweep of one's own (the store's rows): the planner's
fit on its smaller counts, with the link rate the sweep's probe measured and without it,
against its larger counts (benchmarks/netprobe.py and the shaped test bed's test).
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from ..report import reference
from . import adaptive, scaling_model
from . import predict as forecast
from .scaling_model import Observation

TABLES = {"piz-daint": "cscs-2017-table1", "aws-p2.xlarge": "cscs-2017-table2", "aws-p2.8xlarge": "cscs-2017-table3"}
EXTRAPOLATE_FROM = (8, 16, 32, 64)
MODEL, BATCH = "inception3", 64


def table(system: str, data: str = "synthetic") -> list[Observation]:
    rows = [r for r in reference.published([TABLES[system]]) if r["data"] == data]
    return sorted(scaling_model.observations_from_rows(rows), key=lambda o: o.config.gpus)


def _errors(train: list[Observation], target: Observation) -> dict[str, float]:
    variables = scaling_model.Variables.of(MODEL)
    ours = scaling_model.fit(train, BATCH, variables).images_per_sec(target.config)
    base = scaling_model.fit_optimus(train, BATCH).images_per_sec(target.config)
    actual = target.images_per_sec
    return {
        "actual": actual,
        "model": ours,
        "baseline": base,
        "model_error": (ours - actual) / actual * 100.0,
        "baseline_error": (base - actual) / actual * 100.0,
    }


def link_range(train: list[Observation], target: Observation) -> dict[str, Any]:
    """The planner's range with no link rate known, against the published `target`."""
    fits = scaling_model.link_fits(train, BATCH, scaling_model.Variables.of(MODEL))
    predictions = [f.images_per_sec(target.config) for f in fits]
    actual = target.images_per_sec
    low, high = (min(predictions) - actual) / actual * 100.0, (max(predictions) - actual) / actual * 100.0
    return {"range_low": low, "range_high": high, "inside_range": low <= 0.0 <= high, "range_width": high - low}


def extrapolations(systems=tuple(TABLES)) -> list[dict[str, Any]]:
    result = []
    for system in systems:
        rows = table(system)
        for n in EXTRAPOLATE_FROM:
            target = [o for o in rows if o.config.gpus == 2 * n]
            if target:
                train = [o for o in rows if o.config.gpus <= n]
                result.append(
                    {
                        "system": system,
                        "kind": "extrapolate",
                        "fit_up_to": n,
                        "gpus": 2 * n,
                        **_errors(train, target[0]),
                        **link_range(train, target[0]),
                    }
                )
    return result


def leave_one_out(systems=tuple(TABLES)) -> list[dict[str, Any]]:
    result = []
    for system in systems:
        rows = table(system)
        for i in range(1, len(rows) - 1):
            result.append(
                {
                    "system": system,
                    "kind": "leave-one-out",
                    "fit_up_to": None,
                    "gpus": rows[i].config.gpus,
                    **_errors(rows[:i] + rows[i + 1 :], rows[i]),
                }
            )
    return result


def summary(rows: list[dict[str, Any]]) -> dict[str, float]:
    ours = [abs(r["model_error"]) for r in rows]
    base = [abs(r["baseline_error"]) for r in rows]
    result = {
        "model_median": statistics.median(ours),
        "model_max": max(ours),
        "baseline_median": statistics.median(base),
        "baseline_max": max(base),
        "cases": len(rows),
    }
    if rows and "inside_range" in rows[0]:
        result["inside_range"] = sum(1 for r in rows if r["inside_range"])
        result["range_median_width"] = statistics.median(r["range_width"] for r in rows)
    return result


def doubling_verdict(system: str, fit_up_to: int, threshold: float = 0.10) -> dict[str, Any]:
    """Fitted on the rows up to `fit_up_to`: is doubling to 2x worth it (best predicted configuration)?"""
    rows = [o for o in table(system) if o.config.gpus <= fit_up_to]
    fitted = scaling_model.fit(rows, BATCH, scaling_model.Variables.of(MODEL))
    per_node = rows[-1].config.gpus_per_node
    plan = forecast.predict_counts(fitted, [fit_up_to, 2 * fit_up_to], per_node, gain_threshold=threshold)
    return plan[-1]


def sweep_extrapolation(
    rows: Sequence[Mapping[str, Any]], model: str, batch_size: int, fit_up_to: int, link_gb_s: float | None
) -> dict[str, Any]:
    """The planner fitted on a sweep's ok runs up to `fit_up_to` GPUs (num_ps=auto's path,
    ``adaptive.calibrate``) against each larger configuration the sweep measured: the prediction
    with the measured link rate `link_gb_s` (GB/s), without it, and the range printed when no rate
    is known (``scaling_model.link_fits``); errors are (predicted - measured) / measured."""
    train = [r for r in rows if r["gpus"] <= fit_up_to]
    told = adaptive.calibrate(train, batch_size, model, link_gb_s)
    blind = adaptive.calibrate(train, batch_size, model)
    fits = scaling_model.link_fits(adaptive.observations_of(train), batch_size, adaptive.variables_of(model, train))
    cases = []
    for o in adaptive.observations_of(rows):
        if o.config.gpus <= fit_up_to:
            continue
        actual = o.images_per_sec
        predictions = [f.images_per_sec(o.config) for f in fits]
        case = {
            "gpus": o.config.gpus,
            "num_ps": o.config.num_ps,
            "variable_update": o.config.variable_update,
            "measured": actual,
            "with_link": told.images_per_sec(o.config),
            "without_link": blind.images_per_sec(o.config),
            "range": [min(predictions), max(predictions)],
            "network_bound_with_link": told.network_bound(o.config),
        }
        case["error_with_link"] = (case["with_link"] - actual) / actual
        case["error_without_link"] = (case["without_link"] - actual) / actual
        case["inside_range"] = case["range"][0] <= actual <= case["range"][1]
        cases.append(case)
    return {
        "fit_up_to": fit_up_to,
        "fit_with_link": told.as_dict(),
        "fit_without_link": blind.as_dict(),
        "cases": cases,
    }


def _fmt(rows: list[dict[str, Any]]) -> list[str]:
    ranged = bool(rows) and "inside_range" in rows[0]
    lines = [
        "| system | case | GPUs | published | model | error | Optimus form | error |"
        + (" range, link unknown |" if ranged else ""),
        "|---|---|---|---|---|---|---|---|" + ("---|" if ranged else ""),
    ]
    for r in rows:
        case = f"fit <= {r['fit_up_to']}" if r["fit_up_to"] else "leave out"
        lines.append(
            f"| {reference.display_name(r['system'])} | {case} | {r['gpus']} | {r['actual']:.0f} | "
            f"{r['model']:.0f} | {r['model_error']:+.1f}% | {r['baseline']:.0f} | {r['baseline_error']:+.1f}% |"
            + (
                f" {r['range_low']:+.1f}..{r['range_high']:+.1f}%{' (inside)' if r['inside_range'] else ''} |"
                if ranged
                else ""
            )
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="dtfbench scaling_validation", description=__doc__.splitlines()[0]).parse_args(argv)
    for title, rows in (
        ("Extrapolation (fit on <= N GPUs, predict 2N)", extrapolations()),
        ("Leave-one-out (interior rows)", leave_one_out()),
    ):
        s = summary(rows)
        print(f"## {title}\n")
        print("\n".join(_fmt(rows)))
        print(
            f"\n{s['cases']} cases: model median {s['model_median']:.1f}%, max {s['model_max']:.1f}%; "
            f"Optimus form median {s['baseline_median']:.1f}%, max {s['baseline_max']:.1f}%"
            + (
                f"; the published value inside the range printed with no link rate known: "
                f"{s['inside_range']} of {s['cases']}, its median width {s['range_median_width']:.1f}%"
                if "inside_range" in s
                else ""
            )
            + "\n"
        )
    v = doubling_verdict("aws-p2.xlarge", 64)
    print(f"p2.xlarge, fitted on <= 64 GPUs, 64 -> 128: {v['verdict']}")
    return 0
