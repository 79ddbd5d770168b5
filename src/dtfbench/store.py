"""The results store: one row per benchmark run in SQLite (``results/results.sqlite``).

Append-only and transactional: a run is written in one transaction once it has ended, so a
playbook killed mid-sweep leaves every finished run in the store and no partial row.

Command line (used by the playbooks on the controller)::

    python -m dtfbench.store add --db results/results.sqlite < run.json
    python -m dtfbench.store export --db results/results.sqlite --format csv
"""

from __future__ import annotations

import argparse
import csv
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping

DEFAULT_DB = "results/results.sqlite"
# 2: gpu_util_mean, gpu_util_max. 3: data_read_mb_per_s, data_read. 4: workload,
# workload_ref, workload_commit. A store of an older version gets the new columns when it is
# opened (NULL in its old rows); every column added later must be nullable for that.
SCHEMA_VERSION = 4

# (column, SQL type). Order is the export order. Everything a report filters or groups on
# is a column; the raw worker results stay in `worker_results` as JSON.
COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "TEXT NOT NULL"),
    ("sweep_id", "TEXT NOT NULL"),
    ("started_at", "TEXT"),
    ("finished_at", "TEXT"),
    ("system", "TEXT NOT NULL"),
    ("hosts", "TEXT"),  # JSON list of host names used by the run
    ("gpus", "INTEGER NOT NULL"),
    ("num_workers", "INTEGER"),
    ("num_ps", "INTEGER NOT NULL"),
    ("devices_per_worker", "INTEGER"),
    ("ps_on_worker_nodes", "INTEGER"),
    ("variable_update", "TEXT NOT NULL"),
    ("cross_replica_sync", "INTEGER"),
    ("data", "TEXT NOT NULL"),
    ("model", "TEXT"),
    ("batch_size", "INTEGER"),
    ("image_size", "INTEGER"),
    ("repetition", "INTEGER NOT NULL"),
    ("warmup_steps", "INTEGER"),
    ("steps", "INTEGER"),
    ("images_per_sec", "REAL"),  # total over the workers
    ("images_per_sec_per_worker", "TEXT"),  # JSON list, by worker task index
    ("step_time_mean", "REAL"),
    ("step_time_p50", "REAL"),
    ("step_time_p95", "REAL"),
    ("step_time_stddev", "REAL"),
    ("status", "TEXT NOT NULL CHECK (status IN ('ok', 'failed'))"),
    ("reason", "TEXT"),
    ("tf_version", "TEXT"),
    ("git_revision", "TEXT"),
    ("cluster_spec", "TEXT"),  # JSON: the ClusterSpec the workers used
    ("worker_results", "TEXT"),  # JSON list of the workers' result documents
    # GPU utilisation (nvidia-smi utilization.gpu, percent) during the measured steps: the
    # mean of the workers' means and the highest sample; NULL where the nodes have no GPU.
    ("gpu_util_mean", "REAL"),
    ("gpu_util_max", "REAL"),
    # Real-data runs: the raw read rate of the data directory, the slowest node's (it bounds
    # the run), and every node's measurement (JSON {host: dtfbench.read_throughput's result}).
    ("data_read_mb_per_s", "REAL"),
    ("data_read", "TEXT"),
    # What the run measured: 'ours' (python -m dtfbench.train) or 'tf_cnn_benchmarks' with the
    # git ref asked for and the commit it resolved to (NULL for ours; NULL in rows recorded
    # before schema 4, which were all ours).
    ("workload", "TEXT"),
    ("workload_ref", "TEXT"),
    ("workload_commit", "TEXT"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
REQUIRED = ("run_id", "sweep_id", "system", "gpus", "num_ps", "variable_update", "data",
            "repetition", "status")
JSON_COLUMNS = ("hosts", "images_per_sec_per_worker", "cluster_spec", "worker_results", "data_read")


class StoreError(ValueError):
    """A record that cannot be stored, with what is wrong in it."""


def connect(db_path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the store and make sure the schema is there."""
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30)
    conn.row_factory = sqlite3.Row
    # WAL: readers (reports) never block the writer, and a crash never corrupts a row.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    columns = ",\n  ".join(f"{name} {sqltype}" for name, sqltype in COLUMNS)
    with conn:
        # One writer at a time through the schema: two processes opening an older store at
        # once (a report during a sweep) must not both add the same column.
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(f"CREATE TABLE IF NOT EXISTS runs (\n  id INTEGER PRIMARY KEY,\n  {columns}\n)")
        # A run id is done once: at most one ok row each. Failed attempts stay as history.
        conn.execute("CREATE UNIQUE INDEX IF NOT EXISTS runs_ok_once ON runs(run_id) WHERE status = 'ok'")
        conn.execute("CREATE INDEX IF NOT EXISTS runs_by_sweep ON runs(sweep_id)")
        conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
        # A store made by an older version lacks the newer columns: add them (appending a
        # nullable column rewrites no row, so the append-only history stays as it was).
        present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
        for name, sqltype in COLUMNS:
            if name not in present:
                conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sqltype}")
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        # Append-only: the store never rewrites history.
        conn.execute("CREATE TRIGGER IF NOT EXISTS runs_no_update BEFORE UPDATE ON runs "
                     "BEGIN SELECT RAISE(ABORT, 'runs are append-only'); END")
    return conn


def _normalise(record: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in REQUIRED if record.get(key) in (None, "")]
    if missing:
        raise StoreError(f"run record lacks {', '.join(missing)}; every run needs {', '.join(REQUIRED)}")
    unknown = sorted(set(record) - set(COLUMN_NAMES))
    if unknown:
        raise StoreError(f"run record has unknown fields {', '.join(unknown)}; "
                         f"known fields: {', '.join(COLUMN_NAMES)}")
    if record["status"] not in ("ok", "failed"):
        raise StoreError(f"status must be 'ok' or 'failed', not {record['status']!r}")
    row = {}
    for name in COLUMN_NAMES:
        value = record.get(name)
        if name in JSON_COLUMNS and value is not None and not isinstance(value, str):
            value = json.dumps(value, sort_keys=True)
        elif isinstance(value, bool):
            value = int(value)
        row[name] = value
    return row


def add_run(conn: sqlite3.Connection, record: Mapping[str, Any]) -> int:
    """Append one run in its own transaction; returns its row id."""
    row = _normalise(record)
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    with conn:
        cursor = conn.execute(f"INSERT INTO runs ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})",
                              [row[name] for name in COLUMN_NAMES])
    return int(cursor.lastrowid)


def runs(conn: sqlite3.Connection, where: str = "", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Rows as dicts, JSON columns decoded, in insertion order."""
    sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY id"
    result = []
    for row in conn.execute(sql, tuple(params)):
        item = dict(row)
        for name in JSON_COLUMNS:
            if item.get(name):
                item[name] = json.loads(item[name])
        result.append(item)
    return result


def completed_run_ids(db_path: str | Path, sweep_id: str) -> set[str]:
    """Run ids of `sweep_id` already recorded as ok: a re-run of the sweep skips them.

    Reads without creating anything, so asking about a store that does not exist yet is free.
    """
    path = Path(db_path)
    if not path.exists():
        return set()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        rows = conn.execute("SELECT run_id FROM runs WHERE sweep_id = ? AND status = 'ok'", (sweep_id,))
        return {run_id for (run_id,) in rows}
    except sqlite3.OperationalError:  # a file without our schema: nothing recorded
        return set()
    finally:
        conn.close()


def export(conn: sqlite3.Connection, fmt: str, out) -> None:
    rows = runs(conn)
    if fmt == "json":
        json.dump(rows, out, indent=2, sort_keys=True)
        out.write("\n")
        return
    writer = csv.writer(out)
    writer.writerow(("id",) + COLUMN_NAMES)
    for row in rows:
        writer.writerow([row["id"]] + [json.dumps(row[n], sort_keys=True) if n in JSON_COLUMNS and row[n] is not None
                                       else row[n] for n in COLUMN_NAMES])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtfbench.store", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="append one run record (JSON on stdin or --file)")
    add.add_argument("--db", default=DEFAULT_DB)
    add.add_argument("--file", help="JSON file with the record (default: stdin)")
    exp = sub.add_parser("export", help="write every run as CSV or JSON")
    exp.add_argument("--db", default=DEFAULT_DB)
    exp.add_argument("--format", choices=("csv", "json"), default="csv")
    exp.add_argument("--output", help="file to write (default: stdout)")
    args = parser.parse_args(argv)

    if args.command == "add":
        text = Path(args.file).read_text() if args.file else sys.stdin.read()
        try:
            record = json.loads(text)
            conn = connect(args.db)
            row_id = add_run(conn, record)
        except (json.JSONDecodeError, StoreError, sqlite3.IntegrityError) as err:
            print(f"dtfbench.store: error: {err}", file=sys.stderr)
            return 2
        print(json.dumps({"id": row_id, "run_id": record["run_id"], "db": str(args.db)}))
        return 0
    if not Path(args.db).exists():
        print(f"dtfbench.store: error: no results store at {args.db}; run the benchmark first "
              f"or pass --db", file=sys.stderr)
        return 2
    conn = connect(args.db)
    if args.output:
        tmp = Path(args.output + ".tmp")
        with tmp.open("w", newline="") as out:
            export(conn, args.format, out)
        tmp.replace(args.output)
    else:
        export(conn, args.format, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
