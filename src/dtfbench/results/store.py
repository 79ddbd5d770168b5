"""The results store: one row per benchmark run in SQLite (``results/results.sqlite``).

Append-only and transactional: a run is written in one transaction once it has ended, so a
playbook killed mid-sweep leaves every finished run in the store and no partial row.

Writers check the store before a sweep starts (`check_writable`: it opens or can be created,
is SQLite of our schema, passes ``PRAGMA quick_check``, takes a write, and its disk has room);
readers open it read-only (`open_readonly`), so a report never creates or changes a file. Every
error names the variable or option and the path.

Command line (on the controller)::

    python -m dtfbench store add --db results/results.sqlite < run.json
    python -m dtfbench store add < finished-run.json
    python -m dtfbench store export --db results/results.sqlite --format csv

``store add`` is the one way in: it takes a prepared record (one row: what a refused run's
``*.unrecorded-<run id>.json`` keeps) or a finished run as the playbook hands it over (the
interrupt watchdog's; ``dtfbench.results.record`` builds its row, as the run_record action does),
told apart by the finished run's keys (``is_finished_run``). ``dtfbench record`` is its former
name for a finished run on stdin.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sqlite3
import sys
import tempfile
import urllib.parse
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..plan import workloads

DEFAULT_DB = "results/results.sqlite"
# 2: gpu_util_mean, gpu_util_max. 3: data_read_mb_per_s, data_read. 4: workload,
# workload_ref, workload_commit. 5: environment, environment_key. 6: the sweep_steps table (what an
# adaptive sweep ran or skipped at each GPU count, dtfbench.sweep_steps). 7: the network_probes table (what
# each sweep's link probe measured, dtfbench.results.network). A store of an older version
# gets the new columns and tables when it is opened (NULL in its old rows); every column added later
# must be nullable for that. 8: nic, nic_busiest_host, nic_rx_gb_per_s, nic_tx_gb_per_s (the NIC
# sampler's figures per run, docs/network.md). 9: eval_every_steps, eval_top1, eval_top5, eval_seconds,
# target_accuracy, max_epochs, optimizer, learning_rate, sync, tta_status, time_to_accuracy,
# epochs_to_accuracy (held-out accuracy, time to accuracy and what they depend on, docs/accuracy.md).
# 10: lr_scaling, warmup_epochs (the learning rate scaled with the global batch, and its warm-up), storage
# (the file system the nodes read data_dir from, docs/storage.md). 11: cache (the page cache setting a
# real-data run started with, docs/storage.md). 12: the stagings table (each node's copy of the dataset
# to local disk before a sweep's first run, dtfbench.results.staging); checkpoint_every_steps,
# checkpoint_every_secs, checkpoint_saves, checkpoint_mean_s, checkpoint_max_s, checkpoint_gb,
# checkpoint_gb_per_s (the checkpoints worker 0 saved during the measured steps, docs/storage.md).
# 13: input_format (the real data's file format, tfrecord or lmdb, docs/storage.md). 14: background_io,
# background_io_mb_per_s (another node's reader of data_dir during the run, docs/storage.md).
SCHEMA_VERSION = 14

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
    # the run), and every node's measurement (JSON {host: dtfbench read_throughput's result}).
    ("data_read_mb_per_s", "REAL"),
    ("data_read", "TEXT"),
    # What the run measured: 'ours' (python -m dtfbench train) or 'tf_cnn_benchmarks' with the
    # git ref asked for and the commit it resolved to (NULL for ours; NULL in rows recorded
    # before schema 4, which were all ours).
    ("workload", "TEXT"),
    ("workload_ref", "TEXT"),
    ("workload_commit", "TEXT"),
    # Where and on what it ran (dtfbench.results.run_environment): {host: environment document} and the
    # fields that matter (GPU model, driver, TF version and build, instance type) as one string;
    # runs whose keys differ are never one configuration. NULL before schema 5: unknown.
    ("environment", "TEXT"),
    ("environment_key", "TEXT"),
    # The bytes in and out of each host's TF interface over the workers' measured window
    # (dtfbench.launch.nic_sampler): {host: figures or {status: unknown, reason}}, and the busiest
    # host's (the most bytes a second, in and out together) name and rates in GB/s (1e9 bytes/s). NULL
    # before schema 8, or where no host could be measured.
    ("nic", "TEXT"),
    ("nic_busiest_host", "TEXT"),
    ("nic_rx_gb_per_s", "REAL"),
    ("nic_tx_gb_per_s", "REAL"),
    # Held-out accuracy (dtfbench.workload.evaluation): the run's evaluation interval in measured steps (a
    # configuration key: evaluation pauses training; NULL: none), and the evaluating worker's (worker 0's)
    # last top-1 and top-5 (fractions) and the seconds its evaluations took. NULL before schema 9.
    ("eval_every_steps", "INTEGER"),
    ("eval_top1", "REAL"),
    ("eval_top5", "REAL"),
    ("eval_seconds", "REAL"),
    # A time-to-accuracy run: its target top-1 and its cap in epochs (configuration keys; NULL: a
    # run of fixed length), whether worker 0 saw the target reached ('converged', 'not_converged'),
    # and when: seconds from the first training step to the end of that evaluation, and epochs.
    ("target_accuracy", "REAL"),
    ("max_epochs", "REAL"),
    # The optimizer and learning rate the plan gave (configuration keys; NULL: the workload's own).
    ("optimizer", "TEXT"),
    ("learning_rate", "REAL"),
    # Synchronous (1) or asynchronous (0) updates as the plan asked (a configuration key: a sweep axis);
    # NULL: not asked (the workload's own; cross_replica_sync says what the workers reported).
    ("sync", "INTEGER"),
    ("tta_status", "TEXT"),
    ("time_to_accuracy", "REAL"),
    ("epochs_to_accuracy", "REAL"),
    # How the learning rate followed the images an update averages ('none', 'linear') and the epochs of its
    # warm-up, as the plan asked (configuration keys; NULL: not asked, the workload's own: none). NULL before 10.
    ("lr_scaling", "TEXT"),
    ("warmup_epochs", "REAL"),
    # Real data: the file system the nodes read data_dir from, as each node's read test found it
    # (dtfbench.results.record.storage_of: 'ext4', 'nfs4 server:/export'); a configuration key, so runs
    # from a shared and a local copy are never averaged. NULL: synthetic data, or not measured.
    ("storage", "TEXT"),
    # Real data: the page cache of data_dir's files at the run's start as the plan set it ('cold', 'warm'; a
    # configuration key); NULL: left as it was (each node's resident fraction is in data_read). NULL before 11.
    ("cache", "TEXT"),
    # Real data: the records' file format ('tfrecord', 'lmdb'; a configuration key). NULL: synthetic data, and
    # before 13 (when real data was TFRecords: the report reads it so).
    ("input_format", "TEXT"),
    # Real data: the node that read data_dir beside the run (background_io, a configuration key; NULL: none)
    # and the MB/s it read at during the run (NULL where it said nothing). NULL before 14.
    ("background_io", "TEXT"),
    ("background_io_mb_per_s", "REAL"),
    # Checkpoints during the measured steps (dtfbench.workload.checkpoints; docs/storage.md): the setting (a
    # configuration key) and worker 0's saves: how many, mean and longest seconds, the checkpoint's GB and the
    # rate it was written at. NULL without checkpoints, and before 12.
    ("checkpoint_every_steps", "INTEGER"),
    ("checkpoint_every_secs", "REAL"),
    ("checkpoint_saves", "INTEGER"),
    ("checkpoint_mean_s", "REAL"),
    ("checkpoint_max_s", "REAL"),
    ("checkpoint_gb", "REAL"),
    ("checkpoint_gb_per_s", "REAL"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)
REQUIRED = ("run_id", "sweep_id", "system", "gpus", "num_ps", "variable_update", "data", "repetition", "status")
JSON_COLUMNS = (
    "hosts",
    "images_per_sec_per_worker",
    "cluster_spec",
    "worker_results",
    "data_read",
    "environment",
    "nic",
)


# Schema 6: one row per decision of an adaptive sweep (dtfbench.sweep_steps reads and writes it).
SWEEP_STEPS_TABLE = (
    "CREATE TABLE IF NOT EXISTS sweep_steps (sweep_id TEXT NOT NULL, gpus INTEGER NOT NULL, "
    "action TEXT NOT NULL CHECK (action IN ('full', 'narrowed', 'stopped')), reason TEXT NOT NULL, "
    "detail TEXT NOT NULL, recorded_at TEXT)"
)


# Schema 7: one row per link probe of a sweep (dtfbench.results.network reads and writes it; rates
# in GB/s, 10^9 bytes/s; NULL: unknown, the document says why).
NETWORK_PROBES_TABLE = (
    "CREATE TABLE IF NOT EXISTS network_probes (sweep_id TEXT NOT NULL, probed_at TEXT, "
    "status TEXT NOT NULL CHECK (status IN ('ok', 'unknown')), link_gb_s REAL, incast_gb_s REAL, rtt_ms REAL, "
    "document TEXT NOT NULL)"
)


# Schema 12: one row per node and staging of a sweep's dataset (dtfbench.results.staging reads and
# writes it; status ok or failed; seconds the whole staging; document the stager's JSON report).
STAGINGS_TABLE = (
    "CREATE TABLE IF NOT EXISTS stagings (sweep_id TEXT NOT NULL, node TEXT NOT NULL, staged_at TEXT, "
    "status TEXT NOT NULL CHECK (status IN ('ok', 'failed')), source TEXT, target TEXT, seconds REAL, "
    "copied_bytes INTEGER, bytes INTEGER, already_staged INTEGER, document TEXT NOT NULL)"
)


# Room a sweep needs on the store's file system before it starts: a run's row is a few KB,
# but SQLite also needs its WAL and shared-memory files (32 KB) beside the store.
MIN_FREE_BYTES = 1 << 20


class StoreError(ValueError):
    """A record that cannot be stored, or a store that cannot be used, with what is wrong."""


def _free_bytes(path: Path) -> int | None:
    """Bytes free to us on the file system holding `path` (its nearest existing folder)."""
    for folder in (path, *path.parents):
        try:
            stat = os.statvfs(folder)
        except OSError:
            continue
        return stat.f_bavail * stat.f_frsize
    return None


def _room_problem(path: Path, need: int = MIN_FREE_BYTES) -> str | None:
    free = _free_bytes(path)
    if free is not None and free < need:
        return (
            f"the disk is full: {free // 1024} KB free on the file system of {path.parent} "
            f"(a sweep needs at least {need // 1024} KB); free some room or use a store on another disk"
        )
    return None


def describe_error(where: str, path: Path, err: BaseException) -> str:
    """One line for a store that SQLite refused: `where` (results_db=PATH or --db PATH), the
    problem in words, and the fix."""
    text = str(err)
    lowered = text.lower()
    if isinstance(err, sqlite3.Error):
        room = _room_problem(path)
        if room and ("disk" in lowered or "full" in lowered or "i/o" in lowered):
            return f"{where}: {room} ({text})"
    if "file is not a database" in lowered:
        return f"{where}: not an SQLite database ({text}); point it at a results store, or at a new path to start one"
    if "malformed" in lowered or "corrupt" in lowered:
        return (
            f"{where}: the database is damaged, perhaps truncated ({text}); restore it from a copy, "
            f"or point it at a new path to start a store"
        )
    if "readonly" in lowered or "read-only" in lowered or "permission" in lowered:
        return f"{where}: cannot be written ({text}); use a path you can write"
    if "unable to open" in lowered and path.is_file() and not os.access(path.absolute().parent, os.W_OK):
        return (
            f"{where}: cannot be opened here ({text}): its folder {path.absolute().parent} cannot be written, and "
            f"SQLite creates {path.name}-shm beside a store in WAL mode to read it, and a journal to write it; use a "
            "path in a folder you can write (to read it, a copy there, with its -wal file if any)"
        )
    if "unable to open" in lowered or isinstance(err, OSError):
        reason = getattr(err, "strerror", None) or text
        return f"{where}: cannot be opened or created ({reason}); use a path in a folder you can write"
    return f"{where}: {text}"


def _ro_uri(path: Path) -> str:
    """The SQLite URI a reader opens `path` with (quoted, so '#', '?', '%', spaces and non-ASCII
    characters are part of the path and not of the URI). It never creates a database (the file
    exists: the callers check), and the reader only reads; what differs is what SQLite leaves:

    - on a read-only file system (a CD, a read-only mount of an archive): immutable, since a store
      in WAL mode is otherwise read through a -shm file SQLite must create beside it, and nothing
      can change a store there while it is read;
    - where the store and its folder can be written: read-write, so that the last connection to
      close removes the -wal and -shm files it made (a read-only one leaves them behind);
    - elsewhere: read-only."""
    uri = "file:" + urllib.parse.quote(str(path.absolute()), safe="/")
    folder = path.absolute().parent
    try:
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    if read_only:
        return uri + "?mode=ro&immutable=1"
    if os.access(path, os.W_OK) and os.access(folder, os.W_OK | os.X_OK):
        return uri + "?mode=rw"
    return uri + "?mode=ro"


def _check_schema(conn: sqlite3.Connection, where: str, path: Path, *, empty_ok: bool) -> None:
    """A store of ours: a runs table (an empty database only where `empty_ok`), a schema
    version this code knows. SQLite's own errors are raised as they come."""
    tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "runs" not in tables:
        if tables or not empty_ok:
            what = f"holds tables {', '.join(sorted(tables))} but" if tables else "is empty:"
            raise StoreError(
                f"{where}: an SQLite database that {what} no results store (no runs table); "
                f"point it at a results store, or at a new path to start one"
            )
        return
    if "meta" in tables:
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        try:
            version = int(row[0]) if row else 0
        except ValueError:
            version = 0
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{where}: a store of schema {version}, newer than this dtfbench knows "
                f"({SCHEMA_VERSION}); update dtfbench, or use another results store"
            )


