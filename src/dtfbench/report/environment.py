"""The report's Environment section: per system, the distinct environments and the runs of each.

An environment is a run's ``environment_key`` (``dtfbench.results.environment_view.MATTERS``: instance
type, GPU model, driver, TF version and build); each system's are labelled E1, E2 ... in the
order they were first recorded; a run with none (recorded before schema 5, or failed before a
worker reported) is under ``unknown``. ``environments.{md,csv}`` list them with the other facts
their hosts reported (CPU, OS, kernel, Python, CUDA, cuDNN, GPU clocks and power limit) and the
runs that used each; configurations that are the same but for their environment are named
with the fields that split them.

Beside them, each sweep's network as its link probe measured it (``dtfbench.results.network``):
the point-to-point and incast rates and the round trip, each host's rates, and the hosts far
below the others; ``unknown`` with why where nothing was measured. Rates in GB/s (10^9
bytes/s), with Mbit/s beside them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..results import environment_view, network
from . import markdown

UNKNOWN = environment_view.UNKNOWN
CSV_COLUMNS = (
    ("system", "environment", "runs", "run_ids", "sweep_ids", "hosts")
    + environment_view.MATTERS
    + environment_view.DETAILS
    + ("environment_key",)
)


def labels(rows: Iterable[Mapping[str, Any]]) -> dict[tuple, str]:
    """{(system, environment_key): 'E1' | 'unknown'}, numbered per system in order of appearance."""
    out: dict[tuple, str] = {}
    counts: dict[Any, int] = {}
    for row in rows:
        key = (row.get("system"), row.get("environment_key") or None)
        if key not in out:
            if key[1] is None:
                out[key] = UNKNOWN
            else:
                counts[key[0]] = counts.get(key[0], 0) + 1
                out[key] = f"E{counts[key[0]]}"
    return out


def label_of(names: Mapping[tuple, str], system: Any, key: Any) -> str:
    return names.get((system, key or None), UNKNOWN)


def environments(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One entry per (system, environment): its fields, its hosts' other facts, its runs."""
    names = labels(rows)
    found: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row.get("system"), row.get("environment_key") or None)
        entry = found.setdefault(
            key,
            {
                "system": key[0],
                "environment": names[key],
                "environment_key": key[1],
                "run_ids": [],
                "sweep_ids": [],
                "hosts": [],
                "_details": {},
                **environment_view.parse_key(key[1]),
            },
        )
        entry["run_ids"].append(str(row.get("run_id")))
        if row.get("sweep_id") not in entry["sweep_ids"]:
            entry["sweep_ids"].append(row.get("sweep_id"))
        documents = row.get("environment") if isinstance(row.get("environment"), Mapping) else {}
        for host, document in documents.items():
            if host not in entry["hosts"]:
                entry["hosts"].append(host)
            for name, value in environment_view.fields(document).items():
                if name in environment_view.DETAILS:
                    entry["_details"].setdefault(name, set()).add(value)
    out = []
    for entry in found.values():
        details = entry.pop("_details")
        for name in environment_view.DETAILS:
            entry[name] = " | ".join(sorted(details.get(name) or {UNKNOWN}))
        entry["runs"] = len(entry["run_ids"])
        entry["hosts"] = sorted(entry["hosts"])
        out.append(entry)
    return out


def splits(summaries: Iterable[Mapping[str, Any]], names: Mapping[tuple, str]) -> list[str]:
    """One line per configuration kept apart from its twins by its environment."""
    lines = []
    for s in summaries:
        if s.get("environment_split"):
            lines.append(
                f"{s['system']}, {s['model']}, {s['data']}, {s['gpus']} GPUs, {s['num_ps']} PS, "
                f"{s['variable_update']}: environment {label_of(names, s['system'], s.get('environment_key'))}"
                f" ({s['n_ok']}/{s['runs']} runs ok), split by {', '.join(s['environment_split'])}"
            )
    return lines


NETWORK_CSV_COLUMNS = (
    "sweep_id",
    "status",
    "why",
    "link_gb_s",
    "incast_gb_s",
    "incast_receiver",
    "rtt_ms",
    "host",
    "private_ip",
    "send_gb_s",
    "recv_gb_s",
    "host_gb_s",
    "host_rtt_ms",
    "host_why",
    "slow",
)


def networks(rows: Iterable[Mapping[str, Any]], db: str | None) -> dict[str, network.Measured]:
    """{sweep_id: what its link probe measured} for the sweeps of `rows` (unknown, with why, where none)."""
    sweeps = list(dict.fromkeys(str(r.get("sweep_id")) for r in rows if r.get("sweep_id")))
    if not db:
        return {s: network.Measured("unknown", "no results store given") for s in sweeps}
    return {s: network.measured(db, s) for s in sweeps}


def _rate(gb_s: float | None) -> str:
    return UNKNOWN if gb_s is None else f"{gb_s:.4g} GB/s ({gb_s * 8e3:.4g} Mbit/s)"


