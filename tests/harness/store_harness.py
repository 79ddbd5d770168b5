"""Rows for the results store (dtfbench.results.store.add_run) that tests write by hand.

- ``run_row(run_id, sweep_id="s", **fields)``: the fewest fields a run needs, one local
  synthetic-data run of 1 GPU and 1 PS that ended ok, with `fields` added or replaced.
- ``measured_row(...)``: the same with a measured rate, 100 images/s of small_cnn at batch 32 on
  one worker (the report's input).
- ``study_row(...)``: a run with every configuration column the report groups by.
- ``old_store(db, schema_version, missing, row)``: a store as an older schema wrote it.
- ``fill(folder, leave)``: the file system under a store made full, but for `leave` bytes.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from dtfbench.results import store


def run_row(run_id: str, sweep_id: str = "s", **fields) -> dict:
    return {
        "run_id": run_id,
        "sweep_id": sweep_id,
        "system": "local",
        "gpus": 1,
        "num_ps": 1,
        "variable_update": "parameter_server",
        "data": "synthetic",
        "repetition": 1,
        "status": "ok",
        **fields,
    }


def measured_row(run_id: str = "s-1", sweep_id: str = "s", **fields) -> dict:
    return run_row(
        run_id,
        sweep_id,
        **{"num_workers": 1, "model": "small_cnn", "batch_size": 32, "images_per_sec": 100.0, **fields},
    )


def study_row(
    run_id: str,
    sweep_id: str,
    system: str,
    gpus: int,
    num_ps: int,
    update: str,
    data: str,
    rep: int,
    ips: float | None,
    *,
    reason: str | None = None,
    status: str | None = None,
    model: str = "inception3",
    batch_size: int = 64,
    **fields,
) -> dict:
    """A run of the study's shape (one device a worker, 10 warm-up and 100 measured steps, the
    PS on worker nodes) with its configuration; failed, unless `status` says, where `ips` is None."""
    return {
        "run_id": run_id,
        "sweep_id": sweep_id,
        "system": system,
        "gpus": gpus,
        "num_workers": gpus,
        "num_ps": num_ps,
        "variable_update": update,
        "data": data,
        "model": model,
        "batch_size": batch_size,
        "repetition": rep,
        "devices_per_worker": 1,
        "ps_on_worker_nodes": True,
        "warmup_steps": 10,
        "steps": 100,
        "images_per_sec": ips,
        "images_per_sec_per_worker": [ips / gpus] * gpus if ips else [],
        "status": status or ("ok" if ips is not None else "failed"),
        "reason": reason,
        **fields,
    }


def old_store(db: Path, schema_version: int, missing: tuple[str, ...], row: dict) -> None:
    """A results store at `schema_version`: today's runs table without the `missing` columns
    (those that later versions added), holding `row`, written with sqlite3 as that version did."""
    columns = [(name, kind) for name, kind in store.COLUMNS if name not in missing]
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, " + ", ".join(f"{n} {t}" for n, t in columns) + ")")
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(schema_version),))
    conn.execute(f"INSERT INTO runs ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    conn.commit()
    conn.close()


def fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of `folder` up, then give `leave` bytes back."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    os.truncate(filler, max(0, filler.stat().st_size - leave))