def open_readonly(db_path: str | Path, where: str | None = None) -> sqlite3.Connection:
    """Open an existing store read-only: it never creates or changes a file (a 0-byte file
    stays 0 bytes). StoreError, naming `where` and the problem, for anything but a store."""
    path = Path(db_path)
    where = where or f"--db {path}"
    if not path.exists():
        raise StoreError(f"{where}: no results store there; run the benchmark first or pass --db")
    if path.is_dir():
        raise StoreError(f"{where}: a folder, not a results store; pass the store's file")
    if path.stat().st_size == 0:
        raise StoreError(f"{where}: an empty file, not a results store; pass the store's file")
    try:
        conn = sqlite3.connect(_ro_uri(path), uri=True, timeout=30)
    except sqlite3.Error as err:
        raise StoreError(describe_error(where, path, err)) from None
    conn.row_factory = sqlite3.Row
    try:
        _check_schema(conn, where, path, empty_ok=False)
    except sqlite3.DatabaseError as err:
        conn.close()
        raise StoreError(describe_error(where, path, err)) from None
    except StoreError:
        conn.close()
        raise
    return conn


def check_writable(
    db_path: str | Path, where: str | None = None, need: int = MIN_FREE_BYTES, create: bool = True
) -> None:
    """Check, before a sweep starts, that runs can be recorded in `db_path`: an existing store
    is SQLite of our schema, passes PRAGMA quick_check and takes a write (one meta row, rolled
    back: the store is left as it was); a new one can be created (a probe database beside it, written and removed);
    the file system has `need` bytes free. StoreError naming `where` and the problem.

    `create=False` (ansible-playbook --check) makes nothing: a store that does not exist yet is
    checked by the permissions of its nearest existing folder, without making its folder or a probe."""
    path = Path(db_path).expanduser()
    where = where or f"results_db={path}"
    if path.is_dir():
        raise StoreError(f"{where}: a folder, not a results store; give the store's file, e.g. {path}/results.sqlite")
    if not create and not (path.exists() and path.stat().st_size):
        folder = next(p for p in path.absolute().parents if p.exists())
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(
                f"{where}: cannot create it under {folder} (not a folder you can write); use a path in a folder "
                "you can write"
            )
        room = _room_problem(path, need)
        if room:
            raise StoreError(f"{where}: {room}")
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise StoreError(
            f"{where}: cannot create its folder {path.parent} ({err.strerror}); use a path in a folder you can write"
        ) from None
    room = _room_problem(path, need)
    if room:
        raise StoreError(f"{where}: {room}")
    target = path if path.exists() and path.stat().st_size else path.parent / f".{path.name}.check-{os.getpid()}"
    conn = None
    try:
        if target == path:
            conn = sqlite3.connect(
                "file:" + urllib.parse.quote(str(path.absolute()), safe="/") + "?mode=rw", uri=True, timeout=30
            )
            _check_schema(conn, where, path, empty_ok=True)
            problems = [text for (text,) in conn.execute("PRAGMA quick_check")]
            if problems != ["ok"]:
                raise StoreError(
                    f"{where}: the database is damaged (PRAGMA quick_check: {'; '.join(problems[:3])}); "
                    f"restore it from a copy, or point it at a new path to start a store"
                )
            # A write that is rolled back: it takes the write lock and opens the journal beside
            # the store (a read-only file or folder, a locked store fail here), but leaves the
            # store as it was - the check runs in --check and submit=false too.
            conn.isolation_level = None
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
                conn.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('write_checked_at', ?)",
                    (datetime.now(timezone.utc).isoformat(),),
                )
            finally:
                conn.execute("ROLLBACK")
        else:
            conn = sqlite3.connect(str(target), timeout=30)
            with conn:
                conn.execute("CREATE TABLE probe (x TEXT)")
                conn.execute("INSERT INTO probe VALUES ('dtfbench write check')")
    except (sqlite3.Error, OSError) as err:
        raise StoreError(describe_error(where, path, err)) from None
    finally:
        if conn is not None:
            conn.close()
        if target != path:
            for leftover in (target, Path(f"{target}-journal")):
                try:
                    leftover.unlink()
                except OSError:
                    pass