def network_line(sweep_id: str, m: network.Measured) -> str:
    """One line: a sweep's measured network (the report's index)."""
    if not m.known:
        return f"network of sweep {sweep_id}: {UNKNOWN} ({m.why})"
    incast = (m.document or {}).get("incast") or {}
    line = (
        f"network of sweep {sweep_id}: point-to-point {_rate(m.link_gb_s)}, incast into "
        f"{incast.get('receiver', '-')} {_rate(m.incast_gb_s)}, round trip "
        + (UNKNOWN if m.rtt_ms is None else f"{m.rtt_ms:.3g} ms")
    )
    if m.slow_hosts:
        line += "; WARNING: far below the others: " + ", ".join(f"{s['host']} {_rate(s['gb_s'])}" for s in m.slow_hosts)
    return line


def network_tables(measured: Mapping[str, network.Measured]) -> tuple[list[dict], str]:
    """(the CSV rows of network.csv: one per sweep and host, the Network part of environments.md)."""
    csv_rows: list[dict] = []
    md = [
        "## Network",
        "",
        "Each sweep's links as its probe measured them before the first run, over the private (TF) "
        "addresses (docs/network.md): point-to-point (each host's rate is the slower of its sending and "
        "receiving, at its best partner), incast (every other host into one, a PS's situation), round trip. "
        f"Rates in {network.UNIT}.",
    ]
    for sweep_id, m in measured.items():
        md += ["", f"### Sweep {markdown.text(sweep_id)}", "", f"- {markdown.text(network_line(sweep_id, m))}"]
        document = m.document or {}
        incast = document.get("incast") or {}
        base = {
            "sweep_id": sweep_id,
            "status": m.status,
            "why": m.why or "",
            "link_gb_s": m.link_gb_s,
            "incast_gb_s": m.incast_gb_s,
            "incast_receiver": incast.get("receiver", ""),
            "rtt_ms": m.rtt_ms,
        }
        hosts = document.get("hosts") or {}
        if not hosts:
            csv_rows.append(dict(base))
            continue
        slow = {s["host"] for s in m.slow_hosts}
        md += ["", "| host | private address | sends | receives | round trip | note |", "|---|---|---|---|---|---|"]
        for host, entry in sorted(hosts.items()):
            note = "far below the others" if host in slow else (entry.get("why") or "")
            rtt = entry.get("rtt_ms")
            md.append(
                f"| {_cell(host)} | {_cell(entry.get('private_ip'))} | {_rate(entry.get('send_gb_s'))} | "
                f"{_rate(entry.get('recv_gb_s'))} | {UNKNOWN if rtt is None else f'{rtt:.3g} ms'} | {_cell(note)} |"
            )
            csv_rows.append(
                dict(
                    base,
                    host=host,
                    private_ip=entry.get("private_ip"),
                    send_gb_s=entry.get("send_gb_s"),
                    recv_gb_s=entry.get("recv_gb_s"),
                    host_gb_s=entry.get("gb_s"),
                    host_rtt_ms=rtt,
                    host_why=entry.get("why") or "",
                    slow=host in slow,
                )
            )
    return csv_rows, "\n".join(md) + "\n"


def _cell(value: Any) -> str:
    return markdown.cell(value)


def tables(rows: list[Mapping[str, Any]], summaries: Iterable[Mapping[str, Any]]) -> tuple[list[dict], str]:
    """(the CSV rows of environments.csv, environments.md)."""
    found = environments(rows)
    names = labels(rows)
    csv_rows = [
        dict(
            e, run_ids=" ".join(e["run_ids"]), sweep_ids=" ".join(map(str, e["sweep_ids"])), hosts=" ".join(e["hosts"])
        )
        for e in found
    ]
    md = [
        "# Environment",
        "",
        "Where and on what the runs ran, per system: each distinct environment (instance type, GPU model, "
        "driver, TF version and build: runs that differ in one of these are never one configuration), "
        "what else its hosts reported, and the runs that used it. `unknown`: runs recorded before "
        "environments were, or that failed before a worker reported; within a field, `unknown` means "
        "the node could not say (the stored document says why).",
    ]
    for system in dict.fromkeys(e["system"] for e in found):
        md += ["", f"## {markdown.text(system)}", ""]
        md.append("| | " + " | ".join(_cell(e["environment"]) for e in found if e["system"] == system) + " |")
        md.append("|---|" + "---|" * sum(1 for e in found if e["system"] == system))
        for name in environment_view.MATTERS + environment_view.DETAILS + ("hosts", "runs", "run_ids"):
            values = [e[name] for e in found if e["system"] == system]
            shown = [", ".join(v) if isinstance(v, list) else v for v in values]
            md.append(f"| {name} | " + " | ".join(_cell(v) for v in shown) + " |")
    split = splits(summaries, names)
    md += ["", "## Configurations split by their environment", ""]
    md += [f"- {markdown.text(line)}" for line in split] or ["None: no configuration ran in more than one environment."]
    return csv_rows, "\n".join(md) + "\n"
