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

``python -m dtfbench.scaling_validation`` prints every error and the summary.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from ..report import reference
from . import scaling_model
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


def extrapolations(systems=tuple(TABLES)) -> list[dict[str, Any]]:
    result = []
    for system in systems:
        rows = table(system)
        for n in EXTRAPOLATE_FROM:
            target = [o for o in rows if o.config.gpus == 2 * n]
            if target:
                result.append(
                    {
                        "system": system,
                        "kind": "extrapolate",
                        "fit_up_to": n,
                        "gpus": 2 * n,
                        **_errors([o for o in rows if o.config.gpus <= n], target[0]),
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
    return {
        "model_median": statistics.median(ours),
        "model_max": max(ours),
        "baseline_median": statistics.median(base),
        "baseline_max": max(base),
        "cases": len(rows),
    }


def doubling_verdict(system: str, fit_up_to: int, threshold: float = 0.10) -> dict[str, Any]:
    """Fitted on the rows up to `fit_up_to`: is doubling to 2x worth it (best predicted configuration)?"""
    from . import predict as forecast  # the planner's own ranking and verdict

    rows = [o for o in table(system) if o.config.gpus <= fit_up_to]
    fitted = scaling_model.fit(rows, BATCH, scaling_model.Variables.of(MODEL))
    per_node = rows[-1].config.gpus_per_node
    plan = forecast.predict_counts(fitted, [fit_up_to, 2 * fit_up_to], per_node, gain_threshold=threshold)
    return plan[-1]


def _fmt(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| system | case | GPUs | published | model | error | Optimus form | error |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        case = f"fit <= {r['fit_up_to']}" if r["fit_up_to"] else "leave out"
        lines.append(
            f"| {reference.display_name(r['system'])} | {case} | {r['gpus']} | {r['actual']:.0f} | "
            f"{r['model']:.0f} | {r['model_error']:+.1f}% | {r['baseline']:.0f} | {r['baseline_error']:+.1f}% |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog="python -m dtfbench.scaling_validation", description=__doc__.splitlines()[0]
    ).parse_args(argv)
    for title, rows in (
        ("Extrapolation (fit on <= N GPUs, predict 2N)", extrapolations()),
        ("Leave-one-out (interior rows)", leave_one_out()),
    ):
        s = summary(rows)
        print(f"## {title}\n")
        print("\n".join(_fmt(rows)))
        print(
            f"\n{s['cases']} cases: model median {s['model_median']:.1f}%, max {s['model_max']:.1f}%; "
            f"Optimus form median {s['baseline_median']:.1f}%, max {s['baseline_max']:.1f}%\n"
        )
    v = doubling_verdict("aws-p2.xlarge", 64)
    print(f"p2.xlarge, fitted on <= 64 GPUs, 64 -> 128: {v['verdict']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