def save_unrecorded(record: Mapping[str, Any], db_path: str | Path) -> Path | None:
    """Keep a run for the store: its record as JSON beside the store (or, where
    that fails too, in the temporary folder), ready for ``python -m dtfbench store add --file``.
    None when no file could be written."""
    path = Path(db_path)
    name = f"{path.name}.unrecorded-{record.get('run_id', 'run')}.json"
    text = json.dumps(record, sort_keys=True) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass
    for folder in (path.parent, Path(tempfile.gettempdir())):
        target = folder / name
        try:
            target.write_text(text)
            return target
        except OSError:
            try:
                target.unlink()
            except OSError:
                pass
    return None


def connect(db_path: str | Path) -> sqlite3.Connection:
    """Open (creating if needed) the store and make sure the schema is there."""
    path = Path(db_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(path), timeout=30)
    try:
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
            # Each sweep's configuration (JSON), appended when a run first records it or a run of an
            # extended sweep (sweep_extend) records another one: a resume is checked against the last.
            conn.execute(
                "CREATE TABLE IF NOT EXISTS sweeps (sweep_id TEXT NOT NULL, config TEXT NOT NULL, recorded_at TEXT)"
            )
            # Schema 6: an adaptive sweep's decisions per GPU count (num_ps=auto, stop_below_efficiency).
            conn.execute(SWEEP_STEPS_TABLE)
            # Schema 7: each sweep's link probe (dtfbench.results.network).
            conn.execute(NETWORK_PROBES_TABLE)
            # Schema 12: each node's staging of the dataset (dtfbench.results.staging).
            conn.execute(STAGINGS_TABLE)
            # A store made by an older version lacks the newer columns: add them (appending a
            # nullable column rewrites no row, so the append-only history stays as it was).
            present = {row[1] for row in conn.execute("PRAGMA table_info(runs)")}
            for name, sqltype in COLUMNS:
                if name not in present:
                    conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sqltype}")
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            # Append-only: the store never rewrites history.
            conn.execute(
                "CREATE TRIGGER IF NOT EXISTS runs_no_update BEFORE UPDATE ON runs "
                "BEGIN SELECT RAISE(ABORT, 'runs are append-only'); END"
            )
    except BaseException:
        conn.close()  # at once: a store that failed (a full disk) keeps no WAL files open
        raise
    return conn


