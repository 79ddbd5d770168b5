"""Turn one finished run, as the playbook saw it, into one row of the results store.

The playbook hands over (the options of its ``run_record`` action, on the controller; the
interrupt watchdog, as JSON on stdin of ``python -m dtfbench store add``, which tells it from a
prepared record by its keys ``run`` and ``layout``; ``dtfbench record`` is its former name):

    {"run": <the plan's run>, "sweep_id": ..., "system": ..., "results_db": ...,
     "git_revision": ..., "started_at": ..., "finished_at": ...,
     "layout": <tf_cluster_spec's result>,
     "hosts": {"<host>": {"failure": "" | "why", "failed_at": <epoch s> | null,
                          "workers": [<tf_task finished results>]}},
     "data_read": {"<host>": <dtfbench read_throughput's JSON>},   (real-data runs only)
     "workload": {"name": "ours" | "tf_cnn_benchmarks", "ref": <git ref> | null,
                  "commit": <the commit the ref resolved to> | null},
     "interrupted": <why the controller left the run unfinished>,   (an interrupted run only)
     "instance_types": {"<host>": <the inventory's instance_type> | ""}}

Each host's entry may carry ``"nic": {"<host>": <NIC figures>}`` (dtfbench.launch.nic_sampler's
host_figures; the SSH launcher's hosts their own, the Slurm launcher's login node every node's).

A run is 'ok' only when every worker of the layout returned an 'ok' JSON result; otherwise it
is 'failed' with the first reason found (the hosts' failures, the earliest first since it is
the cause; a worker's own reason; a missing result), so the sweep goes on and the report can
list it.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..contract.outcomes import PEER_LOST
from . import run_environment, store


def _worker_results(hosts: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for host in hosts.values():
        for outcome in host.get("workers") or []:
            result = outcome.get("result") if isinstance(outcome, Mapping) else None
            if isinstance(result, Mapping) and "task_index" in result:
                found[int(result["task_index"])] = dict(result)
    return found


# Two tasks that end together are seen by two supervisors (on two hosts, on a loaded machine)
# in either order: a PS killed at t and the worker that lost it at t + 10 ms can be recorded
# the other way round. Within this many seconds, a failure that is not a lost peer is the cause.
PEER_LOST_SLACK = 2.0


def _cause_order(host: Mapping[str, Any]) -> float:
    failed_at = _failed_at(host)
    return failed_at + PEER_LOST_SLACK if PEER_LOST in str(host.get("failure") or "") else failed_at


def _failed_at(host: Mapping[str, Any]) -> float:
    # No time: the host left the play (unreachable), which its peers' failures follow.
    try:
        return float(host.get("failed_at"))
    except (TypeError, ValueError):
        return float("-inf")


def _host_failures(hosts: Mapping[str, Any]) -> str | None:
    """Every host's failure, the earliest first: it is the cause, the later ones (peers that
    lost the failed task) are its consequences and get their first line only. A lost peer
    counts PEER_LOST_SLACK s late (see there)."""
    failed = sorted(((_cause_order(h), name, str(h["failure"])) for name, h in hosts.items() if h.get("failure")))
    if not failed:
        return None
    (_, first_host, first), others = failed[0], failed[1:]
    reason = f"{first_host}: {first}"
    if others:
        reason += "\nthen: " + "; ".join(f"{name}: {text.splitlines()[0]}" for _, name, text in others)
    return reason


def _failure_reason(payload: Mapping[str, Any], results: Mapping[int, Mapping[str, Any]]) -> str | None:
    # A run the controller left unfinished (dtfbench interrupt records it): that is the reason.
    if payload.get("interrupted"):
        return f"interrupted: {payload['interrupted']}"
    host_reason = _host_failures(payload.get("hosts", {}))
    if host_reason:
        return host_reason
    for index, result in sorted(results.items()):
        if result.get("status") != "ok":
            return f"worker {index}: {result.get('reason') or result.get('status') or 'failed'}"
        if not isinstance(result.get("images_per_sec"), (int, float)):
            return f"worker {index}: its result has no images_per_sec"
    expected = int(payload["layout"]["num_workers"])
    missing = [i for i in range(expected) if i not in results]
    if missing:
        return f"no result from worker(s) {', '.join(map(str, missing))}"
    return None


def _gpu_utilisation(results: list[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """(mean of the workers' mean utilisation, highest sample) over the workers that sampled GPUs."""
    sampled = [
        r["gpu_utilization"]
        for r in results
        if isinstance(r.get("gpu_utilization"), Mapping) and r["gpu_utilization"].get("mean") is not None
    ]
    if not sampled:
        return None, None
    return statistics.fmean(float(s["mean"]) for s in sampled), max(float(s["max"]) for s in sampled)


def _data_read(measured: Any) -> dict[str, Any]:
    """The slowest node's raw read rate (it bounds a real-data run), every node's result, and the
    storage the nodes read data_dir from (storage_of)."""
    if not isinstance(measured, Mapping) or not measured:
        return {"data_read_mb_per_s": None, "data_read": None, "storage": None}
    rates = [
        float(m["mb_per_s"])
        for m in measured.values()
        if isinstance(m, Mapping) and isinstance(m.get("mb_per_s"), (int, float))
    ]
    return {
        "data_read_mb_per_s": min(rates) if rates else None,
        "data_read": dict(measured),
        "storage": storage_of(measured),
    }


def storage_of(measured: Mapping[str, Any]) -> str | None:
    """Where the nodes read data_dir from, as one configuration value: the file system type, and for
    a network file system its source (server and export: one shared copy), e.g. 'ext4',
    'nfs4 10.0.0.1:/srv/imagenet'; nodes on different ones, each kind once, sorted ('ext4, nfs4 ...').
    None where no node said."""
    kinds = set()
    for m in measured.values():
        fs = m.get("filesystem") if isinstance(m, Mapping) else None
        if isinstance(fs, Mapping) and fs.get("fs_type"):
            kinds.add(f"{fs['fs_type']} {fs['source']}" if fs.get("network") else str(fs["fs_type"]))
    return ", ".join(sorted(kinds)) or None


def _background_io(run: Mapping[str, Any], read: Any) -> dict[str, Any]:
    """The node that read data_dir beside the run (the plan's background_io) and its MB/s meanwhile."""
    rate = read.get("mb_per_s") if isinstance(read, Mapping) else None
    return {
        "background_io": run.get("background_io"),
        "background_io_mb_per_s": float(rate) if isinstance(rate, (int, float)) and run.get("background_io") else None,
    }


def _workload(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The workload columns; a payload without one (an older playbook) ran ours."""
    workload = payload.get("workload")
    if not isinstance(workload, Mapping) or not workload.get("name"):
        workload = {"name": "ours"}
    return {
        "workload": str(workload["name"]),
        "workload_ref": workload.get("ref") or None,
        "workload_commit": workload.get("commit") or None,
    }


GB = 1e9


def _accuracy(run: Mapping[str, Any], results: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The held-out accuracy worker 0 measured last (it evaluates in every mode), and the setting."""
    accuracy = (results.get(0) or {}).get("accuracy") or {}
    return {
        "eval_every_steps": run.get("eval_every_steps"),
        "eval_top1": accuracy.get("top1"),
        "eval_top5": accuracy.get("top5"),
        "eval_seconds": accuracy.get("eval_seconds"),
        "target_accuracy": run.get("target_accuracy"),
        "max_epochs": run.get("max_epochs"),
        "optimizer": run.get("optimizer"),
        "learning_rate": run.get("learning_rate"),
        "lr_scaling": run.get("lr_scaling"),
        "warmup_epochs": run.get("warmup_epochs"),
        "sync": run.get("sync"),
        "tta_status": accuracy.get("status"),
        "time_to_accuracy": accuracy.get("time_to_target"),
        "epochs_to_accuracy": accuracy.get("epochs_to_target"),
    }


def _checkpoints(run: Mapping[str, Any], results: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """The checkpoints worker 0 saved (it saves in every mode), and the setting."""
    saved = (results.get(0) or {}).get("checkpoints") or {}
    return {
        "checkpoint_every_steps": run.get("checkpoint_every_steps"),
        "checkpoint_every_secs": run.get("checkpoint_every_secs"),
        "checkpoint_saves": saved.get("saves"),
        "checkpoint_mean_s": saved.get("mean_seconds"),
        "checkpoint_max_s": saved.get("max_seconds"),
        "checkpoint_gb": saved.get("gb"),
        "checkpoint_gb_per_s": saved.get("gb_per_s"),
    }


def _nic(hosts: Mapping[str, Any]) -> dict[str, Any]:
    """Every host's NIC figures, and the busiest host's: the one whose NIC moved the most bytes
    a second, in and out together, over the measured window."""
    figures: dict[str, Any] = {}
    for host in hosts.values():
        if isinstance(host, Mapping) and isinstance(host.get("nic"), Mapping):
            figures.update(host["nic"])
    measured = {
        name: f
        for name, f in figures.items()
        if isinstance(f, Mapping) and f.get("status") == "ok" and f.get("rx_bytes_per_s") is not None
    }
    if not measured:
        return {"nic": figures or None, "nic_busiest_host": None, "nic_rx_gb_per_s": None, "nic_tx_gb_per_s": None}
    name = max(sorted(measured), key=lambda n: measured[n]["rx_bytes_per_s"] + measured[n]["tx_bytes_per_s"])
    return {
        "nic": figures,
        "nic_busiest_host": name,
        "nic_rx_gb_per_s": float(measured[name]["rx_bytes_per_s"]) / GB,
        "nic_tx_gb_per_s": float(measured[name]["tx_bytes_per_s"]) / GB,
    }


def build_record(payload: Mapping[str, Any]) -> dict[str, Any]:
    run = payload["run"]
    layout = payload["layout"]
    results = _worker_results(payload.get("hosts", {}))
    reason = _failure_reason(payload, results)
    ok = reason is None
    ordered = [results[i] for i in sorted(results)]
    rates = [
        float(r["images_per_sec"])
        for r in ordered
        if r.get("status") == "ok" and isinstance(r.get("images_per_sec"), (int, float))
    ]
    step_means = [r["step_time"] for r in ordered if r.get("status") == "ok" and r.get("step_time")]

    def mean_of(key: str) -> float | None:
        values = [float(s[key]) for s in step_means if s.get(key) is not None]
        return statistics.fmean(values) if values else None

    gpu_util_mean, gpu_util_max = _gpu_utilisation(ordered)
    first = ordered[0] if ordered else {}
    config = first.get("config") or {}
    return {
        "run_id": run["run_id"],
        "sweep_id": payload["sweep_id"],
        "started_at": payload.get("started_at"),
        "finished_at": payload.get("finished_at"),
        "system": payload["system"],
        "hosts": layout.get("hosts_used"),
        "gpus": run["gpus"],
        "num_workers": layout.get("num_workers"),
        "num_ps": run["num_ps"],
        "devices_per_worker": run.get("devices_per_worker"),
        "ps_on_worker_nodes": run.get("ps_on_worker_nodes"),
        "variable_update": run["variable_update"],
        "cross_replica_sync": config.get("cross_replica_sync"),
        "data": run["data"],
        "model": run.get("model"),
        "batch_size": run.get("batch_size"),
        "image_size": config.get("image_size"),
        "repetition": run["repetition"],
        "warmup_steps": run.get("warmup_steps"),
        "steps": run.get("steps"),
        # The study's figure: the sum of the workers' rates (tf_cnn_benchmarks prints one
        # worker's rate times the number of workers; the sum is exact when they differ).
        "images_per_sec": sum(rates) if ok else None,
        "images_per_sec_per_worker": rates,
        "step_time_mean": mean_of("mean"),
        "step_time_p50": mean_of("p50"),
        "step_time_p95": mean_of("p95"),
        "step_time_stddev": mean_of("stddev"),
        "status": "ok" if ok else "failed",
        "reason": reason,
        "tf_version": first.get("tf_version"),
        "git_revision": payload.get("git_revision"),
        "cluster_spec": layout.get("cluster_spec"),
        "worker_results": ordered,
        "gpu_util_mean": gpu_util_mean,
        "gpu_util_max": gpu_util_max,
        **_data_read(payload.get("data_read")),
        # The page cache setting the run started with (the plan's); what each node had cached is in data_read.
        "cache": run.get("cache"),
        # The real data's file format (the plan leaves TFRecords, the default, off the run).
        "input_format": run.get("input_format") or ("tfrecord" if run.get("data") == "real" else None),
        **_background_io(run, payload.get("background_read")),
        **_workload(payload),
        **run_environment.columns(payload.get("hosts", {}), payload.get("instance_types")),
        **_nic(payload.get("hosts", {})),
        **_accuracy(run, results),
        **_checkpoints(run, results),
    }


# The options of the run_record action (plugins/action/run_record.py; its documentation:
# library/run_record.py): the payload above, one option a key.
ARGUMENT_SPEC = {
    "run": {"type": "dict", "required": True},
    "sweep_id": {"type": "str", "required": True},
    "sweep_config": {"type": "dict"},
    "system": {"type": "str", "required": True},
    "results_db": {"type": "str"},
    "git_revision": {"type": "str", "default": ""},
    "workload": {"type": "dict"},
    "started_at": {"type": "raw"},
    "finished_at": {"type": "raw"},
    "layout": {"type": "dict", "required": True},
    "hosts": {"type": "dict", "default": {}},
    "instance_types": {"type": "dict", "default": {}},
    "data_read": {"type": "dict", "default": {}},
    "background_read": {"type": "dict", "default": {}},
    "interrupted": {"type": "str"},
    "store_expected": {"type": "bool", "default": False},
}


class RecordError(Exception):
    """The run could not be recorded: ``msg`` says why and what to do. ``exit_code`` 2: the
    record itself was refused; 3: the store refused a finished run, which is kept as JSON."""

    def __init__(self, msg: str, exit_code: int):
        super().__init__(msg)
        self.msg = msg
        self.exit_code = exit_code


def record_run(payload: Mapping[str, Any]) -> dict[str, Any]:
    """Record one finished run (the payload above) in the results store; its row id, run id,
    status, reason and images/sec. Raises RecordError."""
    try:
        record = build_record(payload)
    except (KeyError, TypeError, store.StoreError) as err:
        raise RecordError(f"dtfbench record: error: cannot record the run: {err!r}", 2) from err
    db = payload.get("results_db") or store.DEFAULT_DB
    # The run's record goes to a file first, while the disk may still have room, and is
    # removed once the store holds it: a store that refuses it (a full disk) loses nothing.
    kept = store.save_unrecorded(record, db)
    if payload.get("store_expected") and not Path(db).expanduser().exists():
        # A store the sweep had (it was there at its start, or took its earlier runs) is gone: made
        # again here, it would hide that every run recorded before went with it.
        gone = (
            f"results_db={db}: the store is gone: it was there when the sweep started or took its earlier runs, "
            "and its file or folder was removed or unmounted during the sweep (the runs recorded in it went with "
            "it); restore it from a copy, or give results_db a new path"
        )
        raise RecordError(_unrecorded(record, db, payload.get("sweep_id"), None, kept, problem=gone), 3)
    conn = None
    try:
        conn = store.connect(db)
        row_id = store.add_run(conn, record, payload.get("sweep_config"))
    except (store.StoreError, sqlite3.IntegrityError) as err:  # the record itself is refused
        if kept is not None:
            kept.unlink(missing_ok=True)
        raise RecordError(f"dtfbench record: error: cannot record the run: {err!r}", 2) from err
    except (sqlite3.Error, OSError) as err:
        raise RecordError(_unrecorded(record, db, payload.get("sweep_id"), err, kept), 3) from err
    finally:
        if conn is not None:
            conn.close()
    if kept is not None:
        kept.unlink(missing_ok=True)
    return {
        "id": row_id,
        "run_id": record["run_id"],
        "status": record["status"],
        "reason": record["reason"],
        "images_per_sec": record["images_per_sec"],
    }


def _unrecorded(
    record: Mapping[str, Any],
    db: str,
    sweep_id: str | None,
    err: BaseException | None,
    kept: Path | None,
    problem: str | None = None,
) -> str:
    """The store refused a finished run (disk full, file gone bad or gone mid-sweep): the run stays
    in the JSON file written before (never throw a result away); the one line that says so."""
    problem = problem or store.describe_error(f"results_db={db}", Path(db), err)
    if kept is None:  # not even a file: the record goes to the log, whole
        where = f"its record follows (no file could be written): {json.dumps(record, sort_keys=True)}"
    else:
        where = f"its result is kept in {kept} (add it later: python -m dtfbench store add --db {db} --file {kept})"
    return (
        f"dtfbench record: error: run {record['run_id']} finished but was not recorded: {problem}; {where}; "
        f"the sweep stops here (resume it with -e sweep_id={sweep_id})"
    )


def add_finished_run(payload: Any, db: str | None = None) -> int:
    """``dtfbench store add`` of a finished run (the payload above): record_run, its answer as JSON
    on stdout or its error as one line on stderr; the exit code (2: refused; 3: kept as JSON).
    ``db``: the store, in place of the payload's results_db."""
    if db:
        payload = dict(payload, results_db=db)
    try:
        answer = record_run(payload)
    except RecordError as err:
        print(err.msg, file=sys.stderr)
        return err.exit_code
    print(json.dumps(answer))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``dtfbench record`` (internal): ``dtfbench store add`` of a finished run under its former
    name, the payload as JSON on stdin (the playbook records through the run_record action).
    Exit 2: refused; 3: kept as JSON."""
    argparse.ArgumentParser(
        prog="dtfbench record",
        description="Record one finished run (the playbook's JSON on stdin) in the results store: "
        "dtfbench store add, which takes a prepared record too.",
    ).parse_args(argv)
    try:
        payload = json.loads(sys.stdin.read())
    except json.JSONDecodeError as err:
        print(f"dtfbench record: error: cannot record the run: {err!r}", file=sys.stderr)
        return 2
    return add_finished_run(payload)
