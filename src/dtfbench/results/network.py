"""The network a sweep ran on, as its link probe measured it, kept in the results store.

Before a sweep on more than one host (and through ``playbooks/probe-network.yml`` on its own)
the link probe (``dtfbench.node.netprobe`` on the nodes, ``dtfbench.results.netprobe`` on the controller) measures, between the nodes' private (TF) addresses,
the point-to-point rate, the incast rate (every other node sending into one, a PS's
situation) and the round-trip time. Its result is one JSON document per sweep, with an entry
per host, appended to the store's ``network_probes`` table (schema 7) and never rewritten; a
resumed sweep probes again and the newest document counts.

Units: every rate is in **GB/s, 10^9 bytes per second**, the planner's unit
(``--link-gb-s``, ``dtfbench.forecast.scaling_model.GB``); round-trip times in milliseconds.
Field names carry the unit (``*_gb_s``, ``*_ms``).

What could not be measured is ``None`` in the figures, with ``status: "unknown"`` and a
``why`` (the probe's port taken, one host, the probe timed out, ``network_probe=false``, no
probe recorded for the sweep). ``measured(db, sweep_id)`` never fails for a missing probe:
it answers ``unknown`` with why.

The document (``document`` column; ``dtfbench.results.netprobe.summarise`` writes it)::

    {"schema": 1, "status": "ok" | "unknown", "why": str | None,
     "probed_at": ISO-8601 UTC, "tool": "dtfbench.netprobe",
     "duration_s": seconds per transfer, "rounds": transfer rounds, "seconds": the probe's wall time,
     "link_gb_s": median over the hosts of each host's rate (None: unknown),
     "incast_gb_s": the incast's aggregate rate into its receiver (None: unknown or < 3 hosts),
     "rtt_ms": median round-trip time over the pairs,
     "hosts": {host: {"private_ip": str, "send_gb_s": float | None, "recv_gb_s": float | None,
                      "gb_s": the slower of the two (the host's rate), "rtt_ms": float | None,
                      "why": str | None}},
     "pairs": [{"round": int, "sender": host, "receiver": host, "gb_s": float | None, "why": ...}],
     "incast": {"receiver": host, "senders": [host, ...], "gb_s": float | None, "why": ...} | None,
     "slow_hosts": [{"host": host, "gb_s": float, "median_gb_s": float}],
     "unreached": {host: why}: hosts that never joined the probe over the private network}

Standard library only (sqlite3), like ``dtfbench.results.store``.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import store

SCHEMA = 1
UNIT = "GB/s (10^9 bytes/s)"
STATUSES = ("ok", "unknown")
# A host whose rate is under this share of the hosts' median gets a warning (a bad cable, a
# NIC at a lower speed, a noisy neighbour): the sweep's other hosts wait for it every step.
SLOW_SHARE = 0.5


def unknown(why: str, **figures: Any) -> dict[str, Any]:
    """The document of a probe that could not measure (figures None, `why` says why)."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "status": "unknown",
        "why": why,
        "probed_at": datetime.now(timezone.utc).isoformat(),
        "tool": "dtfbench.netprobe",
        "link_gb_s": None,
        "incast_gb_s": None,
        "rtt_ms": None,
        "hosts": {},
        "pairs": [],
        "incast": None,
        "slow_hosts": [],
    }
    document.update(figures)
    return document


def check(document: Mapping[str, Any]) -> None:
    """A ValueError naming what is wrong with a document before it is stored."""
    if not isinstance(document, Mapping):
        raise ValueError(f"a network probe's result must be a JSON object, not {type(document).__name__}")
    if document.get("status") not in STATUSES:
        raise ValueError(f"network probe status {document.get('status')!r}: one of {', '.join(STATUSES)}")
    if document["status"] == "unknown" and not document.get("why"):
        raise ValueError("a network probe with status 'unknown' must say why ('why')")
    for name in ("link_gb_s", "incast_gb_s", "rtt_ms"):
        value = document.get(name)
        if value is not None and not (isinstance(value, (int, float)) and value > 0):
            raise ValueError(f"network probe {name}={value!r}: a number > 0 ({UNIT} for rates), or null when unknown")
    if document["status"] == "ok" and document.get("link_gb_s") is None:
        raise ValueError("a network probe with status 'ok' must have link_gb_s; otherwise it is 'unknown' with why")