def _normalise(record: Mapping[str, Any]) -> dict[str, Any]:
    missing = [key for key in REQUIRED if record.get(key) in (None, "")]
    if missing:
        raise StoreError(f"run record lacks {', '.join(missing)}; every run needs {', '.join(REQUIRED)}")
    unknown = sorted(set(record) - set(COLUMN_NAMES))
    if unknown:
        raise StoreError(f"run record has unknown fields {', '.join(unknown)}; known fields: {', '.join(COLUMN_NAMES)}")
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


def add_run(conn: sqlite3.Connection, record: Mapping[str, Any], sweep_config: Mapping[str, Any] | None = None) -> int:
    """Append one run in its own transaction; returns its row id. With `sweep_config`, the
    sweep's configuration is recorded in the same transaction where it is not the last one
    recorded for the sweep."""
    row = _normalise(record)
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    with conn:
        cursor = conn.execute(
            f"INSERT INTO runs ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})",
            [row[name] for name in COLUMN_NAMES],
        )
        if sweep_config:
            config = json.dumps(sweep_config, sort_keys=True)
            last = conn.execute(
                "SELECT config FROM sweeps WHERE sweep_id = ? ORDER BY rowid DESC LIMIT 1", (row["sweep_id"],)
            ).fetchone()
            if last is None or last[0] != config:
                conn.execute(
                    "INSERT INTO sweeps VALUES (?, ?, ?)",
                    (row["sweep_id"], config, datetime.now(timezone.utc).isoformat()),
                )
    return int(cursor.lastrowid)


