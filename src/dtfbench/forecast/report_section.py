"""The report's view of the scaling model: predicted beside measured, and what an adaptive sweep skipped.

- **Predicted beside measured.** For every configuration of a sweep measured at more than one
  GPU, the images/sec the scaling model (``dtfbench.forecast.scaling_model``) predicts when it is fitted
  to the runs of the *same sweep* at the *smaller* GPU counts only (the same calibration
  ``num_ps=auto`` uses: what the planner would have said before running it), beside the
  measured mean and the departure ``(measured - predicted) / predicted``. Fitted on the 1-GPU
  count alone the model has no communication term yet and predicts linear scaling. A large
  departure is where the model (or the system) changed behaviour: a link filling up, a
  straggler, a fault. No prediction where the sweep has no 1-GPU run or the model's variable
  sizes are unknown (said).
- **What the sweep skipped and why**: the decisions of ``num_ps=auto`` and
  ``stop_below_efficiency``/``min_doubling_gain`` (``dtfbench.results.sweep_steps``), newest per count.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..report import stats
from ..results import sweep_steps
from . import adaptive as adaptive_sweep

# What picks a configuration's first run, whose hosts and PS placement the prediction uses.
EXAMPLE_KEYS = ("gpus", "num_ps", "variable_update", "num_workers")


def predicted_rows(rows: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per ok configuration above 1 GPU: measured, predicted, departure; and notes."""
    result, notes = [], []
    ok = [r for r in rows if r.get("status") == "ok" and r.get("images_per_sec") is not None]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in ok:
        groups.setdefault((r["sweep_id"], r.get("system")) + tuple(adaptive_sweep.group_of(r).values()), []).append(r)
    for key, members in groups.items():
        counts = sorted({int(r["gpus"]) for r in members})
        # The fit depends only on the group and the GPU count (the runs below it): fitted once per
        # count, not once per configuration, so the cost follows the counts, not the runs.
        fits: dict[int, Any] = {}
        examples: dict[tuple, Mapping[str, Any]] = {}
        for r in members:
            examples.setdefault(tuple(r.get(k) for k in EXAMPLE_KEYS), r)
        for summary in stats.summarise(members):
            gpus = int(summary["gpus"])
            if (
                gpus == counts[0]
                or summary["status"] != "ok"
                or summary["variable_update"] not in adaptive_sweep.MODELLED_UPDATES
            ):
                continue
            row = {
                "sweep_id": key[0],
                "system": key[1],
                "model": summary["model"],
                "batch_size": summary["batch_size"],
                "data": summary["data"],
                "gpus": gpus,
                "num_ps": summary["num_ps"],
                "variable_update": summary["variable_update"],
                "measured": summary["images_per_sec"],
                "predicted": None,
                "departure": None,
                "calibrated_on": ",".join(str(c) for c in counts if c < gpus),
            }
            try:
                if gpus not in fits:
                    try:
                        below = [r for r in members if int(r["gpus"]) < gpus]
                        fits[gpus] = adaptive_sweep.calibrate(below, int(summary["batch_size"]), str(summary["model"]))
                    except Exception as err:  # noqa: BLE001 - kept: every configuration of the count says it
                        fits[gpus] = err
                if isinstance(fits[gpus], Exception):
                    raise fits[gpus]
                example = examples[tuple(summary.get(k) for k in EXAMPLE_KEYS)]
                hosts = example.get("hosts") or []
                config = adaptive_sweep.planned_config(fits[gpus], dict(example, worker_nodes=len(hosts) or 1))
                row["predicted"] = fits[gpus].images_per_sec(config)
                row["departure"] = (row["measured"] - row["predicted"]) / row["predicted"]
            except Exception as err:  # noqa: BLE001 - no prediction for this group: say why once
                note = f"sweep {key[0]}, {summary['model']}: no prediction ({err})"
                if note not in notes:
                    notes.append(note)
            result.append(row)
    return result, notes


def _f(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def decision_lines(db: str | Path, sweep_ids: Iterable[str]) -> list[str]:
    lines = []
    for sweep_id in sorted(set(sweep_ids)):
        for d in sweep_steps.latest(db, sweep_id):
            detail = d["detail"]
            skipped = ""
            if d["action"] == "narrowed":
                skipped = " Skipped: " + ", ".join(f"{u} {p} PS" for u, p in detail.get("skipped", [])) + "."
            elif d["action"] == "stopped":
                predicted = detail.get("predicted") or {}
                if predicted:
                    skipped = (
                        " The model (fitted to the smaller counts) predicted for the skipped counts: "
                        + "; ".join(
                            f"{c} GPUs {p['images_per_sec']:.1f} images/sec ({p['variable_update']}, {p['num_ps']} PS)"
                            for c, p in sorted(predicted.items(), key=lambda kv: int(kv[0]))
                        )
                        + "."
                    )
            lines.append(f"- sweep `{sweep_id}`, {d['gpus']} GPUs, {d['action']}: {d['reason']}.{skipped}")
    return lines


def markdown(rows: Sequence[Mapping[str, Any]], db: str | Path) -> str:
    """The section for the report's index (and the table command); '' when there is nothing to say."""
    predicted, notes = predicted_rows(rows)
    decisions = decision_lines(db, {str(r["sweep_id"]) for r in rows}) if db else []
    if not predicted and not decisions:
        return ""
    md = []
    if decisions:
        md += ["## What the adaptive sweep ran and skipped (num_ps=auto, stop_below_efficiency)", ""] + decisions + [""]
    if predicted:
        md += [
            "## Predicted beside measured",
            "",
            "Predicted: the scaling model fitted to the runs of the same sweep at the smaller GPU counts only "
            "(column 'calibrated on'; on 1 GPU alone it predicts linear scaling). Departure: (measured - "
            "predicted) / predicted; a large one is where the system stopped behaving as the smaller counts "
            "said (docs/scaling_model.md).",
            "",
            "| sweep | system | model | GPUs | PS | variable update | measured img/s | predicted img/s | "
            "departure | calibrated on (GPUs) |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        md += [
            f"| {r['sweep_id']} | {r['system']} | {r['model']} | {r['gpus']} | {r['num_ps']} | {r['variable_update']} "
            f"| {r['measured']:.1f} | {_f(r['predicted'], '.1f')} | {_f(r['departure'], '+.0%')} | "
            f"{r['calibrated_on']} |"
            for r in predicted
        ]
        md += [""] + [f"- Note: {n}" for n in notes]
    return "\n".join(md).rstrip() + "\n"
