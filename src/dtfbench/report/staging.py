"""What a sweep's staging cost against what it saved: the Summitdev study's "might not be worth it".

A sweep with ``data_staging=copy`` spent its staging's seconds (the slowest node's, once for an
SSH sweep; per job for a Slurm one, whose jobs each stage on their nodes) before its runs read
the node-local copy. What it saved: the same configuration reading the shared copy (a run of
the same configuration whose storage is the staging source's file system, from this store)
takes ``images / images_per_sec`` longer for the images of a run's measured steps. The
staging pays for itself after ``staging seconds / seconds saved a run`` runs; where the copy
reads no faster, never.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..results import staging
from . import stats

# A configuration apart from where its data was read.
_SAME = tuple(k for k in stats.CONFIG_KEYS if k != "storage")


def _key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(row.get(k) for k in _SAME)


def sweep_cost(stagings: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Seconds the sweep's runs waited for staging (the slowest node of each staging), bytes copied."""
    events: dict[Any, list[Mapping[str, Any]]] = {}
    for report in stagings:
        events.setdefault(report.get("run_id"), []).append(report)
    ok = [s for s in stagings if s.get("status") == "ok"]
    return {
        "seconds": sum(staging.summary(reports)["seconds"] for reports in events.values()),
        "stagings": len(events),
        "nodes": sorted({str(s["node"]) for s in stagings}),
        "copied_bytes": sum(int(s.get("copied_bytes") or 0) for s in ok),
        "failed": [s for s in stagings if s.get("status") != "ok"],
        "source_fs": next((s["source_filesystem"]["fs_type"] for s in ok if s.get("source_filesystem")), None),
        "target_fs": next((s["target_filesystem"]["fs_type"] for s in ok if s.get("target_filesystem")), None),
    }


def lines(rows: Iterable[Mapping[str, Any]], summaries: Sequence[Mapping[str, Any]], db: str | None) -> list[str]:
    """One line per staged sweep of `rows`, and one per staged configuration with what it saved."""
    if not db:
        return []
    rows = list(rows)
    out = []
    for sweep_id in dict.fromkeys(str(r["sweep_id"]) for r in rows if r.get("sweep_id")):
        stagings = staging.read(db, sweep_id)
        if not stagings:
            continue
        cost = sweep_cost(stagings)
        source, target = stagings[0]["source"], stagings[0]["target"]
        head = (
            f"staging of sweep {sweep_id}: {cost['copied_bytes'] / 1e9:.3g} GB from {source} ({cost['source_fs'] or '?'}) "
            f"to {target} ({cost['target_fs'] or '?'}) on {len(cost['nodes'])} node(s), {cost['seconds']:.1f} s "
            f"before the runs ({cost['stagings']} staging(s), each its slowest node's time)"
        )
        if cost["failed"]:
            head += f"; failed on {', '.join(sorted(str(s['node']) for s in cost['failed']))}"
        out.append(head)
        # Keys as the summaries have them (a row's workload is a label there).
        staged = {
            _key(s)
            for s in stats.summarise(r for r in rows if r.get("sweep_id") == sweep_id and r.get("data") == "real")
        }
        ok = [s for s in summaries if s.get("status") == "ok" and s.get("images_per_sec")]
        for local in (s for s in ok if _key(s) in staged and s.get("storage") == cost["target_fs"]):
            out.append(_saved(local, ok, cost))
    return out


def _saved(local: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]], cost: Mapping[str, Any]) -> str:
    label = f"{local['model']} bs {local['batch_size']} {local['gpus']} GPU(s) {local['variable_update']}"
    shared = next(
        (s for s in summaries if _key(s) == _key(local) and s.get("storage") == cost["source_fs"] and s is not local),
        None,
    )
    if shared is None:
        return (
            f"  {label}: no run of this configuration read the shared copy ({cost['source_fs'] or '?'}) in this store; "
            "run it once with data_dir at the shared copy and no data_staging to see what staging saved"
        )
    images = float(local["steps"]) * float(local["batch_size"]) * float(local["gpus"])
    saved = images / float(shared["images_per_sec"]) - images / float(local["images_per_sec"])
    text = (
        f"  {label}: {local['images_per_sec']:.1f} img/s from the copy, {shared['images_per_sec']:.1f} from the shared "
        f"copy: {saved:+.2f} s a run of {local['steps']} steps"
    )
    if saved <= 0:
        return text + "; the copy reads no faster, so the staging never pays for itself"
    return text + f"; the staging pays for itself after {math.ceil(cost['seconds'] / saved)} run(s) of this length"