def runs(conn: sqlite3.Connection, where: str = "", params: Iterable[Any] = ()) -> list[dict[str, Any]]:
    """Rows as dicts, JSON columns decoded, in insertion order."""
    sql = "SELECT * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY id"
    result = []
    for row in conn.execute(sql, tuple(params)):
        # A store of an older schema opened read-only lacks the newer columns: NULL, as the
        # upgrade would make them.
        item = {name: None for name in COLUMN_NAMES} | dict(row)
        for name in JSON_COLUMNS:
            if item.get(name):
                item[name] = json.loads(item[name])
        result.append(item)
    return result


def _query_readonly(db_path: str | Path, sql: str, params: Iterable[Any]) -> list[tuple]:
    """Rows of `sql` on the store, read-only; [] where there is no store or no such table.
    Reads without creating anything, so asking about a store that does not exist yet is free."""
    path = Path(db_path).expanduser()
    if not path.is_file() or not path.stat().st_size:
        return []
    conn = sqlite3.connect(_ro_uri(path), uri=True, timeout=30)
    try:
        return list(conn.execute(sql, tuple(params)))
    except sqlite3.OperationalError:  # a file without our schema (or an older one): nothing recorded
        return []
    finally:
        conn.close()


def completed_run_ids(db_path: str | Path, sweep_id: str) -> set[str]:
    """Run ids of `sweep_id` already recorded as ok: a re-run of the sweep skips them."""
    rows = _query_readonly(db_path, "SELECT run_id FROM runs WHERE sweep_id = ? AND status = 'ok'", (sweep_id,))
    return {run_id for (run_id,) in rows}


