"""The report's analysis of the store's rows: summaries, best configurations, I/O overhead, the published match.

A configuration is everything that defines a run except its repetition, the workload
(which program measured) included; its figure is the mean over the repetitions that
succeeded, with a Student-t 95% confidence interval. The best configuration per (system,
workload, model, batch size, data, GPUs) is the one with the highest mean, as in the study's
Tables 1-3. Speedup and efficiency are taken against the best 1-GPU configuration of the
same system, workload, model, batch size and data: speedup =
images/sec(N) / images/sec(1), efficiency = speedup / N. I/O overhead = (synthetic - real)
/ synthetic x 100 per system and GPU count. The statistics live in ``dtfbench.report.stats``;
the published numbers (``dtfbench.report.reference``) are matched to ours where our system
maps to a published one and the GPU count and data kind match.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..results import network, store
from . import reference as reference_data
from . import stats

CONFIG_KEYS = stats.CONFIG_KEYS
BASELINE_KEYS = stats.BASELINE_KEYS
GROUP_KEYS = ("system", "workload", "model", "batch_size")
REFERENCE_CHOICES = ("published", "none")


def _group_of(row: Mapping[str, Any]) -> tuple:
    """The (system, workload, model, batch_size) a best, I/O or summary row belongs to."""
    return tuple(row.get(k) for k in GROUP_KEYS)


class ReportError(Exception):
    """Something the user can fix: no store, no runs, a bad option."""


# ---------------------------------------------------------------------------------------
# The per-configuration table printed after a sweep (`table`).
# ---------------------------------------------------------------------------------------


def summarise(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per configuration, in the order configurations first appear."""
    return stats.summarise(rows)


def load_rows(db: str | Path, sweep_id: str | None = None) -> list[dict[str, Any]]:
    """The store's rows (of one sweep), or a ReportError saying why there are none.

    Read-only: a report never creates or changes a file (store.open_readonly); a file that is
    not a store, or a damaged one, is one line naming it and the problem."""
    try:
        conn = store.open_readonly(db)
        try:
            rows = store.runs(conn, "sweep_id = ?", (sweep_id,)) if sweep_id else store.runs(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as err:
        raise ReportError(store.describe_error(f"--db {db}", Path(db), err)) from None
    except store.StoreError as err:
        raise ReportError(str(err)) from None
    if not rows:
        raise ReportError(f"no runs in {db}" + (f" for sweep {sweep_id}" if sweep_id else ""))
    attach_link_rates(rows, db)
    return rows


def attach_link_rates(rows: list[dict[str, Any]], db: str | Path) -> None:
    """Give every row its sweep's measured link and incast rates (GB/s, None where unknown) and,
    where unknown, why (``link_why``): what the busiest NIC is compared with (report/bounds.py)."""
    by_sweep: dict[str, network.Measured] = {}
    for row in rows:
        sweep_id = str(row.get("sweep_id"))
        if sweep_id not in by_sweep:
            by_sweep[sweep_id] = network.measured(db, sweep_id)
        m = by_sweep[sweep_id]
        row.update(
            link_gb_s=m.link_gb_s if m.known else None,
            incast_gb_s=m.incast_gb_s if m.known else None,
            link_why=None if m.known else (m.why or "unknown"),
        )


# ---------------------------------------------------------------------------------------
# The analysis: our summaries, best configurations, I/O overhead, and the published match.
# ---------------------------------------------------------------------------------------


@dataclass
class Analysis:
    rows: list[dict[str, Any]]
    summaries: list[dict[str, Any]]
    best: list[dict[str, Any]]
    io: list[dict[str, Any]]
    reference: str
    system_map: dict[str, str]
    matcher: reference_data.Matcher | None
    ref_io: dict[tuple, dict[str, Any]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The best PS configuration beside all-reduce, per GPU count where both ran.
    modes: list[dict[str, Any]] = field(default_factory=list)

    def groups(self) -> list[tuple]:
        """(system, workload, model, batch_size) in the order the best table lists them."""
        return list(dict.fromkeys(_group_of(r) for r in self.best))

    def ref_for(self, system: str, gpus: Any, data: Any) -> Mapping[str, Any] | None:
        return self.matcher.find(system, gpus, data) if self.matcher else None

    def ref_system(self, system: str) -> str | None:
        return self.matcher.system_for(system) if self.matcher else None


def analyse(
    rows: list[dict[str, Any]], reference: str = "published", system_map: Mapping[str, str] | None = None
) -> Analysis:
    if reference not in REFERENCE_CHOICES:
        raise ReportError(f"--reference must be one of {', '.join(REFERENCE_CHOICES)}, not {reference!r}")
    summaries = stats.summarise(rows)
    best = stats.best_configurations(summaries)
    io_rows = stats.io_overhead_rows(best)
    mapping = dict(reference_data.DEFAULT_SYSTEM_MAP if system_map is None else system_map)
    analysis = Analysis(
        rows=rows,
        summaries=summaries,
        best=best,
        io=io_rows,
        reference=reference,
        system_map=mapping,
        matcher=None,
        modes=stats.ps_or_all_reduce(summaries),
    )
    if reference == "published":
        ref_best = reference_data.published_best()
        analysis.matcher = reference_data.Matcher(ref_best, mapping)
        analysis.ref_io = {(r["system"], r["gpus"]): r for r in stats.io_overhead_rows(ref_best)}
        for system, _workload, model, batch_size in analysis.groups():
            refs = analysis.matcher.rows_for(system)
            if not refs:
                continue
            theirs = {(r["model"], r["batch_size"]) for r in refs}
            if (model, batch_size) not in theirs:
                ref_model, ref_batch = sorted(theirs)[0]
                analysis.notes.append(
                    f"{system} ran {model}, batch {batch_size} per GPU; the published "
                    f"{reference_data.display_name(analysis.ref_system(system))} numbers are {ref_model}, "
                    f"batch {ref_batch} per GPU: images/sec are not comparable, speedup and efficiency are."
                )
    return analysis
