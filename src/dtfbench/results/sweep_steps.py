"""What an adaptive sweep decided at each GPU count, kept in the results store.

A sweep with ``num_ps=auto`` or ``stop_below_efficiency``/``min_doubling_gain``
(``dtfbench.forecast.adaptive``) decides at each GPU count which of its planned runs to do: all
of them, the PS counts the scaling model ranks best (narrowed), or none (stopped, with the
counts it skipped). Each decision is one row of the store's ``sweep_steps`` table (schema 6),
appended and never rewritten, so a report can say what was skipped and why.

Standard library only (sqlite3), like ``dtfbench.results.store``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import store

ACTIONS = ("full", "narrowed", "stopped")


def record(db: str | Path, sweep_id: str, gpus: int, action: str, reason: str, detail: Mapping[str, Any]) -> None:
    """Append one decision (its own transaction)."""
    if action not in ACTIONS:
        raise ValueError(f"action {action!r}: one of {', '.join(ACTIONS)}")
    conn = store.connect(db)
    try:
        with conn:
            conn.execute(
                "INSERT INTO sweep_steps VALUES (?, ?, ?, ?, ?, ?)",
                (
                    sweep_id,
                    int(gpus),
                    action,
                    reason,
                    json.dumps(detail, sort_keys=True),
                    datetime.now(timezone.utc).isoformat(),
                ),
            )
    finally:
        conn.close()


def read(db: str | Path, sweep_id: str) -> list[dict[str, Any]]:
    """The decisions of `sweep_id`, oldest first; [] for a store without any (or without the table)."""
    rows = store._query_readonly(
        db,
        "SELECT sweep_id, gpus, action, reason, detail, recorded_at FROM sweep_steps WHERE sweep_id = ? ORDER BY rowid",
        (sweep_id,),
    )
    return [
        {"sweep_id": s, "gpus": g, "action": a, "reason": r, "detail": json.loads(d), "recorded_at": t}
        for s, g, a, r, d, t in rows
    ]


def latest(db: str | Path, sweep_id: str) -> list[dict[str, Any]]:
    """The last decision per (GPU count, group): a resumed sweep decides again, the newest counts."""
    last: dict[tuple, dict[str, Any]] = {}
    for row in read(db, sweep_id):
        last[(row["gpus"], json.dumps(row["detail"].get("group"), sort_keys=True))] = row
    return sorted(last.values(), key=lambda r: (r["gpus"], json.dumps(r["detail"].get("group"), sort_keys=True)))