def recorded_run_ids(db_path: str | Path, sweep_id: str) -> set[str]:
    """Run ids of `sweep_id` recorded in any state."""
    return {run_id for (run_id,) in _query_readonly(db_path, "SELECT run_id FROM runs WHERE sweep_id = ?", (sweep_id,))}


def recorded_sweep_config(db_path: str | Path, sweep_id: str) -> dict[str, Any] | None:
    """The last configuration recorded for `sweep_id`, or None (a new sweep, or one recorded
    before configurations were)."""
    rows = _query_readonly(
        db_path, "SELECT config FROM sweeps WHERE sweep_id = ? ORDER BY rowid DESC LIMIT 1", (sweep_id,)
    )
    return json.loads(rows[0][0]) if rows else None


def export(rows: list[dict[str, Any]], fmt: str, out) -> None:
    """Write `rows` (from `runs`) as CSV, JSON, or samples: one JSON object a line, each
    {metric, value, unit, metadata} as the run's workload reads it (PerfKitBenchmarker's shape,
    dtfbench.plan.workloads.Workload.samples)."""
    if fmt == "samples":
        for row in rows:
            for sample in workloads.workload_of(row).samples(row):
                out.write(json.dumps(sample, sort_keys=True) + "\n")
        return
    if fmt == "json":
        json.dump(rows, out, indent=2, sort_keys=True)
        out.write("\n")
        return
    writer = csv.writer(out)
    writer.writerow(("id",) + COLUMN_NAMES)
    for row in rows:
        writer.writerow(
            [row["id"]]
            + [
                json.dumps(row[n], sort_keys=True) if n in JSON_COLUMNS and row[n] is not None else row[n]
                for n in COLUMN_NAMES
            ]
        )


