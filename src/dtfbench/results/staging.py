"""Each node's staging of a sweep's dataset to local disk, in the results store (schema 12).

A sweep with ``data_staging=copy`` copies the dataset from its shared location (``data_dir``)
to node-local disk (``stage_dir``) before its first run (dtfbench.node.stage_data, through the
dataset_stage module or a Slurm job's copy). Each node's report is one row of ``stagings``:
when, from where to where, the seconds, the bytes copied and whether it was staged already.
The sweep's staging time is its slowest node's (the nodes stage at once). The report sets it
against the time the runs saved (dtfbench.report: docs/storage.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import store

ARGUMENT_SPEC = {
    "results_db": {"type": "str", "required": True},
    "sweep_id": {"type": "str", "required": True},
    "stagings": {"type": "list", "elements": "dict", "required": True},
}
ANSIBLE_KEYS = ("changed", "failed", "invocation", "msg", "skipped", "warnings", "deprecations")
NEEDED = ("node", "source", "target", "seconds", "copied_bytes", "bytes", "already_staged")


def record(db: str | Path, sweep_id: str, stagings: Sequence[Mapping[str, Any]]) -> None:
    """Append one row per node's staging report (one transaction)."""
    for report in stagings:
        missing = [
            key for key in (("node", "source", "target") if report.get("error") else NEEDED) if key not in report
        ]
        if missing:
            raise ValueError(f"a staging report without {', '.join(missing)}: {json.dumps(report)[:300]}")
    # A registered module result also holds Ansible's own keys (changed, invocation, ...): not the report's.
    stagings = [{k: v for k, v in r.items() if k not in ANSIBLE_KEYS and not k.startswith("_")} for r in stagings]
    staged_at = datetime.now(timezone.utc).isoformat()
    conn = store.connect(db)
    try:
        with conn:
            conn.executemany(
                "INSERT INTO stagings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        sweep_id,
                        str(report["node"]),
                        staged_at,
                        "failed" if report.get("error") else "ok",
                        report["source"],
                        report["target"],
                        report.get("seconds"),
                        report.get("copied_bytes"),
                        report.get("bytes"),
                        int(bool(report.get("already_staged"))),
                        json.dumps(dict(report), sort_keys=True),
                    )
                    for report in stagings
                ],
            )
    finally:
        conn.close()


def read(db: str | Path, sweep_id: str | None = None) -> list[dict[str, Any]]:
    """The stored reports (of one sweep, or all), in the order they were recorded."""
    query = "SELECT sweep_id, staged_at, status, document FROM stagings"
    rows = store._query_readonly(
        db, query + (" WHERE sweep_id = ?" if sweep_id else "") + " ORDER BY rowid", (sweep_id,) if sweep_id else ()
    )
    return [
        dict(json.loads(document), sweep_id=sweep, staged_at=at, status=status) for sweep, at, status, document in rows
    ]


def summary(stagings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The sweep's staging: the slowest node's seconds (they stage at once), the bytes copied in
    all, and whether every node had it staged already."""
    ok = [s for s in stagings if not s.get("error")]
    return {
        "nodes": len(stagings),
        "seconds": max((float(s["seconds"]) for s in ok), default=0.0),
        "node_seconds": round(sum(float(s["seconds"]) for s in ok), 6),
        "copied_bytes": sum(int(s["copied_bytes"]) for s in ok),
        "already_staged": bool(ok) and all(s["already_staged"] for s in ok),
    }


def line(report: Mapping[str, Any]) -> str:
    """One node's staging as the playbook and the report say it."""
    where = f"{report['source']} -> {report['target']}"
    filesystems = [report.get(side) or {} for side in ("source_filesystem", "target_filesystem")]
    if all(fs.get("fs_type") for fs in filesystems):
        where += f" ({filesystems[0]['fs_type']} -> {filesystems[1]['fs_type']})"
    if report.get("error"):
        return f"{report['node']}: staging failed: {report['error']}"
    if report["already_staged"]:
        return f"{report['node']}: {where}: staged already ({report['bytes'] / 1e9:.3g} GB, checked in {report['seconds']:.2f} s)"
    checked = f", {report['checksummed_files']} checked by SHA-256" if report.get("checksummed_files") else ""
    return (
        f"{report['node']}: {where}: {report['copied_files']} files, {report['copied_bytes'] / 1e9:.3g} GB in "
        f"{report['seconds']:.2f} s ({report.get('mb_per_s') or 0:.1f} MB/s{checked})"
    )


def record_stagings(params: Mapping[str, Any]) -> dict[str, Any]:
    """The staging_record module: store every node's report; ``summary`` and ``lines`` to show."""
    stagings = list(params["stagings"])
    record(params["results_db"], params["sweep_id"], stagings)
    total = summary(stagings)
    head = (
        f"staging: every node had the dataset staged already ({total['seconds']:.2f} s)"
        if total["already_staged"]
        else f"staging: {total['copied_bytes'] / 1e9:.3g} GB to {total['nodes']} node(s) in {total['seconds']:.2f} s"
        " (the slowest node's time: the sweep's first run waited that long)"
    )
    return {"summary": total, "lines": [head, *(line(s) for s in stagings)]}