def slow_hosts(hosts: Mapping[str, Mapping[str, Any]], share: float = SLOW_SHARE) -> list[dict[str, Any]]:
    """Hosts whose rate (``gb_s``) is under `share` of the hosts' median, slowest first."""
    rates = {h: v["gb_s"] for h, v in hosts.items() if isinstance(v, Mapping) and v.get("gb_s")}
    if len(rates) < 2:
        return []
    median = statistics.median(rates.values())
    slow = [{"host": h, "gb_s": r, "median_gb_s": median} for h, r in rates.items() if r < share * median]
    return sorted(slow, key=lambda s: (s["gb_s"], s["host"]))


def record(db: str | Path, sweep_id: str, document: Mapping[str, Any]) -> None:
    """Append a sweep's probe result (its own transaction)."""
    check(document)
    conn = store.connect(db)
    try:
        with conn:
            conn.execute(
                "INSERT INTO network_probes VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    sweep_id,
                    document.get("probed_at") or datetime.now(timezone.utc).isoformat(),
                    document["status"],
                    document.get("link_gb_s"),
                    document.get("incast_gb_s"),
                    document.get("rtt_ms"),
                    json.dumps(document, sort_keys=True),
                ),
            )
    finally:
        conn.close()


def read(db: str | Path, sweep_id: str) -> dict[str, Any] | None:
    """The newest probe document of `sweep_id`; None when none was recorded (and no store is created)."""
    rows = store._query_readonly(
        db, "SELECT document FROM network_probes WHERE sweep_id = ? ORDER BY rowid DESC LIMIT 1", (sweep_id,)
    )
    return json.loads(rows[0][0]) if rows else None


@dataclass(frozen=True)
class Measured:
    """What a sweep's probe measured; every figure None when unknown (`why` says why)."""

    status: str
    why: str | None = None
    link_gb_s: float | None = None
    incast_gb_s: float | None = None
    rtt_ms: float | None = None
    host_gb_s: dict[str, float] = field(default_factory=dict)
    slow_hosts: list[dict[str, Any]] = field(default_factory=list)
    document: dict[str, Any] | None = None

    @property
    def known(self) -> bool:
        return self.status == "ok" and self.link_gb_s is not None

    @property
    def planner_gb_s(self) -> float | None:
        """The rate the busiest NIC can reach: the point-to-point rate, or the incast rate
        where that is lower (a PS's NIC takes every sender's bytes at once)."""
        known = [r for r in (self.link_gb_s, self.incast_gb_s) if r]
        return min(known) if self.known and known else None

    @classmethod
    def of(cls, document: Mapping[str, Any] | None, sweep_id: str = "") -> Measured:
        if document is None:
            return cls(
                "unknown",
                f"no network probe recorded for sweep {sweep_id}" if sweep_id else "no network probe recorded",
            )
        hosts = document.get("hosts") or {}
        return cls(
            status=document.get("status", "unknown"),
            why=document.get("why"),
            link_gb_s=document.get("link_gb_s"),
            incast_gb_s=document.get("incast_gb_s"),
            rtt_ms=document.get("rtt_ms"),
            host_gb_s={h: v["gb_s"] for h, v in hosts.items() if isinstance(v, Mapping) and v.get("gb_s")},
            slow_hosts=list(document.get("slow_hosts") or []),
            document=dict(document),
        )


def measured(db: str | Path, sweep_id: str) -> Measured:
    """What `sweep_id`'s probe measured (the newest probe); unknown with why when none was recorded."""
    return Measured.of(read(db, sweep_id), sweep_id)