def is_finished_run(data: Any) -> bool:
    """Whether the JSON given to ``store add`` is a finished run as the playbook hands it over
    (dtfbench.results.record's payload: its keys ``run`` and ``layout``, neither a column of a
    record) rather than a prepared record."""
    return isinstance(data, Mapping) and ("run" in data or "layout" in data)


def add_command(db: str | None, file: str | None) -> int:
    """``store add``: one run, from --file or stdin, into the store; its answer as JSON on stdout,
    or one line on stderr. A finished run goes to the store its ``results_db`` names (``db`` where
    given) and answers as ``dtfbench record`` did (exit 2: refused, 3: kept as JSON); a prepared
    record goes to ``db`` (default DEFAULT_DB), exit 2 where it is refused."""
    where = db or DEFAULT_DB
    try:
        text = Path(file).read_text() if file else sys.stdin.read()
    except OSError as err:
        print(f"dtfbench store: error: --file {file}: {err.strerror or err}", file=sys.stderr)
        return 2
    try:
        record = json.loads(text)
    except json.JSONDecodeError as err:
        print(f"dtfbench store: error: {err}", file=sys.stderr)
        return 2
    if is_finished_run(record):
        from . import record as recording  # it builds the run's row (and imports this module)

        return recording.add_finished_run(record, db)
    try:
        if not isinstance(record, Mapping):
            raise StoreError(f"a run record is a JSON object, not {type(record).__name__}")
        conn = connect(where)
        row_id = add_run(conn, record)
    except (StoreError, sqlite3.IntegrityError) as err:
        print(f"dtfbench store: error: {err}", file=sys.stderr)
        return 2
    except (sqlite3.Error, OSError) as err:
        print(f"dtfbench store: error: {describe_error(f'--db {where}', Path(where), err)}", file=sys.stderr)
        return 2
    print(json.dumps({"id": row_id, "run_id": record["run_id"], "db": str(where)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench store", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser(
        "add",
        help="append one run: a prepared record, or a finished run as the playbook hands it over "
        "(JSON on stdin or --file)",
        description="Append one run to the store: a prepared record (the row a refused run's "
        "*.unrecorded-<run id>.json keeps), or a finished run as the playbook hands it over (its keys "
        "run and layout; its row is built as the run_record action builds it).",
    )
    add.add_argument(
        "--db", help=f"the store (default: a finished run's results_db, else {DEFAULT_DB}); given, it wins"
    )
    add.add_argument("--file", help="JSON file with the run (default: stdin)")
    exp = sub.add_parser("export", help="write every run as CSV or JSON, or every figure as a sample (JSON lines)")
    exp.add_argument("--db", default=DEFAULT_DB)
    exp.add_argument("--format", choices=("csv", "json", "samples"), default="csv")
    exp.add_argument("--output", help="file to write (default: stdout)")
    args = parser.parse_args(argv)

    if args.command == "add":
        return add_command(args.db, args.file)
    # A reader: read-only, one line naming the file and the problem (exit 2), the same
    # answers as `python -m dtfbench report table` (no store, not a store, no runs).
    try:
        conn = open_readonly(args.db)
        try:
            rows = runs(conn)
        except sqlite3.DatabaseError as err:
            raise StoreError(describe_error(f"--db {args.db}", Path(args.db), err)) from None
        finally:
            conn.close()
        if not rows:
            raise StoreError(f"no runs in {args.db}")
    except StoreError as err:
        print(f"dtfbench store: error: {err}", file=sys.stderr)
        return 2
    if args.output:
        tmp = Path(args.output + ".tmp")
        with tmp.open("w", newline="") as out:
            export(rows, args.format, out)
        tmp.replace(args.output)
    else:
        try:
            export(rows, args.format, sys.stdout)
            sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
        except BrokenPipeError:
            # `store export | head`: the reader has what it wanted. Quiet, as the Python docs
            # advise: stdout to /dev/null, so that the flush at exit does not fail again.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    return 0
